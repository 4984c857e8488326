"""The input queue: follow-up, steer, reject, withdraw, promote and their races (SPEC S2, S6)."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentcore.errors import InputValidationError
from agentcore.testing.steps import Hang, Text, ToolCall
from tests.agentcore.session_helpers import Gate, ends, last_snapshot, run_with, user_texts

COMPLETIONS = "openai-completions"


async def session_agent(make_agent, gate: Gate, **options):
    return await make_agent(COMPLETIONS, session={}, extra_tools=[gate.tool()], **options)


async def test_follow_up_while_busy_is_answered_in_the_same_run(make_agent, fake_server) -> None:
    """S2/S6: a follow-up queued while the agent works starts the next turn; run() returns only
    after it is answered."""
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g")], [Text("first done")], [Text("second done")])
    agent = await session_agent(make_agent, gate)
    receipts = []

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start":
            receipts.append(await agent.control({"type": "submit", "request_id": "f", "prompt": "also this"}))
            snapshot = agent.snapshot()
            assert snapshot["contexts"][0]["queue"][0]["input_id"] == "f"
            gate.open()

    events = await run_with(agent, {"prompt": "start", "request_id": "r"}, on_event)
    assert receipts[0]["status"] == "queued"
    assert [(e.request_id, e.status, e.text) for e in ends(events)] == [
        ("r", "completed", "first done"),
        ("f", "completed", "second done"),
    ]
    assert user_texts(fake_server.requests[2]) == ["start", "also this"]
    assert user_texts(fake_server.requests[1]) == ["start"], "a follow-up never joins the running turn"
    assert last_snapshot(events)["contexts"][0]["queue"] == []


async def test_steer_joins_the_turn_at_the_next_tool_boundary(make_agent, fake_server) -> None:
    """S2: a steer sent while a tool runs is in the very next model request of the same turn."""
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g")], [Text("adjusted")])
    agent = await session_agent(make_agent, gate)

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start":
            await agent.control({"type": "submit", "request_id": "s", "prompt": "use tabs", "mode": "steer"})
            gate.open()

    events = await run_with(agent, {"prompt": "format it", "request_id": "r"}, on_event)
    assert [e.request_id for e in ends(events)] == ["r"], "the steer made no turn of its own"
    assert user_texts(fake_server.requests[1]) == ["format it", "use tabs"]
    assert len(fake_server.requests) == 2
    assert agent.log.receipts["s"].payload["status"] == "placed"


async def test_steer_after_the_last_tool_boundary_starts_the_next_turn(make_agent, fake_server) -> None:
    """S2/W14: a steer that finds no further tool boundary in its turn is the next turn, first,
    and says so: its receipt and its turn in the snapshot carry ``steer_missed`` (a follow-up's
    do not), so a host can tell the person "the turn ended before a tool call"."""
    fake_server.enqueue([Text("thinking..."), Hang()], [Text("answer one")], [Text("answer two")])
    agent = await make_agent(COMPLETIONS, session={})
    started = asyncio.Event()

    async def on_event(event) -> None:
        if event.type == "text_delta" and not started.is_set():
            started.set()
            await agent.control({"type": "submit", "request_id": "f", "prompt": "follow", "mode": "follow_up"})
            await agent.control({"type": "submit", "request_id": "s", "prompt": "steer", "mode": "steer"})
            fake_server.release()

    events = await run_with(agent, {"prompt": "go", "request_id": "r"}, on_event)
    assert [e.request_id for e in ends(events)] == ["r", "s", "f"]
    turns = {t["request_id"]: t for t in last_snapshot(events)["turns"]}
    assert turns["s"]["steer_missed"] is True
    assert turns["f"]["steer_missed"] is False and turns["r"]["steer_missed"] is False
    assert agent.log.receipts["s"].payload["steer_missed"] is True


async def test_reject_is_refused_while_busy_and_accepted_when_idle(make_agent, fake_server) -> None:
    """S2: mode reject refuses while busy (a durable receipt); in an idle session it is a turn."""
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g")], [Text("done")], [Text("idle answer")])
    agent = await session_agent(make_agent, gate)
    receipts = []

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start":
            receipts.append(await agent.control({"type": "submit", "request_id": "x", "prompt": "p", "mode": "reject"}))
            gate.open()

    events = await run_with(agent, "go", on_event)
    assert receipts[0]["status"] == "rejected"
    assert len(ends(events)) == 1 and len(fake_server.requests) == 2

    serving = []
    idle = []
    async for event in agent.serve():  # a host lease: commands work with nothing running
        serving.append(event)
        if event.type == "session" and not idle:
            idle.append(await agent.control({"type": "submit", "request_id": "y", "prompt": "now", "mode": "reject"}))
        if event.type == "end":
            agent.stop_serving()
    assert idle[0]["status"] == "accepted"
    assert [e.text for e in ends(serving)] == ["idle answer"]


async def test_idle_steer_is_a_new_turn(make_agent, fake_server) -> None:
    """S2: a steer with nothing running starts a normal turn (serve: a host lease)."""
    fake_server.enqueue([Text("hello")])
    agent = await make_agent(COMPLETIONS, session={})
    events = []
    receipts = []
    async for event in agent.serve():
        events.append(event)
        if event.type == "session" and not receipts:
            receipts.append(await agent.control({"type": "submit", "request_id": "s", "prompt": "hi", "mode": "steer"}))
        if event.type == "end":
            agent.stop_serving()
    assert receipts[0]["status"] == "accepted"
    assert [(e.request_id, e.text) for e in ends(events)] == [("s", "hello")]
    assert events[-1].type == "session"


async def test_withdraw_before_consumption_removes_the_input(make_agent, fake_server) -> None:
    """S2 race, order 1: withdraw wins over consumption; the input is never sent."""
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g")], [Text("done")])
    agent = await session_agent(make_agent, gate)
    receipts = []

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start":
            await agent.control({"type": "submit", "request_id": "f", "prompt": "never sent"})
            receipts.append(await agent.control({"type": "withdraw", "request_id": "w", "input_id": "f"}))
            gate.open()

    events = await run_with(agent, "go", on_event)
    assert receipts[0]["status"] == "withdrawn"
    assert len(ends(events)) == 1
    assert "never sent" not in str([r.json for r in fake_server.requests])
    assert agent.log.receipts["f"].payload["status"] == "withdrawn"


async def test_withdraw_after_consumption_is_already_placed_then_settled(make_agent, fake_server) -> None:
    """S2 race, order 2: a consumed input cannot be withdrawn (already_placed while its turn
    runs, settled after); nothing is re-sent or undone."""
    gate = Gate()
    second = Gate("gate2")
    fake_server.enqueue([ToolCall("gate", {}, id="g")], [Text("one")], [ToolCall("gate2", {}, id="h")], [Text("two")])
    agent = await make_agent(COMPLETIONS, session={}, extra_tools=[gate.tool(), second.tool()])
    receipts = {}

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start" and event.name == "gate":
            await agent.control({"type": "submit", "request_id": "f", "prompt": "second"})
            gate.open()
        if event.type == "tool" and event.phase == "start" and event.name == "gate2":
            receipts["running"] = await agent.control({"type": "withdraw", "request_id": "w1", "input_id": "f"})
            receipts["promote"] = await agent.control({"type": "promote", "request_id": "p1", "input_id": "f"})
            second.open()
        if event.type == "end" and event.request_id == "f":
            receipts["done"] = await agent.control({"type": "withdraw", "request_id": "w2", "input_id": "f"})

    events = await run_with(agent, "go", on_event)
    assert receipts["running"]["status"] == "already_placed"
    assert receipts["promote"]["status"] == "already_placed"
    assert receipts["done"]["status"] == "settled"
    assert [e.request_id for e in ends(events)][1] == "f"
    assert len(fake_server.requests) == 4


async def test_promote_turns_a_queued_follow_up_into_a_steer(make_agent, fake_server) -> None:
    """S2 race, order 1: promoted before the turn's tool boundary, the follow-up joins the turn
    (same input id, images kept) instead of waiting for the next one."""
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g")], [Text("joined")])
    agent = await session_agent(make_agent, gate)
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    receipts = []

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start":
            image = {"data": png, "mime_type": "image/png"}
            await agent.control({"type": "submit", "request_id": "f", "prompt": "see this", "images": [image]})
            receipts.append(await agent.control({"type": "promote", "request_id": "p", "input_id": "f"}))
            gate.open()

    events = await run_with(agent, "go", on_event)
    assert receipts[0]["status"] == "promoted"
    assert len(ends(events)) == 1
    second = str(fake_server.requests[1].json)
    assert "see this" in second and png[:40] in second
    assert agent.log.receipts["f"].payload["status"] == "placed"


async def test_promote_after_the_turn_ended_is_settled(make_agent, fake_server) -> None:
    """S2 race, order 2: the turn ended and the follow-up already ran: promote re-sends nothing."""
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g")], [Text("one")], [Text("two")])
    agent = await session_agent(make_agent, gate)
    receipts = []

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start":
            await agent.control({"type": "submit", "request_id": "f", "prompt": "second"})
            gate.open()
        if event.type == "end" and event.request_id == "f":
            receipts.append(await agent.control({"type": "promote", "request_id": "p", "input_id": "f"}))

    await run_with(agent, "go", on_event)
    assert receipts[0]["status"] == "settled"
    assert len(fake_server.requests) == 3


@pytest.mark.parametrize("command_type", ["withdraw", "promote"])
async def test_an_unknown_input_id_names_the_field_and_writes_nothing(make_agent, fake_server, command_type) -> None:
    """S2: withdrawing or promoting an input that was never queued is input_validation naming
    ``input_id``; nothing is recorded, so the request id stays free."""
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(COMPLETIONS, session={})
    fields = []

    async def on_event(event) -> None:
        if event.type == "session" and not fields:
            before = agent.log.view.last_seq
            with pytest.raises(InputValidationError) as info:
                await agent.control({"type": command_type, "request_id": "w", "input_id": "nope"})
            fields.append(info.value.field)
            assert agent.log.view.last_seq == before
            assert "w" not in agent.log.receipts

    await run_with(agent, "go", on_event)
    assert fields == ["input_id"]


async def test_close_ends_a_serving_host_and_pauses_its_work(make_agent, fake_server, tmp_path) -> None:
    """S6/R2: closing the runtime while it serves ends serve() and leaves the running turn to
    resume on the next open (close pauses; it cancels nothing)."""
    db = str(tmp_path / "serve.sqlite")
    fake_server.enqueue([Text("part one "), Hang()], [Text("resumed answer")])
    agent = await make_agent(COMPLETIONS, session={}, database_path=db)
    events = []
    async for event in agent.serve():
        events.append(event)
        if event.type == "session" and len(events) == 1:
            await agent.control({"type": "submit", "request_id": "r", "prompt": "go"})
        if event.type == "text_delta":
            await agent.close()
    assert events[-1].type == "session", "serve() ended with the state at close"
    assert events[-1].snapshot["contexts"][0]["status"] == "running", "close paused the turn, it did not end it"
    reopened = await make_agent(COMPLETIONS, session={}, database_path=db)
    assert reopened.pending_request_id == "r"
    ended = ends(await run_with(reopened, {"request_id": "r"}))
    assert [(e.request_id, e.status) for e in ended] == [("r", "completed")]


def offered(request) -> set[str]:
    return {tool["function"]["name"] for tool in request.json.get("tools", [])}


async def test_a_queued_submit_keeps_its_agent_mode(make_agent, fake_server) -> None:
    """S2: ``submit`` with ``agent: "plan"`` queued behind a build turn runs as a plan-mode turn
    (its mode travels through the queue and shows in the snapshot); a steer cannot name a mode,
    and a plan-mode input cannot be promoted into the running build turn."""
    gate = Gate()
    plan = "1. Read the code\n2. Add the greeting"
    fake_server.enqueue([ToolCall("gate", {}, id="g")], [Text("built")], [Text(plan)])
    agent = await session_agent(make_agent, gate)
    seen: dict[str, object] = {}

    async def refused(command: dict[str, str]) -> tuple[str | None, str]:
        with pytest.raises(InputValidationError) as info:
            await agent.control(command)
        return info.value.field, info.value.message

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start":
            queued = await agent.control(
                {"type": "submit", "request_id": "p", "prompt": "plan the greeting", "agent": "plan"}
            )
            seen["receipt"] = queued["status"]
            seen["queue"] = agent.snapshot()["contexts"][0]["queue"]
            seen["promote"] = await refused({"type": "promote", "request_id": "pr", "input_id": "p"})
            steer = {"type": "submit", "request_id": "s", "prompt": "x", "mode": "steer", "agent": "plan"}
            seen["steer"] = await refused(steer)
            gate.open()

    events = await run_with(agent, {"prompt": "build it", "request_id": "b"}, on_event)
    assert seen["receipt"] == "queued"
    assert [(q["input_id"], q["agent"]) for q in seen["queue"]] == [("p", "plan")]
    assert seen["promote"][0] == "input_id" and "plan-mode turn" in seen["promote"][1]
    assert seen["steer"][0] == "agent"
    assert "s" not in agent.log.receipts and "pr" not in agent.log.receipts, "refused commands record nothing"
    assert [(e.request_id, e.status) for e in ends(events)] == [("b", "completed"), ("p", "completed")]
    build, plan_request = fake_server.requests[0], fake_server.requests[2]
    assert "write" in offered(build) and "PLAN MODE" not in json.dumps(build.json)
    assert not {"write", "edit", "bash"} & offered(plan_request), "the queued input ran in plan mode"
    assert "PLAN MODE" in json.dumps(plan_request.json)
    assert [e.phase for e in events if e.type == "plan"] == ["start", "end"]


async def test_an_idle_submit_runs_in_the_agent_mode_it_names(make_agent, fake_server) -> None:
    """S2: an idle ``submit`` with ``agent: "plan"`` is a plan-mode turn; the next one without
    ``agent`` is back in the runtime's mode (build)."""
    fake_server.enqueue([Text("1. Look\n2. Change")], [Text("done")])
    agent = await make_agent(COMPLETIONS, session={})
    events = []
    async for event in agent.serve():
        events.append(event)
        if event.type == "session" and len(events) == 1:
            await agent.control({"type": "submit", "request_id": "p", "prompt": "plan", "agent": "plan"})
        if event.type == "end" and event.request_id == "p":
            await agent.control({"type": "submit", "request_id": "b", "prompt": "now build"})
        if event.type == "end" and event.request_id == "b":
            agent.stop_serving()
    assert [(e.request_id, e.status) for e in ends(events)] == [("p", "completed"), ("b", "completed")]
    assert "PLAN MODE" in json.dumps(fake_server.requests[0].json)
    assert "PLAN MODE" not in json.dumps(fake_server.requests[1].json)
    assert "write" in offered(fake_server.requests[1])


