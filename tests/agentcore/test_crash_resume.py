"""Crash-resume with real processes and real SIGKILL (SPEC D1–D3; DURABILITY invariants 1–10).

A child process runs the agent against a SQLite store and the fake provider server served
by this test; it is SIGKILLed at a scripted point, then a new child re-runs the same
``request_id`` and the durable invariants are checked on the final store.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentcore import create_agent
from agentcore.harness import SqliteStorageFactory
from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Hang, Text, ToolCall, Usage
from tests.agentcore.child_process import Child, running, spawn, until

pytestmark = pytest.mark.crash
CHILD = Path(__file__).with_name("crash_child.py")


async def start_child(
    server: FakeProviderServer, db: Path, workdir: Path, request_id: str = "job", *extra: str
) -> Child:
    args = ("--db", str(db), "--base-url", server.base_url, "--workdir", str(workdir), "--request-id", request_id)
    return await spawn(CHILD, *extra, *args)


async def transcript(db: Path, server: FakeProviderServer) -> tuple[list[dict[str, Any]], Any]:
    runtime = await create_agent(
        provider="fake",
        model="fake-model",
        base_url=server.base_url,
        api_key="k",
        api_kind="openai-completions",
        database_path=str(db),
    )
    try:
        return runtime.read_transcript(), runtime.log
    finally:
        await runtime.close()


def texts(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages)


def assert_store_invariants(db: Path) -> None:
    """DURABILITY 2–4, 8: strictly increasing seq, unique ids, parents exist, one result per call."""
    storage, release = SqliteStorageFactory(str(db)).open()
    try:
        state = storage.load()
    finally:
        storage.close()
        release()
    seqs = [e.seq for e in state.entries]
    assert seqs == sorted(seqs)
    ids = [e.id for e in state.entries]
    assert len(ids) == len(set(ids))
    known = set()
    for entry in state.entries:
        assert entry.parent_id is None or entry.parent_id in known
        known.add(entry.id)
    results = [e.payload.get("call_key") for e in state.entries if e.kind == "message" and e.payload.get("call_key")]
    assert len(results) == len(set(results)), "every tool call has exactly one result"
    records = [row.record_id for row in state.usage]
    assert len(records) == len(set(records))


@pytest.fixture
async def server():
    async with FakeProviderServer() as fake:
        yield fake


async def test_kill_mid_stream_before_text_resumes_with_one_answer(server, tmp_path, workspace) -> None:
    """D1: killed while the model request hangs before any text → reopen → one clean answer."""
    db = tmp_path / "a.sqlite"
    server.enqueue([Hang()])
    child = await start_child(server, db, workspace)
    await server.until_hanging(1)
    await child.kill()
    server.enqueue([Text("hello there")])
    end = await (await start_child(server, db, workspace)).finish()
    assert end["status"] == "completed" and end["text"] == "hello there"
    messages, _ = await transcript(db, server)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert texts(messages).count("hello there") == 1
    assert_store_invariants(db)


async def test_kill_after_text_continues_from_committed_fragments(server, tmp_path, workspace) -> None:
    """D3: text shown before the kill was committed; the resumed run continues from it once."""
    db = tmp_path / "b.sqlite"
    server.enqueue([Text("The first half, "), Hang()])
    child = await start_child(server, db, workspace)
    await child.wait_for(lambda e: e["type"] == "text_delta")
    await child.kill()
    server.enqueue([Text("and the second half.")])
    resumed = await start_child(server, db, workspace)
    end = await resumed.finish()
    assert end["status"] == "completed"
    retries = [e for e in resumed.events if e["type"] == "retry"]
    assert [r["kind"] for r in retries] == ["recovery"]
    request = json.dumps(server.requests[-1].json)
    assert "The first half, " in request and "interrupted" in request
    messages, _ = await transcript(db, server)
    assert texts(messages).count("The first half, ") == 1
    assert texts(messages).count("and the second half.") == 1
    assert_store_invariants(db)


async def test_repeated_crashes_keep_continuing_from_latest_fragments(server, tmp_path, workspace) -> None:
    """D3/L3: crash, resume, crash again after more text, resume: every fragment kept exactly
    once, and the end event — and a replay in a new process — carries the whole answer (issue 22)."""
    db = tmp_path / "c.sqlite"
    server.enqueue([Text("One. "), Hang()])
    child = await start_child(server, db, workspace)
    await child.wait_for(lambda e: e["type"] == "text_delta")
    await child.kill()
    server.enqueue([Text("Two. "), Hang()])
    child = await start_child(server, db, workspace)
    await child.wait_for(lambda e: e["type"] == "text_delta" and "Two" in e["delta"])
    await child.kill()
    server.enqueue([Text("Three.")])
    end = await (await start_child(server, db, workspace)).finish()
    assert end["status"] == "completed" and end["text"] == "One. Two. Three."
    again = await (await start_child(server, db, workspace)).finish()
    assert again["replayed"] and again["text"] == "One. Two. Three."
    assert len(server.requests) == 3, "the replay called no model"
    messages, _ = await transcript(db, server)
    joined = texts(messages)
    assert joined.count("One. ") == 1 and joined.count("Two. ") == 1 and joined.count("Three.") == 1
    last_request = json.dumps(server.requests[-1].json)
    assert "One. " in last_request and "Two. " in last_request
    assert_store_invariants(db)


async def test_never_tool_killed_mid_run_is_not_repeated(server, tmp_path, workspace) -> None:
    """D2: a bash call (replay=never) killed mid-run gets an 'interrupted' result, never a second run."""
    db = tmp_path / "d.sqlite"
    side = workspace / "side.txt"
    pid_file = workspace / "pid.txt"
    command = "echo $$ > pid.txt.tmp && mv pid.txt.tmp pid.txt; echo ran >> side.txt; exec sleep 60"
    server.enqueue([ToolCall("bash", {"command": command}, id="b1")])
    child = await start_child(server, db, workspace)
    await until(lambda: side.exists() and pid_file.exists())
    await child.kill()
    server.enqueue([Text("noted")])
    end = await (await start_child(server, db, workspace)).finish()
    assert end["status"] == "completed"
    assert side.read_text() == "ran\n", "the never-replay command ran exactly once"
    assert not running(int(pid_file.read_text())), "its process died with the agent or was reaped on resume"
    assert "interrupted" in json.dumps(server.requests[-1].json)
    assert_store_invariants(db)


async def test_resume_reaps_a_never_calls_escaped_processes_before_reporting(server, tmp_path, workspace) -> None:
    """D2/issue 19: a process that left the command's process group (setsid) survives the
    agent's death; the resumed run kills it before telling the model the outcome is unknown."""
    db = tmp_path / "escape.sqlite"
    escaped = workspace / "escaped.pid"
    command = "setsid sh -c 'echo $$ > escaped.pid.tmp && mv escaped.pid.tmp escaped.pid; exec sleep 60' & sleep 60"
    server.enqueue([ToolCall("bash", {"command": command}, id="b1")])
    child = await start_child(server, db, workspace)
    await until(escaped.exists)
    pid = int(escaped.read_text())
    await child.kill()
    assert running(pid), "the escaped process outlived the agent and its process group"
    server.enqueue([Text("noted")])
    end = await (await start_child(server, db, workspace)).finish()
    assert end["status"] == "completed"
    assert "interrupted" in json.dumps(server.requests[-1].json)
    assert not running(pid), "the escaped process was reaped before the model was told"


