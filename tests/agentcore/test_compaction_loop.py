"""Compaction through the real loop (SPEC C1–C5): manual, automatic, overflow recovery."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from agentcore import AgentHost, AgentInput
from agentcore.harness import SqliteStorageFactory
from agentcore.testing.steps import Hang, HttpError, Overflow, Stop, Text, ToolCall, Usage
from tests.helpers import collect, final, types

SUMMARY_MARKERS = ("Write the summary of the conversation above now.", "Write the merged summary now.")


def is_summary_request(request: Any) -> bool:
    body = json.dumps(request.json)
    return any(marker in body for marker in SUMMARY_MARKERS)


async def history(agent: Any, fake_server: Any, turns: int = 2) -> None:
    for number in range(turns):
        fake_server.enqueue([Text(f"answer {number}")])
        await collect(agent, f"question {number}")


async def test_manual_compact_replaces_context_with_summary(make_agent, fake_server, tmp_path: Path) -> None:
    """C3: /compact → start/end events (end carries the summary); the summary replaces the context;
    the request carries no tools; the originals stay in the store."""
    db = tmp_path / "m.sqlite"
    agent = await make_agent("openai-completions", database_path=str(db))
    await history(agent, fake_server)
    fake_server.enqueue([Text("## Goal\nAnswer questions 0 and 1.")])
    events = await collect(agent, "/compact")
    compaction = [e for e in events if e.type == "compaction"]
    assert [(e.phase, e.auto) for e in compaction] == [("start", False), ("end", False)]
    assert compaction[1].summary == "## Goal\nAnswer questions 0 and 1."
    assert final(events).status == "completed"
    request = fake_server.requests[-1]
    assert is_summary_request(request) and "tools" not in request.json
    assert "question 0" in json.dumps(request.json) and "question 1" in json.dumps(request.json)
    transcript = agent.read_transcript()
    assert len(transcript) == 1 and "Answer questions 0 and 1." in transcript[0]["content"][0]["text"]
    await agent.close()
    storage, release = SqliteStorageFactory(str(db)).open()
    entries = storage.load().entries
    storage.close()
    release()
    assert any("question 0" in json.dumps(e.payload) for e in entries), "original entries are kept"
    reopened = await make_agent("openai-completions", database_path=str(db))
    assert reopened.read_transcript() == transcript, "a completed compaction survives a restart"


async def test_summarize_command_and_compact_flag(make_agent, fake_server) -> None:
    agent = await make_agent()
    await history(agent, fake_server, 1)
    fake_server.enqueue([Text("summary one")])
    assert final(await collect(agent, "/summarize")).text == "summary one"
    await history(agent, fake_server, 1)
    fake_server.enqueue([Text("summary two")])
    assert final(await collect(agent, AgentInput(prompt="", compact=True))).text == "summary two"


async def test_empty_context_only_end_event(make_agent, fake_server) -> None:
    """C3: compacting an empty context emits only the end event and calls no model."""
    agent = await make_agent()
    events = await collect(agent, "/compact")
    assert [(e.type, getattr(e, "phase", None)) for e in events if e.type == "compaction"] == [("compaction", "end")]
    assert fake_server.requests == []


async def test_failed_or_truncated_summary_keeps_the_original(make_agent, fake_server) -> None:
    """C3: failure or truncation → error; the original context is kept."""
    agent = await make_agent()
    await history(agent, fake_server)
    before = agent.read_transcript()
    fake_server.enqueue([HttpError(401, "bad key")])
    end = final(await collect(agent, "/compact"))
    assert end.status == "failed" and "compaction failed" in (end.error or "")
    fake_server.enqueue([Text("half a summ"), Stop("length")])
    end = final(await collect(agent, "/compact"))
    assert end.status == "failed" and "max_tokens" in (end.error or "")
    assert agent.read_transcript() == before


async def test_cancel_during_compaction_writes_nothing(make_agent, fake_server) -> None:
    """C3: cancel → execution_aborted; nothing written even if the summary would arrive late."""
    agent = await make_agent()
    await history(agent, fake_server)
    before = agent.read_transcript()
    fake_server.enqueue([Text("late summary"), Hang(), Text(" more")])
    abort = asyncio.Event()
    task = asyncio.ensure_future(collect(agent, "/compact", AgentHost(abort_signal=abort)))
    await fake_server.until_hanging(1)
    abort.set()
    events = await asyncio.wait_for(task, 10)
    assert final(events).status == "aborted" and final(events).error_code == "execution_aborted"
    assert agent.read_transcript() == before


async def test_summary_usage_reported_but_not_context(make_agent, fake_server) -> None:
    """C3: the summary's usage goes to report_usage (failed attempts too) and is not context usage."""
    reports: list[dict[str, Any]] = []
    host = AgentHost(report_usage=reports.append)
    agent = await make_agent(context_window=50_000)
    await history(agent, fake_server)
    fake_server.enqueue([Text("short summary"), Usage(input=40_000, output=10)])
    await collect(agent, AgentInput(prompt="/compact"), host)
    assert [r["purpose"] for r in reports if "purpose" in r] == ["compaction"]
    assert agent.get_context_usage()["used"] < 5_000, "billed summary input (40k) is not the new context size"


