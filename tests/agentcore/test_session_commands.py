"""Session options, command validation and receipts (SPEC S1, S2, S3)."""

from __future__ import annotations

import json
import math
from datetime import datetime

import pytest

from agentcore import AgentError, InputValidationError
from agentcore.session.snapshot import SessionSnapshot
from agentcore.testing.steps import Text, ToolCall
from tests.agentcore.session_helpers import Gate, ends, last_snapshot, run_with

COMPLETIONS = "openai-completions"


@pytest.mark.parametrize(
    ("session", "field"),
    [
        ({"bogus": 1}, "session.bogus"),
        ({"subagent": {"tools": []}}, "session.subagent"),
        ({"subagents": {"tools": "read"}}, "session.subagents.tools"),
        ({"subagents": {"tools": ["read"], "max_agents": 0}}, "session.subagents.max_agents"),
        ({"subagents": {"tools": ["read"], "models": [{"provider": "x"}]}}, "session.subagents.models.0.model_id"),
        ({"plan_fork": "later"}, "session.plan_fork"),
        ({"compaction": {"reserve": 1}}, "session.compaction.reserve"),
    ],
)
async def test_invalid_session_options_name_the_field(make_agent, session, field) -> None:
    """S1: an unknown or invalid session key is input_validation naming session.<key>."""
    with pytest.raises(InputValidationError) as info:
        await make_agent(COMPLETIONS, session=session)
    assert info.value.field == field


async def test_control_outside_a_run_is_not_ready(make_agent) -> None:
    """S1/R2: control() needs an active run (or serve); without session= it is not enabled."""
    agent = await make_agent(COMPLETIONS, session={})
    with pytest.raises(AgentError) as info:
        await agent.control({"type": "snapshot", "request_id": "s"})
    assert info.value.code == "AGENT_NOT_READY"


BAD_COMMANDS = [
    ({"request_id": "x"}, "type"),
    ({"type": "launch", "request_id": "x"}, "type"),
    ({"type": "submit", "prompt": "hi"}, "request_id"),
    ({"type": "submit", "request_id": "x", "prompt": "hi", "mode": "later"}, "mode"),
    ({"type": "submit", "request_id": "x", "prompt": ""}, "type"),
    ({"type": "submit", "request_id": "x", "prompt": "hi", "colour": "red"}, "colour"),
    ({"type": "withdraw", "request_id": "x"}, "input_id"),
    ({"type": "configure", "request_id": "x", "expected_version": 0}, "type"),
    ({"type": "configure", "request_id": "x", "expected_version": -1, "effort": "high"}, "expected_version"),
    ({"type": "configure", "request_id": "x", "expected_version": 0, "effort": "ultra-max"}, "effort"),
    ({"type": "plan", "request_id": "x", "expected_version": 0, "items": [{"id": "a", "text": "t"}]}, "items.0.status"),
    ({"type": "cancel", "request_id": "x", "scope": "task"}, "type"),
    ({"type": "cancel", "request_id": "x", "scope": "everything"}, "scope"),
    ({"type": "task", "request_id": "x", "name": "t", "input": {"when": datetime(2026, 1, 1)}}, "input.when"),
    ({"type": "task", "request_id": "x", "name": "t", "input": [math.nan]}, "input.0"),
    ({"type": "task", "request_id": "x", "name": "t", "input": {1: "a"}}, "input"),
    ({"type": "task", "request_id": "x", "name": "t", "input": {"s": {1, 2}}}, "input.s"),
    ({"type": "task", "request_id": "x", "name": "t", "input": "x" * (256 * 1024 + 1)}, "input"),
    ({"type": "task", "request_id": "x", "name": "t", "input": "\ud800"}, "input"),
    ({"type": "promote", "request_id": "x"}, "input_id"),
    ({"type": "promote", "request_id": "x", "input_id": "i" * 201}, "input_id"),
    ({"type": "compact", "request_id": "x", "instructions": "i" * 20_001}, "instructions"),
    ({"type": "compact", "request_id": "x", "instructions": ["summarise"]}, "instructions"),
    ({"type": "reset", "request_id": "x", "handoff": {"note": "carry on"}}, "handoff"),
    ({"type": "reset", "request_id": "x", "handoff": "h" * 200_001}, "handoff"),
    ({"type": "delete", "request_id": "x", "force": True}, "force"),
    ({"type": "fork", "request_id": "x"}, "entry_id"),
    ({"type": "fork", "request_id": "x", "entry_id": "e", "target_id": 99}, "target_id"),
    ({"type": "snapshot", "request_id": "x", "target_id": -1}, "target_id"),
]


@pytest.mark.parametrize(("command", "field"), BAD_COMMANDS)
async def test_invalid_commands_name_the_field_and_change_nothing(make_agent, fake_server, command, field) -> None:
    """S1/S2: a bad command is input_validation naming the field; nothing is recorded, so the
    same request id stays free."""
    fake_server.enqueue([Text("done")])
    agent = await make_agent(COMPLETIONS, session={})
    seen: list[Exception] = []
    before: list[int] = []

    async def on_event(event) -> None:
        if event.type == "session" and not seen:
            before.append(agent.log.view.last_seq)
            with pytest.raises(InputValidationError) as info:
                await agent.control(command)
            seen.append(info.value)
            assert agent.log.view.last_seq == before[0], "a refused command writes nothing"

    await run_with(agent, "hello", on_event)
    assert seen and seen[0].field == field


