"""SQLite backend specifics: transactions, the owner lease across processes, foreign files,
directories, migrations and the saved-state compatibility corpus (SPEC D1, D3, D4, D8)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentInput, create_agent
from agentcore.errors import STORE_INVALID, STORE_LOCKED, StoreError
from agentcore.events import RetryEvent, RunEndEvent
from agentcore.harness import (
    SCHEMA_VERSION,
    Commit,
    Entry,
    SqliteStorage,
    SqliteStorageFactory,
    lock_path_for,
)
from agentcore.harness.sqlite_schema import APPLICATION_ID
from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Text, Usage

CHILD = Path(__file__).with_name("store_child.py")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "stores"


def spawn(mode: str, db: Path) -> tuple[subprocess.Popen[str], int]:
    """Start a child owner and wait (no sleeps) until it reports that it holds the store."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), mode, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith("ready "), line
    return child, int(line.split()[1])


def open_store(path: Path) -> SqliteStorage:
    return SqliteStorageFactory(path).open()[0]


def snapshot_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_write_after_another_connection_committed_since_our_read_succeeds(tmp_path: Path) -> None:
    """DURABILITY pitfall: a deferred transaction upgrading from a stale snapshot fails under
    contention; every commit here is its own BEGIN IMMEDIATE, so this must succeed."""
    db = tmp_path / "s.sqlite"
    store = open_store(db)
    store.commit(Commit(entries=[Entry("a", "main", None, "message", {})]))
    assert store.load().entries  # our read
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO receipts VALUES ('r-other', 'main', '{}', 0)")
    other.execute("COMMIT")
    reader = sqlite3.connect(db)  # a reader holding an old snapshot must not matter either
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM entries").fetchone()
    seq = store.commit(Commit(entries=[Entry("b", "main", "a", "message", {})]))
    assert seq == 2 and [e.id for e in store.load().entries] == ["a", "b"]
    reader.close()
    other.close()
    store.close()


