"""Subagents: tools, models, no nested delegation, limits, background delivery, usage (SPEC S5, S3)."""

from __future__ import annotations

import json
from typing import Any

from agentcore.testing.steps import Text, ToolCall, Usage
from tests.agentcore.session_helpers import ends, last_snapshot, run_with, user_texts

COMPLETIONS = "openai-completions"
CHILD_TASK = "List the files and report"


def offered_tools(request: Any) -> set[str]:
    return {tool["function"]["name"] for tool in request.json.get("tools", [])}


def is_child(request: Any) -> bool:
    texts = user_texts(request)
    return bool(texts) and texts[0].startswith(CHILD_TASK)


async def test_foreground_subagent_answers_with_parent_tools_within_the_whitelist(make_agent, fake_server) -> None:
    """S5: child tools = parent ∩ whitelist, never subagent; the call returns the child's answer;
    the child's usage is its own and the parent's total counts it once."""
    fake_server.enqueue(
        [ToolCall("subagent", {"task": CHILD_TASK}, id="d1"), Usage(input=100, output=10)],
        [Text("README.md and main.py"), Usage(input=40, output=7)],
        [Text("The child found two files."), Usage(input=150, output=12)],
    )
    agent = await make_agent(
        COMPLETIONS,
        permission_policy="read-only",  # the parent has no bash, so the child cannot get it
        session={"subagents": {"tools": ["read", "ls", "bash", "subagent", "update_plan"]}},
    )
    events = await run_with(agent, {"prompt": "delegate", "request_id": "r"})
    parent_first, child, parent_second = fake_server.requests
    assert "subagent" in offered_tools(parent_first)
    assert offered_tools(child) == {"read", "ls", "update_plan"}
    assert user_texts(child) == [CHILD_TASK]
    assert "README.md and main.py" in json.dumps(parent_second.json)
    assert [e.request_id for e in ends(events) if e.target_id is None] == ["r"]
    snapshot = last_snapshot(events)
    child_context = next(c for c in snapshot["contexts"] if c["kind"] == "subagent")
    assert child_context["parent_target_id"] == 0
    usage = {u["target_id"]: u for u in snapshot["usage"]}
    assert usage[0]["own"]["input_tokens"] == 250 and usage[0]["own"]["calls"] == 2
    assert usage[child_context["target_id"]]["own"]["input_tokens"] == 40
    assert usage[0]["total"]["input_tokens"] == 290 and usage[0]["total"]["calls"] == 3
    turn = next(t for t in snapshot["turns"] if t["request_id"] == "r")
    assert turn["usage"]["input_tokens"] == 250, "the child's calls are not the parent's turn"
    history = [t for t in snapshot["history"] if t["kind"] == "subagent"]
    assert history and history[0]["status"] == "completed" and history[0]["result"] == "README.md and main.py"


async def test_subagent_models_must_match_the_whitelist_exactly(make_agent, fake_server) -> None:
    """S5: an explicit child model must be an exact provider/model pair from the whitelist."""
    fake_server.enqueue(
        [ToolCall("subagent", {"task": CHILD_TASK, "model": {"provider": "fake", "model_id": "other"}}, id="a")],
        [ToolCall("subagent", {"task": CHILD_TASK, "model": {"provider": "fake", "model_id": "small"}}, id="b")],
        [Text("done by small")],
        [Text("finished")],
    )
    agent = await make_agent(
        COMPLETIONS, session={"subagents": {"tools": ["ls"], "models": [{"provider": "fake", "model_id": "small"}]}}
    )
    await run_with(agent, "delegate")
    refused = json.dumps(fake_server.requests[1].json)
    assert "is not allowed for subagents" in refused
    child = fake_server.requests[2]
    assert is_child(child) and child.json["model"] == "small"
    assert fake_server.requests[3].json["model"] == "fake-model", "the parent keeps its own model"


