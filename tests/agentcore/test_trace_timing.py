"""Timing in the committed records: what the Trace's time axis is built from (SPEC W8, D1).

Every run here uses an injected fake clock (``create_agent(clock=...)``), so the times read
back from the store are exact and nothing waits for real time.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentInput, AskResume, PlanResume, create_agent_registry
from agentcore.harness import StoreState
from agentcore.testing.steps import HttpError, Stop, Text, ToolCall, Usage
from tests.agentcore.codemode_helpers import script_turn
from tests.agentcore.session_helpers import run_with
from tests.agentcore.task_fixtures import Journal, app
from tests.agentcore.test_plan_mode import QUESTION, ReviewHost
from tests.agentcore.trace_helpers import COMPLETIONS, T0, advancing_tool, resumed_by_another_owner
from tests.helpers import FakeClock, collect, final


def load(agent: Any) -> StoreState:
    return agent.log.storage.load()


def usage_rows(agent: Any) -> list[dict[str, Any]]:
    return [row.payload for row in load(agent).usage]


def entries(agent: Any, kind: str) -> list[Any]:
    return [e for e in load(agent).entries if e.kind == kind]


def tool_results(agent: Any) -> list[dict[str, Any]]:
    return [e.payload for e in entries(agent, "message") if e.payload["message"]["role"] == "tool_result"]


async def test_each_model_attempt_records_start_first_token_end_step_and_what_it_sent_and_got(
    make_agent, fake_server
) -> None:
    """W8: a model request's ledger row says when it started, when its first content streamed and
    when it ended (one clock), with its tokens by class, cost, model, step and attempt, the last
    entry of the context it was sent and the entry it produced."""
    clock = FakeClock(T0, tick=1)
    fake_server.enqueue([Text("hello there"), Usage(input=12, output=3, cached_input=5)])
    agent = await make_agent(COMPLETIONS, clock=clock)
    assert final(await collect(agent, AgentInput(prompt="hi", request_id="r1"))).status == "completed"
    (row,) = usage_rows(agent)
    assert T0 <= row["started_ms"] < row["first_token_ms"] <= row["ended_ms"] < clock.now
    assert (row["step"], row["attempt"], row["stop_reason"], row["model"]) == (0, 0, "stop", "fake-model")
    assert (row["input_tokens"], row["output_tokens"], row["cached_input_tokens"]) == (12, 3, 5)
    messages = {e.id: e.payload["message"] for e in entries(agent, "message")}
    assert messages[row["context_entry"]]["role"] == "user"
    assert messages[row["response_entry"]]["content"][0]["text"] == "hello there"
    receipt = load(agent).receipts["r1"].payload
    assert receipt["started_ms"] <= row["started_ms"] and row["ended_ms"] <= receipt["ended_ms"]


async def test_a_retried_attempt_records_its_failure_and_the_retry_kind_and_reason(make_agent, fake_server) -> None:
    """W8/L2/L4: a failed attempt has its own row with the failure and the retry it led to (kind,
    reason, attempt); an attempt that streamed nothing has no first-token time."""
    clock = FakeClock(T0, tick=1)
    fake_server.enqueue([HttpError(503, "upstream busy")], [Text("cut"), Stop("length")], [Text("whole")])
    agent = await make_agent(COMPLETIONS, clock=clock)
    assert final(await collect(agent, "go")).status == "completed"
    dropped, length, done = usage_rows(agent)
    assert dropped["first_token_ms"] is None and dropped["started_ms"] <= dropped["ended_ms"]
    assert dropped["error"]["kind"] == "status" and "upstream busy" in dropped["error"]["message"]
    assert dropped["retry"]["kind"] == "dropped" and dropped["retry"]["attempt"] == 1
    assert "upstream busy" in dropped["retry"]["reason"]
    assert (dropped["step"], dropped["attempt"]) == (0, 0)
    assert length["retry"]["kind"] == "length" and length["retry"]["reason"] == "the reply hit max_tokens"
    assert (length["step"], length["attempt"]) == (0, 1) and length["first_token_ms"] is not None
    assert "retry" not in done and "error" not in done and done["step"] == 1


async def test_tool_calls_record_start_end_and_intent_time_on_the_same_clock(make_agent, fake_server) -> None:
    """W8: a tool call's result entry says when it ran (start, end); its intent when it was
    committed; a call refused before it ran has an end and no start."""
    clock = FakeClock(T0)
    fake_server.enqueue(
        [ToolCall("work", {}, id="c1"), ToolCall("missing_tool", {}, id="c2")],
        [Text("done")],
    )
    agent = await make_agent(COMPLETIONS, clock=clock, extra_tools=[advancing_tool(clock, 250)])
    assert final(await collect(agent, "go")).status == "completed"
    worked, refused = tool_results(agent)
    assert worked["ended_ms"] - worked["started_ms"] == 250
    (intent,) = [e.payload for e in entries(agent, "tool_intent")]
    assert intent["at_ms"] <= worked["started_ms"]
    assert "started_ms" not in refused and refused["ended_ms"] >= worked["ended_ms"]


async def test_ask_user_records_when_the_run_paused_and_when_the_answer_came(make_agent, fake_server) -> None:
    """W8/PL2: the pause for a question is committed with its start; the answer's entry records
    the wait (since, until) — the time spent waiting for a person."""
    clock = FakeClock(T0)
    fake_server.enqueue([ToolCall("ask_user", QUESTION, id="ask1")], [Text("thanks")])
    agent = await make_agent(clock=clock)
    host = ReviewHost()
    end = final(await collect(agent, AgentInput(prompt="ask me", request_id="q", agent="plan"), host))
    assert end.status == "paused" and end.pending["since_ms"] == T0
    assert load(agent).receipts["q"].payload["pending"]["since_ms"] == T0
    clock.advance(90_000)
    await collect(agent, AgentInput(request_id="q", ask_resume=AskResume(answers={"q1": "hi"})), host)
    (answer,) = tool_results(agent)
    assert answer["wait"] == {"kind": "ask_user", "approval_id": "q/0/0", "since_ms": T0, "until_ms": T0 + 90_000}
    assert (answer["started_ms"], answer["ended_ms"]) == (T0, T0 + 90_000)


async def test_plan_review_records_the_wait_for_the_reviewers_decision(make_agent, fake_server) -> None:
    """W8/PL4: the decision's entry records the review as a wait from the pause to the decision."""
    clock = FakeClock(T0)
    fake_server.enqueue([Text("Plan: do it")], [Text("Done.")])
    agent = await make_agent(clock=clock)
    host = ReviewHost()
    end = final(await collect(agent, AgentInput(prompt="plan", request_id="p", agent="plan"), host))
    approval_id = end.pending["approval_id"]
    clock.advance(42_000)
    resume = PlanResume(approval_id=approval_id, approved=True, plan="Plan: do it")
    assert final(await collect(agent, AgentInput(request_id="p", plan_resume=resume), host)).status == "completed"
    (decision,) = [e.payload for e in entries(agent, "message") if e.payload.get("wait")]
    assert decision["wait"] == {
        "kind": "plan",
        "approval_id": approval_id,
        "since_ms": T0,
        "until_ms": T0 + 42_000,
        "decision": "approved",
    }


