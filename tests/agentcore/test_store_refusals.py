"""Check first, write after (SPEC D4; README "Durability"): every store that opening refuses is
refused with ``store_invalid`` naming what is wrong, and the file and its logs (``-wal``,
``-shm``, ``-journal``) stay byte-for-byte as they were — also when a crashed owner left
committed transactions in the WAL. A zero-byte file is a new store only with no log content."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from agentcore.errors import STORE_INVALID, StoreError
from agentcore.harness import (
    SCHEMA_VERSION,
    Commit,
    Entry,
    Receipt,
    RegisterWrite,
    SqliteStorage,
    SqliteStorageFactory,
    TaskRow,
    UsageRow,
)


def open_store(path: Path) -> SqliteStorage:
    return SqliteStorageFactory(path).open()[0]


def make_store(db: Path, entries: int = 300) -> None:
    """A closed store with every table filled; enough entries for a multi-page b-tree."""
    store = open_store(db)
    parent = None
    for n in range(entries):
        store.commit(
            Commit(
                entries=[Entry(f"e{n}", "main", parent, "message", {"n": n, "text": "z" * 200})],
                registers=[RegisterWrite("head", {"entry": f"e{n}"})],
                usage=[UsageRow(f"u{n}", "main", {"tokens": n})],
            )
        )
        parent = f"e{n}"
    store.commit(
        Commit(
            receipts=[Receipt("job", "main", {"status": "running"})],
            tasks=[TaskRow("t1", "main", {"status": "waiting"})],
        )
    )
    store.close()


def reason(error: StoreError, db: Path) -> str:
    """The message without its leading path (test directories are named after the tests)."""
    assert error.message.startswith(f"{db}: "), error.message
    return error.message.removeprefix(f"{db}: ")


def fingerprint(directory: Path) -> dict[str, str]:
    """Every file except the path lock (which the refused opener itself takes), hashed."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if not p.name.endswith(".lock")
    }


