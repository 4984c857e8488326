"""Ids are validated alike on every store, before anything is written (SPEC I1, R1, S1, S2, D8;
issue 22).

A ``request_id`` holding a NUL character was accepted by the memory and SQLite stores while
PostgreSQL refused it (``store_invalid``, faulting the runtime). Every id a caller gives — a
request id, a session id, the input, entry, task and plan item ids and the task name of
session commands, the approval id of a resume — is now checked at the input boundary: 1–200 characters, no
control characters (NUL included) and no lone surrogates. A bad one is ``input_validation``
naming the field; the store is unchanged and the runtime goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from agentcore import AgentInput
from agentcore.errors import AgentError, InputValidationError
from agentcore.harness import StoreState
from agentcore.testing.steps import Text, ToolCall
from tests.agentcore.session_helpers import Gate, ends, run_with
from tests.helpers import collect, final

COMPLETIONS = "openai-completions"
BAD_IDS = ["a\x00b", "\x00", "line\nbreak", "tab\tbed", "bell\x07", "del\x7f", "c1\x85", "half \ud800 pair"]


def content(state: StoreState) -> StoreState:
    return dataclasses.replace(state, owner_id="", fence=0)


async def test_a_bad_request_id_is_refused_alike_on_every_store(make_agent, fake_server, store_option) -> None:
    """I1/D8: the same refusal on memory, SQLite and PostgreSQL: input_validation naming
    request_id, nothing written, and the runtime serves the next request."""
    agent = await make_agent(COMPLETIONS, **store_option)
    before = content(agent.log.storage.load())
    for bad in BAD_IDS:
        with pytest.raises(InputValidationError) as caught:
            await collect(agent, {"prompt": "hi", "request_id": bad})
        assert caught.value.field == "request_id", repr(bad)
    assert content(agent.log.storage.load()) == before, "nothing was written"
    assert not fake_server.requests
    fake_server.enqueue([Text("fine")])
    assert final(await collect(agent, {"prompt": "hi", "request_id": "good id: ünïcode ✓"})).text == "fine"


def test_the_input_model_refuses_bad_ids_in_every_id_field() -> None:
    """I1/I2: request_id and the approval ids of plan_resume / tool_resume."""
    for bad in BAD_IDS:
        cases = [
            ({"request_id": bad}, "request_id"),
            ({"plan_resume": {"approval_id": bad, "approved": True}}, "plan_resume.approval_id"),
            ({"tool_resume": {"approval_id": bad, "approved": True}}, "tool_resume.approval_id"),
        ]
        for data, field in cases:
            with pytest.raises(InputValidationError) as caught:
                AgentInput(**data)
            assert caught.value.field == field, (data, field)


async def test_a_bad_session_id_is_refused_before_a_store_exists(make_agent, tmp_path) -> None:
    """R1: ``session_id`` (the main conversation's id, a key of every row) is checked the same way."""
    db = tmp_path / "never.sqlite"
    for bad in BAD_IDS:
        with pytest.raises(InputValidationError) as caught:
            await make_agent(COMPLETIONS, database_path=str(db), session_id=bad)
        assert caught.value.field == "session_id", repr(bad)
    assert not db.exists()


COMMANDS: list[tuple[dict[str, Any], str]] = [
    ({"type": "submit", "prompt": "hi", "request_id": "{bad}"}, "request_id"),
    ({"type": "withdraw", "request_id": "w", "input_id": "{bad}"}, "input_id"),
    ({"type": "promote", "request_id": "p", "input_id": "{bad}"}, "input_id"),
    ({"type": "fork", "request_id": "f", "entry_id": "{bad}"}, "entry_id"),
    ({"type": "cancel", "request_id": "c", "scope": "task", "task_id": "{bad}"}, "task_id"),
    ({"type": "task", "request_id": "t", "name": "{bad}"}, "name"),
    ({"type": "plan", "request_id": "pl", "expected_version": 0, "items": [{"id": "{bad}", "text": "x",
      "status": "pending"}]}, "items.0.id"),
    ({"type": "resume", "request_id": "r", "input_id": "{bad}", "tool_resume": {"approval_id": "a", "approved": True}},
     "input_id"),
    ({"type": "resume", "request_id": "r", "input_id": "i", "plan_resume": {"approval_id": "{bad}", "approved": True}},
     "plan_resume.approval_id"),
]  # fmt: skip


def _with(template: Any, bad: str) -> Any:
    if isinstance(template, dict):
        return {key: _with(value, bad) for key, value in template.items()}
    if isinstance(template, list):
        return [_with(value, bad) for value in template]
    return bad if template == "{bad}" else template


async def test_session_commands_refuse_bad_ids_naming_the_field_and_record_nothing(
    make_agent, fake_server, tmp_path
) -> None:
    """S1/S2: every id of a command is checked before its request id is recorded (sent while a
    turn is held at a gate, so the store is quiet between the two reads)."""
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g1")], [Text("done")])
    agent = await make_agent(
        COMPLETIONS, database_path=str(tmp_path / "s.sqlite"), session={}, extra_tools=[gate.tool()]
    )
    refused: list[tuple[str, str]] = []
    unchanged: list[bool] = []

    async def send_bad_commands() -> None:
        await gate.entered.wait()
        before = content(agent.log.storage.load())
        try:
            for template, field in COMMANDS:
                for bad in BAD_IDS:
                    try:
                        await agent.control(_with(template, bad))
                    except InputValidationError as exc:
                        refused.append((field, exc.field or ""))
                    except AgentError as exc:  # refused, but not as bad input
                        refused.append((field, exc.code))
                    else:
                        refused.append((field, "accepted"))
            unchanged.append(content(agent.log.storage.load()) == before)
        finally:
            gate.open()

    sender = asyncio.ensure_future(send_bad_commands())
    events = await run_with(agent, {"prompt": "go", "request_id": "r"})
    await sender
    assert refused == [(field, field) for _, field in COMMANDS for _ in BAD_IDS]
    assert unchanged == [True], "no command recorded anything"
    assert [e.status for e in ends(events)] == ["completed"]