async def test_manual_compaction_records_its_start_end_and_the_attempts_timing(make_agent, fake_server) -> None:
    """W8/C3: the compaction entry says when it started and ended and which request and step ran
    it; the summary request's ledger row has its own timing and names the compaction."""
    clock = FakeClock(T0, tick=1)
    fake_server.enqueue([Text("an answer")], [Text("Summary: we talked.")])
    agent = await make_agent(COMPLETIONS, clock=clock)
    await collect(agent, "hello")
    assert final(await collect(agent, AgentInput(prompt="/compact", request_id="c"))).status == "completed"
    (compaction,) = [e.payload for e in entries(agent, "compaction")]
    summary_row = usage_rows(agent)[-1]
    assert compaction["op"] == "c" and compaction["auto"] is False and compaction["step"] == 0
    assert compaction["started_ms"] <= summary_row["started_ms"] <= summary_row["ended_ms"] <= compaction["ended_ms"]
    assert summary_row["purpose"] == "compaction" and summary_row["compaction_started_ms"] == compaction["started_ms"]
    assert summary_row["first_token_ms"] is not None


async def test_a_resume_records_when_and_by_which_owner_and_the_last_write_before_it(
    make_agent, fake_server, tmp_path: Path
) -> None:
    """W8/D1: a request driven again by a new owner (after a close mid-tool, as after a crash)
    commits a ``resume`` entry: when, the new and the previous owner, and when the program
    counter was last written — the gap the Trace shows; the re-run call says it was re-run."""
    clock = FakeClock(T0)
    first, second = await resumed_by_another_owner(
        make_agent, fake_server, str(tmp_path / "resume.sqlite"), clock, 600_000
    )
    (resume,) = [e.payload for e in entries(second, "resume")]
    assert resume["op"] == "r" and resume["owner_id"] == second.owner_id != first.owner_id
    assert resume["previous_owner"] == first.owner_id and resume["phase"] == "tools"
    assert resume["since_ms"] == T0 and resume["at_ms"] == T0 + 600_000
    (result,) = tool_results(second)
    assert result["recovery"] == "rerun" and result["started_ms"] == T0 + 600_000


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
async def test_every_backend_keeps_the_timing(make_agent, fake_server, tmp_path: Path, backend: str, request) -> None:
    """W8/D8: memory, SQLite and PostgreSQL stores give back the same timing fields (they travel
    in the payloads every backend already stores)."""
    options: dict[str, Any] = {}
    if backend == "sqlite":
        options["database_path"] = str(tmp_path / "t.sqlite")
    elif backend == "postgres":
        cluster = request.getfixturevalue("postgres")
        options["database_url"] = f"{cluster.dsn}?store=timing-{uuid.uuid4().hex[:8]}"
    clock = FakeClock(T0)
    fake_server.enqueue([ToolCall("work", {}, id="c1")], [Text("done")])
    agent = await make_agent(COMPLETIONS, clock=clock, extra_tools=[advancing_tool(clock, 30)], **options)
    assert final(await collect(agent, AgentInput(prompt="go", request_id="b"))).status == "completed"
    first_request, second_request = usage_rows(agent)
    (result,) = tool_results(agent)
    assert (first_request["started_ms"], first_request["ended_ms"]) == (T0, T0)
    assert (result["started_ms"], result["ended_ms"]) == (T0, T0 + 30)
    assert second_request["started_ms"] == T0 + 30
    receipt = load(agent).receipts["b"].payload
    assert (receipt["started_ms"], receipt["ended_ms"]) == (T0, T0 + 30)