async def test_unknown_task_without_registry(make_agent, fake_server) -> None:
    """S2: a task command needs a registered task; without one it is unknown_task, unrecorded."""
    fake_server.enqueue([Text("done")])
    agent = await make_agent(COMPLETIONS, session={})
    codes: list[str] = []

    async def on_event(event) -> None:
        if event.type == "session" and not codes:
            with pytest.raises(AgentError) as info:
                await agent.control({"type": "task", "request_id": "t1", "name": "app.timer", "input": {}})
            codes.append(info.value.code)
            assert "t1" not in agent.log.receipts

    await run_with(agent, "hello", on_event)
    assert codes == ["unknown_task"]


async def test_resend_returns_the_same_receipt_and_conflicts_are_refused(make_agent, fake_server) -> None:
    """S1: a resend returns an equal receipt and does nothing again; the same request id with
    another payload is request_conflict; the command is copied on entry."""
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g")], [Text("first done")], [Text("follow-up done")])
    agent = await make_agent(COMPLETIONS, session={}, extra_tools=[gate.tool()])
    receipts: list[dict] = []

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start":
            command = {"type": "submit", "request_id": "f1", "prompt": "and then", "mode": "follow_up"}
            receipts.append(await agent.control(command))
            command["prompt"] = "mutated after sending"  # copied on entry: no effect
            receipts.append(await agent.control({**command, "prompt": "and then"}))
            with pytest.raises(AgentError) as info:
                await agent.control({**command, "prompt": "something else"})
            assert info.value.code == "request_conflict"
            with pytest.raises(AgentError) as info:
                await agent.control({"type": "withdraw", "request_id": "main-request", "input_id": "f1"})
            assert info.value.code == "request_conflict", "a run's request id is taken too"
            gate.open()

    events = await run_with(agent, {"prompt": "go", "request_id": "main-request"}, on_event)
    assert (
        receipts[0]
        == receipts[1]
        == {
            "request_id": "f1",
            "type": "submit",
            "status": "queued",
            "input_id": "f1",
            "mode": "follow_up",
        }
    )
    assert [e.request_id for e in ends(events)] == ["main-request", "f1"]
    assert len(fake_server.requests) == 3, "the follow-up ran once"
    assert "and then" in json.dumps(fake_server.requests[2].json)
    assert "mutated" not in json.dumps(fake_server.requests[2].json)


async def test_receipts_are_durable_across_reopen(make_agent, fake_server, tmp_path) -> None:
    """S1: a reopened runtime returns the original receipt for a resent command."""
    db = str(tmp_path / "session.sqlite")
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g")], [Text("done")], [Text("follow-up done")])
    agent = await make_agent(COMPLETIONS, session={}, database_path=db, extra_tools=[gate.tool()])
    first: list[dict] = []
    command = {"type": "submit", "request_id": "f1", "prompt": "later", "mode": "follow_up"}

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start" and not first:
            first.append(await agent.control(command))
            gate.open()

    await run_with(agent, "go", on_event)
    await agent.close()
    fake_server.enqueue([Text("again")])
    reopened = await make_agent(COMPLETIONS, session={}, database_path=db, extra_tools=[Gate().tool()])
    again: list[dict] = []

    async def resend(event) -> None:
        if event.type == "session" and not again:
            again.append(await reopened.control(command))

    await run_with(reopened, "another", resend)
    assert again == first
    prompts = json.dumps([request.json for request in fake_server.requests])
    assert prompts.count('"later"') == 2, "the follow-up was answered once (seen in two later requests)"


async def test_snapshot_is_complete_json_without_credentials(make_agent, fake_server) -> None:
    """S3: version 1, a new owner id per open, strictly increasing revisions, JSON data that
    validates against the documented model, and no API key anywhere."""
    fake_server.enqueue([Text("hello")])
    agent = await make_agent(COMPLETIONS, session={}, api_key="sk-secret-value-123")
    events = await run_with(agent, "hi")
    snapshots = [e.snapshot for e in events if e.type == "session"]
    assert len(snapshots) >= 2
    revisions = [s["revision"] for s in snapshots]
    assert revisions == sorted(set(revisions)), "revisions strictly increase"
    last = last_snapshot(events)
    SessionSnapshot.model_validate(last)
    assert last["version"] == 1 and last["owner_id"] == agent.owner_id
    assert {"contexts", "tasks", "history", "turns", "plan", "records", "receipts", "usage"} <= set(last)
    assert last["turns"][-1]["status"] == "completed"
    assert set(last["turns"][-1]["usage"]) >= {
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cached_input_tokens",
        "cache_creation_tokens",
        "reasoning_tokens",
        "calls",
    }
    text = json.dumps(snapshots)
    assert "sk-secret-value-123" not in text
    assert events[-1].type == "session", "a session run ends with the settled snapshot"


async def test_new_owner_revisions_are_always_higher(make_agent, fake_server, tmp_path) -> None:
    """S3: an older owner's revision can never suppress a newer owner's."""
    db = str(tmp_path / "rev.sqlite")
    fake_server.enqueue(*[[Text(f"answer {n}")] for n in range(4)])
    first = await make_agent(COMPLETIONS, session={}, database_path=db)
    for n in range(3):
        await run_with(first, f"q{n}")
    old = first.snapshot()["revision"]
    old_owner = first.owner_id
    await first.close()
    second = await make_agent(COMPLETIONS, session={}, database_path=db)
    events = await run_with(second, "again")
    new = [e.snapshot["revision"] for e in events if e.type == "session"]
    assert min(new) > old
    assert second.owner_id != old_owner
