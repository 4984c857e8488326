"""The end event's text is the whole answer of the turn, across every continuation (SPEC L3–L6,
D1, D3, PL3; issue 22).

The answer of an operation is the text the model wrote after the operation's last tool round
(or since the input, when it called no tool): every reply that an interruption, a length stop,
a lost call or a paused turn cut short is joined with the reply that continued it, in order,
exactly as it streamed. Text written before or beside a tool call is narration, not the answer
(the seed's rule for plans). The same answer is what ``end.text`` and the plan carry, what a
replay of the finished ``request_id`` returns, on every store, after any number of crashes
(the SQLite test with repeated SIGKILLs is
``test_crash_resume.test_repeated_crashes_keep_continuing_from_latest_fragments``).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from agentcore import AgentHost, AgentInput, UserInputRequired
from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Disconnect, Hang, HttpError, Stop, Text, ToolCall
from tests.agentcore.test_crash_resume import start_child
from tests.agentcore.test_store_postgres_crash import kill
from tests.helpers import collect, final, text_of


async def test_a_drop_mid_sentence_gives_the_whole_sentence_and_its_replay(
    make_agent, fake_server, store_option
) -> None:
    """L3/D1: ``Text("The first half, ")``, a disconnect, ``Text("and the second half.")``: the
    end event, and a replay of the finished request id, carry the sentence the run streamed."""
    fake_server.enqueue([Text("The first half, "), Disconnect()], [Text("and the second half.")])
    agent = await make_agent(**store_option)
    events = await collect(agent, AgentInput(prompt="write", request_id="r1"))
    assert text_of(events) == "The first half, and the second half."
    assert final(events).text == "The first half, and the second half."
    replay = final(await collect(agent, AgentInput(prompt="write", request_id="r1")))
    assert replay.replayed and replay.text == "The first half, and the second half."
    assert len(fake_server.requests) == 2


async def test_every_kind_of_continuation_joins_the_answer(make_agent, fake_server, store_option) -> None:
    """L3–L5, P2: a drop, a length stop, a lost call and a paused turn each continue the same
    answer; the end text is all of it, in the order it streamed."""
    fake_server.enqueue(
        [Text("One, "), Disconnect()],
        [Text("two, "), Stop("length")],
        [Text("three, "), Stop("tool_use")],
        [Text("four, "), Stop("pause_turn")],
        [Text("five.")],
    )
    agent = await make_agent("anthropic-messages", **store_option)
    events = await collect(agent, "count")
    assert text_of(events) == "One, two, three, four, five."
    assert final(events).status == "completed" and final(events).text == "One, two, three, four, five."


async def test_text_before_the_last_tool_round_is_not_the_answer(make_agent, fake_server) -> None:
    """PL3's rule for every answer: what the model said before or beside its tool calls is
    narration; the answer is what it wrote after the last tool round, across its continuations."""
    fake_server.enqueue(
        [Text("Let me look. "), ToolCall("ls", {"path": "."})],
        [Text("Two files: "), Disconnect()],
        [Text("README.md and main.py.")],
    )
    agent = await make_agent()
    end = final(await collect(agent, "what is here?"))
    assert end.status == "completed" and end.text == "Two files: README.md and main.py."


async def test_a_failed_turn_reports_the_whole_answer_it_had(make_agent, fake_server) -> None:
    """L3/L6: a turn that runs out of connection attempts after two partial replies reports both."""
    fake_server.enqueue(
        [Text("Half "), Disconnect()],
        [Text("and more, "), Disconnect()],
        *([HttpError(503)] for _ in range(9)),
    )
    agent = await make_agent()
    end = final(await collect(agent, "go"))
    assert end.status == "failed" and "interrupted 10 times" in (end.error or "")
    assert end.text == "Half and more, "


async def test_a_plan_cut_by_a_drop_is_submitted_whole(make_agent, fake_server) -> None:
    """PL3/L3: a plan whose reply was interrupted and continued is reviewed and approved whole."""
    fake_server.enqueue([Text("Plan: 1. read, "), Disconnect()], [Text("2. write.")])
    seen: list[str] = []

    def review(payload: dict[str, Any]) -> None:
        seen.append(payload["plan"])
        raise UserInputRequired("review", payload)

    agent = await make_agent()
    plan_input = AgentInput(prompt="plan it", request_id="p", agent="plan")
    events = await collect(agent, plan_input, AgentHost(approve_plan=review))
    assert seen == ["Plan: 1. read, 2. write."]
    assert [e.text for e in events if e.type == "plan" and e.phase == "end"] == ["Plan: 1. read, 2. write."]
    assert final(events).pending is not None and final(events).pending["plan"] == "Plan: 1. read, 2. write."


@pytest.fixture
async def server():
    async with FakeProviderServer() as fake:
        yield fake


@pytest.mark.crash
async def test_a_crash_mid_answer_on_postgres_ends_with_the_whole_answer(server, postgres, workspace) -> None:
    """D3 on PostgreSQL (the store of the soak that found it): SIGKILL after the first half."""
    url = f"{postgres.dsn}?store=answer-crash-{uuid.uuid4().hex[:12]}"
    server.enqueue([Text("The first half, "), Hang()])
    child = await start_child(server, url, workspace)
    await child.wait_for(lambda e: e["type"] == "text_delta")
    await kill(child, postgres)
    server.enqueue([Text("and the second half.")])
    end = await (await start_child(server, url, workspace)).finish()  # type: ignore[arg-type]
    assert end["status"] == "completed" and end["text"] == "The first half, and the second half."