async def test_events_and_transcript_rows_name_the_turn_they_belong_to(make_agent, fake_server) -> None:
    """S6: on one session event stream every event of a turn carries that turn's ``request_id``
    (session snapshots carry none), and ``read_transcript(entry_ids=True)`` names the request
    that wrote each message, so a host can group both into turns without guessing."""
    gate = Gate()
    fake_server.enqueue([Text("working "), ToolCall("gate", {}, id="g")], [Text("first done")], [Text("second done")])
    agent = await session_agent(make_agent, gate)

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start":
            await agent.control({"type": "submit", "request_id": "f", "prompt": "also this"})
            gate.open()

    events = await run_with(agent, {"prompt": "start", "request_id": "r"}, on_event)
    turn_events = [e for e in events if e.type != "session"]
    assert {e.request_id for e in events if e.type == "session"} == {None}
    assert None not in {e.request_id for e in turn_events}
    order = [e.request_id for e in turn_events]
    assert order == sorted(order, key=["r", "f"].index), "a turn's events never interleave with the next's"
    by_turn = {rid: [e.type for e in turn_events if e.request_id == rid] for rid in ("r", "f")}
    assert "tool" in by_turn["r"] and "text_delta" in by_turn["r"] and by_turn["r"][-1] == "end"
    assert "tool" not in by_turn["f"] and by_turn["f"][-1] == "end"
    rows = agent.read_transcript(entry_ids=True)
    assert [(row["role"], row["request_id"]) for row in rows] == [
        ("user", "r"),
        ("assistant", "r"),
        ("tool_result", "r"),
        ("assistant", "r"),
        ("user", "f"),
        ("assistant", "f"),
    ]
    assert "request_id" not in agent.read_transcript()[0], "only asked for with entry_ids"