def write(db: Path, *statements: str, crashed: bool) -> None:
    """Run ``statements`` as another program would. ``crashed``: leave them in the WAL, as a
    process killed before any checkpoint does (files copied while the writer still holds them)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    for statement in statements:
        conn.execute(statement)
    saved = {p: p.read_bytes() for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm"))} if crashed else {}
    conn.close()
    for path, data in saved.items():
        path.write_bytes(data)
    assert Path(f"{db}-wal").exists() == crashed
    if crashed:
        assert Path(f"{db}-wal").stat().st_size > 0


def entries_root_page(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'entries'").fetchone()[0])
    finally:
        conn.close()


def corrupt_page(db: Path, page: int) -> None:
    data = bytearray(db.read_bytes())
    data[(page - 1) * 4096 : page * 4096] = b"\xa5" * 4096
    db.write_bytes(bytes(data))


LOGICAL_DAMAGE: dict[str, tuple[tuple[str, ...], str]] = {  # statements, what the message names
    "too-new-schema": ((f"UPDATE meta SET schema_version = {SCHEMA_VERSION + 3}",), f"version {SCHEMA_VERSION + 3}"),
    "corrupt-register": (("UPDATE registers SET value = '{\"entry\": \"e2' WHERE key = 'head'",), "register 'head'"),
    "corrupt-entry": (("UPDATE entries SET payload = 'not json' WHERE id = 'e7'",), "entry 'e7'"),
    "corrupt-usage": (("UPDATE usage SET payload = '{' WHERE record_id = 'u3'",), "usage row 'u3'"),
    "corrupt-receipt": (("UPDATE receipts SET payload = '{\"status\": ' WHERE request_id = 'job'",), "receipt 'job'"),
    "corrupt-task": (("UPDATE tasks SET payload = 'NaN]' WHERE task_id = 't1'",), "task 't1'"),
    "payload-not-an-object": (("UPDATE registers SET value = '[1, 2]' WHERE key = 'head'",), "not a JSON object"),
    "blob-payload": (("UPDATE entries SET payload = x'5b5d' WHERE id = 'e5'",), "entry 'e5' is not a JSON object"),
    "seq-not-an-integer": (("UPDATE entries SET seq = 'soon' WHERE id = 'e4'",), "row 'e4'"),
    "rewound-last-seq": (("UPDATE meta SET last_seq = 10",), "last_seq is 10"),
    "trigger": (
        ("CREATE TRIGGER audit AFTER INSERT ON entries BEGIN UPDATE meta SET fence = 0; END",),
        "unknown trigger 'audit'",
    ),
    "view": (("CREATE VIEW v AS SELECT * FROM entries",), "unknown view 'v'"),
    "extra-table": (("CREATE TABLE notes (x)",), "unknown table 'notes'"),
    "extra-index": (("CREATE INDEX by_kind ON entries (kind)",), "unknown index 'by_kind'"),
    "missing-index": (("DROP INDEX entries_by_conversation",), "missing index 'entries_by_conversation'"),
    "no-meta-row": (("DELETE FROM meta",), "no meta row"),
}


@pytest.mark.parametrize("crashed", [False, True], ids=["closed", "crashed-in-wal"])
@pytest.mark.parametrize("damage", LOGICAL_DAMAGE)
def test_a_damaged_store_is_refused_naming_the_damage_and_left_byte_identical(
    tmp_path: Path, damage: str, crashed: bool
) -> None:
    db = tmp_path / "s.sqlite"
    make_store(db)
    statements, named = LOGICAL_DAMAGE[damage]
    write(db, *statements, crashed=crashed)
    before = fingerprint(tmp_path)
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_INVALID
    assert named in reason(info.value, db)
    assert fingerprint(tmp_path) == before


def test_corrupt_table_pages_are_refused_before_the_fence_is_bumped(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    make_store(db, entries=2000)
    corrupt_page(db, entries_root_page(db))
    before = fingerprint(tmp_path)
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_INVALID and "damaged" in reason(info.value, db)
    assert fingerprint(tmp_path) == before


@pytest.mark.parametrize("cut", [3 * 4096, 1000], ids=["last-pages", "not-page-aligned"])
def test_a_truncated_store_is_refused_and_left_byte_identical(tmp_path: Path, cut: int) -> None:
    """The pages lost are at the end (table and index pages); meta and the schema survive."""
    db = tmp_path / "s.sqlite"
    make_store(db, entries=2000)
    data = db.read_bytes()
    db.write_bytes(data[:-cut])
    before = fingerprint(tmp_path)
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_INVALID and reason(info.value, db).startswith("truncated")
    assert fingerprint(tmp_path) == before


@pytest.mark.parametrize("crashed", [False, True], ids=["closed", "crashed-in-wal"])
def test_a_foreign_application_id_is_refused_and_left_byte_identical(tmp_path: Path, crashed: bool) -> None:
    db = tmp_path / "s.sqlite"
    make_store(db)
    write(db, "PRAGMA application_id = 7", "UPDATE meta SET fence = fence + 1", crashed=crashed)
    if crashed:  # the header change is in the WAL: make the main file say so too, as a checkpoint would
        data = bytearray(db.read_bytes())
        data[68:72] = (7).to_bytes(4, "big")
        db.write_bytes(bytes(data))
    before = fingerprint(tmp_path)
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_INVALID and "another application" in reason(info.value, db)
    assert fingerprint(tmp_path) == before


def test_a_hot_rollback_journal_is_refused_and_both_files_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    make_store(db)
    Path(f"{db}-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + b"\x00" * 504)
    before = fingerprint(tmp_path)
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_INVALID and "rollback journal" in reason(info.value, db)
    assert fingerprint(tmp_path) == before


@pytest.mark.parametrize("log", ["-wal", "-journal"])
def test_a_zero_byte_store_next_to_a_non_empty_log_is_refused_not_reset(tmp_path: Path, log: str) -> None:
    db = tmp_path / "s.sqlite"
    make_store(db, entries=5)
    if log == "-wal":
        write(db, "INSERT INTO receipts VALUES ('late', 'main', '{}', 1)", crashed=True)
    else:
        Path(f"{db}-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + b"\x01" * 504)
    db.write_bytes(b"")
    before = fingerprint(tmp_path)
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_INVALID
    assert f"{db}{log}" in info.value.message and "zero-byte" in reason(info.value, db)
    assert fingerprint(tmp_path) == before


def test_a_zero_byte_file_with_only_empty_logs_becomes_a_new_store(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    db.write_bytes(b"")
    Path(f"{db}-wal").write_bytes(b"")
    Path(f"{db}-shm").write_bytes(b"\x00" * 32768)
    store = open_store(db)
    assert store.load().entries == []
    assert store.commit(Commit(entries=[Entry("a", "main", None, "message", {})])) == 1
    store.close()
    assert [e.id for e in open_store(db).load().entries] == ["a"]


def test_a_wal_without_its_shm_is_read_and_the_temporary_shm_is_removed_on_refusal(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    make_store(db)
    write(db, "UPDATE registers SET value = 'oops' WHERE key = 'head'", crashed=True)
    Path(f"{db}-shm").unlink()
    before = fingerprint(tmp_path)
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert "register 'head'" in reason(info.value, db)  # the damage exists only in the WAL: it was read
    assert fingerprint(tmp_path) == before


GOOD_WAL: dict[str, Callable[[Path], None]] = {
    "closed": lambda db: None,
    "crashed-in-wal": lambda db: write(db, "INSERT INTO receipts VALUES ('late', 'main', '{}', 0)", crashed=True),
}


@pytest.mark.parametrize("state", GOOD_WAL)
def test_a_sound_store_opens_with_what_the_check_read(tmp_path: Path, state: str) -> None:
    """The rows the check read are the first ``load()``: nothing committed is missing."""
    db = tmp_path / "s.sqlite"
    make_store(db, entries=20)
    GOOD_WAL[state](db)
    store = open_store(db)
    first = store.load()
    second = store.load()  # read again from the file
    assert first.entries == second.entries and first.registers == second.registers
    assert first.receipts == second.receipts and first.fence == second.fence == 2
    assert ("late" in first.receipts) == (state == "crashed-in-wal")
    assert store.commit(Commit(entries=[Entry("x", "main", "e19", "message", {})])) == first.last_seq + 1
    store.close()


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_fifo_in_place_of_a_log_is_refused_without_blocking(tmp_path: Path, suffix: str) -> None:
    db = tmp_path / "s.sqlite"
    make_store(db, entries=3)
    os.mkfifo(f"{db}{suffix}")
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_INVALID and "not a regular file" in reason(info.value, db)


def test_a_fifo_in_place_of_the_store_is_refused_without_blocking(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    os.mkfifo(db)
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_INVALID and "not a regular file" in reason(info.value, db)
