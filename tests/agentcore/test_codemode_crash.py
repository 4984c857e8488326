"""Code mode crash tests with real SIGKILL (SPEC X4, D1–D2; DURABILITY 1–10).

A child process runs a session whose model calls ``codemode``; the script's nested calls leave
side effects in files. The child is SIGKILLed while a nested call runs; its sandbox worker dies
with it. A new child re-runs the same request id: the script runs again, committed nested
results are fed back without executing them, a ``safe`` call in flight runs again, a ``never``
call in flight is reported as "outcome unknown" — and a log that no longer matches the script
or the sandbox is refused clearly, with nothing run again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentcore.harness import SqliteStorageFactory
from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Text, ToolCall
from tests.agentcore.child_process import Child, running, spawn, until
from tests.agentcore.codemode_helpers import worker_pids
from tests.agentcore.test_crash_resume import assert_store_invariants

pytestmark = pytest.mark.crash
CHILD = Path(__file__).with_name("codemode_child.py")

NEVER_IN_FLIGHT = """
    const a = await tools.effect({tag: "one"});
    text("first:", a);
    let b;
    try {
        b = await tools.effect({tag: "two", hang: true, random: Math.random(), now: Date.now()});
    } catch (e) {
        b = "failed: " + e.message;
    }
    text("second:", b);
    return await tools.effect({tag: "three"});
"""
SAFE_IN_FLIGHT = """
    await tools.effect({tag: "one"});
    const seen = await tools.probe({});
    await tools.effect({tag: "three"});
    return seen;
"""


@pytest.fixture
async def server():
    async with FakeProviderServer() as fake:
        yield fake


async def start(server: FakeProviderServer, db: Path, workdir: Path, request_id: str = "job") -> Child:
    args = ("--db", str(db), "--base-url", server.base_url, "--workdir", str(workdir), "--request-id", request_id)
    return await spawn(CHILD, *args)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def kill_inside(child: Child, condition: Any) -> None:
    """Wait until ``condition()`` (a nested call is running in the child), check the script runs
    in a worker of the child, SIGKILL the child and wait until its worker died with it."""
    await until(condition)
    workers = worker_pids(child.proc.pid)
    assert len(workers) == 1, "the script runs in one worker process of the agent"
    await child.kill()
    await until(lambda: not any(running(pid) for pid in workers))


def stored(db: Path, *kinds: str) -> list[Any]:
    storage, release = SqliteStorageFactory(str(db)).open()
    try:
        return [e for e in storage.load().entries if e.kind in kinds]
    finally:
        storage.close()
        release()


def codemode_result(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in events if e["type"] == "tool" and e["name"] == "codemode" and e["phase"] == "end")


async def test_kill_during_a_never_call_resumes_without_redoing_anything(server, tmp_path, workspace) -> None:
    """X4 / D2: killed inside a `never` nested call; the resumed script gets call 0 from the log
    (not run again), call 1 as "outcome unknown" (not redone), and runs call 2 once. The re-run
    sees the same Math.random() and Date.now() (they are in call 1's arguments)."""
    db = tmp_path / "never.sqlite"
    server.enqueue([ToolCall("codemode", {"code": NEVER_IN_FLIGHT}, id="c1")], [Text("done")])
    effects = workspace / "effects.txt"
    await kill_inside(await start(server, db, workspace), lambda: "two" in lines(effects))
    assert lines(effects) == ["one", "two"]

    events = await (await start(server, db, workspace)).run_to_end()
    assert [e["status"] for e in events if e["type"] == "end"] == ["completed"]
    assert lines(effects) == ["one", "two", "three"], "nothing ran twice"
    result = codemode_result(events)["result"]
    assert result.startswith("first: one ran\nsecond: failed: The process running this tool call was interrupted")
    assert result.endswith('Return value: "three ran"')
    assert len(server.requests) == 2, "the model was asked once per step"
    statuses = [(e.payload["index"], e.payload["status"]) for e in stored(db, "nested_result")]
    assert statuses == [(0, "completed"), (1, "unknown"), (2, "completed")]
    (end,) = stored(db, "code_run_end")
    assert end.payload["status"] == "completed" and end.payload["replayed"] == [0]
    record = [e for e in events if e["type"] == "session"][-1]["snapshot"]["records"]["code_mode"]
    assert [c["replayed"] for c in record["executions"][-1]["calls"]] == [True, False, False]
    assert_store_invariants(db)


async def test_kill_during_a_safe_call_reruns_only_that_call(server, tmp_path, workspace) -> None:
    """X4 / D2: killed inside a `safe` nested call; on resume that call runs again with its
    persisted arguments, the committed `never` call before it is fed back, and the script
    finishes."""
    db = tmp_path / "safe.sqlite"
    server.enqueue([ToolCall("codemode", {"code": SAFE_IN_FLIGHT}, id="c1")], [Text("done")])
    probe, effects = workspace / "probe.txt", workspace / "effects.txt"
    await kill_inside(await start(server, db, workspace), lambda: len(lines(probe)) == 1)

    events = await (await start(server, db, workspace)).run_to_end()
    assert lines(probe) == ["probe", "probe"], "the safe call was re-run once"
    assert lines(effects) == ["one", "three"]
    assert codemode_result(events)["result"] == 'Return value: "probe ran 2 times"'
    results = {e.payload["index"]: e.payload for e in stored(db, "nested_result")}
    assert results[1].get("rerun") is True and results[1]["status"] == "completed"
    assert_store_invariants(db)


def _tamper(db: Path, change: str) -> None:
    conn = sqlite3.connect(db)
    try:
        (entry_id, payload) = conn.execute("SELECT id, payload FROM entries WHERE kind = 'code_run'").fetchone()
        header = json.loads(payload)
        if change == "fingerprint":
            header["fingerprint"] = "sha256:" + "0" * 32
        else:  # another script, consistent with its own digest
            header["script"] = header["script"].replace('"three"', '"four"')
            header["script_sha256"] = hashlib.sha256(header["script"].encode()).hexdigest()
        conn.execute("UPDATE entries SET payload = ? WHERE id = ?", (json.dumps(header), entry_id))
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("fingerprint", "the sandbox changed since the script started"),
        ("script", "the script differs from the one recorded in the execution log"),
    ],
)
async def test_resume_refuses_a_log_that_does_not_match_and_runs_nothing(
    server, tmp_path, workspace, change: str, reason: str
) -> None:
    """X4: recovery checks the sandbox fingerprint and the script against the execution log; a
    mismatch is a clear error to the model and nothing is run again."""
    db = tmp_path / f"{change}.sqlite"
    server.enqueue([ToolCall("codemode", {"code": NEVER_IN_FLIGHT}, id="c1")], [Text("done")])
    effects = workspace / "effects.txt"
    await kill_inside(await start(server, db, workspace), lambda: "two" in lines(effects))
    _tamper(db, change)

    events = await (await start(server, db, workspace)).run_to_end()
    result = codemode_result(events)
    assert result["is_error"] and "could not resume this script after a restart" in result["result"]
    assert reason in result["result"]
    assert lines(effects) == ["one", "two"], "nothing ran again"
    assert [e["status"] for e in events if e["type"] == "end"] == ["completed"]
    (end,) = stored(db, "code_run_end")
    assert end.payload["status"] == "mismatch"
    assert_store_invariants(db)


