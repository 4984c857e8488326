"""The runtime's public surface (SPEC R1–R4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentcore import AgentError, AgentInput, InputValidationError, create_agent
from agentcore.testing.steps import Text
from tests.helpers import collect, final


async def test_unknown_option_is_rejected_naming_it() -> None:
    with pytest.raises(InputValidationError) as info:
        await create_agent(provider="demo", temprature=0.2)
    assert info.value.field == "temprature"


async def test_missing_model_config_is_input_validation() -> None:
    """R4: nothing configured → input_validation before anything is opened."""
    with pytest.raises(InputValidationError) as info:
        await create_agent()
    assert info.value.field == "model"


async def test_database_path_and_storage_are_exclusive(tmp_path: Path) -> None:
    from agentcore.harness import MemoryStorageFactory

    with pytest.raises(InputValidationError) as info:
        await create_agent(provider="demo", database_path=str(tmp_path / "a.sqlite"), storage=MemoryStorageFactory())
    assert info.value.field == "storage"
    assert not (tmp_path / "a.sqlite").exists()


async def test_invalid_attributes_json_option() -> None:
    with pytest.raises(InputValidationError) as info:
        await create_agent(provider="x", model="m", base_url="http://127.0.0.1:9/v1", model_attributes='{"bogus": 1}')
    assert info.value.field == "model_attributes.bogus"


async def test_async_with_and_control_without_session(make_agent, fake_server) -> None:
    """R2: async with closes; control() says the session protocol is not enabled."""
    fake_server.enqueue([Text("hi")])
    agent = await make_agent()
    async with agent:
        with pytest.raises(AgentError) as info:
            await agent.control({"type": "snapshot", "request_id": "x"})
        assert info.value.code == "session_not_enabled"
        events = await collect(agent, "hello")
        assert final(events).status == "completed"
    with pytest.raises(AgentError):
        agent.read_transcript()


async def test_restore_transcript_only_before_history(make_agent, fake_server) -> None:
    """R2: restore_transcript seeds the context once; later it refuses."""
    agent = await make_agent()
    agent.restore_transcript([{"role": "user", "content": [{"type": "text", "text": "earlier"}]}])
    fake_server.enqueue([Text("ok")])
    await collect(agent, "now")
    assert "earlier" in str(fake_server.requests[0].json)
    with pytest.raises(AgentError):
        agent.restore_transcript([])


async def test_reset_clears_context(make_agent, fake_server) -> None:
    fake_server.enqueue([Text("one")], [Text("two")])
    agent = await make_agent()
    await collect(agent, "zebra-before-reset")
    agent.reset()
    assert agent.read_transcript() == []
    await collect(agent, "second")
    assert "zebra-before-reset" in str(fake_server.requests[0].json)
    assert "zebra-before-reset" not in str(fake_server.requests[1].json)


async def test_context_usage_and_validation(make_agent, fake_server) -> None:
    """C2/R2: get_context_usage returns {used,total}; update_context_usage validates."""
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(context_window=10_000)
    await collect(agent, "hello")
    usage = agent.get_context_usage()
    assert usage is not None and usage["total"] == 10_000 and usage["used"] > 0
    with pytest.raises(InputValidationError) as info:
        agent.update_context_usage(used=-1, total=100)
    assert info.value.field == "used"
    with pytest.raises(InputValidationError) as info:
        agent.update_context_usage(used=1, total=float("inf"))
    assert info.value.field == "total"
    agent.update_context_usage(used=5000, total=10_000)
    assert agent.get_context_usage() == {"used": 5000, "total": 10_000}


async def test_invalid_run_input_changes_nothing(make_agent, fake_server) -> None:
    """Bad input gets a typed error naming the field; the store is unchanged."""
    agent = await make_agent()
    with pytest.raises(InputValidationError) as info:
        await collect(agent, {"prompt": "x", "effort": "extreme"})
    assert info.value.field == "effort"
    with pytest.raises(InputValidationError) as info:
        await collect(agent, AgentInput(prompt="x", workdir="/definitely/not/here"))
    assert info.value.field == "workdir"
    assert agent.read_transcript() == [] and fake_server.requests == []


async def test_invalid_new_input_does_not_supersede_a_paused_run(make_agent, fake_server) -> None:
    """Bad input loses nothing: an invalid new request leaves a paused run untouched."""
    from agentcore import AgentHost, UserInputRequired

    def pause(payload: dict) -> None:
        raise UserInputRequired("review", payload)

    fake_server.enqueue([Text("Plan: 1. x")])
    agent = await make_agent()
    end = final(
        await collect(agent, AgentInput(prompt="p", request_id="keep", agent="plan"), AgentHost(approve_plan=pause))
    )
    assert end.status == "paused"
    with pytest.raises(InputValidationError):
        await collect(agent, AgentInput(prompt="new", effort="max", workdir="/no/such/dir"))
    with pytest.raises(InputValidationError):
        await collect(agent, AgentInput(prompt=""))
    assert agent.pending_request_id == "keep"


async def test_models_table_supplies_attributes_for_a_switched_model(make_agent, fake_server) -> None:
    """R1/M2: `models` maps model ids to attributes; a run switching `model` uses that entry."""
    fake_server.enqueue([Text("a")], [Text("b")])
    agent = await make_agent(models={"big-model": '{"context_window": 500000, "name": "Big"}'})
    await collect(agent, "hi")
    assert agent.get_context_usage()["total"] != 500_000
    await collect(agent, AgentInput(prompt="hi", model="big-model"))
    assert agent.get_context_usage()["total"] == 500_000
    assert fake_server.requests[1].json["model"] == "big-model"


async def test_models_table_is_validated_naming_the_entry(make_agent) -> None:
    with pytest.raises(InputValidationError) as info:
        await make_agent(models={"m1": {"context_window": "huge"}})
    assert info.value.field == "models.m1.context_window"


async def test_update_models_prices_the_next_request_as_registered_now(make_agent, fake_server) -> None:
    """R1/M1 (issue #22): a model priced after the runtime opened is priced from the next
    request on; a bad table is input_validation naming the entry and changes nothing."""
    from agentcore.testing.steps import Usage

    fake_server.enqueue([Text("a"), Usage(input=800, output=300)], [Text("b"), Usage(input=800, output=300)])
    agent = await make_agent(models={})
    first = final(await collect(agent, AgentInput(prompt="hi", model="priced-later")))
    with pytest.raises(InputValidationError) as info:
        agent.update_models({"priced-later": {"cost": {"input": -1}}})
    assert info.value.field == "models.priced-later.cost.input"
    agent.update_models({"priced-later": {"cost": {"input": 2.5, "output": 10}}})
    second = final(await collect(agent, AgentInput(prompt="again", model="priced-later")))
    assert first.usage["cost"] == 0
    assert second.usage["cost"] == pytest.approx(0.005)


async def test_host_input_run_neither_reads_nor_writes_the_transcript(make_agent, fake_server, tmp_path) -> None:
    """I2: a gateway-driven run (host_input) uses the gateway's history in memory only."""
    fake_server.enqueue([Text("stored turn")], [Text("gateway answer")])
    agent = await make_agent(database_path=str(tmp_path / "h.sqlite"))
    await collect(agent, "local question")
    before = agent.read_transcript()
    history = [{"role": "user", "content": [{"type": "text", "text": "gateway history line"}]}]
    end = final(await collect(agent, AgentInput(prompt="gateway question", host_input={"messages": history})))
    assert end.status == "completed" and end.text == "gateway answer"
    sent = str(fake_server.requests[1].json)
    assert "gateway history line" in sent and "local question" not in sent
    assert agent.read_transcript() == before
    with pytest.raises(InputValidationError) as info:
        await collect(agent, AgentInput(prompt="x", host_input="not a list"))
    assert info.value.field == "host_input"


@pytest.mark.parametrize("session", [None, {}], ids=["plain", "session"])
async def test_a_decision_for_an_unknown_request_names_it(make_agent, session) -> None:
    """I2/PL4/S6: a resume payload for a request that is not paused here is refused, naming it,
    and nothing is written — the same answer with or without a session (one admission path)."""
    from agentcore import AgentInput, PlanResume

    agent = await make_agent(session=session)
    decision = AgentInput(request_id="nosuch", plan_resume=PlanResume(approval_id="a", approved=True))
    with pytest.raises(InputValidationError) as info:
        await collect(agent, decision)
    assert info.value.field == "request_id" and "no paused request 'nosuch'" in info.value.message
    assert agent.log.view.last_seq == 0 and "nosuch" not in agent.log.view.receipts


async def test_usage_ledger_lists_the_stores_rows_after_a_commit_in_commit_order(tmp_path: Path) -> None:
    """R2, DURABILITY 5: ``usage_ledger(after_seq)`` is the store's ledger as the file has it
    (rows another runtime committed included), from the rows after commit ``after_seq`` on."""
    import sqlite3

    path = str(tmp_path / "ledger.sqlite")

    async def turns(*prompts: str) -> None:
        async with await create_agent(database_path=path, provider="demo") as writer:
            for prompt in prompts:
                assert final(await collect(writer, prompt)).status == "completed"

    def in_file() -> list[tuple[str, str, int]]:
        with sqlite3.connect(path) as conn:
            return list(conn.execute("SELECT record_id, conversation_id, seq FROM usage ORDER BY seq, pos"))

    await turns("what files are here?", "hello")
    agent = await create_agent(database_path=path, provider="demo")
    try:
        rows = [(r.record_id, r.conversation_id, r.seq) for r in agent.usage_ledger()]
        assert rows == in_file() and len(rows) >= 2  # a tool turn makes two model calls
        first_seq = rows[0][2]
        assert [r.seq for r in agent.usage_ledger(first_seq)] == [seq for _, _, seq in rows if seq > first_seq]
        assert agent.usage_ledger(rows[-1][2]) == []
        assert all(r.payload.get("request_id") for r in agent.usage_ledger())
        assert final(await collect(agent, "and once more")).status == "completed"
        newer = agent.usage_ledger(rows[-1][2])  # the row this runtime just committed
        assert [(r.record_id, r.conversation_id, r.seq) for r in newer] == in_file()[len(rows) :] and newer
    finally:
        await agent.close()
    with pytest.raises(AgentError) as info:
        agent.usage_ledger()
    assert info.value.code == "AGENT_NOT_READY"
