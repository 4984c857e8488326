"""Tool-call arguments nested too deep are refused, that call only (SPEC T3, X4, L1; issue 22).

Arguments nested 900 deep made ``run()`` raise ``run_failed: maximum recursion depth
exceeded`` (and, in a session, the snapshot could not be serialised), and the same depth in a
code-mode nested call ended the whole script with a raw ``RecursionError``. Every call's
arguments are now measured (without recursion) where they enter the engine — a model's calls
before their assistant message is committed, a script's call before its execution log is
written — and a call nested deeper than ``MAX_ARGUMENT_DEPTH`` gets an error result the model
(or the script) can read; the run goes on.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentcore import AgentHost, AgentTool, ToolContext, ToolResult, UserInputRequired
from agentcore.engine.call_limits import MAX_ARGUMENT_DEPTH
from agentcore.testing.steps import Text, ToolCall
from tests.agentcore.codemode_helpers import Effects, codemode_end, entries_of, script_turn
from tests.agentcore.session_helpers import ends, run_with
from tests.conftest import API_KINDS
from tests.helpers import collect, final

COMPLETIONS = "openai-completions"
OPEN_SCHEMA = {"type": "object"}


def nested(depth: int) -> Any:
    """``depth - 1`` lists around 1: ``{"x": nested(depth)}`` is ``depth`` containers deep."""
    value: Any = 1
    for _ in range(depth - 1):
        value = [value]
    return value


class Receiver:
    """An extra tool that accepts any object and records what it got."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def tool(self) -> AgentTool:
        async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
            self.calls.append(arguments)
            return ToolResult.text("received")

        return AgentTool("take", "Take any object.", OPEN_SCHEMA, execute, replay="safe")


def tool_ends(events: list[Any], name: str) -> list[Any]:
    return [e for e in events if e.type == "tool" and e.phase == "end" and e.name == name]


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_a_model_call_nested_900_deep_gets_an_error_result_and_the_run_goes_on(
    make_agent, fake_server, api_kind: str
) -> None:
    """L1/T3: the deep call is not run; the model reads why; the next call and the answer work;
    what was committed holds a short note in place of the arguments."""
    receiver = Receiver()
    fake_server.enqueue(
        [ToolCall("take", {"x": nested(900)}, id="deep")],
        [ToolCall("take", {"x": nested(3)}, id="flat")],
        [Text("done")],
    )
    agent = await make_agent(api_kind, extra_tools=[receiver.tool()])
    events = await collect(agent, "go")
    assert final(events).status == "completed" and final(events).text == "done"
    refused, ran = tool_ends(events, "take")
    assert refused.is_error and f"nested more than {MAX_ARGUMENT_DEPTH} levels deep" in refused.result
    assert not ran.is_error and receiver.calls == [{"x": [[1]]}]
    sent = json.dumps(fake_server.requests[1].json)
    assert f"more than {MAX_ARGUMENT_DEPTH} levels deep" in sent
    assert "[[[[[[[[[[[[[[[[[[[[" not in sent, "the deep arguments never entered the conversation"


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_arguments_too_deep_for_the_json_decoder_are_refused_not_retried(
    make_agent, fake_server, api_kind: str
) -> None:
    """L1/L7/T3: arguments 5,000 levels deep — beyond what Python's JSON decoder takes — are the
    model's mistake, not a dropped connection: that call gets an error result naming the depth,
    and the model is asked once, never retried as a drop."""
    receiver = Receiver()
    deep = '{"x": ' + "[" * 5000 + "1" + "]" * 5000 + "}"
    fake_server.enqueue(
        [ToolCall("take", raw_arguments=deep, id="deep")],
        [Text("done")],
    )
    agent = await make_agent(api_kind, extra_tools=[receiver.tool()])
    events = await collect(agent, "go")
    assert final(events).status == "completed" and final(events).text == "done"
    assert not [e for e in events if e.type == "retry"]
    (refused,) = tool_ends(events, "take")
    assert refused.is_error and "levels deep" in refused.result and receiver.calls == []
    assert len(fake_server.requests) == 2


