"""The Trace built from the store: spans, their tree and times, live and after a restart (SPEC W8).

Runs use the real runtime against the fake provider server and a fake clock; traces are read
back from the store files (read-only, beside the owner), never from events.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentcore import (
    AgentHost,
    AgentInput,
    AskResume,
    ToolApprovalResume,
    TraceBuilder,
    UserInputRequired,
    build_trace,
    create_agent,
    create_agent_registry,
    span_details,
)
from agentcore.errors import InputValidationError, StoreError
from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Hang, HttpError, Stop, Text, ToolCall, Usage
from agentcore.trace import open_trace_source
from tests.agentcore.child_process import spawn
from tests.agentcore.session_helpers import run_with
from tests.agentcore.task_fixtures import Journal, app
from tests.agentcore.test_compaction_loop import big_file, history, is_summary_request
from tests.agentcore.test_plan_mode import QUESTION, ReviewHost, deploy_tool
from tests.agentcore.trace_helpers import T0, advancing_tool, resumed_by_another_owner
from tests.helpers import FakeClock, collect, final

COMPLETIONS = "openai-completions"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "stores"
CRASH_CHILD = Path(__file__).with_name("crash_child.py")


def by_kind(trace: Any, kind: str) -> list[Any]:
    return [s for s in trace.spans if s.kind == kind]


def shape(trace: Any) -> list[tuple[Any, ...]]:
    """What a timeline draws, without the store's random entry ids."""
    names = {s.id: (s.kind, s.name) for s in trace.spans}
    return sorted(
        (s.kind, s.name, names.get(s.parent_id or "", None), s.start_ms, s.end_ms, s.status) for s in trace.spans
    )


async def test_a_turn_with_a_tool_a_script_and_a_subagent_is_one_tree_on_one_time_axis(
    make_agent, fake_server, tmp_path: Path
) -> None:
    """W8: one turn's model requests, tool calls, code-mode script with its nested call and a
    subagent (with its own model request, under the call that started it) form one tree whose
    children lie inside their parents' intervals."""
    db = tmp_path / "s.sqlite"
    clock = FakeClock(T0, tick=1)
    fake_server.enqueue(
        [ToolCall("work", {}, id="c1"), Usage(input=10, output=5)],
        [ToolCall("subagent", {"task": "look around"}, id="d1")],
        [Text("two files")],
        [ToolCall("codemode", {"code": "await tools.work({}); return 1"}, id="k1")],
        [Text("all done")],
    )
    agent = await make_agent(
        COMPLETIONS,
        database_path=str(db),
        clock=clock,
        extra_tools=[advancing_tool(clock, 100)],
        session={"subagents": {"tools": ["work"]}, "code_mode": {}},
    )
    await run_with(agent, {"prompt": "go", "request_id": "r1"})
    trace = build_trace(db, request_id="r1")
    spans = {s.id: s for s in trace.spans}
    (turn,) = by_kind(trace, "turn")
    assert turn.id == "turn:r1" and turn.parent_id is None and turn.status == "ok"
    assert turn.attributes["prompt"] == "go"
    models = by_kind(trace, "model")
    assert len(models) == 5 and all(m.attributes["model"] == "fake-model" for m in models)
    assert models[0].attributes["input_tokens"] == 10 and models[0].attributes["output_tokens"] == 5
    tools = {s.attributes["tool"]: s for s in by_kind(trace, "tool")}
    assert set(tools) == {"work", "subagent", "codemode"}
    assert 100 <= tools["work"].duration_ms < 110 and tools["work"].parent_id == "turn:r1"  # the tool's 100 ms
    (script,) = by_kind(trace, "script")
    (nested,) = by_kind(trace, "nested_call")
    assert script.parent_id == tools["codemode"].id and nested.parent_id == script.id
    assert nested.attributes["tool"] == "work" and 100 <= nested.duration_ms < 110
    (child,) = by_kind(trace, "subagent")
    assert child.parent_id == tools["subagent"].id and child.status == "ok"
    assert [m.parent_id for m in models].count(child.id) == 1
    for span in trace.spans:
        assert span.start_ms is not None and span.end_ms is not None, span
        if span.parent_id is not None:
            parent = spans[span.parent_id]
            assert parent.start_ms <= span.start_ms <= span.end_ms <= parent.end_ms, (span.id, parent.id)
    assert [s.start_ms for s in trace.spans] == sorted(s.start_ms for s in trace.spans), "timeline order"