TWO_HANGS = """
    const a = await tools.effect({tag: "one"});
    const outcome = async (tag) => {
        try { return await tools.effect({tag, hang: true}); } catch (e) { return "unknown"; }
    };
    return [a, await outcome("two"), await outcome("three")];
"""


async def test_a_crash_during_recovery_recovers_again_from_the_longer_log(server, tmp_path, workspace) -> None:
    """X4 / DURABILITY 17: killed in call 1, then killed again in call 2 while resuming; the third
    run replays calls 0 and 1 (the "unknown" outcome the second run committed) and reports call 2
    unknown. Each effect ran exactly once."""
    db = tmp_path / "twice.sqlite"
    server.enqueue([ToolCall("codemode", {"code": TWO_HANGS}, id="c1")], [Text("done")])
    effects = workspace / "effects.txt"
    await kill_inside(await start(server, db, workspace), lambda: "two" in lines(effects))
    await kill_inside(await start(server, db, workspace), lambda: "three" in lines(effects))

    events = await (await start(server, db, workspace)).run_to_end()
    assert lines(effects) == ["one", "two", "three"]
    assert codemode_result(events)["result"] == 'Return value: ["one ran","unknown","unknown"]'
    statuses = [(e.payload["index"], e.payload["status"]) for e in stored(db, "nested_result")]
    assert statuses == [(0, "completed"), (1, "unknown"), (2, "unknown")]
    (end,) = stored(db, "code_run_end")
    assert end.payload["replayed"] == [0, 1]
    assert len(server.requests) == 2
    assert_store_invariants(db)


BRANCHING = """
    const first = await tools.effect({tag: "one"});
    if (first === "one ran") {
        await tools.effect({tag: "two", hang: true});
    }
    return first;
"""


async def test_resume_refuses_a_rerun_that_leaves_the_log(server, tmp_path, workspace) -> None:
    """X4: the re-run must follow the log to its end: when a committed result in the log no
    longer leads the script to the calls logged after it (here: the log's first result was
    altered, so the script takes the other branch and ends early), the resume is refused and
    nothing runs."""
    db = tmp_path / "branch.sqlite"
    server.enqueue([ToolCall("codemode", {"code": BRANCHING}, id="c1")], [Text("done")])
    effects = workspace / "effects.txt"
    await kill_inside(await start(server, db, workspace), lambda: "two" in lines(effects))
    conn = sqlite3.connect(db)
    try:
        (entry_id, payload) = conn.execute(
            "SELECT id, payload FROM entries WHERE kind = 'nested_result' AND json_extract(payload, '$.index') = 0"
        ).fetchone()
        conn.execute(
            "UPDATE entries SET payload = ? WHERE id = ?", (json.dumps(dict(json.loads(payload), value="x")), entry_id)
        )
        conn.commit()
    finally:
        conn.close()

    events = await (await start(server, db, workspace)).run_to_end()
    result = codemode_result(events)
    assert result["is_error"] and "the execution log has 2 calls, but the re-run ended after 1" in result["result"]
    assert lines(effects) == ["one", "two"]
    assert_store_invariants(db)