async def test_code_mode_records_the_script_and_each_nested_call_on_the_wall_clock(make_agent, fake_server) -> None:
    """W8/X4: the script's header starts on the store's clock; each nested call's intent and
    result carry wall-clock start and end (besides the script's own elapsed time); the run's end
    record says when it ended."""
    clock = FakeClock(T0)
    fake_server.enqueue(*script_turn("await tools.work({}); await tools.work({}); return 1"))
    tools = [advancing_tool(clock, 40)]
    agent = await make_agent(COMPLETIONS, clock=clock, extra_tools=tools, session={"code_mode": {}})
    await run_with(agent, {"prompt": "go", "request_id": "s"})
    (header,) = [e.payload for e in entries(agent, "code_run")]
    results = [e.payload for e in entries(agent, "nested_result")]
    intents = [e.payload for e in entries(agent, "nested_intent")]
    (end,) = [e.payload for e in entries(agent, "code_run_end")]
    assert header["clock_ms"] == T0
    assert [(r["started_ms"], r["ended_ms"]) for r in results] == [(T0, T0 + 40), (T0 + 40, T0 + 80)]
    assert [i["started_ms"] for i in intents] == [T0, T0 + 40]
    assert end["ended_ms"] == T0 + 80


async def test_a_subagent_context_names_the_turn_and_call_that_made_it(make_agent, fake_server) -> None:
    """W8/S5: the child's context register links it to the calling turn and tool call, and its
    operation's receipt has its own start and end."""
    clock = FakeClock(T0, tick=1)
    fake_server.enqueue(
        [ToolCall("subagent", {"task": "look around"}, id="d1")],
        [Text("two files")],
        [Text("the child found two files")],
    )
    agent = await make_agent(COMPLETIONS, clock=clock, session={"subagents": {"tools": ["ls"]}})
    await run_with(agent, {"prompt": "delegate", "request_id": "r"})
    state = load(agent)
    (key,) = [k for k, r in state.registers.items() if k.startswith("conv:") and r.value["kind"] == "subagent"]
    context = state.registers[key].value
    assert context["owner_request"] == "r" and context["owner_call"].endswith(":d1")
    child = key[len("conv:") :]
    receipt = state.receipts[f"{child}:task"].payload
    parent = state.receipts["r"].payload
    assert parent["started_ms"] < context["created_ms"] <= receipt["started_ms"] < receipt["ended_ms"]
    assert receipt["ended_ms"] < parent["ended_ms"]


async def test_a_task_row_keeps_its_timeline_created_sleep_waits_and_end(make_agent, fake_server, tmp_path) -> None:
    """W8/X1: a durable task's row keeps a history: created, each sleep with its wake time, the
    wait on its children, the phase it woke into and its end — each on the store's clock."""
    clock = FakeClock(T0)
    registry = create_agent_registry()
    registry.install(app(Journal(tmp_path / "journal.txt")))
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(COMPLETIONS, clock=clock, session={"registry": registry})
    started: list[dict[str, Any]] = []

    async def on_event(event: Any) -> None:
        if event.type == "session" and not started:
            command = {"type": "task", "request_id": "t", "name": "app.parent", "input": {}, "background": True}
            started.append(await agent.control(command))

    await run_with(agent, "go", on_event)
    tasks = load(agent).tasks
    parent_history = tasks[started[0]["task_id"]].payload["history"]
    assert [e["event"] for e in parent_history] == ["created", "waiting", "phase", "ended"]
    assert parent_history[1]["waiting_on"] == tasks[started[0]["task_id"]].payload["children"]
    assert parent_history[2]["phase"] == "collect" and parent_history[3]["status"] == "completed"
    child = tasks[parent_history[1]["waiting_on"][0]].payload["history"]
    assert [e["event"] for e in child] == ["created", "sleep", "ended"]
    assert child[1]["wake_at"] == T0 and all(e["at_ms"] == T0 for e in child)
