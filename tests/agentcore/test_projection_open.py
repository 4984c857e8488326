"""Opening a long store rebuilds only the messages still in the context (D1, S4).

A reset or a compaction drops the older messages from the context, so opening a store does
not rebuild them; their tool calls and results still feed the tool history. What a reopened
runtime sees must equal what the runtime that wrote the store saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentcore.harness.projection import ConversationLog, _live_from
from agentcore.harness.storage import Entry
from agentcore.testing.steps import Text, ToolCall
from tests.helpers import collect, final


def _entry(entry_id: str, kind: str, **payload: Any) -> Entry:
    return Entry(entry_id, "c", None, kind, payload)


def test_live_from_is_the_last_cut() -> None:
    message = {"message": {"role": "user", "content": []}}
    entries = [_entry("m1", "message", **message), _entry("r", "reset"), _entry("m2", "message", **message)]
    assert _live_from(entries) == 1, "a reset: everything before it is gone"
    entries += [_entry("m3", "message", **message), _entry("k", "compaction", keep_from_entry="m3")]
    assert _live_from(entries) == 3, "a compaction keeps from its keep_from_entry"
    entries.append(_entry("k2", "compaction", keep_from_entry=None))
    assert _live_from(entries) == 5, "a compaction that keeps nothing is a cut of its own"
    entries.append(_entry("k3", "compaction", keep_from_entry="in-a-fork-base"))
    assert _live_from(entries) == 0, "a kept entry outside this list (a fork's base): rebuild all"
    assert _live_from([_entry("m1", "message", **message)]) == 0


def _state(log: ConversationLog) -> dict[str, Any]:
    return {
        "entry_ids": log.message_entry_ids,
        "ops": log.message_ops,
        "synthetic": log.message_synthetic,
        "generation": log.compaction_generation,
        "tools_finished": log.tools_finished,
        "tool_history": list(log.tool_history),
        "results": log.results,
        "entries": log.entry_ids,
    }


async def test_a_reopened_store_sees_what_its_writer_saw(make_agent, fake_server, tmp_path: Path) -> None:
    """Turns with tool calls, a reset, more turns and a compaction that keeps the newest turn:
    the transcript, the tool history and the log's bookkeeping are the same after a reopen,
    although the messages before the cut were not rebuilt."""
    db = str(tmp_path / "long.sqlite")
    session = {"compaction": {"keep_recent_tokens": 40}}
    agent = await make_agent(database_path=db, session=session)
    for turn in range(3):
        fake_server.enqueue([ToolCall("ls", {"path": "."}, id=f"a{turn}")], [Text(f"answer {turn} " * 20)])
        assert final(await collect(agent, f"question {turn} " * 20)).status == "completed"
        if turn == 0:
            agent.reset()
    fake_server.enqueue([Text("## Summary\nquestions 1 and 2")])
    assert final(await collect(agent, "/compact")).status == "completed"
    fake_server.enqueue([Text("after the summary")])
    assert final(await collect(agent, "one more")).status == "completed"

    transcript = agent.read_transcript(entry_ids=True)
    snapshot = agent.snapshot()
    written = _state(agent.log)
    assert written["generation"] == 2 and written["tools_finished"] == 3
    assert len(transcript) > 2, "the compaction kept something after its summary"
    await agent.close()

    reopened = await make_agent(database_path=db, session=session)
    assert reopened.read_transcript(entry_ids=True) == transcript
    assert _state(reopened.log) == written
    again = reopened.snapshot()
    assert again["history"] == snapshot["history"]

    def contexts(snap: dict[str, Any]) -> list[dict[str, Any]]:  # the meter is measured by the next request
        return [{k: v for k, v in c.items() if k != "context_usage"} for c in snap["contexts"]]

    assert contexts(again) == contexts(snapshot)
    await reopened.close()
