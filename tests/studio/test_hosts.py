"""W2/W4/S1–S2: the session host drives runtimes through the session protocol, pauses for plans
and questions, queues follow-ups, stops, records usage."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from studio import pages, selectors, services
from studio.host.contract import HostError
from studio.host.session_host import SessionHost
from studio.models import Approval, Run, StudioSession, ToolCall, UsageRecord

pytestmark = pytest.mark.django_db(transaction=True)


async def _session(make_session: Any, user: Any, **kwargs: Any) -> StudioSession:
    return await sync_to_async(make_session)(user, **kwargs)


async def _refresh(session: StudioSession) -> StudioSession:
    return await StudioSession.objects.aget(pk=session.pk)


async def test_build_run_records_tools_usage_and_title(user: Any, make_session: Any, host: SessionHost) -> None:
    session = await _session(make_session, user)
    sent = await host.prompt(str(session.pk), prompt="what files are here?", agent="build")
    assert sent["status"] == "accepted"
    await host.wait_idle(str(session.pk))
    session = await _refresh(session)
    assert session.status == "idle"
    assert session.title == "what files are here?"
    assert session.input_tokens > 0 and session.output_tokens > 0
    names = [t.name async for t in ToolCall.objects.filter(session=session)]
    assert names == ["ls", "read"]
    assert all([t.duration_ms is not None and t.status == "ok" async for t in ToolCall.objects.filter(session=session)])
    state = await host.state(str(session.pk))
    assert not state.running and state.live is None
    assert state.transcript[-1]["role"] == "assistant"
    assert state.context_usage and state.context_usage["total"] == 32000


async def test_a_prompt_while_busy_is_queued_not_refused(user: Any, make_session: Any, gated_host: Any) -> None:
    """S2 submit: busy → a queued follow-up (shown in the snapshot's queue) that runs next."""
    host, gate, _server = gated_host
    session = await _session(make_session, user)
    sid = str(session.pk)
    first = await host.prompt(sid, prompt="HOLD one", agent="build")
    await gate.entered.wait()
    second = await host.prompt(sid, prompt="and then this", agent="build")
    assert (first["status"], second["status"]) == ("accepted", "queued")
    state = await host.state(sid)
    assert [q["prompt"] for q in state.context()["queue"]] == ["and then this"]
    run = await Run.objects.aget(session=session, request_id=second["request_id"])
    assert run.status == "queued"
    with pytest.raises(HostError) as err:  # plan mode starts a turn of its own: it cannot steer
        await host.prompt(sid, prompt="plan something", agent="plan", mode="steer")
    assert err.value.code == "plan_steer"
    third = await host.prompt(sid, prompt="plan something", agent="plan")
    assert third["status"] == "queued", "a plan-mode message queues too (a submit with agent plan)"
    queue = (await host.state(sid)).context()["queue"]
    assert [(q["prompt"], q.get("agent")) for q in queue] == [("and then this", None), ("plan something", "plan")]
    plan_run = await Run.objects.aget(session=session, request_id=third["request_id"])
    assert (plan_run.status, plan_run.agent) == ("queued", "plan")
    html = await sync_to_async(pages.render_full_regions)(sid, await host.state(sid))
    chip = html[html.index(f'data-input-id="{third["request_id"]}"') :]
    chip = chip[: chip.index("</div>")]
    assert "plan · queued" in chip and "promote-button" not in chip, "a plan-mode input cannot be promoted"
    gate.release()
    await host.wait_idle(sid)
    runs = {r.request_id: r.status async for r in Run.objects.filter(session=session)}
    assert runs[first["request_id"]] == runs[second["request_id"]] == "completed"
    users = [m for m in (await host.state(sid)).transcript if m["role"] == "user"]
    assert [m["content"][0]["text"] for m in users][:2] == ["HOLD one", "and then this"]
    assert runs[third["request_id"]] == "paused", "the queued plan-mode turn ran in plan mode: its plan waits"
    pending = await sync_to_async(selectors.pending_run)(sid)
    assert pending is not None and pending["request_id"] == third["request_id"]
    assert pending["pending"]["kind"] == "plan"


async def test_plan_mode_pauses_then_approval_builds(user: Any, make_session: Any, host: SessionHost) -> None:
    """PL/W4: a plan waits for review; approving resumes the same request in build mode."""
    session = await _session(make_session, user)
    request_id = (await host.prompt(str(session.pk), prompt="add a todo list", agent="plan"))["request_id"]
    await host.wait_idle(str(session.pk))
    session = await _refresh(session)
    assert session.status == "waiting"
    pending = await sync_to_async(selectors.pending_run)(str(session.pk))
    assert pending is not None and pending["pending"]["kind"] == "plan"
    assert "1. Inspect the workspace" in pending["pending"]["plan"]
    approval = await Approval.objects.aget(session=session)
    assert approval.decision == "" and approval.plan.startswith("Plan:")

    with pytest.raises(HostError):  # a new prompt must wait for the review
        await host.prompt(str(session.pk), prompt="something else", agent="build")

    resumed = await host.resume_plan(str(session.pk), approved=True, notes="go")
    assert resumed == request_id
    await host.wait_idle(str(session.pk))
    session = await _refresh(session)
    assert session.status == "idle"
    approval = await Approval.objects.aget(session=session)
    assert approval.decision == "approved" and approval.notes == "go"
    state = await host.state(str(session.pk))
    assert "approved plan" in str(state.transcript[-1]).lower()
    run = await Run.objects.aget(session=session, request_id=request_id)
    assert run.status == "completed"


async def test_rejecting_a_plan_with_notes_gets_a_revision(user: Any, make_session: Any, host: SessionHost) -> None:
    session = await _session(make_session, user)
    await host.prompt(str(session.pk), prompt="add a todo list", agent="plan")
    await host.wait_idle(str(session.pk))
    await host.resume_plan(str(session.pk), approved=False, notes="use SQLite please")
    await host.wait_idle(str(session.pk))
    pending = await sync_to_async(selectors.pending_run)(str(session.pk))
    assert pending is not None
    assert "use SQLite please" in pending["pending"]["plan"]
    decisions = [(a.decision, a.notes) async for a in Approval.objects.filter(session=session).order_by("id")]
    assert decisions == [("rejected", "use SQLite please"), ("", "")]


async def test_stop_cancels_the_running_turn(user: Any, make_session: Any, gated_host: Any) -> None:
    """S2 cancel (foreground): the held turn ends aborted, durably; the session works on."""
    host, gate, _server = gated_host
    session = await _session(make_session, user)
    sid = str(session.pk)
    request_id = (await host.prompt(sid, prompt="HOLD a long job", agent="build"))["request_id"]
    await gate.entered.wait()
    assert await host.stop(sid)
    await host.wait_idle(sid)
    run = await Run.objects.aget(request_id=request_id)
    assert run.status == "aborted"
    assert (await _refresh(session)).status == "idle"
    assert not await host.stop(sid)  # nothing left to stop
    await host.prompt(sid, prompt="hello again", agent="build")
    await host.wait_idle(sid)
    assert "hello again" in str((await host.state(sid)).transcript[-1])


def test_usage_records_are_upserts_never_double_counted(user: Any, make_session: Any) -> None:
    """Cost accuracy: a replayed usage record (same record_id) does not count twice."""
    session = make_session(user)
    usage = {
        "record_id": "r1:0:0",
        "input_tokens": 100,
        "cached_input_tokens": 50,
        "cache_creation_tokens": 10,
        "output_tokens": 20,
        "reasoning_tokens": 5,
        "cost": 0.0125,
        "model": "m",
    }
    assert services.record_usage(str(session.pk), "r1", usage) is True
    assert services.record_usage(str(session.pk), "r1", usage) is False
    session.refresh_from_db()
    assert (session.input_tokens, session.cached_input_tokens, session.cache_creation_tokens) == (100, 50, 10)
    assert (session.output_tokens, session.reasoning_tokens) == (20, 5)
    assert str(session.cost) == "0.012500"
    assert session.total_tokens == 180  # reasoning is part of output, not added again
    assert UsageRecord.objects.count() == 1


def test_usage_tab_prices_each_token_class_from_the_runtimes_cost_detail(user: Any, make_session: Any) -> None:
    """The Usage tab shows the runtime's per-class prices (``cost_detail``), never its own."""
    from studio.models import RegisteredModel

    model = RegisteredModel.objects.create(
        name="Priced",
        provider="openai",
        model_id="gpt-x",
        attributes={"cost": {"input": 99, "output": 99, "cache_read": 99, "cache_write": 99}},  # ignored
    )
    session = make_session(user, registered_model=model)
    assert selectors.usage_context(session)["usage_totals"]["class_costs"] is None  # nothing priced yet
    services.record_usage(
        str(session.pk),
        "r1",
        {
            "record_id": "a",
            "input_tokens": 1_000_000,
            "cached_input_tokens": 2_000_000,
            "cache_creation_tokens": 400_000,
            "output_tokens": 100_000,
            "cost": 5,
            "cost_detail": {"input": 2, "output": 1, "cache_read": 1, "cache_write": 1},
        },
    )
    services.record_usage(
        str(session.pk),
        "r2",
        {"record_id": "b", "input_tokens": 10, "cost": 0.5, "cost_detail": {"input": 0.5}},
    )
    context = selectors.usage_context(session)
    costs = context["usage_totals"]["class_costs"]
    assert (costs["input"], costs["cached"], costs["cache_write"], costs["output"]) == (Decimal("2.5"), 1, 1, 1)
    assert context["usage_totals"]["calls"] == 2
    assert context["usage_totals"]["cost"] == Decimal("5.5")
    assert [r["class_costs"]["input"] for r in context["usage_rows"]] == [2, Decimal("0.5")]
    assert context["usage_chart"]["bars"]


async def test_real_demo_asks_then_plans_with_the_answers(user: Any, make_session: Any, host: SessionHost) -> None:
    """W4 with the real runtime: ask_user pauses, answers resume, the plan carries them."""
    session = await _session(make_session, user, mode="plan")
    sid = str(session.pk)
    await host.prompt(sid, prompt="Plan a todo app, ask me questions first", agent="plan")
    await host.wait_idle(sid)
    with pytest.raises(HostError) as err:  # a plan decision does not answer questions
        await host.resume_plan(sid, approved=True)
    assert err.value.code == "not_waiting"
    await host.wait_idle(sid)
    run = await Run.objects.aget(session=session)
    assert run.status == "paused" and run.pending["kind"] == "ask_user"
    assert [q["id"] for q in run.pending["questions"]] == ["scope", "extras"]
    await host.answer(sid, answers={"scope": "Tiny", "extras": ["CI", "a changelog"]})
    await host.wait_idle(sid)
    run = await Run.objects.aget(session=session)
    assert run.status == "paused" and run.pending["kind"] == "plan"
    assert all(word in run.pending["plan"] for word in ("Tiny", "CI", "a changelog"))


async def test_a_new_host_resumes_a_plan_the_old_host_paused(user: Any, make_session: Any) -> None:
    """A restart between pause and approval: the next host process serves the approval."""
    from studio.host.session_host import set_session_host

    session = await _session(make_session, user, mode="plan")
    sid = str(session.pk)
    first = SessionHost(flush_interval=0.01)
    set_session_host(first)
    await first.prompt(sid, prompt="Plan a habit tracker", agent="plan")
    await first.wait_idle(sid)
    await first.close()  # the process goes away; the store and Studio's records stay
    second = SessionHost(flush_interval=0.01)
    set_session_host(second)
    try:
        await second.resume_plan(sid, approved=True)
        await second.wait_idle(sid)
        run = await Run.objects.aget(session=session)
        assert run.status == "completed"
        state = await second.state(sid)
        assert "approved plan" in str(state.transcript[-1])
        assert state.transcript[-2].get("synthetic") is True  # the runtime's "plan was approved" prompt
    finally:
        await second.close()
        set_session_host(None)


async def test_one_demo_server_serves_every_demo_session_of_a_host(
    user: Any, make_session: Any, host: SessionHost
) -> None:
    from agentcore.harness.lease import lock_path_for

    sessions = [await _session(make_session, user) for _ in range(3)]
    for s in sessions:
        await host.prompt(str(s.pk), prompt="hello", agent="build")
    for s in sessions:
        await host.wait_idle(str(s.pk))
    urls = {hs.config.model_options["base_url"] for hs in host._sessions.values()}
    assert urls == {host.demo_base_url()}
    assert all(lock_path_for(s.store_path).exists() for s in sessions)
    assert await host.release(str(sessions[0].pk)) is True  # an idle session lets go of its store
    assert await host.release(str(sessions[0].pk)) is False


async def test_the_first_change_after_a_quiet_window_is_pushed_at_once(user: Any, make_session: Any) -> None:
    """#17: the push window is leading-edge. With a one-minute window, the first change of a
    quiet session (here: the prompt that opens it) is still pushed at once — the window only
    holds the changes that come while it is open — so the first token of an answer after a
    pause never waits a whole window (trailing-edge, this push took the full minute)."""
    from channels.layers import get_channel_layer

    from agentcore.testing.fake_server import FakeProviderServer
    from studio.host.session_host import set_session_host
    from tests.studio.fakes import Gate, gated_factory, responder

    server = FakeProviderServer(responder=responder).start_in_thread()
    gate = Gate()
    host = SessionHost(runtime_factory=gated_factory(server, gate), flush_interval=60)
    set_session_host(host)
    try:
        session = await _session(make_session, user)
        layer = get_channel_layer()
        watcher = await layer.new_channel()
        await layer.group_add(f"session-{session.pk}", watcher)
        await host.prompt(str(session.pk), prompt="HOLD a long answer", agent="build")
        # The turn's opening (the live pusher's) and its status pill (the rows pusher's), each a
        # push of its own: neither waits for the window.
        pushed = ""
        while 'id="live-turn"' not in pushed or 'id="session-status"' not in pushed:
            push = await asyncio.wait_for(layer.receive(watcher), timeout=20)  # a bound, far below the window
            assert push["type"] == "session.push"
            pushed += push["html"]
    finally:
        gate.release()
        await host.close()
        set_session_host(None)
        server.stop_in_thread()


def test_the_stream_window_widens_with_the_streams_a_host_runs() -> None:
    """Issue 25: 20 ms per ten live streams, never below agentcore's 20 ms nor above the ceiling."""
    from studio.host.stream_windows import stream_window

    assert stream_window(0, widest=0.06) == stream_window(10, widest=0.06) == 0.02
    assert stream_window(20, widest=0.06) == pytest.approx(0.04)
    assert stream_window(50, widest=0.06) == stream_window(500, widest=0.06) == 0.06
    assert stream_window(50, widest=0.01) == 0.02


def test_a_hosts_windows_follow_each_sessions_recount_and_say_only_a_change() -> None:
    """Issue 25: the host's total of live turns moves by what each recount changes (no session
    is summed again), and the window is handed on only when the policy gives a new one."""
    from studio.host.stream_windows import StreamWindows

    windows = StreamWindows(lambda live: 0.02 * (1 + min(live, 2)))
    assert windows.recount(0, 1) == pytest.approx(0.04)  # a first session's turn opens
    assert windows.recount(0, 1) == pytest.approx(0.06)  # a second one's
    assert windows.recount(0, 1) is None  # a third: the policy's cap, nothing to hand on
    assert windows.live == 3
    assert windows.recount(1, 0) is None and windows.recount(1, 0) == pytest.approx(0.04)
    assert (windows.live, windows.window) == (1, pytest.approx(0.04))


@contextlib.asynccontextmanager
async def _window_host() -> AsyncIterator[tuple[SessionHost, Any]]:
    """A host whose runtimes stream from the gated fake provider, with a window policy of one
    20 ms step per live turn (0.02 s with none), installed as the process's host."""
    from agentcore.testing.fake_server import FakeProviderServer
    from studio.host.session_host import set_session_host
    from tests.studio.fakes import Gate, gated_factory, responder

    server = FakeProviderServer(responder=responder).start_in_thread()
    gate = Gate()
    host = SessionHost(
        runtime_factory=gated_factory(server, gate), flush_interval=0.01, window_policy=lambda live: 0.02 * (1 + live)
    )
    set_session_host(host)
    try:
        yield host, gate
    finally:
        await host.close()
        set_session_host(None)
        server.stop_in_thread()


async def test_a_host_sets_every_runtimes_stream_window_from_its_live_turns(user: Any, make_session: Any) -> None:
    """Issue 25: while turns stream the host widens the window of every runtime it holds (by its
    policy; here one step per live turn), and narrows it again when they end — a runtime opened
    meanwhile starts with the host's current window."""
    async with _window_host() as (host, gate):
        first, second = [str((await sync_to_async(make_session)(user)).pk) for _ in range(2)]
        await host.prompt(first, prompt="HOLD one", agent="build")
        await host.wait_live(first)
        await host.prompt(second, prompt="HOLD two", agent="build")
        await host.wait_live(second)
        windows = {sid: host._sessions[sid].runtime.config.stream_window.seconds for sid in (first, second)}
        assert windows == {first: pytest.approx(0.06), second: pytest.approx(0.06)}
        third = str((await sync_to_async(make_session)(user)).pk)
        await host.state(third)  # opens its runtime while two turns stream
        assert host._sessions[third].runtime.config.stream_window.seconds == pytest.approx(0.06)
        await asyncio.wait_for(gate.entered.wait(), 10)
        while gate.calls < 2:  # both turns wait at the gate: one release lets both through
            gate.entered.clear()
            if gate.calls < 2:
                await asyncio.wait_for(gate.entered.wait(), 10)
        gate.release()
        await host.wait_idle(first)
        await host.wait_idle(second)
        assert all(hs.runtime.config.stream_window.seconds == pytest.approx(0.02) for hs in host._sessions.values())


async def test_a_session_dropped_while_its_turn_streams_narrows_the_other_runtimes_window(
    user: Any, make_session: Any
) -> None:
    """Issue 25: a session that leaves the host mid-turn (dropped for another holder, or closed)
    stops streaming here, so the runtimes that stay get the window of the turns still live —
    before, the host kept the wide window until some other turn opened or ended."""
    async with _window_host() as (host, _gate):
        first, second = [str((await sync_to_async(make_session)(user)).pk) for _ in range(2)]
        for sid in (first, second):
            await host.prompt(sid, prompt=f"HOLD {sid}", agent="build")
            await host.wait_live(sid)
        assert host._sessions[second].runtime.config.stream_window.seconds == pytest.approx(0.06)
        await host.drop(first, "a test: another holder has it")
        assert first not in host._sessions
        assert host._sessions[second].runtime.config.stream_window.seconds == pytest.approx(0.04)


async def test_a_turn_opening_or_ending_counts_only_its_own_sessions_live_turns(
    user: Any, make_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25: the host keeps its total of live turns as each session was last counted, so a
    turn's start and end read that session alone — before, every start and end summed the live
    turns of every open session (quadratic in the sessions streaming at once) — and the total
    still follows the turns through a drop and through the turns' ends."""
    from studio.host.state import HostedSession

    async with _window_host() as (host, gate):
        idle, streaming, other = [str((await sync_to_async(make_session)(user)).pk) for _ in range(3)]
        await host.state(idle)  # open, never prompted
        for sid in (streaming, other):
            await host.prompt(sid, prompt=f"HOLD {sid}", agent="build")
            await host.wait_live(sid)
        assert host.windows.live == 2
        counted: list[str] = []
        live_turns = HostedSession.live_turns
        monkeypatch.setattr(HostedSession, "live_turns", lambda hs: counted.append(hs.root_id) or live_turns(hs))
        await host.drop(other, "a test: another holder has it")
        assert host.windows.live == 1
        assert host._sessions[streaming].runtime.config.stream_window.seconds == pytest.approx(0.04)
        await asyncio.wait_for(gate.entered.wait(), 10)
        gate.release()
        await host.wait_idle(streaming)
        assert host.windows.live == 0
        assert host._sessions[idle].runtime.config.stream_window.seconds == pytest.approx(0.02)
        assert set(counted) == {streaming}  # the dropped one counts as none: it left the host


async def test_a_resume_the_runtime_refuses_leaves_no_live_turn_in_the_hosts_count(
    user: Any, make_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25: a review's or question's answer opens the turn live before the ``resume``
    command goes out; when the runtime refuses it the turn is closed again, and the host's total
    of live turns (which sets every runtime's stream window) forgets it at once — not only at
    that session's next event."""
    from studio.host import commands
    from studio.host.contract import HostError

    async def refused(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
        raise HostError("not_waiting", "nothing waits for that answer")

    async with _window_host() as (host, _gate):
        sid = str((await sync_to_async(make_session)(user)).pk)
        await host.state(sid)
        hs = host._sessions[sid]
        view = next(iter(hs.views.values()))
        monkeypatch.setattr(commands, "control", refused)
        with pytest.raises(HostError):
            await host._resume(hs, view, {"request_id": "a-paused-request", "agent": "build"}, {"plan_resume": {}})
        assert not hs.live(view.target_id)
        assert (host.windows.live, hs.counted_live) == (0, 0)
        assert hs.runtime.config.stream_window.seconds == pytest.approx(0.02)