def big_file(workspace: Path, name: str = "big.txt", lines: int = 120) -> str:
    (workspace / name).write_text("".join(f"line {i}: lorem ipsum dolor sit amet consectetur\n" for i in range(lines)))
    return name


async def test_auto_compaction_between_tool_rounds(make_agent, fake_server, workspace: Path) -> None:
    """C4: at 90% of the window the older part is summarized before the next request, also
    between tool rounds of one turn; events carry auto=true; the newest messages are kept."""
    name = big_file(workspace)
    agent = await make_agent("openai-completions", context_window=4_000)
    await history(agent, fake_server, 2)

    model_calls = 0

    def responder(request: Any) -> list[Any]:
        nonlocal model_calls
        if is_summary_request(request):
            return [Text("Summary: the user asked questions 0 and 1 and wants big.txt read.")]
        model_calls += 1
        return [ToolCall("read", {"path": name})] if model_calls <= 3 else [Text("finished")]

    fake_server.responder = responder
    events = await collect(agent, "read big.txt three times")
    assert final(events).status == "completed"
    autos = [e for e in events if e.type == "compaction"]
    assert autos and all(e.auto for e in autos)
    assert ("start", "end") == tuple(e.phase for e in autos[:2])
    kinds = types(events)
    assert kinds.index("compaction") > kinds.index("tool"), "compaction happened between tool rounds"
    transcript = agent.read_transcript()
    assert "Summary: the user asked" in transcript[0]["content"][0]["text"]
    assert transcript[-1]["role"] == "assistant" and transcript[-1]["content"][0]["text"] == "finished"


async def test_overflow_error_compacts_once_and_retries(make_agent, fake_server) -> None:
    """C5: a provider 'context too long' error → compact once → retry; a second overflow → error."""
    agent = await make_agent("anthropic-messages")
    await history(agent, fake_server, 2)
    fake_server.enqueue([Overflow()], [Text("compacted summary")], [Text("answer after compaction")])
    events = await collect(agent, "next")
    assert final(events).text == "answer after compaction"
    assert [e.phase for e in events if e.type == "compaction"] == ["start", "end"]
    fake_server.enqueue([Overflow()], [Text("summary again")], [Overflow()])
    end = final(await collect(agent, "again"))
    assert end.status == "failed" and "too long" in (end.error or "")


async def test_overflow_with_compaction_disabled_fails(make_agent, fake_server) -> None:
    """C5: enabled=False disables overflow recovery (manual compaction still works)."""
    agent = await make_agent(session={"compaction": {"enabled": False}})
    await history(agent, fake_server, 1)
    fake_server.enqueue([Overflow()])
    end = final(await collect(agent, "next"))
    assert end.status == "failed" and "too long" in (end.error or "")
    fake_server.enqueue([Text("manual summary")])
    assert final(await collect(agent, "/compact")).text == "manual summary"


