"""Issue #14, session controls through the host and the views (S2, S5, X1, W3, W6).

Real runtimes in session mode on the scripted provider server: a ``HOLD`` prompt waits at a
gate until the test opens it, so "while the agent is busy" is a fact, not a race.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.test import AsyncClient
from django.urls import reverse

from studio import pages, selectors
from studio.host.contract import HostError
from studio.models import RegisteredModel, Run, SessionKind, StudioSession, UsageRecord

pytestmark = pytest.mark.django_db(transaction=True)


async def _client(user: Any) -> AsyncClient:
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    return client


def _user_texts(transcript: list[dict[str, Any]]) -> list[str]:
    return [m["content"][0]["text"] for m in transcript if m["role"] == "user" and not m.get("synthetic")]


async def test_a_withdrawn_follow_up_never_runs(user: Any, make_session: Any, gated_host: Any) -> None:
    """S2 withdraw: the queued input is taken back; a withdraw once it ran says so."""
    host, gate, _server = gated_host
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    await host.prompt(sid, prompt="HOLD first", agent="build")
    await gate.entered.wait()
    queued = await host.prompt(sid, prompt="never mind this", agent="build")
    assert await host.withdraw(sid, input_id=queued["request_id"]) == "withdrawn"
    assert (await host.state(sid)).context()["queue"] == []
    gate.release()
    await host.wait_idle(sid)
    assert _user_texts((await host.state(sid)).transcript) == ["HOLD first"]
    assert (await Run.objects.aget(request_id=queued["request_id"])).status == "withdrawn"
    # Withdrawing something that already ran is refused plainly, through the page's endpoint.
    ran = await host.prompt(sid, prompt="this one runs", agent="build")
    await host.wait_idle(sid)
    client = await _client(user)
    response = await client.post(
        reverse("studio:session_withdraw", args=[session.pk]),
        {"input_id": ran["request_id"]},
        headers={"HX-Request": "true"},
    )
    assert "Too late" in response.content.decode()


async def test_a_promoted_follow_up_joins_the_running_turn(user: Any, make_session: Any, gated_host: Any) -> None:
    """S2 promote: the queued message becomes a steer, is shown in the live turn, and lands in
    the same turn at its next tool boundary (before the turn's answer)."""
    host, gate, _server = gated_host
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    layer = get_channel_layer()
    watcher = await layer.new_channel()
    await layer.group_add(f"session-{session.pk}", watcher)
    first = await host.prompt(sid, prompt="HOLD the main job", agent="build")
    await gate.entered.wait()
    # The steer holds the turn once more (the model calls the gate again after reading it), so
    # the test can see it in the live turn before the turn ends.
    queued = await host.prompt(sid, prompt="HOLD and also mention the tests", agent="build")
    assert await host.promote(sid, input_id=queued["request_id"]) == "promoted"
    assert [q["mode"] for q in (await host.state(sid)).context()["queue"]] == ["steer"]
    gate.release()
    while "steer-msg" not in (push := await layer.receive(watcher))["html"]:
        pass
    assert "HOLD and also mention the tests" in push["html"]
    await gate.entered.wait()
    assert (await host.state(sid)).live is not None  # shown while the turn is live
    gate.release()
    await host.wait_idle(sid)
    transcript = (await host.state(sid)).transcript
    assert _user_texts(transcript) == ["HOLD the main job", "HOLD and also mention the tests"]
    roles = [m["role"] for m in transcript]
    assert roles == ["user", "assistant", "tool_result", "user", "assistant", "tool_result", "assistant"]  # one turn
    runs = {r.request_id: r async for r in Run.objects.filter(session=session)}
    assert runs[first["request_id"]].status == "completed"
    assert (runs[queued["request_id"]].status, runs[queued["request_id"]].mode) == ("placed", "steer")


async def test_fork_opens_a_linked_session_with_its_own_conversation(
    user: Any, make_session: Any, gated_host: Any
) -> None:
    """S2 fork: a new view of the same store, from a committed entry; the main one is untouched."""
    host, _gate, _server = gated_host
    session = await sync_to_async(make_session)(user, title="Original")
    sid = str(session.pk)
    await host.prompt(sid, prompt="remember lighthouse", agent="build")
    await host.wait_idle(sid)
    entry = (await host.state(sid)).transcript[-1]["entry_id"]
    client = await _client(user)
    response = await client.post(
        reverse("studio:session_fork", args=[session.pk]), {"entry_id": entry}, headers={"HX-Request": "true"}
    )
    fork = await StudioSession.objects.aget(root=session, kind=SessionKind.FORK)
    assert response["HX-Redirect"] == reverse("studio:session_detail", args=[fork.pk])
    assert (fork.title, fork.store_path, fork.owner_id) == ("Fork of Original", session.store_path, user.pk)
    await host.prompt(str(fork.pk), prompt="only in the fork", agent="build")
    await host.wait_idle(str(fork.pk))
    assert _user_texts((await host.state(str(fork.pk))).transcript) == ["remember lighthouse", "only in the fork"]
    assert _user_texts((await host.state(sid)).transcript) == ["remember lighthouse"]
    page = (await client.get(reverse("studio:session_detail", args=[fork.pk]))).content.decode()
    assert "A fork" in page and f'href="/sessions/{session.pk}/"' in page
    bad = await client.post(
        reverse("studio:session_fork", args=[session.pk]), {"entry_id": "no-such-entry"}, headers={"HX-Request": "true"}
    )
    assert "entry_id" in bad.content.decode()
    assert await StudioSession.objects.filter(kind=SessionKind.FORK).acount() == 1  # nothing half-made


async def test_reset_with_a_handoff_starts_a_new_context(user: Any, make_session: Any, host: Any) -> None:
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    await host.prompt(sid, prompt="an old topic", agent="build")
    await host.wait_idle(sid)
    assert await host.reset(sid, handoff="We were comparing note apps.") == "applied"
    await host.wait_idle(sid)
    state = await host.state(sid)
    assert "an old topic" not in str(state.transcript)
    assert "We were comparing note apps." in str(state.transcript)
    context = await sync_to_async(pages.session_page_context)(await _fresh(session), state)
    notices = [b.text for t in context["turns"] for b in t.blocks if b.kind == "notice"]
    assert any("reset" in n and "comparing note apps" in n for n in notices), notices


async def _fresh(session: StudioSession) -> StudioSession:
    return await StudioSession.objects.select_related("registered_model", "owner", "root").aget(pk=session.pk)


async def test_configure_effort_and_a_stale_form_is_a_clear_conflict(user: Any, make_session: Any, host: Any) -> None:
    """S2 configure: compare-and-swap on the settings version; a stale one changes nothing."""
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    assert await host.configure(sid, expected_version=0, effort="high") == 1
    with pytest.raises(HostError) as err:
        await host.configure(sid, expected_version=0, effort="low")
    assert err.value.code == "version_conflict" and "changed elsewhere" in err.value.message
    assert (await host.state(sid)).context()["config"]["effort"] == "high"
    client = await _client(user)
    response = await client.post(
        reverse("studio:session_configure", args=[session.pk]),
        {"expected_version": "0", "effort": "minimal"},
        headers={"HX-Request": "true"},
    )
    html = response.content.decode()
    assert "changed elsewhere" in html
    assert 'id="session-config" class="session-config" hx-swap-oob="true"' in html  # the form as it is now
    assert '<input type="hidden" name="expected_version" value="1">' in html
    assert '<option value="high" selected>' in html


async def test_a_model_switch_runs_the_next_request_on_the_chosen_model(
    user: Any, make_session: Any, gated_host: Any
) -> None:
    """S2 configure model: offered only among models that share the session's endpoint and key."""
    host, _gate, _server = gated_host
    shared = {"provider": "custom", "base_url": "http://models.example/v1", "api_kind": "openai-responses"}
    alpha = await RegisteredModel.objects.acreate(name="Alpha", model_id="alpha-1", api_key="k1", **shared)
    beta = await RegisteredModel.objects.acreate(name="Beta", model_id="beta-2", api_key="k1", **shared)
    other = await RegisteredModel.objects.acreate(name="Other key", model_id="gamma", api_key="k2", **shared)
    assert [m.name for m in await sync_to_async(selectors.model_choices)(alpha)] == ["Alpha", "Beta"]
    session = await sync_to_async(make_session)(user, registered_model=alpha)
    sid = str(session.pk)
    await host.prompt(sid, prompt="first", agent="build")
    await host.wait_idle(sid)
    client = await _client(user)
    url = reverse("studio:session_configure", args=[session.pk])
    refused = await client.post(url, {"expected_version": "0", "model": other.pk}, headers={"HX-Request": "true"})
    assert "cannot be used in this session" in refused.content.decode()
    ok = await client.post(url, {"expected_version": "0", "model": beta.pk}, headers={"HX-Request": "true"})
    assert ok.content == b""
    await host.prompt(sid, prompt="second", agent="build")
    await host.wait_idle(sid)
    models = [r.model async for r in UsageRecord.objects.filter(session=session).order_by("id")]
    assert models[0] == "alpha-1" and models[-1] == "beta-2"
    assert (await host.state(sid)).context()["config"]["model"] == {"provider": "custom", "model_id": "beta-2"}


async def test_cancel_a_durable_task_from_the_trace(user: Any, make_session: Any, host: Any) -> None:
    """S2 cancel scope task: the timer is stopping (durably) while its abort runs, then aborted."""
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    await host.prompt(sid, prompt="start a timer for 30 minutes", agent="build")
    await host.wait_idle(sid)
    [task] = [t for t in (await host.state(sid)).snapshot["tasks"] if t["kind"] == "task"]
    assert task["status"] == "running" and task["detail"]["wake_at"]
    client = await _client(user)
    response = await client.post(
        reverse("studio:session_cancel_task", args=[session.pk]),
        {"task_id": task["task_id"]},
        headers={"HX-Request": "true"},
    )
    assert response.content == b""
    stopping = [t for t in (await host.state(sid)).snapshot["tasks"] if t["task_id"] == task["task_id"]]
    assert stopping and stopping[0]["stopping"] is True  # the abort (1 s of clean-up) is running
    await host.wait_quiet(sid)
    [ended] = [t for t in (await host.state(sid)).snapshot["history"] if t["task_id"] == task["task_id"]]
    assert (ended["status"], ended["stopping"]) == ("aborted", False)
    again = await client.post(
        reverse("studio:session_cancel_task", args=[session.pk]),
        {"task_id": "task-nope"},
        headers={"HX-Request": "true"},
    )
    assert "no active task" in again.content.decode()


async def test_a_timer_fires_and_the_session_settles(user: Any, make_session: Any, host: Any) -> None:
    """X1 through Studio: the demo starts the example timer; it fires and completes."""
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    await host.prompt(sid, prompt="start a timer for 1 second", agent="build")
    await host.wait_quiet(sid)
    state = await host.state(sid)
    [timer] = [t for t in state.snapshot["history"] if t["name"] == "example.timer"]
    assert timer["status"] == "completed" and timer["result"]["label"] == "1 s timer"
    assert (await StudioSession.objects.aget(pk=session.pk)).status == "idle"


async def test_a_subagent_page_is_read_only_and_linked(
    user: Any, other_user: Any, make_session: Any, host: Any
) -> None:
    """S5/W6: the subagent's page is created on first open, read-only, and only for its owner."""
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    await host.prompt(sid, prompt="Delegate to a subagent: what files are here?", agent="build")
    await host.wait_idle(sid)
    [child] = [c for c in (await host.state(sid)).snapshot["contexts"] if c["kind"] == "subagent"]
    client = await _client(user)
    opened = await client.get(reverse("studio:session_context", args=[session.pk, child["target_id"]]))
    view = await StudioSession.objects.aget(root=session, target_id=child["target_id"])
    assert opened.status_code == 302 and opened["Location"] == reverse("studio:session_detail", args=[view.pk])
    assert view.kind == SessionKind.SUBAGENT and view.read_only
    page = (await client.get(reverse("studio:session_detail", args=[view.pk]))).content.decode()
    assert "read-only" in page and 'id="composer"' not in page and "I listed the workspace" in page
    refused = await client.post(
        reverse("studio:session_prompt", args=[view.pk]), {"prompt": "hi"}, headers={"HX-Request": "true"}
    )
    assert "read-only" in refused.content.decode()
    assert await StudioSession.objects.filter(kind=SessionKind.SUBAGENT).acount() == 1
    assert (await StudioSession.objects.aget(pk=view.pk)).kind == "subagent"
    mallory = await _client(other_user)
    for url in (
        reverse("studio:session_context", args=[session.pk, child["target_id"]]),
        reverse("studio:session_detail", args=[view.pk]),
    ):
        assert (await mallory.get(url)).status_code == 404
    missing = await client.get(reverse("studio:session_context", args=[session.pk, 99]))
    assert missing.status_code == 404


async def test_a_long_conversation_shows_the_newest_turns_and_loads_older_ones(
    user: Any, make_session: Any, host: Any
) -> None:
    """Scale: the page renders a window of the newest turns; "Show earlier" pages load the rest."""
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    hs = await host._view(sid)
    runtime = hs[0].runtime
    messages = []
    for n in range(120):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"question {n}"}]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {n}"}]})
    runtime.restore_transcript(messages)
    client = await _client(user)
    page = (await client.get(reverse("studio:session_detail", args=[session.pk]))).content.decode()
    assert page.count('class="turn"') == pages.CONVERSATION_WINDOW
    assert "question 119" in page and "question 79" not in page
    assert 'data-first="80" data-total="120"' in page
    older = await client.get(reverse("studio:session_turns", args=[session.pk]) + "?start=40&end=80")
    html = older.content.decode()
    assert html.count('class="turn"') == 40 and "question 40" in html and "question 79" in html
    assert "question 80" not in html and "question 39" not in html
    bad = await client.get(reverse("studio:session_turns", args=[session.pk]) + "?start=x")
    assert bad.status_code == 400