async def test_in_a_session_the_deep_call_is_refused_and_the_snapshot_still_serialises(make_agent, fake_server) -> None:
    """S3/S4: the session's tool tasks show the committed (short) arguments, so the snapshot of a
    turn with a deep call is JSON like any other."""
    fake_server.enqueue([ToolCall("take", {"x": nested(900)}, id="deep")], [Text("done")])
    agent = await make_agent(COMPLETIONS, extra_tools=[Receiver().tool()], session={})
    events = await run_with(agent, {"prompt": "go", "request_id": "r"})
    assert [e.status for e in ends(events)] == ["completed"]
    (refused,) = tool_ends(events, "take")
    assert refused.is_error and "levels deep" in refused.result
    json.dumps(agent.snapshot())


async def test_the_depth_limit_is_inclusive(make_agent, fake_server) -> None:
    """T3: arguments exactly ``MAX_ARGUMENT_DEPTH`` deep run; one level more is refused."""
    receiver = Receiver()
    fake_server.enqueue(
        [ToolCall("take", {"x": nested(MAX_ARGUMENT_DEPTH)}, id="at")],
        [ToolCall("take", {"x": nested(MAX_ARGUMENT_DEPTH + 1)}, id="over")],
        [Text("done")],
    )
    agent = await make_agent(COMPLETIONS, extra_tools=[receiver.tool()])
    at, over = tool_ends(await collect(agent, "go"), "take")
    assert not at.is_error and len(receiver.calls) == 1
    assert over.is_error and "levels deep" in over.result


DEEP_SCRIPT = """
    let v = 1;
    for (let i = 0; i < 900; i++) v = [v];
    let refused;
    try { await tools.take({x: v}); } catch (e) { refused = e.message; }
    const ok = await tools.take({x: [[1]]});
    return {refused, ok};
"""


async def test_a_script_call_nested_900_deep_is_refused_and_the_script_goes_on(make_agent, fake_server) -> None:
    """X4: the script gets an error for that call only, its next call runs, and the execution
    log holds a refusal without the deep value (and no intent)."""
    receiver = Receiver()
    fake_server.enqueue(*script_turn(DEEP_SCRIPT))
    agent = await make_agent(COMPLETIONS, extra_tools=[receiver.tool()], session={"code_mode": {}})
    events = await run_with(agent, {"prompt": "go", "request_id": "r"})
    end = codemode_end(events)
    assert not end.is_error, end.result
    returned = json.loads(end.result.split("Return value: ", 1)[1])
    assert f"nested more than {MAX_ARGUMENT_DEPTH} levels deep" in returned["refused"] and returned["ok"] == "received"
    assert receiver.calls == [{"x": [[1]]}]
    results = entries_of(agent, "nested_result")
    assert [r.payload["status"] for r in results] == ["invalid", "completed"]
    assert len(json.dumps(results[0].payload)) < 2_000
    assert [e.payload["index"] for e in entries_of(agent, "nested_intent")] == [1]


async def test_a_resumed_script_replays_its_refused_deep_call(make_agent, fake_server) -> None:
    """X4/D1: a script whose deep call was refused pauses on a later approval; the resumed
    re-run makes the same deep call, which matches the log (refused again, from the log) and the
    approved call runs once."""
    effects = Effects()

    def approve(payload: dict[str, Any]) -> None:
        if payload["tool"] == "effect":
            raise UserInputRequired("approve?", payload)

    code = """
        let v = 1;
        for (let i = 0; i < 900; i++) v = [v];
        let refused;
        try { await tools.effect({tag: "deep", v}); } catch (e) { refused = e.message; }
        const done = await tools.effect({tag: "ask"});
        return [refused.includes("levels deep"), done];
    """
    fake_server.enqueue(*script_turn(code))
    agent = await make_agent(COMPLETIONS, extra_tools=[effects.tool()], session={"code_mode": {}})
    host = AgentHost(approve_tool_call=approve)
    paused = ends(await run_with(agent, {"prompt": "go", "request_id": "r"}, host=host))[-1]
    assert paused.status == "paused" and paused.pending["approval_id"].endswith("/n1")
    resume = {"request_id": "r", "tool_resume": {"approval_id": paused.pending["approval_id"], "approved": True}}
    events = await run_with(agent, resume, host=host)
    assert codemode_end(events).result == 'Return value: [true,"effect ask #1"]'
    assert effects.calls == [{"tag": "ask"}]
    assert ends(events)[-1].status == "completed"
