"""Export and import of SQLite agent stores (SPEC D6)."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
from collections.abc import Callable
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

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "stores"


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


def test_the_owner_lock_is_not_copied_and_no_lock_is_left_at_either_end(tmp_path: Path) -> None:
    source = tmp_path / "src.sqlite"
    store = open_store(source)
    fill(store, 2)
    store.close()
    destination = tmp_path / "copy.sqlite"
    export_agent_database(database_path=source, destination=destination)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.sqlite", "src.sqlite", "src.sqlite.lock"]
    assert lock_path_for(source).read_text() == ""  # left by the source's own owner, released
    copy = open_store(destination)  # immediately openable: no lease came along with the copy
    original = open_store(source)
    assert copy.load().fence == original.load().fence  # each store bumped its own counter once
    copy.close()
    original.close()


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("direction", ["export", "import"])
def test_a_copy_adds_only_the_destination_file(tmp_path: Path, direction: str) -> None:
    """No ``.lock``, temporary file or log is left next to the source or the destination."""
    source = tmp_path / "in" / "exported.sqlite"
    store = open_store(tmp_path / "in" / "live.sqlite")
    fill(store, 3)
    store.close()
    export_agent_database(database_path=tmp_path / "in" / "live.sqlite", destination=source)
    before = tree(tmp_path)
    destination = tmp_path / "out" / "deep" / "copy.sqlite"
    if direction == "export":
        export_agent_database(database_path=source, destination=destination)
    else:
        import_agent_database(source=source, database_path=destination)
    assert tree(tmp_path) == sorted([*before, "out", "out/deep", "out/deep/copy.sqlite"])


def _owned_source(tmp_path: Path) -> tuple[Path, Path, list[SqliteStorage]]:
    source = tmp_path / "src.sqlite"
    store = open_store(source)
    fill(store, 2)
    return source, tmp_path / "new" / "dir" / "copy.sqlite", [store]


def _taken_destination(tmp_path: Path) -> tuple[Path, Path, list[SqliteStorage]]:
    source = tmp_path / "src.sqlite"
    store = open_store(source)
    fill(store, 2)
    store.close()
    destination = tmp_path / "taken.sqlite"
    destination.write_bytes(b"precious")
    return source, destination, []


def _foreign_source(tmp_path: Path) -> tuple[Path, Path, list[SqliteStorage]]:
    source = tmp_path / "notes.txt"
    source.write_text("not a store")
    return source, tmp_path / "new" / "dir" / "copy.sqlite", []


def _too_new_source(tmp_path: Path) -> tuple[Path, Path, list[SqliteStorage]]:
    source = tmp_path / "src.sqlite"
    open_store(source).close()
    conn = sqlite3.connect(source, isolation_level=None)
    conn.execute("UPDATE meta SET schema_version = 99")
    conn.close()
    return source, tmp_path / "new" / "dir" / "copy.sqlite", []


@pytest.mark.parametrize(
    ("setup", "code"),
    [
        (_owned_source, STORE_LOCKED),
        (_taken_destination, STORE_EXISTS),
        (_foreign_source, STORE_INVALID),
        (_too_new_source, STORE_INVALID),
    ],
    ids=["source-owned", "destination-exists", "foreign-source", "too-new-source"],
)
@pytest.mark.parametrize("direction", ["export", "import"])
def test_a_refused_copy_leaves_no_file_or_directory_behind(
    tmp_path: Path,
    setup: Callable[[Path], tuple[Path, Path, list[SqliteStorage]]],
    code: str,
    direction: str,
) -> None:
    source, destination, owners = setup(tmp_path)
    before = tree(tmp_path)
    with pytest.raises(StoreError) as info:
        if direction == "export":
            export_agent_database(database_path=source, destination=destination)
        else:
            import_agent_database(source=source, database_path=destination)
    assert info.value.code == code
    assert tree(tmp_path) == before
    for owner in owners:
        owner.close()


@pytest.mark.parametrize("alias", ["symlink", "hard-link"])
def test_export_through_an_alias_of_an_open_store_is_refused(tmp_path: Path, alias: str) -> None:
    source = tmp_path / "src.sqlite"
    store = open_store(source)
    fill(store, 2)
    other = tmp_path / "other-name.sqlite"
    if alias == "symlink":
        other.symlink_to(source)
    else:
        os.link(source, other)
    with pytest.raises(StoreError) as info:
        export_agent_database(database_path=other, destination=tmp_path / "copy.sqlite")
    assert info.value.code == STORE_LOCKED and f"pid {os.getpid()}" in info.value.message
    assert not (tmp_path / "copy.sqlite").exists()
    fill(store, 1, start=2)  # the owner is untouched
    store.close()


IMPORT_DAMAGE: dict[str, tuple[str, str]] = {  # statement run on the source, what the refusal names
    "trigger": (
        "CREATE TRIGGER bump AFTER INSERT ON entries BEGIN UPDATE meta SET last_seq = last_seq + 1; END",
        "unknown trigger 'bump'",
    ),
    "view": ("CREATE VIEW everything AS SELECT * FROM entries", "unknown view 'everything'"),
    "extra-table": ("CREATE TABLE extra (x)", "unknown table 'extra'"),
    "extra-index": ("CREATE INDEX by_payload ON entries (payload)", "unknown index 'by_payload'"),
    "changed-table": ("ALTER TABLE registers ADD COLUMN note TEXT", "table 'registers' is defined differently"),
    "rewound-last-seq": ("UPDATE meta SET last_seq = 2", "last_seq is 2"),
    "corrupt-register": ("UPDATE registers SET value = '{broken' WHERE key = 'head'", "register 'head'"),
    "corrupt-entry": ("UPDATE entries SET payload = '' WHERE id = 'e3'", "entry 'e3'"),
    "corrupt-usage": ("UPDATE usage SET payload = '{\"tokens\": }' WHERE record_id = 'u1'", "usage row 'u1'"),
    "corrupt-receipt": ("INSERT INTO receipts VALUES ('r1', 'main', 'x', 1)", "receipt 'r1'"),
    "corrupt-task": ("INSERT INTO tasks VALUES ('t1', 'main', '[', 1)", "task 't1'"),
    "payload-not-an-object": ("UPDATE entries SET payload = '\"text\"' WHERE id = 'e0'", "not a JSON object"),
    "blob-payload": ("UPDATE entries SET payload = x'7b7d' WHERE id = 'e1'", "row 'e1'"),
}


@pytest.mark.parametrize("damage", IMPORT_DAMAGE)
def test_import_refuses_a_source_agentcore_did_not_write_and_creates_nothing(tmp_path: Path, damage: str) -> None:
    source = tmp_path / "upload" / "src.sqlite"
    store = open_store(source)
    fill(store, 5)
    store.close()
    statement, named = IMPORT_DAMAGE[damage]
    conn = sqlite3.connect(source, isolation_level=None)
    conn.execute(statement)
    conn.close()
    source_bytes = source.read_bytes()
    before = tree(tmp_path)
    with pytest.raises(StoreError) as info:
        import_agent_database(source=source, database_path=tmp_path / "sessions" / "s1" / "store.sqlite")
    assert info.value.code == STORE_INVALID
    assert info.value.message.startswith(f"{source}: ") and named in info.value.message.removeprefix(f"{source}: ")
    assert tree(tmp_path) == before  # no destination, no directory, no temporary file, no lock
    assert source.read_bytes() == source_bytes


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


def test_names_that_are_not_utf8_or_look_like_uri_syntax_open_export_and_import(tmp_path: Path) -> None:
    """The read-only checks reach the file through a SQLite URI: the name is percent-encoded
    byte by byte, so ``?``, ``#``, ``%`` and bytes that are not UTF-8 name the right file."""
    name = tmp_path / os.fsdecode(b"caf\xe9 ?mode=ro#1%.sqlite")
    store = open_store(name)
    fill(store, 3)
    store.close()
    exported = export_agent_database(database_path=name, destination=tmp_path / os.fsdecode(b"out\xff.sqlite"))
    installed = import_agent_database(source=exported, database_path=tmp_path / "in" / os.fsdecode(b"s\xfe#.sqlite"))
    restored = open_store(installed)
    assert [e.id for e in restored.load().entries] == ["e0", "e1", "e2"]
    restored.close()


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.sqlite")), ids=lambda p: p.name)
def test_every_saved_store_in_the_corpus_can_be_imported(tmp_path: Path, fixture: Path) -> None:
    installed = import_agent_database(source=fixture, database_path=tmp_path / "restored.sqlite")
    store = open_store(installed)
    assert store.load().entries
    store.close()