async def test_a_reload_and_a_restart_show_the_same_trace(make_agent, fake_server, tmp_path: Path) -> None:
    """W8: the trace comes from the store: built beside the running owner, through the runtime,
    and again after the runtime closed (a restarted Studio), it is the same."""
    db = tmp_path / "r.sqlite"
    fake_server.enqueue([ToolCall("ls", {"path": "."}, id="c1")], [Text("done")])
    agent = await make_agent(COMPLETIONS, database_path=str(db), clock=FakeClock(T0, tick=3))
    await collect(agent, AgentInput(prompt="list", request_id="r"))
    live = build_trace(db)
    through_runtime = build_trace(agent)
    await agent.close()
    after_restart = build_trace(db)
    assert [s.to_dict() for s in live.spans] == [s.to_dict() for s in after_restart.spans]
    assert [s.to_dict() for s in through_runtime.spans] == [s.to_dict() for s in live.spans]
    assert {s.kind for s in live.spans} == {"turn", "model", "tool"}


async def test_building_after_every_commit_from_the_last_seq_gives_the_full_trace(
    make_agent, fake_server, tmp_path: Path
) -> None:
    """W8 live use: rebuilding after each committed change reads only the rows after the last
    seq, and the incrementally built trace equals one built at once; each step reports what
    changed."""
    db = tmp_path / "live.sqlite"
    fake_server.enqueue(
        [Text("thinking about it"), ToolCall("ls", {"path": "."}, id="c1")],
        [HttpError(503, "busy")],
        [ToolCall("read", {"path": "README.md"}, id="c2")],
        [Text("done")],
    )
    agent = await make_agent(COMPLETIONS, database_path=str(db), clock=FakeClock(T0, tick=2))
    reader = open_trace_source(db)
    builder = TraceBuilder(reader.label)
    batches: list[int] = []

    def on_commit(commit: Any, seq: int) -> None:
        records = reader.read(builder.last_seq)
        assert records.after_seq < records.last_seq == seq
        changed = builder.add(records)
        batches.append(len(records.entries) + len(records.usage) + len(records.receipts))
        assert changed, "every commit of a run changes some span"

    agent.log.view.on_commit(on_commit)
    await collect(agent, AgentInput(prompt="go", request_id="live"))
    full = build_trace(db)
    assert [s.to_dict() for s in builder.trace().spans] == [s.to_dict() for s in full.spans]
    assert max(batches) < sum(batches), "each read returned only the new rows"
    assert builder.changed_since(full.last_seq) == []


async def test_retries_and_continuations_are_attempts_with_their_kind_and_reason(make_agent, fake_server) -> None:
    """W8/L2/L4: each attempt is a model span; a failed one says why and which retry followed."""
    fake_server.enqueue([HttpError(503, "upstream busy")], [Text("cut"), Stop("length")], [Text("whole")])
    agent = await make_agent(COMPLETIONS, clock=FakeClock(T0, tick=1))
    await collect(agent, AgentInput(prompt="go", request_id="r"))
    dropped, length, done = by_kind(build_trace(agent), "model")
    assert dropped.status == "error" and dropped.attributes["retry"]["kind"] == "dropped"
    assert "upstream busy" in dropped.attributes["error"]["message"]
    assert dropped.attributes["time_to_first_token_ms"] is None
    assert length.status == "ok" and length.attributes["retry"]["kind"] == "length"
    assert length.attributes["time_to_first_token_ms"] > 0
    assert "retry" not in done.attributes and done.attributes["attempt"] == 0 and done.attributes["step"] == 1


async def test_a_question_is_an_open_wait_until_the_answer_closes_it(make_agent, fake_server) -> None:
    """W8/PL2: while the run waits for an answer, the ask_user call and its wait are open spans
    (status waiting, no end); the answer ends both at the time it came."""
    clock = FakeClock(T0)
    fake_server.enqueue([ToolCall("ask_user", QUESTION, id="ask1")], [Text("thanks")])
    agent = await make_agent(clock=clock)
    host = ReviewHost()
    await collect(agent, AgentInput(prompt="ask", request_id="q", agent="plan"), host)
    waiting = build_trace(agent)
    (wait,) = by_kind(waiting, "wait")
    (call,) = by_kind(waiting, "tool")
    assert (wait.status, wait.start_ms, wait.end_ms, wait.parent_id) == ("waiting", T0, None, call.id)
    assert call.status == "waiting" and call.attributes["tool"] == "ask_user"
    assert by_kind(waiting, "turn")[0].status == "waiting"
    clock.advance(75_000)
    await collect(agent, AgentInput(request_id="q", ask_resume=AskResume(answers={"q1": "hi"})), host)
    answered = build_trace(agent)
    waits = {s.attributes["wait_kind"]: s for s in by_kind(answered, "wait")}
    assert (waits["ask_user"].status, waits["ask_user"].duration_ms) == ("ok", 75_000)
    assert by_kind(answered, "tool")[0].duration_ms == 75_000
    assert waits["plan"].status == "waiting" and waits["plan"].parent_id == "turn:q", "the answer led to a plan review"


