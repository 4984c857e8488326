"""Export and import of SQLite agent stores (SPEC D6)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from agentcore.errors import STORE_EXISTS, STORE_INVALID, STORE_LOCKED, StoreError
from agentcore.harness import (
    Commit,
    Entry,
    RegisterWrite,
    SqliteStorage,
    SqliteStorageFactory,
    StoreState,
    UsageRow,
    export_agent_database,
    import_agent_database,
    lock_path_for,
)


def open_store(path: Path) -> SqliteStorage:
    return SqliteStorageFactory(path).open()[0]


def fill(store: SqliteStorage, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        store.commit(
            Commit(
                entries=[Entry(f"e{n}", "main", f"e{n - 1}" if n else None, "message", {"n": n, "body": "y" * 500})],
                registers=[RegisterWrite("head", {"entry": f"e{n}"})],
                usage=[UsageRow(f"u{n}", "main", {"tokens": n})],
            )
        )


def content(state: StoreState) -> StoreState:
    return dataclasses.replace(state, owner_id="", fence=0)


def test_export_copies_committed_wal_pages_and_not_an_uncommitted_transaction(tmp_path: Path) -> None:
    source = tmp_path / "src.sqlite"
    store = open_store(source)
    assert store._conn is not None
    store._conn.execute("PRAGMA wal_autocheckpoint = 0")  # keep every commit in the WAL
    fill(store, 50)
    expected = store.load()
    store._lease.release()  # like a crashed owner: its connection (and its WAL) stay behind
    writer = sqlite3.connect(source, isolation_level=None)
    writer.execute("PRAGMA cache_size = 2")  # force the open transaction's pages into the WAL
    writer.execute("BEGIN IMMEDIATE")
    for n in range(2000):
        writer.execute(
            "INSERT INTO entries (seq, id, conversation_id, kind, payload) VALUES (99, ?, 'x', 'm', ?)",
            (f"uncommitted-{n}", json.dumps({"pad": "z" * 2000})),
        )
    writer.execute("UPDATE meta SET last_seq = 99")
    wal_size = Path(f"{source}-wal").stat().st_size
    assert wal_size > 2_000_000, "the uncommitted transaction should have spilled into the WAL"
    main_only = tmp_path / "main-file-only.sqlite"
    main_only.write_bytes(source.read_bytes())  # the main file alone lacks the WAL's commits
    assert sqlite3.connect(main_only).execute("SELECT count(*) FROM entries").fetchone()[0] < 50

    destination = tmp_path / "out" / "copy.sqlite"
    assert export_agent_database(database_path=source, destination=destination) == destination
    writer.execute("ROLLBACK")
    writer.close()
    store.close()

    check = sqlite3.connect(destination)
    assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    check.close()
    copy = open_store(destination)
    assert content(copy.load()) == content(expected)
    copy.close()


def test_export_refuses_a_store_that_is_open(tmp_path: Path) -> None:
    source = tmp_path / "src.sqlite"
    store = open_store(source)
    with pytest.raises(StoreError) as info:
        export_agent_database(database_path=source, destination=tmp_path / "copy.sqlite")
    assert info.value.code == STORE_LOCKED
    assert not (tmp_path / "copy.sqlite").exists()
    store.close()


@pytest.mark.parametrize("kind", ["plain-file", "agent-store"])
def test_existing_destination_is_store_exists_and_untouched(tmp_path: Path, kind: str) -> None:
    source = tmp_path / "src.sqlite"
    store = open_store(source)
    fill(store, 3)
    store.close()
    destination = tmp_path / "dest.sqlite"
    if kind == "plain-file":
        destination.write_bytes(b"precious user data")
    else:
        other = open_store(destination)
        fill(other, 1)
        other.close()
    before = destination.read_bytes()
    for call in (
        lambda: export_agent_database(database_path=source, destination=destination),
        lambda: import_agent_database(source=source, database_path=destination),
    ):
        with pytest.raises(StoreError) as info:
            call()
        assert info.value.code == STORE_EXISTS
        assert destination.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".agentcore-")]


@pytest.mark.parametrize("content_bytes", [b"hello, not a database", None], ids=["foreign-file", "foreign-sqlite"])
def test_foreign_source_is_store_invalid_and_untouched(tmp_path: Path, content_bytes: bytes | None) -> None:
    source = tmp_path / "foreign.db"
    if content_bytes is None:
        conn = sqlite3.connect(source)
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
        conn.close()
    else:
        source.write_bytes(content_bytes)
    before = source.read_bytes()
    with pytest.raises(StoreError) as info:
        export_agent_database(database_path=source, destination=tmp_path / "copy.sqlite")
    assert info.value.code == STORE_INVALID
    assert source.read_bytes() == before
    assert not (tmp_path / "copy.sqlite").exists()
    with pytest.raises(StoreError) as info:
        import_agent_database(source=tmp_path / "missing.sqlite", database_path=tmp_path / "copy.sqlite")
    assert info.value.code == STORE_INVALID


def test_the_owner_lock_is_not_copied(tmp_path: Path) -> None:
    source = tmp_path / "src.sqlite"
    store = open_store(source)
    fill(store, 2)
    store.close()
    destination = tmp_path / "copy.sqlite"
    export_agent_database(database_path=source, destination=destination)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "copy.sqlite",
        "copy.sqlite.lock",
        "src.sqlite",
        "src.sqlite.lock",
    ]
    assert lock_path_for(destination).read_text() == "" and lock_path_for(source).read_text() == ""
    copy = open_store(destination)  # immediately openable: no lease came along with the copy
    original = open_store(source)
    assert copy.load().fence == original.load().fence  # each store bumped its own counter once
    copy.close()
    original.close()


def test_import_round_trip_resumes_where_the_export_stopped(tmp_path: Path) -> None:
    source = tmp_path / "a" / "src.sqlite"
    store = open_store(source)
    fill(store, 20)
    expected = store.load()
    store.close()
    exported = export_agent_database(database_path=source, destination=tmp_path / "exports" / "snap.sqlite")
    installed = import_agent_database(source=exported, database_path=tmp_path / "b" / "deep" / "restored.sqlite")
    restored = open_store(installed)
    assert content(restored.load()) == content(expected)
    fill(restored, 1, start=20)
    assert restored.load().last_seq == expected.last_seq + 1
    restored.close()