async def test_invalid_compaction_settings_name_the_field(make_agent) -> None:
    try:
        await make_agent(session={"compaction": {"reserve_tokens": -1}})
    except Exception as exc:
        assert getattr(exc, "field", None) == "session.compaction.reserve_tokens"
    else:
        raise AssertionError("negative reserve_tokens must be rejected")


async def test_oversize_single_tool_result_is_a_clear_error(make_agent, fake_server, workspace: Path) -> None:
    """C5: a single tool result larger than the window → an error asking to shorten it."""
    name = big_file(workspace, "huge.txt", 1500)
    agent = await make_agent("openai-completions", context_window=3_000)
    fake_server.enqueue([ToolCall("read", {"path": name})])
    end = final(await collect(agent, "read it"))
    assert end.status == "failed" and "horten" in (end.error or "")


async def test_long_session_on_small_window_keeps_every_goal(make_agent, fake_server, workspace: Path) -> None:
    """Issue 8 acceptance: a 200-turn session with large tool outputs on an 8k window runs to
    completion with several automatic compactions, no overflow, and every user goal survives
    in the summaries."""
    name = big_file(workspace, "data.txt", 60)
    agent = await make_agent("openai-completions", context_window=8_000)
    goals = [f"goal-{n:02d}" for n in range(20)]

    rounds = 0
    largest_request = 0

    def responder(request: Any) -> list[Any]:
        nonlocal rounds, largest_request
        body = json.dumps(request.json)
        if is_summary_request(request):
            kept = sorted(set(re.findall(r"goal-\d\d", body)))
            return [Text("## Goals\n" + "\n".join(f"- {g}" for g in kept))]
        largest_request = max(largest_request, len(body))
        rounds += 1
        return [ToolCall("read", {"path": name})] if rounds < 10 else [Text("done")]

    fake_server.responder = responder
    compactions = 0
    for goal in goals:
        rounds = 0
        events = await collect(agent, f"{goal}: read data.txt nine times")
        assert final(events).status == "completed", final(events).error
        compactions += sum(1 for e in events if e.type == "compaction" and e.phase == "end")
    model_turns = sum(1 for r in fake_server.requests if not is_summary_request(r))
    assert model_turns == 200
    assert largest_request < 8_000 * 4, "no request came near the window (about 4 characters per token)"
    assert compactions >= 5
    transcript = json.dumps(agent.read_transcript())
    assert all(goal in transcript for goal in goals), "every user goal is still in the context"


async def test_compact_agent_messages_public_api(fake_server) -> None:
    """C3: compact_agent_messages(..., force=True, on_usage=...) summarizes a transcript with no
    store; on_usage sees every attempt (the failed one too); failures raise, nothing is lost."""
    from agentcore import AgentError, compact_agent_messages

    messages = [
        {"role": "user", "content": [{"type": "text", "text": "build a parser"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "done: parser.py"}]},
    ]
    options = {"provider": "gw", "model": "m", "base_url": fake_server.base_url, "api_key": "k"}
    usages: list[dict] = []
    fake_server.enqueue([HttpError(401, "bad key")], [Text("## Goal\nA parser."), Usage(input=50, output=7)])
    try:
        await compact_agent_messages(messages, force=True, on_usage=usages.append, **options)
    except AgentError as exc:
        assert exc.code == "model_error"
    else:
        raise AssertionError("a failed summary must raise")
    result = await compact_agent_messages(messages, force=True, on_usage=usages.append, **options)
    assert len(result) == 1 and "A parser." in result[0]["content"][0]["text"]
    assert [u["ok"] for u in usages] == [False, True] and usages[1]["input_tokens"] == 50
    assert not fake_server.requests[1].json.get("tools")
    unchanged = await compact_agent_messages(messages, force=False, **options)
    assert [(m["role"], m["content"]) for m in unchanged] == [(m["role"], m["content"]) for m in messages], (
        "below the threshold nothing is summarized"
    )