async def test_safe_tool_killed_mid_run_is_executed_again(server, tmp_path, workspace) -> None:
    """D2: a replay='safe' tool whose result was never committed runs again on resume."""
    db = tmp_path / "e.sqlite"
    probe = workspace / "probe.txt"
    server.enqueue([ToolCall("probe", {}, id="p1")])
    child = await start_child(server, db, workspace)
    await until(lambda: probe.exists() and probe.read_text() == "probe\n")  # written, not just created
    await child.kill()
    server.enqueue([Text("done")])
    end = await (await start_child(server, db, workspace)).finish()
    assert end["status"] == "completed"
    assert probe.read_text() == "probe\nprobe\n"
    assert "probe ran 2 times" in json.dumps(server.requests[-1].json)
    assert_store_invariants(db)


async def test_kill_after_tool_result_before_next_request(server, tmp_path, workspace) -> None:
    """D1: a settled model call is never requested again; the committed tool result is reused."""
    db = tmp_path / "f.sqlite"
    server.enqueue([ToolCall("ls", {"path": "."}, id="l1"), Usage(input=10, output=5)], [Hang()])
    child = await start_child(server, db, workspace)
    await server.until_hanging(1)
    await child.kill()
    server.enqueue([Text("two files")])
    resumed = await start_child(server, db, workspace)
    end = await resumed.finish()
    assert end["status"] == "completed"
    assert len(server.requests) == 3  # settled 1st, killed 2nd, resumed 2nd — the 1st never again
    assert not [e for e in resumed.events if e["type"] == "tool"], "ls was not executed again"
    assert json.dumps(server.requests[1].json) == json.dumps(server.requests[2].json)
    _, log = await transcript(db, server)
    assert sum(1 for row in log.usage.values() if row.payload["input_tokens"] == 10) == 1
    assert_store_invariants(db)


