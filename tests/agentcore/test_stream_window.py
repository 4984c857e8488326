"""The stream window: how often streamed text is committed (and only then shown), set by the host
(SPEC D1, D3, E1; issue 25). A host under load widens it — fewer commits and fewer batches of
events per answer — and the rule stays: an event is emitted only after the fragment it carries
is committed, so a reader of the store never sees less than a live client saw."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentcore.errors import InputValidationError
from agentcore.harness.sqlite_store import SqliteStorage
from agentcore.testing.steps import Delay, Stop, Text, Thinking, Usage

COMPLETIONS = "openai-completions"


def _fragments(db: Path) -> list[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return [row[0] for row in conn.execute("SELECT payload FROM entries WHERE kind = 'fragment' ORDER BY seq")]


async def _text_events(agent: Any) -> list[str]:
    events = agent.run({"prompt": "count", "request_id": "r1"})
    return [event.delta async for event in events if event.type == "text_delta"]


async def test_a_wider_window_commits_fewer_fragments_and_shows_nothing_before_its_commit(
    make_agent: Any, fake_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 tokens 20 ms apart (0.4 s) under a 0.2 s window: at most a few fragment commits (the
    default 20 ms window makes one per token), every delta event after the commit of its text,
    and the answer whole."""
    tokens = [f"t{i} " for i in range(20)]
    fake_server.enqueue([Text("", chunks=tokens, pace_s=0.02), Usage(input=5, output=20), Stop("stop")])
    db = tmp_path / "w.sqlite"
    agent = await make_agent(COMPLETIONS, database_path=str(db))
    agent.set_stream_window(0.2)
    committed: list[str] = []  # fragments' text, then the settled reply's (it settles the rest)
    commit = SqliteStorage.commit

    def recording(self: Any, c: Any, *args: Any, **kwargs: Any) -> Any:
        result = commit(self, c, *args, **kwargs)
        committed.extend(e.payload.get("text", "") for e in c.entries if e.kind == "fragment")
        for entry in c.entries:
            message = entry.payload.get("message") if entry.kind == "message" else None
            if message and message.get("role") == "assistant":
                blocks = message.get("content", [])
                committed[:] = ["".join(b.get("text", "") for b in blocks if b.get("type") == "text")]
        return result

    monkeypatch.setattr(SqliteStorage, "commit", recording)
    shown = ""
    async for event in agent.run({"prompt": "count", "request_id": "r1"}):
        if event.type == "text_delta":
            shown += event.delta
            assert "".join(committed).startswith(shown), "an event was emitted before its text was committed"
    assert shown == "".join(tokens)
    assert 1 <= len(_fragments(db)) <= 4, _fragments(db)


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, math.nan, math.inf, "20ms", None, True])
async def test_the_window_is_validated(make_agent: Any, bad: Any) -> None:
    agent = await make_agent(COMPLETIONS)
    with pytest.raises(InputValidationError) as info:
        agent.set_stream_window(bad)
    assert info.value.field == "stream_window"


async def test_a_window_emits_one_delta_event_per_block_not_one_per_token(make_agent: Any, fake_server: Any) -> None:
    """E1/E2 (issue 25): the deltas a window releases together (after one commit) are one event
    per block and kind — the same text at the same moment as one event per token, for a fraction
    of the work in every layer that handles events. 20 text tokens 20 ms apart under a 0.2 s
    window give a handful of text events, not 20; the text, its order and the block index hold,
    and a reasoning block keeps its own events, never merged into the text."""
    tokens = [f"t{i} " for i in range(20)]
    fake_server.enqueue(
        [Thinking("think", chunk_size=1), Text("", chunks=tokens, pace_s=0.02), Usage(input=5, output=20), Stop("stop")]
    )
    agent = await make_agent(COMPLETIONS)
    agent.set_stream_window(0.2)
    events = [event async for event in agent.run({"prompt": "count", "request_id": "r1"})]
    texts = [e for e in events if e.type == "text_delta"]
    thinking = [e for e in events if e.type == "thinking_delta"]
    assert "".join(e.delta for e in texts) == "".join(tokens)
    assert "".join(e.delta for e in thinking) == "think"
    assert 1 <= len(texts) <= 4, [e.delta for e in texts]
    assert len({e.index for e in texts}) == 1 and {e.index for e in thinking}.isdisjoint({texts[0].index})
    kinds = [e.type for e in events if e.type in ("text_delta", "thinking_delta")]
    assert kinds.index("thinking_delta") < kinds.index("text_delta")


async def test_everything_received_before_a_windows_deadline_goes_out_with_that_window(
    make_agent: Any, fake_server: Any, tmp_path: Path
) -> None:
    """D1/E1 (issue 25): a window's commit carries every fragment that arrived before its
    deadline. The first token goes out at once; the next opens a window, and three more come at
    once while it is open: at its deadline all four are committed and emitted together. (It
    used to commit at the first of the waiting tokens and hold the other two for a whole further
    window: with tokens 20 ms apart, every window wider than 40 ms added up to a window of delay
    to most of them.)"""
    fake_server.enqueue(
        [
            Text("", chunks=["a "]),
            Delay(0.05),
            Text("", chunks=["b "]),
            Delay(0.05),
            Text("", chunks=["c ", "d ", "e "]),
            Delay(1.0),  # the provider is quiet well past the window's deadline
            Text("", chunks=["f "]),
            Usage(input=5, output=6),
            Stop("stop"),
        ]
    )
    db = tmp_path / "w.sqlite"
    agent = await make_agent(COMPLETIONS, database_path=str(db))
    agent.set_stream_window(0.5)
    texts = await _text_events(agent)
    assert texts[:2] == ["a ", "b c d e "], texts
    assert "".join(texts) == "a b c d e f "
    assert [json.loads(f)["text"] for f in _fragments(db)][:2] == ["a ", "b c d e "]


async def test_a_streams_first_text_is_committed_and_shown_at_once(
    make_agent: Any, fake_server: Any, tmp_path: Path
) -> None:
    """D1/E1 (issue 25): the first text of a stream does not wait for a window — a person waits
    for the first token most. Under a 1 s window, a token and another 0.3 s later: the first is
    committed and emitted alone, the second with the window after it."""
    fake_server.enqueue(
        [Text("", chunks=["a "]), Delay(0.3), Text("", chunks=["b "]), Usage(input=5, output=2), Stop("stop")]
    )
    db = tmp_path / "w.sqlite"
    agent = await make_agent(COMPLETIONS, database_path=str(db))
    agent.set_stream_window(1.0)
    texts = await _text_events(agent)
    assert texts == ["a ", "b "]
    assert next(json.loads(f)["text"] for f in _fragments(db)) == "a "
