"""Crash-resume with real processes and real SIGKILL (SPEC D1–D3; DURABILITY invariants 1–10).

A child process runs the agent against a SQLite store and the fake provider server served
by this test; it is SIGKILLed at a scripted point, then a new child re-runs the same
``request_id`` and the durable invariants are checked on the final store.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentcore import create_agent
from agentcore.harness import SqliteStorageFactory
from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Delay, Hang, Text, ToolCall, Usage

pytestmark = pytest.mark.crash
ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("crash_child.py")


class Child:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.events: list[dict[str, Any]] = []

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool], limit: float = 30) -> dict[str, Any]:
        async with asyncio.timeout(limit):
            for event in self.events:
                if predicate(event):
                    return event
            assert self.proc.stdout is not None
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    raise AssertionError(f"child ended first; events: {self.events}")
                event = json.loads(line)
                self.events.append(event)
                if predicate(event):
                    return event

    async def finish(self, limit: float = 60) -> dict[str, Any]:
        end = await self.wait_for(lambda e: e["type"] == "end", limit)
        await self.proc.wait()
        return end

    async def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()


async def start_child(
    server: FakeProviderServer, db: Path, workdir: Path, request_id: str = "job", *extra: str
) -> Child:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        *extra,
        "--db",
        str(db),
        "--base-url",
        server.base_url,
        "--workdir",
        str(workdir),
        "--request-id",
        request_id,
        stdout=asyncio.subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    return Child(proc)


async def until(condition: Callable[[], bool], limit: float = 30) -> None:
    """Wait for an external condition (a file written by the child) by polling it: another
    process writes it, so there is no in-process event to await."""
    async with asyncio.timeout(limit):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


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
    """D3: crash, resume, crash again after more text, resume: every fragment kept exactly once."""
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
    assert end["status"] == "completed"
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
    os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the command orphaned by the killed child
    server.enqueue([Text("noted")])
    end = await (await start_child(server, db, workspace)).finish()
    assert end["status"] == "completed"
    assert side.read_text() == "ran\n", "the never-replay command ran exactly once"
    assert "interrupted" in json.dumps(server.requests[-1].json)
    assert_store_invariants(db)


async def test_safe_tool_killed_mid_run_is_executed_again(server, tmp_path, workspace) -> None:
    """D2: a replay='safe' tool whose result was never committed runs again on resume."""
    db = tmp_path / "e.sqlite"
    probe = workspace / "probe.txt"
    server.enqueue([ToolCall("probe", {}, id="p1")])
    child = await start_child(server, db, workspace)
    await until(probe.exists)
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
    """D1–D3 randomized: SIGKILL at seeded random instants; the run converges and invariants hold.

    CRASH_KILLS (default 8) sets how many kills; run with CRASH_KILLS=200 for the long version.
    """
    kills = int(os.environ.get("CRASH_KILLS", "8"))
    rng = random.Random(20261130)
    db = tmp_path / "r.sqlite"
    side = workspace / "appends.txt"

    def turn(i: int) -> list[Any]:
        command = f"echo {i} >> appends.txt"
        return [Text(f"Step {i}. ", chunk_size=3), Delay(0.002), ToolCall("bash", {"command": command}, id=f"c{i}")]

    def responder(request: Any) -> list[Any]:
        done = json.dumps(request.json).count("appends.txt")  # tool calls already in history
        return turn(done) if done < 6 else [Text("All steps done.")]

    server.responder = responder
    for _ in range(kills):
        child = await start_child(server, db, workspace)
        await asyncio.sleep(rng.uniform(0.05, 0.9))  # the random instant of the kill (not synchronisation)
        if child.proc.returncode is None:
            await child.kill()
    end = await (await start_child(server, db, workspace)).finish(limit=120)
    assert end["status"] == "completed" and "All steps done." in end["text"]
    lines = side.read_text().split() if side.exists() else []
    assert len(lines) == len(set(lines)), f"a never-replay command ran twice: {lines}"
    assert_store_invariants(db)


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