async def test_completed_request_id_is_not_run_again_after_reopen(server, tmp_path, workspace) -> None:
    """D1: the same request id on a reopened store returns the outcome without model or tools."""
    db = tmp_path / "g.sqlite"
    server.enqueue([ToolCall("ls", {"path": "."})], [Text("finished")])
    first = await (await start_child(server, db, workspace)).finish()
    again = await (await start_child(server, db, workspace)).finish()
    assert first["text"] == again["text"] == "finished" and again["replayed"]
    assert len(server.requests) == 2


async def test_random_kills_converge(server, tmp_path, workspace) -> None:
    """D1–D3 randomized: SIGKILL on observed progress at seeded random points; the run converges.

    Each kill waits for something the child reports — the first text of a streaming answer
    (before the response settled), a tool that started, or the n-th committed event — so a
    loaded machine cannot make every kill land at interpreter start-up. The kills must cover
    every phase. CRASH_KILLS (default 8) sets how many kills; CRASH_KILLS=200 for the long run.
    """
    kills = max(3, int(os.environ.get("CRASH_KILLS", "8")))
    rng = random.Random(20261130)
    db = tmp_path / "r.sqlite"
    side = workspace / "appends.txt"
    steps = max(6, kills)

    def turn(i: int) -> list[Any]:
        command = f"echo {i} >> appends.txt"
        text = Text(f"Step {i} of the plan. ", chunk_size=3, pace_s=0.02)
        return [text, ToolCall("bash", {"command": command}, id=f"c{i}")]

    def responder(request: Any) -> list[Any]:
        done = json.dumps(request.json).count("appends.txt")  # tool calls already in history
        return turn(done) if done < steps else [Text("All steps done.")]

    phases = ["stream", "tool", "commit"]
    plan = phases + [rng.choice(phases) for _ in range(kills - len(phases))]
    rng.shuffle(plan)
    server.responder = responder
    hit: list[str] = []
    for phase in plan:
        child = await start_child(server, db, workspace)
        try:
            if phase == "stream":
                await child.wait_for(lambda e: e["type"] == "text_delta")
                settled = any(e["type"] in ("tool", "usage") for e in child.events)
            elif phase == "tool":
                await child.wait_for(lambda e: e["type"] == "tool" and e["phase"] == "start")
                settled = False
            else:
                target = rng.randint(1, 12)
                await child.wait_for(lambda _e, c=child, n=target: len(c.events) >= n)
                settled = False
        except AssertionError:  # the run ended before this point: nothing to kill here
            await child.proc.wait()
            continue
        await child.kill()
        if not settled:
            hit.append(phase)
    assert set(hit) == set(phases), f"the kills must cover every phase; covered {hit}"
    end = await (await start_child(server, db, workspace)).finish(limit=120)
    assert end["status"] == "completed" and "All steps done." in end["text"]
    lines = side.read_text().split() if side.exists() else []
    assert len(lines) == len(set(lines)), f"a never-replay command ran twice: {lines}"
    assert_store_invariants(db)


