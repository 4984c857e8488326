"""Offline cancellation (SPEC D7) and failed runs (D5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentError, AgentInput, UserInputRequired
from agentcore.harness import SqliteStorageFactory
from agentcore.host import AgentHost
from agentcore.offline import cancel_agent_conversation
from agentcore.testing.steps import Text, ToolCall
from tests.helpers import collect, final


async def pause_on_plan(payload: dict[str, Any]) -> None:
    raise UserInputRequired("review", payload)


async def test_offline_cancel_ends_a_paused_run(make_agent, fake_server, tmp_path: Path) -> None:
    """D7: a paused run in a closed store is cancelled offline; reopening shows it aborted."""
    db = tmp_path / "sess-1.sqlite"
    fake_server.enqueue([Text("Plan: 1. do it")])
    agent = await make_agent(database_path=str(db))
    end = final(
        await collect(
            agent, AgentInput(prompt="x", request_id="r1", agent="plan"), AgentHost(approve_plan=pause_on_plan)
        )
    )
    assert end.status == "paused"
    with pytest.raises(AgentError) as info:
        await cancel_agent_conversation(agent_store_dir=tmp_path, conversation_id="sess-1")
    assert info.value.code == "store_locked", "a running owner must be stopped first"
    await agent.close()
    outcome = await cancel_agent_conversation(agent_store_dir=tmp_path, conversation_id="sess-1")
    assert outcome["cancelled_requests"] == ["r1"]
    reopened = await make_agent(database_path=str(db))
    assert reopened.pending_request_id is None
    again = final(await collect(reopened, AgentInput(request_id="r1")))
    assert again.status == "aborted" and again.replayed and len(fake_server.requests) == 1


async def test_unknown_store_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(AgentError) as info:
        await cancel_agent_conversation(agent_store_dir=tmp_path, conversation_id="missing")
    assert info.value.field == "conversation_id"


async def test_failed_run_records_reason_and_does_not_continue(make_agent, fake_server, tmp_path: Path) -> None:
    """D5: an exception in the runtime records the failure; reopening does not auto-continue."""
    db = tmp_path / "d5.sqlite"

    def broken_report(usage: dict[str, Any]) -> None:
        raise RuntimeError("host projection crashed")

    fake_server.enqueue([ToolCall("ls", {"path": "."})], [Text("never requested")])
    agent = await make_agent(database_path=str(db))
    with pytest.raises(AgentError) as info:
        await collect(agent, AgentInput(prompt="x", request_id="f1"), AgentHost(report_usage=broken_report))
    assert info.value.code == "run_failed"
    await agent.close()
    reopened = await make_agent(database_path=str(db))
    assert reopened.pending_request_id is None
    end = final(await collect(reopened, AgentInput(request_id="f1")))
    assert end.status == "failed" and "host projection crashed" in (end.error or "")
    assert len(fake_server.requests) == 1, "a failed run is never re-executed on reopen"
    assert not [m for m in reopened.read_transcript() if m["role"] == "tool_result" and not m["is_error"]]


async def test_storage_factory_option_runs_the_loop(make_agent, fake_server, tmp_path: Path) -> None:
    """D8: a custom storage= factory (here wrapping SQLite) backs a real run; its release runs after close."""
    released: list[bool] = []

    class Factory:
        label = "custom"

        def open(self) -> Any:
            storage, release = SqliteStorageFactory(str(tmp_path / "deep" / "a" / "b" / "custom.sqlite")).open()

            def done() -> None:
                release()
                released.append(True)

            return storage, done

    fake_server.enqueue([Text("stored")])
    agent = await make_agent(storage=Factory())
    assert final(await collect(agent, "hi")).text == "stored"
    await agent.close()
    assert released == [True]


async def test_corrupt_database_file_is_refused_untouched(make_agent, tmp_path: Path) -> None:
    """D4/D8: a foreign file at database_path is a clear error; its bytes are unchanged."""
    db = tmp_path / "notes.sqlite"
    db.write_bytes(b"these are my notes, not a database" * 10)
    before = db.read_bytes()
    with pytest.raises(AgentError) as info:
        await make_agent(database_path=str(db))
    assert info.value.code == "store_invalid"
    assert db.read_bytes() == before