async def test_a_resume_shows_the_gap_since_the_last_commit(make_agent, fake_server, tmp_path: Path) -> None:
    """W8/D1: a request an owner closed mid-tool and another resumed has a gap span from the last
    commit to the resume, naming both owners, the same in a view built live through the close and
    the resume as in one built afterwards; the re-run call says it was re-run."""
    db = str(tmp_path / "gap.sqlite")
    reader = open_trace_source(db)
    live = TraceBuilder(reader.label)  # a Studio page open through the close and the resume

    def follow(commit: Any, seq: int) -> None:
        live.add(reader.read(live.last_seq))

    first, second = await resumed_by_another_owner(make_agent, fake_server, db, FakeClock(T0), 300_000, follow)
    trace = build_trace(db, request_id="r")
    assert [s.to_dict() for s in live.trace(request_id="r").spans] == [s.to_dict() for s in trace.spans]
    (gap,) = by_kind(trace, "gap")
    assert (gap.start_ms, gap.end_ms, gap.parent_id) == (T0, T0 + 300_000, "turn:r")
    assert gap.attributes["owner_id"] == second.owner_id and gap.attributes["previous_owner"] == first.owner_id
    (tool,) = by_kind(trace, "tool")
    assert tool.attributes["recovery"] == "rerun" and tool.status == "ok"


@pytest.mark.crash
async def test_a_sigkill_mid_stream_leaves_an_interrupted_attempt_and_a_gap(tmp_path: Path, workspace: Path) -> None:
    """W8/D3: killed after some text streamed, the attempt the kill cut short is a model span with
    its start and first token (from its committed fragment) and status interrupted; the resume is
    a gap from the last commit before the kill; the next attempt completes."""
    db = tmp_path / "kill.sqlite"
    async with FakeProviderServer() as server:
        server.enqueue([Text("The first half, "), Hang()])
        args = ("--db", str(db), "--base-url", server.base_url, "--workdir", str(workspace), "--request-id", "job")
        child = await spawn(CRASH_CHILD, *args)
        await child.wait_for(lambda e: e["type"] == "text_delta")
        before_kill = int(time.time() * 1000)
        await child.kill()
        server.enqueue([Text("and the second half.")])
        resumed = await spawn(CRASH_CHILD, *args)
        assert (await resumed.finish())["status"] == "completed"
    trace = build_trace(db, request_id="job")
    cut, done = by_kind(trace, "model")
    assert cut.status == "interrupted" and cut.end_ms is None
    assert cut.start_ms <= cut.attributes["first_token_ms"] <= before_kill
    assert done.status == "ok" and done.start_ms > before_kill
    (gap,) = by_kind(trace, "gap")
    assert cut.attributes["first_token_ms"] <= gap.start_ms <= before_kill < gap.end_ms <= done.start_ms
    assert gap.attributes["previous_owner"] != gap.attributes["owner_id"]