def test_connection_runs_in_wal_with_explicit_transactions(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.sqlite")
    conn = store._conn
    assert conn is not None and conn.isolation_level is None
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    store.close()
    full = SqliteStorageFactory(tmp_path / "s.sqlite", synchronous="full").open()[0]
    assert full._conn is not None and full._conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    full.close()


def test_second_opener_in_the_same_process_gets_store_locked_naming_the_pid(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    first = open_store(db)
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_LOCKED
    assert f"pid {os.getpid()}" in info.value.message
    first.close()
    assert lock_path_for(db).read_text() == ""  # the pid is cleared on release
    open_store(db).close()


def test_a_child_process_holds_the_lease_until_it_is_killed(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    child, pid = spawn("hold", db)
    try:
        with pytest.raises(StoreError) as info:
            open_store(db)
        assert info.value.code == STORE_LOCKED
        assert f"pid {pid}" in info.value.message and info.value.details["holder_pid"] == pid
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    store = open_store(db)  # the OS released the dead owner's lock at once
    assert store.load().fence == 2
    store.close()


@pytest.mark.parametrize(
    "content",
    [
        b"this is not a database at all\n" * 10,
        b"SQLite format 3\x00" + b"\xff" * 200,
        b"SQLite format 3\x00" + b"\x00" * 40,  # a truncated header
        bytes(range(256)) * 64,
    ],
    ids=["text", "garbage-after-magic", "truncated", "binary"],
)
def test_corrupt_file_is_store_invalid_and_left_untouched(tmp_path: Path, content: bytes) -> None:
    db = tmp_path / "s.sqlite"
    db.write_bytes(content)
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_INVALID
    assert db.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sqlite", "s.sqlite.lock"]
    assert lock_path_for(db).read_text() == ""  # the lease was released


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_foreign_sqlite_database_is_store_invalid_and_left_untouched(tmp_path: Path, journal: str) -> None:
    db = tmp_path / "app.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(f"PRAGMA journal_mode={journal}")
    conn.execute("CREATE TABLE meta (id INTEGER PRIMARY KEY, schema_version INTEGER)")
    conn.execute("INSERT INTO meta VALUES (1, 1)")
    conn.close()
    before = snapshot_files(tmp_path)
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_INVALID
    assert "another application" in info.value.message
    after = snapshot_files(tmp_path)
    assert after.pop("app.db.lock") == b""
    assert after == before


def test_sqlite_file_with_our_application_id_but_no_meta_is_store_invalid(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("CREATE TABLE other (x)")
    conn.close()
    before = db.read_bytes()
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_INVALID
    assert db.read_bytes() == before


def test_a_directory_at_the_path_is_store_invalid(tmp_path: Path) -> None:
    (tmp_path / "dir.sqlite").mkdir()
    with pytest.raises(StoreError) as info:
        open_store(tmp_path / "dir.sqlite")
    assert info.value.code == STORE_INVALID


def test_an_empty_file_becomes_a_new_store(tmp_path: Path) -> None:
    db = tmp_path / "empty.sqlite"
    db.touch()
    store = open_store(db)
    assert store.commit(Commit(entries=[Entry("a", "main", None, "message", {})])) == 1
    store.close()


def test_missing_deep_parent_directories_are_created(tmp_path: Path) -> None:
    depth = (480 - len(str(tmp_path)) - len("/store.sqlite")) // 3  # as deep as SQLite's path limit allows
    db = tmp_path.joinpath(*[f"d{i % 10}" for i in range(depth)], "store.sqlite")
    assert depth > 50
    store = open_store(db)
    store.commit(Commit(entries=[Entry("a", "main", None, "message", {})]))
    store.close()
    assert [e.id for e in open_store(db).load().entries] == ["a"]


def test_a_path_beyond_sqlite_limit_is_refused_clearly_before_creating_anything(tmp_path: Path) -> None:
    db = tmp_path.joinpath(*["x" * 60] * 10, "store.sqlite")
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_INVALID and "SQLite accepts at most" in info.value.message
    assert list(tmp_path.iterdir()) == []


def test_a_stale_wal_of_a_deleted_database_is_not_replayed_into_a_new_store(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    store = open_store(db)
    store.commit(Commit(entries=[Entry("old", "main", None, "message", {})]))
    shutil.copy(f"{db}-wal", tmp_path / "saved-wal")
    store.close()
    db.unlink()
    shutil.copy(tmp_path / "saved-wal", f"{db}-wal")
    assert open_store(db).load().entries == []


def test_v1_fixture_is_migrated_with_its_open_operation_intact(tmp_path: Path) -> None:
    db = tmp_path / "v1.sqlite"
    shutil.copy(FIXTURES / "v1.sqlite", db)
    store = open_store(db)
    state = store.load()
    assert state.fence == 4  # the fixture was opened three times before
    assert state.last_seq == 7
    main = [(e.seq, e.kind) for e in state.entries if e.conversation_id == "main"]
    assert main == [(4, "message"), (5, "message"), (5, "tool_intent"), (6, "message"), (7, "fragment")]
    ids = [e.id for e in state.entries]
    assert all(e.parent_id is None or ids.index(e.parent_id) < ids.index(e.id) for e in state.entries)
    assert state.entries[2].payload["message"]["content"][0]["text"] == "Hello — ünïcode works too."
    op = state.registers["op:main"]
    assert (op.value["request_id"], op.value["phase"], op.value["step"], op.seq) == ("job-v1", "model", 1, 6)
    assert state.receipts["job-v1"].payload["status"] == "running"
    assert state.receipts["side-1"].payload["final"]["status"] == "completed"
    assert [u.record_id for u in state.usage] == ["side-1:0:0", "job-v1:0:0"]
    assert state.tasks["task-1"].payload["status"] == "waiting"
    conn = store._conn
    assert conn is not None
    assert conn.execute("SELECT schema_version FROM meta").fetchone()[0] == SCHEMA_VERSION
    store.close()
    fresh = open_store(tmp_path / "fresh.sqlite")
    fresh.close()
    assert schema_of(db) == schema_of(tmp_path / "fresh.sqlite")


async def test_v1_fixture_open_operation_resumes_through_the_runtime(
    tmp_path: Path, fake_server: FakeProviderServer
) -> None:
    """The v1 store was killed while the second model request of ``job-v1`` streamed: re-running
    ``job-v1`` on the migrated store continues from the committed fragment and completes, and the
    finished ``side-1`` returns its stored outcome without a model call."""
    db = tmp_path / "v1.sqlite"
    shutil.copy(FIXTURES / "v1.sqlite", db)
    (tmp_path / "README.md").write_text("# demo\n")
    options: dict[str, Any] = {
        "provider": "fake",
        "model": "fake-model",
        "base_url": fake_server.base_url,
        "api_key": "k",
        "api_kind": "openai-completions",
        "database_path": str(db),
        "workdir": str(tmp_path),
    }
    runtime = await create_agent(**options)
    try:
        assert runtime.pending_request_id == "job-v1"
        fake_server.enqueue([Text("README.md, a short readme."), Usage(input=150, output=8)])
        events = [event async for event in runtime.run(AgentInput(request_id="job-v1"))]
        transcript = runtime.read_transcript()
        assert runtime.pending_request_id is None
    finally:
        await runtime.close()
    assert [e.kind for e in events if isinstance(e, RetryEvent)] == ["recovery"]
    end = events[-1]
    assert isinstance(end, RunEndEvent) and end.status == "completed" and end.request_id == "job-v1"
    assert "README.md, a short readme." in end.text
    assert len(fake_server.requests) == 1  # the model was called once, to continue
    sent = json.dumps(fake_server.requests[0].body, ensure_ascii=False)
    for part in ("list the files", "call_ls_1", "README.md", "There is one file in the directory: "):
        assert part in sent, part
    assert transcript[-1]["role"] == "assistant"
    assert transcript[-1]["content"][-1]["text"] == "README.md, a short readme."
    side = await create_agent(**options, session_id="side")
    try:
        replay = [event async for event in side.run(AgentInput(request_id="side-1"))]
    finally:
        await side.close()
    assert len(replay) == 1 and isinstance(replay[0], RunEndEvent) and replay[0].replayed
    assert replay[0].text == "Hello — ünïcode works too." and len(fake_server.requests) == 1
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT schema_version FROM meta").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM registers WHERE key = 'op:main'").fetchone()[0] == 0
        status = json.loads(conn.execute("SELECT payload FROM receipts WHERE request_id = 'job-v1'").fetchone()[0])
        assert status["status"] == "completed"
    finally:
        conn.close()


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.sqlite")), ids=lambda p: p.name)
def test_every_saved_store_in_the_corpus_opens_and_loads(tmp_path: Path, fixture: Path) -> None:
    db = tmp_path / fixture.name
    shutil.copy(fixture, db)
    store = open_store(db)
    state = store.load()
    ids = {e.id for e in state.entries}
    assert all(e.parent_id is None or e.parent_id in ids for e in state.entries)
    assert store.commit(Commit()) == state.last_seq + 1
    store.close()


def test_a_newer_schema_version_is_refused_naming_both_versions(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    open_store(db).close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE meta SET schema_version = ?", (SCHEMA_VERSION + 5,))
    conn.close()
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_INVALID
    assert f"version {SCHEMA_VERSION + 5}" in info.value.message and f"({SCHEMA_VERSION})" in info.value.message
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT schema_version, fence FROM meta").fetchone() == (SCHEMA_VERSION + 5, 1)
    conn.close()


def schema_of(db: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name").fetchall()
        return [(t, n, " ".join(s.split())) for t, n, s in rows]
    finally:
        conn.close()


def test_wal_is_checkpointed_off_the_commit_path(tmp_path) -> None:
    """D1/perf: SQLite's automatic checkpoint is off (it used to land inside commits and double
    their cost as the WAL grew); every 500 commits a PASSIVE checkpoint copies the WAL into the
    database file on another thread, so the file holds the data and the WAL stays bounded."""
    from agentcore.harness.sqlite_store import CHECKPOINT_EVERY, SqliteStorage
    from agentcore.harness.storage import Commit, Entry

    path = tmp_path / "wal.sqlite"
    storage = SqliteStorage.open(path)
    try:
        assert storage._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        payload = {"text": "x" * 2000}
        before = path.stat().st_size
        for n in range(CHECKPOINT_EVERY):
            storage.commit(Commit(entries=[Entry(f"e{n}", "main", None, "fragment", payload)]))
        checkpointer = storage._checkpointer
        assert checkpointer is not None
        checkpointer.join(timeout=30)
        assert path.stat().st_size - before > CHECKPOINT_EVERY * 2000 // 2, "the pages reached the database file"
    finally:
        storage.close()
    reopened = SqliteStorage.open(path)
    try:
        assert len(reopened.load().entries) == CHECKPOINT_EVERY
    finally:
        reopened.close()
