"""Plan mode, ask_user, approvals, host hooks and the communication skill (SPEC PL1–PL4, H1, K1, T1, D9)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agentcore import (
    AgentHost,
    AgentInput,
    AgentTool,
    AskResume,
    PlanResume,
    ToolApprovalResume,
    ToolDefinition,
    ToolResult,
    UserInputRequired,
)
from agentcore.testing.steps import HttpError, Text, ToolCall
from tests.helpers import collect, final, types

PLAN = "Plan: add a greeting\n\n1. Write hello.txt with a greeting.\n2. Check it."
QUESTION = {"questions": [{"id": "q1", "question": "Which greeting?", "options": ["hi", "hello"]}]}


class ReviewHost(AgentHost):
    """A host whose plan approvals always wait for a person (the Studio case)."""

    def __init__(self) -> None:
        async def approve_plan(payload: dict[str, Any]) -> None:
            self.plan_requests.append(payload)
            raise UserInputRequired("plan review", payload)

        self.plan_requests: list[dict[str, Any]] = []
        super().__init__(approve_plan=approve_plan)


def request_tools(request: Any) -> set[str]:
    return {t.get("name") or t.get("function", {}).get("name") for t in request.json.get("tools", [])}


async def test_ask_answer_plan_approve_build(make_agent, fake_server, workspace: Path) -> None:
    """PL1–PL4/T1: ask_user pauses, answers resume the same turn, the plan pauses for approval,
    approval switches to build and the build executes."""
    fake_server.enqueue(
        [ToolCall("ask_user", QUESTION, id="ask1")],
        [Text(PLAN)],
        [ToolCall("write", {"path": "hello.txt", "content": "hello\n"}, id="w1")],
        [Text("Done.")],
    )
    agent = await make_agent()
    host = ReviewHost()
    events = await collect(agent, AgentInput(prompt="add a greeting", request_id="p1", agent="plan"), host)
    end = final(events)
    assert end.status == "paused" and end.error_code == "user_input_required"
    assert end.pending["kind"] == "ask_user" and end.pending["questions"][0]["options"] == ["hi", "hello"]
    assert "plan" not in types(events), "ask_user never produces a plan event"
    first_tools = request_tools(fake_server.requests[0])
    assert "ask_user" in first_tools and not {"write", "edit", "bash"} & first_tools
    assert "PLAN MODE" in json.dumps(fake_server.requests[0].json)

    events = await collect(agent, AgentInput(request_id="p1", ask_resume=AskResume(answers={"q1": "hello"})), host)
    end = final(events)
    assert "A: hello" in json.dumps(fake_server.requests[1].json), "the answer came back as the tool result"
    assert end.status == "paused" and end.pending["kind"] == "plan" and end.pending["plan"] == PLAN
    plan_events = [e for e in events if e.type == "plan"]
    assert [e.phase for e in plan_events] == ["start", "end"] and plan_events[1].text == PLAN
    approval_id = end.pending["approval_id"]
    assert not (workspace / "hello.txt").exists()

    resume = PlanResume(approval_id=approval_id, approved=True, plan=PLAN)
    events = await collect(agent, AgentInput(request_id="p1", plan_resume=resume), host)
    assert [(e.decision, e.approval_id) for e in events if e.type == "approval"] == [("approved", approval_id)]
    assert final(events).status == "completed"
    assert (workspace / "hello.txt").read_text() == "hello\n"
    assert "write" in request_tools(fake_server.requests[2])
    assert json.dumps(PLAN)[1:-1] in json.dumps(fake_server.requests[2].json), "the plan is sent to the build run"


async def test_reject_with_notes_revises_then_unchanged_revision_needs_new_decision(make_agent, fake_server) -> None:
    """PL4: reject keeps plan mode and sends plan + notes; each plan gets its own approval id;
    an unchanged revision still waits for a fresh decision."""
    fake_server.enqueue([Text(PLAN)], [Text(PLAN)], [Text("Done.")])
    agent = await make_agent()
    host = ReviewHost()
    end = final(await collect(agent, AgentInput(prompt="greet", request_id="p2", agent="plan"), host))
    first_id = end.pending["approval_id"]
    reject = PlanResume(approval_id=first_id, approved=False, plan=PLAN, notes="use a friendlier tone")
    events = await collect(agent, AgentInput(request_id="p2", plan_resume=reject), host)
    assert [e.decision for e in events if e.type == "approval"] == ["rejected"]
    second_request = json.dumps(fake_server.requests[1].json)
    assert "use a friendlier tone" in second_request and "rejected" in second_request
    assert "write" not in request_tools(fake_server.requests[1]), "still plan mode after a reject"
    end = final(events)
    assert end.status == "paused" and end.pending["plan"] == PLAN
    assert end.pending["approval_id"] != first_id, "the unchanged revision needs a fresh decision"
    approve = PlanResume(approval_id=end.pending["approval_id"], approved=True, plan=PLAN)
    assert final(await collect(agent, AgentInput(request_id="p2", plan_resume=approve), host)).status == "completed"


async def test_text_before_tools_is_not_the_plan(make_agent, fake_server) -> None:
    """PL3: only the text after the last tool call is the plan."""
    fake_server.enqueue([Text("Let me look around first."), ToolCall("ls", {"path": "."})], [Text(PLAN)])
    agent = await make_agent()
    events = await collect(agent, AgentInput(prompt="plan it", agent="plan"), ReviewHost())
    plan_texts = [e.text for e in events if e.type == "plan" and e.phase == "end"]
    assert plan_texts == [PLAN]


async def test_failed_turn_never_submits_leftovers_as_a_plan(make_agent, fake_server) -> None:
    """PL3: failure → no plan event, no approval request."""
    fake_server.enqueue([Text("Plan: half"), HttpError(401, "bad key")])
    agent = await make_agent()
    host = ReviewHost()
    events = await collect(agent, AgentInput(prompt="plan it", agent="plan"), host)
    assert final(events).status == "failed"
    assert "plan" not in types(events) and host.plan_requests == []


async def test_no_host_never_pauses(make_agent, fake_server) -> None:
    """H1: with no host, a plan is reported but nothing pauses."""
    fake_server.enqueue([Text(PLAN)])
    agent = await make_agent(mode="plan")
    events = await collect(agent, "plan it")
    assert final(events).status == "completed" and final(events).text == PLAN
    assert [e.phase for e in events if e.type == "plan"] == ["start", "end"]


async def test_host_approving_directly_runs_the_build(make_agent, fake_server) -> None:
    """H1: approve_plan returning normally approves without a pause."""
    fake_server.enqueue([Text(PLAN)], [Text("Built.")])
    agent = await make_agent()
    host = AgentHost(approve_plan=lambda payload: True)
    events = await collect(agent, AgentInput(prompt="go", agent="plan"), host)
    assert [e.decision for e in events if e.type == "approval"] == ["approved"]
    assert final(events).text == "Built."


async def test_cancel_during_a_question(make_agent, fake_server) -> None:
    """PL2/L8: a pending question cancelled by the host ends the run aborted; no plan."""
    fake_server.enqueue([ToolCall("ask_user", QUESTION)])
    agent = await make_agent()
    end = final(await collect(agent, AgentInput(prompt="x", request_id="q", agent="plan"), ReviewHost()))
    assert end.status == "paused"
    abort = asyncio.Event()
    abort.set()
    events = await collect(agent, AgentInput(request_id="q"), AgentHost(abort_signal=abort))
    assert final(events).status == "aborted" and "plan" not in types(events)
    assert agent.pending_request_id is None


async def test_plan_pause_survives_a_restart_with_a_file_store(make_agent, fake_server, tmp_path: Path) -> None:
    """PL4/D9: the approval pause is durable; a new runtime on the same file resumes it."""
    db = str(tmp_path / "plan.sqlite")
    fake_server.enqueue([Text(PLAN)], [Text("Built after restart.")])
    agent = await make_agent(database_path=db)
    end = final(await collect(agent, AgentInput(prompt="go", request_id="r", agent="plan"), ReviewHost()))
    await agent.close()
    reopened = await make_agent(database_path=db)
    assert reopened.pending_request_id == "r"
    approve = PlanResume(approval_id=end.pending["approval_id"], approved=True, plan=PLAN)
    events = await collect(reopened, AgentInput(request_id="r", plan_resume=approve), ReviewHost())
    assert final(events).text == "Built after restart."


async def test_resume_without_decision_repeats_the_pause(make_agent, fake_server) -> None:
    fake_server.enqueue([Text(PLAN)])
    agent = await make_agent()
    first = final(await collect(agent, AgentInput(prompt="go", request_id="s", agent="plan"), ReviewHost()))
    again = final(await collect(agent, AgentInput(request_id="s"), ReviewHost()))
    assert again.status == "paused" and again.pending == first.pending
    assert len(fake_server.requests) == 1


def deploy_tool(calls: list[dict[str, Any]]) -> AgentTool:
    async def execute(arguments: dict[str, Any], ctx: Any) -> ToolResult:
        calls.append(arguments)
        return ToolResult.text("deployed")

    return AgentTool(
        name="deploy",
        description="Deploy",
        parameters={"type": "object", "properties": {"env": {"type": "string"}}, "required": ["env"]},
        execute=execute,
    )


async def test_tool_approval_allow_and_deny(make_agent, fake_server) -> None:
    """H1: approve_tool_call returning allows; raising denies with the message sent to the model."""
    calls: list[dict[str, Any]] = []
    fake_server.enqueue([ToolCall("deploy", {"env": "staging"})], [ToolCall("deploy", {"env": "prod"})], [Text("ok")])
    agent = await make_agent(extra_tools=[deploy_tool(calls)])

    def approve(payload: dict[str, Any]) -> None:
        if payload["arguments"]["env"] == "prod":
            raise PermissionError("prod deploys need a change ticket")

    events = await collect(agent, "deploy", AgentHost(approve_tool_call=approve))
    assert final(events).status == "completed"
    assert calls == [{"env": "staging"}]
    assert "prod deploys need a change ticket" in json.dumps(fake_server.requests[2].json)


async def test_tool_approval_pause_and_resume_reuses_the_approval(make_agent, fake_server) -> None:
    """H1/S4: raising UserInputRequired pauses; resume reuses that approval for the same call;
    a later identical call asks again."""
    calls: list[dict[str, Any]] = []
    asked: list[str] = []
    fake_server.enqueue(
        [ToolCall("deploy", {"env": "prod"}, id="d1")], [ToolCall("deploy", {"env": "prod"}, id="d1")], [Text("ok")]
    )
    agent = await make_agent(extra_tools=[deploy_tool(calls)])

    def approve(payload: dict[str, Any]) -> None:
        asked.append(payload["approval_id"])
        raise UserInputRequired("approve deploy", payload)

    host = AgentHost(approve_tool_call=approve)
    end = final(await collect(agent, AgentInput(prompt="deploy", request_id="t"), host))
    assert end.status == "paused" and end.pending["kind"] == "tool_approval" and calls == []
    resume = ToolApprovalResume(approval_id=end.pending["approval_id"], approved=True)
    end = final(await collect(agent, AgentInput(request_id="t", tool_resume=resume), host))
    assert calls == [{"env": "prod"}], "the approved call ran once, without asking again"
    assert end.status == "paused", "the later identical call needs its own approval"
    assert len(asked) == 2 and asked[0] != asked[1]


async def test_auto_approve_false_pauses_only_in_plan_rounds(make_agent, fake_server) -> None:
    """T3: auto_approve=False pauses before the call in plan rounds; build rounds run directly."""
    calls: list[dict[str, Any]] = []
    fake_server.enqueue([ToolCall("deploy", {"env": "a"})], [Text("built")], [ToolCall("deploy", {"env": "b"})])
    agent = await make_agent(
        extra_tools=[deploy_tool(calls)], tool_definitions=[ToolDefinition("deploy", auto_approve=False)]
    )
    events = await collect(agent, "build it")
    assert final(events).status == "completed" and calls == [{"env": "a"}]
    end = final(await collect(agent, AgentInput(prompt="plan it", agent="plan"), ReviewHost()))
    assert end.status == "paused" and end.pending["kind"] == "tool_approval" and calls == [{"env": "a"}]


async def test_report_usage_gets_stable_record_ids(make_agent, fake_server) -> None:
    """H1: report_usage is awaited once per settled response with a stable record id."""
    reports: list[dict[str, Any]] = []

    async def report(usage: dict[str, Any]) -> None:
        reports.append(usage)

    fake_server.enqueue([ToolCall("ls", {"path": "."})], [Text("ok")])
    agent = await make_agent()
    await collect(agent, AgentInput(prompt="x", request_id="u"), AgentHost(report_usage=report))
    assert [r["record_id"] for r in reports] == ["u:0:0", "u:1:0"]
    assert all("api_key" not in json.dumps(r) for r in reports)


async def test_communication_skill_in_every_request_and_opt_out_sticks(make_agent, fake_server, tmp_path) -> None:
    """K1: the guide is in every system prompt (build, plan, custom); 'stop adhd mode' turns it off
    durably, an explicit request turns it on again; it never changes the tools."""
    db = str(tmp_path / "k.sqlite")
    fake_server.enqueue(*([Text("ok")] for _ in range(5)))
    agent = await make_agent(database_path=db, system_prompt="You are a custom agent.")
    await collect(agent, "hello")
    await collect(agent, AgentInput(prompt="plan", agent="plan"))
    await collect(agent, "please stop adhd mode")
    tools_before = request_tools(fake_server.requests[0])
    await agent.close()
    agent = await make_agent(database_path=db, system_prompt="You are a custom agent.")
    await collect(agent, "next question")
    await collect(agent, "start adhd mode again please")
    marker = "i-have-adhd"
    has = [marker in json.dumps(r.json) for r in fake_server.requests]
    assert has == [True, True, False, False, True]
    assert "You are a custom agent." in json.dumps(fake_server.requests[0].json)
    assert request_tools(fake_server.requests[3]) == tools_before