async def test_tasks_are_spans_with_their_phases_sleeps_and_waits(make_agent, fake_server, tmp_path: Path) -> None:
    """W8/X1: a durable task is a span from creation to its end; its phases, its sleep (until its
    wake time) and its wait on children are spans under it, and its children are tasks under it."""
    clock = FakeClock(T0, tick=1)
    registry = create_agent_registry()
    registry.install(app(Journal(tmp_path / "journal.txt")))
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(COMPLETIONS, clock=clock, session={"registry": registry})
    started: list[dict[str, Any]] = []

    async def on_event(event: Any) -> None:
        if event.type == "session" and not started:
            command = {"type": "task", "request_id": "t", "name": "app.parent", "input": {}}
            started.append(await agent.control(command))

    await run_with(agent, "go", on_event)
    trace = build_trace(agent)
    parent = next(s for s in by_kind(trace, "task") if s.parent_id is None)
    assert parent.refs["task_id"] == started[0]["task_id"] and parent.status == "ok"
    children = [s for s in by_kind(trace, "task") if s.parent_id == parent.id]
    assert len(children) == 2
    parts = [s for s in trace.spans if s.parent_id == parent.id and s.kind != "task"]
    assert [s.kind for s in sorted(parts, key=lambda s: s.start_ms)] == ["task_phase", "task_wait", "task_phase"]
    wait = next(s for s in parts if s.kind == "task_wait")
    assert all(c.end_ms <= wait.end_ms for c in children), "the wait ends when its children have"
    sleeps = [s for s in trace.spans if s.kind == "task_sleep"]
    assert len(sleeps) == 2 and all(s.parent_id in {c.id for c in children} for s in sleeps)
    for span in [parent, *children, *parts]:
        assert span.start_ms is not None and span.end_ms is not None and span.start_ms <= span.end_ms


async def test_stores_of_earlier_versions_show_what_they_have_with_unknown_times(
    tmp_path: Path, fake_server: FakeProviderServer
) -> None:
    """W8/D1: a schema-1 store (no timing anywhere) still gives its spans — read as it is: a
    finished turn with its model request and an open one with its tool call, every time unknown,
    nothing raising; then resumed by today's runtime: the old records keep unknown times, the
    resume and the new request have theirs."""
    db = tmp_path / "v1.sqlite"
    shutil.copy(FIXTURES / "v1.sqlite", db)
    trace = build_trace(db)
    turns = {s.request_id: s for s in by_kind(trace, "turn")}
    assert set(turns) == {"side-1", "job-v1"}
    assert turns["side-1"].status == "ok" and turns["job-v1"].status == "running"
    assert all(s.start_ms is None and s.end_ms is None for s in trace.spans)
    (tool,) = by_kind(trace, "tool")
    assert tool.attributes["tool"] == "ls" and tool.status == "ok" and tool.parent_id == "turn:job-v1"
    models = by_kind(trace, "model")
    assert {m.request_id for m in models} == {"side-1", "job-v1"}
    for span in trace.spans:
        span_details(db, span)  # details of an old record never raise either
    runtime = await create_agent(
        provider="fake",
        model="fake-model",
        base_url=fake_server.base_url,
        api_key="k",
        api_kind=COMPLETIONS,
        database_path=str(db),
        workdir=str(tmp_path),
        clock=FakeClock(T0),
    )
    try:
        fake_server.enqueue([Text("README.md, a short readme.")])
        assert final([e async for e in runtime.run(AgentInput(request_id="job-v1"))]).status == "completed"
    finally:
        await runtime.close()
    resumed = build_trace(db, request_id="job-v1")
    (gap,) = by_kind(resumed, "gap")
    assert (gap.start_ms, gap.end_ms, gap.attributes["previous_owner"]) == (None, T0, None)
    old_model, new_model = sorted(by_kind(resumed, "model"), key=lambda s: s.seq)
    assert old_model.start_ms is None and (new_model.start_ms, new_model.status) == (T0, "ok")
    (turn,) = by_kind(resumed, "turn")
    assert turn.status == "ok" and turn.end_ms == T0 and turn.attributes["times_from_children"]


