"""Crash-resume against a PostgreSQL store, with real processes and real SIGKILL (SPEC D1-D3;
DURABILITY invariants 1-10, 12, 18).

The same child as the SQLite crash suite (``crash_child.py``) runs the agent with
``database_url=`` against the session's private PostgreSQL server and the fake provider served
by this test. It is SIGKILLed mid-stream or mid-tool; the server ends its session, which frees
the owner lease; a second process takes over and re-runs the same ``request_id``. Then the
durable invariants are checked on the store: nothing committed lost, nothing repeated, no
``never`` tool run twice, no settled model call requested again.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from typing import Any

import psycopg
import pytest

from agentcore import create_agent
from agentcore.harness.postgres_store import PostgresStorage
from agentcore.harness.postgres_target import target_from_url
from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Hang, Text, ToolCall, Usage
from tests.agentcore.child_process import Child, running, until
from tests.agentcore.test_crash_resume import start_child
from tests.pg import PostgresCluster, wait_for_sessions_gone

pytestmark = pytest.mark.crash


@pytest.fixture
async def server():
    async with FakeProviderServer() as fake:
        yield fake


@pytest.fixture
def url(postgres: PostgresCluster) -> str:
    return f"{postgres.dsn}?store=crash-{uuid.uuid4().hex[:12]}"


async def kill(child: Child, postgres: PostgresCluster) -> None:
    """SIGKILL the owner, then wait until the server has ended its session (the lease)."""
    await child.kill()
    wait_for_sessions_gone(postgres.dsn, f"pid {child.proc.pid} ")


async def transcript(url: str, server: FakeProviderServer) -> tuple[list[dict[str, Any]], Any]:
    runtime = await create_agent(
        provider="fake", model="fake-model", base_url=server.base_url, api_key="k",
        api_kind="openai-completions", database_url=url,
    )  # fmt: skip
    try:
        return runtime.read_transcript(), runtime.log
    finally:
        await runtime.close()


def assert_store_invariants(url: str) -> None:
    """DURABILITY 2-5, 8: seqs rise, ids unique, parents exist, one result per call, one ledger row per record."""
    storage = PostgresStorage.open(target_from_url(url), create=False)  # the children wrote it
    try:
        state = storage.load()
    finally:
        storage.close()
    assert state.entries, "the children committed to this PostgreSQL store"
    seqs = [e.seq for e in state.entries]
    assert seqs == sorted(seqs) and (not seqs or seqs[-1] <= state.last_seq)
    ids = [e.id for e in state.entries]
    assert len(ids) == len(set(ids))
    known: set[str] = set()
    for entry in state.entries:
        assert entry.parent_id is None or entry.parent_id in known
        known.add(entry.id)
    results = [e.payload.get("call_key") for e in state.entries if e.kind == "message" and e.payload.get("call_key")]
    assert len(results) == len(set(results)), "every tool call has exactly one result"
    records = [row.record_id for row in state.usage]
    assert len(records) == len(set(records))


async def test_kill_before_text_then_another_process_takes_over(server, url, postgres, workspace) -> None:
    """D1: killed while the request hangs → the lease frees → a second process answers once."""
    server.enqueue([Hang()])
    child = await start_child(server, url, workspace)
    await server.until_hanging(1)
    await kill(child, postgres)
    server.enqueue([Text("hello there")])
    end = await (await start_child(server, url, workspace)).finish()
    assert end["status"] == "completed" and end["text"] == "hello there"
    messages, _ = await transcript(url, server)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert json.dumps(messages).count("hello there") == 1
    assert_store_invariants(url)


async def test_kill_mid_stream_continues_from_committed_fragments(server, url, postgres, workspace) -> None:
    """D3: text shown before the kill was committed; the new owner continues from it, once."""
    server.enqueue([Text("The first half, "), Hang()])
    child = await start_child(server, url, workspace)
    await child.wait_for(lambda e: e["type"] == "text_delta")
    await kill(child, postgres)
    server.enqueue([Text("and the second half.")])
    resumed = await start_child(server, url, workspace)
    end = await resumed.finish()
    assert end["status"] == "completed"
    assert [r["kind"] for r in resumed.events if r["type"] == "retry"] == ["recovery"]
    request = json.dumps(server.requests[-1].json)
    assert "The first half, " in request and "interrupted" in request
    messages, _ = await transcript(url, server)
    assert json.dumps(messages).count("The first half, ") == 1
    assert json.dumps(messages).count("and the second half.") == 1
    assert_store_invariants(url)


async def test_never_tool_killed_mid_run_is_not_repeated(server, url, postgres, workspace) -> None:
    """D2: a bash call (replay=never) killed mid-run gets an 'interrupted' result, never a second run."""
    side = workspace / "side.txt"
    pid_file = workspace / "pid.txt"
    command = "echo $$ > pid.txt.tmp && mv pid.txt.tmp pid.txt; echo ran >> side.txt; exec sleep 60"
    server.enqueue([ToolCall("bash", {"command": command}, id="b1")])
    child = await start_child(server, url, workspace)
    await until(lambda: side.exists() and pid_file.exists())
    await kill(child, postgres)
    server.enqueue([Text("noted")])
    end = await (await start_child(server, url, workspace)).finish()
    assert end["status"] == "completed"
    assert side.read_text() == "ran\n", "the never-replay command ran exactly once"
    assert not running(int(pid_file.read_text()))
    assert "interrupted" in json.dumps(server.requests[-1].json)
    assert_store_invariants(url)


async def test_safe_tool_killed_mid_run_runs_again(server, url, postgres, workspace) -> None:
    """D2: a replay='safe' tool whose result was never committed runs again under the new owner."""
    probe = workspace / "probe.txt"
    server.enqueue([ToolCall("probe", {}, id="p1")])
    child = await start_child(server, url, workspace)
    await until(lambda: probe.exists() and probe.read_text() == "probe\n")
    await kill(child, postgres)
    server.enqueue([Text("done")])
    end = await (await start_child(server, url, workspace)).finish()
    assert end["status"] == "completed"
    assert probe.read_text() == "probe\nprobe\n"
    assert "probe ran 2 times" in json.dumps(server.requests[-1].json)
    assert_store_invariants(url)


async def test_a_settled_model_call_is_never_requested_again(server, url, postgres, workspace) -> None:
    """D1/DURABILITY 7: killed after a tool result, before the next response settled."""
    server.enqueue([ToolCall("ls", {"path": "."}, id="l1"), Usage(input=10, output=5)], [Hang()])
    child = await start_child(server, url, workspace)
    await server.until_hanging(1)
    await kill(child, postgres)
    server.enqueue([Text("two files")])
    resumed = await start_child(server, url, workspace)
    end = await resumed.finish()
    assert end["status"] == "completed"
    assert len(server.requests) == 3  # settled 1st, killed 2nd, resumed 2nd — the 1st never again
    assert not [e for e in resumed.events if e["type"] == "tool"], "ls was not executed again"
    _, log = await transcript(url, server)
    assert sum(1 for row in log.usage.values() if row.payload["input_tokens"] == 10) == 1
    assert_store_invariants(url)


def cancel_marker(url: str) -> dict[str, Any] | None:
    """The committed cancel marker of the main conversation, read beside the owner (no lease)."""
    dsn, store = url.split("?store=")
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT r.value FROM agentcore.registers r JOIN agentcore.stores s USING (store_id) "
            "WHERE s.name = %s AND r.key = 'cancel:main'",
            (store,),
        ).fetchone()
    return json.loads(row[0]) if row else None


async def test_cancel_is_durable_across_a_kill(server, url, postgres, workspace) -> None:
    """DURABILITY 12: Stop, then a kill before the terminal commit → the new owner ends the
    request ``aborted`` without another model request or tool run."""
    server.enqueue([ToolCall("stall", {}, id="s1")])
    child = await start_child(server, url, workspace, "job", "--cancel-on-tool", "stall")
    await child.wait_for(lambda e: e["type"] == "tool" and e["phase"] == "start")
    await until(lambda: cancel_marker(url) is not None)
    await kill(child, postgres)
    resumed = await start_child(server, url, workspace)
    end = await resumed.finish()
    assert end["status"] == "aborted" and end["error_code"] == "execution_aborted"
    assert len(server.requests) == 1 and not [e for e in resumed.events if e["type"] == "tool"]
    assert cancel_marker(url) is None
    assert_store_invariants(url)


async def test_random_kills_converge(server, url, postgres, workspace) -> None:
    """D1-D3 randomized, as the SQLite suite: SIGKILL on observed progress at seeded random
    points (mid-stream, mid-tool, after the n-th event), a new process each time; the run
    converges, no never-replay command runs twice. CRASH_KILLS (default 6) sets the count."""
    kills = max(3, int(os.environ.get("CRASH_KILLS", "6")))
    rng = random.Random(20261201)
    side = workspace / "appends.txt"
    steps = max(5, kills)

    def responder(request: Any) -> list[Any]:
        done = json.dumps(request.json).count("appends.txt")
        if done >= steps:
            return [Text("All steps done.")]
        text = Text(f"Step {done} of the plan. ", chunk_size=3, pace_s=0.02)
        return [text, ToolCall("bash", {"command": f"echo {done} >> appends.txt"}, id=f"c{done}")]

    phases = ["stream", "tool", "commit"]
    plan = phases + [rng.choice(phases) for _ in range(kills - len(phases))]
    rng.shuffle(plan)
    server.responder = responder
    hit: list[str] = []
    for phase in plan:
        child = await start_child(server, url, workspace)
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
        except AssertionError:
            await child.proc.wait()
            continue
        await kill(child, postgres)
        if not settled:
            hit.append(phase)
    assert set(hit) == set(phases), f"the kills must cover every phase; covered {hit}"
    end = await (await start_child(server, url, workspace)).finish(limit=120)
    assert end["status"] == "completed" and "All steps done." in end["text"]
    lines = side.read_text().split() if side.exists() else []
    assert len(lines) == len(set(lines)), f"a never-replay command ran twice: {lines}"
    assert_store_invariants(url)