def cancel_marker(db: Path) -> dict[str, Any] | None:
    """The committed cancel marker of the main conversation, read without taking the lock."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT value FROM registers WHERE key = 'cancel:main'").fetchone()
    except sqlite3.OperationalError:  # the store is still being created
        return None
    finally:
        conn.close()
    return json.loads(row[0]) if row else None


async def test_cancel_is_durable_across_a_crash(server, tmp_path, workspace) -> None:
    """DURABILITY 12: Stop, then a crash before the terminal commit → the reopened request ends
    ``aborted`` without another model request or tool run (the stalled tool is replay-safe, so
    without the marker recovery would run it again)."""
    db = tmp_path / "cancel.sqlite"
    server.enqueue([ToolCall("stall", {}, id="s1")])
    child = await start_child(server, db, workspace, "job", "--cancel-on-tool", "stall")
    await child.wait_for(lambda e: e["type"] == "tool" and e["phase"] == "start")
    await until(lambda: cancel_marker(db) is not None)
    assert child.proc.returncode is None, "the stalled tool keeps the cancelled run from ending"
    await child.kill()
    resumed = await start_child(server, db, workspace)
    end = await resumed.finish()
    assert end["status"] == "aborted" and end["error_code"] == "execution_aborted"
    assert len(server.requests) == 1, "no model request after a durable cancel"
    assert not [e for e in resumed.events if e["type"] == "tool"], "no tool runs after a durable cancel"
    assert cancel_marker(db) is None, "the terminal transaction removes the marker"
    assert_store_invariants(db)


async def test_resumed_request_keeps_the_model_and_max_tokens_it_started_with(server, tmp_path, workspace) -> None:
    """DURABILITY 13: a request interrupted on model A with max_tokens 1000 resumes on A with
    1000 even though the process reopens with model B and 2000; a new request uses B."""
    db = tmp_path / "pinned.sqlite"
    server.enqueue([Text("The first half, "), Hang()])
    child = await start_child(server, db, workspace, "job", "--model", "model-a", "--max-tokens", "1000")
    await child.wait_for(lambda e: e["type"] == "text_delta")
    await child.kill()
    server.enqueue([Text("and the rest.")])
    other = ("--model", "model-b", "--max-tokens", "2000")
    end = await (await start_child(server, db, workspace, "job", *other)).finish()
    assert end["status"] == "completed"
    resumed = server.requests[-1].json
    assert (resumed["model"], resumed["max_completion_tokens"]) == ("model-a", 1000)
    server.enqueue([Text("fresh")])
    await (await start_child(server, db, workspace, "job-2", *other)).finish()
    fresh = server.requests[-1].json
    assert (fresh["model"], fresh["max_completion_tokens"]) == ("model-b", 2000)


async def test_kill_between_plan_and_approval_then_approve_builds(server, tmp_path, workspace) -> None:
    """PL4/D1: the process dies while a plan waits for approval; a new process approves it
    (same request id) and the build runs — the plan is not requested again."""
    db = tmp_path / "plan.sqlite"
    server.enqueue([Text("Plan: 1. write hello.txt")])
    child = await start_child(server, db, workspace, "job", "--plan", "--hold")
    paused = await child.wait_for(lambda e: e["type"] == "end")
    assert paused["status"] == "paused" and paused["pending"]["kind"] == "plan"
    await child.kill()
    server.enqueue([ToolCall("write", {"path": "hello.txt", "content": "hi\n"})], [Text("Built.")])
    resumed = await start_child(server, db, workspace, "job", "--approve", paused["pending"]["approval_id"])
    end = await resumed.finish()
    assert end["status"] == "completed" and end["text"] == "Built."
    assert (workspace / "hello.txt").read_text() == "hi\n"
    assert len(server.requests) == 3
    assert_store_invariants(db)


async def test_crash_during_compaction_keeps_the_old_context(server, tmp_path, workspace) -> None:
    """C3/issue 8: killed while the summary streams → the old context stays in force; the same
    request id then completes the compaction, which survives a restart."""
    db = tmp_path / "compact.sqlite"
    server.enqueue([Text("first answer")])
    await (await start_child(server, db, workspace, "r0", "--prompt", "remember the blue door")).finish()
    before, _ = await transcript(db, server)
    server.enqueue([Text("Summary: the user mentioned"), Hang()])
    child = await start_child(server, db, workspace, "c1", "--prompt", "/compact")
    await server.until_hanging(1)
    await child.kill()
    after_kill, _ = await transcript(db, server)
    assert after_kill == before, "a crash during compaction leaves the old context in force"
    server.enqueue([Text("Summary: the user mentioned the blue door.")])
    end = await (await start_child(server, db, workspace, "c1", "--prompt", "/compact")).finish()
    assert end["status"] == "completed"
    compacted, _ = await transcript(db, server)
    assert len(compacted) == 1 and "blue door" in json.dumps(compacted)
    assert_store_invariants(db)