async def test_details_show_what_was_sent_and_received_and_never_credentials(
    make_agent, fake_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """W8: a model span's details hold the context it was sent and its response; a tool span's its
    arguments and result — with API keys, auth headers and environment credentials redacted."""
    secret = f"sk-{uuid.uuid4().hex}"
    monkeypatch.setenv("MY_SERVICE_API_KEY", "a-very-private-value-123")
    (Path(tmp_path) / "leak.txt").write_text(
        f"Authorization: Bearer abcdefghijklmnop\nkey={secret}\nenv a-very-private-value-123\n"
    )
    db = tmp_path / "d.sqlite"
    fake_server.enqueue([ToolCall("read", {"path": str(tmp_path / "leak.txt")}, id="c1")], [Text("read it")])
    agent = await make_agent(
        COMPLETIONS, database_path=str(db), permission_policy="auto", clock=FakeClock(T0), api_key="test-key-42"
    )
    await collect(agent, AgentInput(prompt="read the file", request_id="r"))
    trace = build_trace(db)
    first, second = by_kind(trace, "model")
    sent = span_details(db, first)
    assert [m["role"] for m in sent["messages"]] == ["user"] and sent["messages"][0]["content"][0]["text"] == (
        "read the file"
    )
    assert sent["response"]["content"][0]["type"] == "tool_call" and sent["usage"]["model"] == "fake-model"
    assert [m["role"] for m in span_details(db, second)["messages"]] == ["user", "assistant", "tool_result"]
    (tool,) = by_kind(trace, "tool")
    details = span_details(db, tool)
    assert details["arguments"] == {"path": str(tmp_path / "leak.txt")}
    text = json.dumps(details)
    assert "Authorization: [redacted]" in text and "abcdefghijklmnop" not in text
    assert secret not in text and "a-very-private-value-123" not in text
    everything = json.dumps([span_details(db, s) for s in trace.spans])
    assert "test-key-42" not in everything and secret not in everything


async def test_memory_sqlite_and_postgres_stores_give_the_same_trace(
    make_agent, fake_server, tmp_path: Path, postgres: Any
) -> None:
    """W8/D8: the same run on a memory, a SQLite and a PostgreSQL store gives the same spans and
    times (read through the runtime, the file and a PostgreSQL URL of the reader's own)."""
    shapes = {}
    for backend in ("memory", "sqlite", "postgres"):
        options: dict[str, Any] = {}
        if backend == "sqlite":
            options["database_path"] = str(tmp_path / "t.sqlite")
        elif backend == "postgres":
            options["database_url"] = f"{postgres.dsn}?store=trace-{uuid.uuid4().hex[:8]}"
        clock = FakeClock(T0)  # time moves only in the tool: the times cannot depend on how often it is read
        fake_server.enqueue([ToolCall("work", {}, id="c1")], [HttpError(500, "oops")], [Text("done")])
        agent = await make_agent(COMPLETIONS, clock=clock, extra_tools=[advancing_tool(clock, 30)], **options)
        await collect(agent, AgentInput(prompt="go", request_id="b"))
        shapes[backend] = shape(build_trace(options.get("database_path") or options.get("database_url") or agent))
    assert shapes["memory"] == shapes["sqlite"] == shapes["postgres"]
    kinds = [(kind, status) for kind, _name, _parent, _start, _end, status in shapes["memory"]]
    expected = [("turn", "ok"), ("model", "ok"), ("tool", "ok"), ("model", "error"), ("model", "ok")]
    assert sorted(kinds) == sorted(expected)
    assert all(start is not None and end is not None and start <= end for *_, start, end, _ in shapes["memory"])
    assert [end - start for kind, _, _, start, end, _ in shapes["memory"] if kind == "tool"] == [30]


def test_a_source_that_is_not_a_store_is_refused_clearly(tmp_path: Path) -> None:
    """Bad input: a value that names no store is ``input_validation`` (field source); a path with
    no store file is ``store_invalid``, and nothing is created there."""
    with pytest.raises(InputValidationError) as refused:
        build_trace(42)
    assert refused.value.field == "source"
    missing = tmp_path / "missing.sqlite"
    with pytest.raises(StoreError) as invalid:
        build_trace(missing)
    assert invalid.value.code == "store_invalid" and not missing.exists()


async def test_a_fork_is_a_conversation_with_its_own_turns_and_its_inherited_context(make_agent, fake_server) -> None:
    """W8/S2: a fork is listed with the entry it was forked from; its trace holds only its own
    turns, and its model request's details show the context it inherited up to the fork entry."""
    fake_server.enqueue([Text("answer one")], [Text("answer two")], [Text("fork answer")], [Text("answer three")])
    agent = await make_agent(COMPLETIONS, session={}, clock=FakeClock(T0, tick=1))
    await run_with(agent, {"prompt": "question one", "request_id": "q1"})
    await run_with(agent, {"prompt": "question two", "request_id": "q2"})
    first_answer = next(m for m in agent.read_transcript(entry_ids=True) if m["role"] == "assistant")
    created: list[dict[str, Any]] = []

    async def on_event(event: Any) -> None:
        if event.type == "session" and not created:
            fork = {"type": "fork", "request_id": "f", "entry_id": first_answer["entry_id"]}
            created.append(await agent.control(fork))
            submit = {"type": "submit", "request_id": "in-fork", "prompt": "fork question"}
            await agent.control({**submit, "target_id": created[0]["target_id"]})

    await run_with(agent, {"prompt": "question three", "request_id": "q3"}, on_event)
    whole = build_trace(agent)
    (fork,) = [c for c in whole.conversations if c.kind == "fork"]
    assert fork.base == {"conversation": agent.session_id, "entry": first_answer["entry_id"]}
    forked = build_trace(agent, conversation_id=fork.conversation_id)
    assert [s.request_id for s in by_kind(forked, "turn")] == ["in-fork"]
    (model,) = by_kind(forked, "model")
    sent = span_details(agent, model)["messages"]
    assert [m["content"][0]["text"] for m in sent] == ["question one", "answer one", "fork question"]
    main = build_trace(agent, conversation_id=agent.session_id)
    assert {s.request_id for s in by_kind(main, "turn")} == {"q1", "q2", "q3"}


async def test_a_tool_approval_is_a_wait_under_its_call(make_agent, fake_server) -> None:
    """W8/H1: a call that paused for the host's approval has the wait (pause to decision) as a
    span under it, and the call itself starts after the decision."""
    clock = FakeClock(T0)
    fake_server.enqueue([ToolCall("deploy", {"env": "prod"}, id="d1")], [Text("ok")])
    agent = await make_agent(extra_tools=[deploy_tool([])], clock=clock)

    def approve(payload: dict[str, Any]) -> None:
        raise UserInputRequired("approve deploy", payload)

    host = AgentHost(approve_tool_call=approve)
    end = final(await collect(agent, AgentInput(prompt="deploy", request_id="t"), host))
    clock.advance(30_000)
    resume = ToolApprovalResume(approval_id=end.pending["approval_id"], approved=True)
    await collect(agent, AgentInput(request_id="t", tool_resume=resume), AgentHost())
    trace = build_trace(agent)
    (wait,) = by_kind(trace, "wait")
    (call,) = by_kind(trace, "tool")
    assert (wait.attributes["wait_kind"], wait.duration_ms, wait.parent_id) == ("tool_approval", 30_000, call.id)
    assert call.start_ms == T0 + 30_000 and call.status == "ok"


async def test_an_automatic_compaction_is_a_span_with_its_summary_request_under_it(
    make_agent, fake_server, workspace: Path
) -> None:
    """W8/C4: a compaction between tool rounds is a span (auto) in its turn, with its summary
    request as a model span under it and inside its interval."""
    name = big_file(workspace)
    agent = await make_agent(COMPLETIONS, context_window=4_000, clock=FakeClock(T0, tick=1))
    await history(agent, fake_server, 2)
    calls = 0

    def responder(request: Any) -> list[Any]:
        nonlocal calls
        if is_summary_request(request):
            return [Text("Summary: questions 0 and 1, and big.txt.")]
        calls += 1
        return [ToolCall("read", {"path": name})] if calls <= 3 else [Text("finished")]

    fake_server.responder = responder
    await collect(agent, AgentInput(prompt="read big.txt three times", request_id="big"))
    trace = build_trace(agent, request_id="big")
    compactions = by_kind(trace, "compaction")
    assert compactions and all(c.attributes["auto"] and c.parent_id == "turn:big" for c in compactions)
    for compaction in compactions:
        (summary,) = [s for s in trace.spans if s.parent_id == compaction.id]
        assert summary.kind == "model" and summary.attributes["purpose"] == "compaction"
        assert compaction.start_ms <= summary.start_ms <= summary.end_ms <= compaction.end_ms


async def test_a_wait_its_turn_was_cancelled_in_is_no_longer_waiting(make_agent, fake_server) -> None:
    """W8: cancelling a run that waits for an answer ends the question: its call and its wait are
    shown cancelled, never waiting for ever."""
    fake_server.enqueue([ToolCall("ask_user", QUESTION, id="ask1")])
    agent = await make_agent(clock=FakeClock(T0))
    await collect(agent, AgentInput(prompt="ask", request_id="q", agent="plan"), ReviewHost())
    stop = asyncio.Event()
    stop.set()
    assert final(await collect(agent, AgentInput(request_id="q"), AgentHost(abort_signal=stop))).status == "aborted"
    trace = build_trace(agent)
    assert by_kind(trace, "turn")[0].status == "cancelled"
    (call,) = by_kind(trace, "tool")
    (wait,) = by_kind(trace, "wait")
    assert (call.status, call.start_ms, call.attributes["tool"]) == ("cancelled", T0, "ask_user")
    assert (wait.status, wait.start_ms, wait.parent_id) == ("cancelled", T0, call.id) and wait.end_ms is not None