async def test_at_most_max_agents_are_active(make_agent, fake_server) -> None:
    """S5: with max_agents=1 a second concurrent subagent is refused (a tool error)."""

    def responder(request: Any) -> list[Any]:
        if is_child(request):
            return [Text("child result")]
        body = json.dumps(request.json)
        if "Background subagent" in body:
            return [Text("parent done")]
        if "Started subagent" in body:
            return [Text("waiting")]
        return [
            ToolCall("subagent", {"task": CHILD_TASK, "background": True}, id="x1"),
            ToolCall("subagent", {"task": CHILD_TASK + " again", "background": True}, id="x2"),
        ]

    fake_server.responder = responder
    agent = await make_agent(COMPLETIONS, session={"subagents": {"tools": ["ls"], "max_agents": 1}})
    events = await run_with(agent, "delegate twice")
    results = [e for e in events if e.type == "tool" and e.phase == "end" and e.name == "subagent"]
    assert [r.is_error for r in results] == [False, True]
    assert "At most 1 subagents may be active" in results[1].result
    assert sum(1 for r in fake_server.requests if is_child(r)) == 1


async def test_background_subagent_result_is_delivered_once_and_run_waits(make_agent, fake_server) -> None:
    """S5/S6: a background child runs beside the parent; its result arrives once as a new
    parent turn; run() returns only after that."""

    def responder(request: Any) -> list[Any]:
        if is_child(request):
            return [Text("background findings"), Usage(input=30, output=5)]
        body = json.dumps(request.json)
        if "Background subagent" in body:
            return [Text("Got the background findings.")]
        if "Started subagent" in body:
            return [Text("I will wait for it.")]
        return [ToolCall("subagent", {"task": CHILD_TASK, "background": True}, id="bg")]

    fake_server.responder = responder
    agent = await make_agent(COMPLETIONS, session={"subagents": {"tools": ["ls"]}})
    events = await run_with(agent, {"prompt": "start it", "request_id": "r"})
    main_ends = [e for e in ends(events) if e.target_id is None]
    assert [e.text for e in main_ends] == ["I will wait for it.", "Got the background findings."]
    deliveries = [r for r in fake_server.requests if "Background subagent" in json.dumps(r.json)]
    assert len(deliveries) == 1, "delivered exactly once"
    assert "background findings" in json.dumps(deliveries[0].json)
    child_ends = [e for e in ends(events) if e.target_id is not None]
    assert len(child_ends) == 1 and child_ends[0].status == "completed"
    assert events[-1].type == "session"
    snapshot = last_snapshot(events)
    assert all(c["status"] == "idle" for c in snapshot["contexts"])
    task = next(t for t in snapshot["history"] if t["kind"] == "subagent")
    assert task["background"] is True and task["status"] == "completed"


async def test_subagent_without_the_option_is_not_offered(make_agent, fake_server) -> None:
    """S5: delegation is opt-in."""
    fake_server.enqueue([Text("hi")])
    agent = await make_agent(COMPLETIONS, session={})
    await run_with(agent, "hi")
    assert "subagent" not in offered_tools(fake_server.requests[0])


async def test_a_subagents_first_request_is_not_a_recovery(make_agent, fake_server) -> None:
    """S5/L6: a child the parent's call just started is driven as a new request, not as one
    resumed after a restart: no ``recovery`` retry event, no connection-budget attempt spent,
    its first request is attempt 0."""
    fake_server.enqueue([ToolCall("subagent", {"task": CHILD_TASK}, id="d1")], [Text("child done")], [Text("ok")])
    agent = await make_agent(COMPLETIONS, session={"subagents": {"tools": ["ls"]}})
    events = await run_with(agent, {"prompt": "delegate", "request_id": "r"})
    assert [e for e in events if e.type == "retry"] == []
    child_rows = [row.record_id for row in agent.log.storage.load().usage if "/sub/" in row.record_id]
    assert len(child_rows) == 1 and child_rows[0].endswith(":task:0:0")
