"""Opening a store that does not exist yet: the file this open creates is complete, and only a
file this open made itself skips the read-only check — any file that was already on disk, or
that someone else put at the path meanwhile, is checked (SPEC D4, D6, D8; DURABILITY: check
first, write after)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentcore.errors import STORE_INVALID, StoreError
from agentcore.harness import SCHEMA_VERSION, Commit, Entry, SqliteStorage, sqlite_store
from agentcore.harness.sqlite_schema import APPLICATION_ID, create_store_file
from agentcore.harness.store_check import check_store, expected_schema


class CheckCounter:
    """``check_store`` as ``SqliteStorage.open`` calls it, counting the calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = sqlite_store.check_store

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(sqlite_store, "check_store", counted)


def test_a_store_this_open_creates_is_not_read_back_but_a_reopen_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """D8: the new file's content is known (made under both locks); the file on disk at the
    next open is not, and is checked before anything writes to it."""
    checks = CheckCounter(monkeypatch)
    db = tmp_path / "s.sqlite"
    store = SqliteStorage.open(db)
    assert checks.calls == 0
    assert store.created
    state = store.load()
    assert (state.last_seq, state.entries, state.registers, state.usage) == (0, [], {}, [])
    store.commit(Commit(entries=[Entry("e1", "c", None, "message", {"n": 1})]))
    store.close()
    again = SqliteStorage.open(db)
    assert checks.calls == 1
    assert not again.created
    assert [e.id for e in again.load().entries] == ["e1"]
    again.close()


def test_a_new_store_file_is_a_complete_wal_agent_store(tmp_path: Path) -> None:
    """D4: what creation writes passes every read-only check (exact schema objects of this
    version, the meta row, our application id), is in WAL mode and intact; no temp file stays."""
    db = tmp_path / "s.sqlite"
    SqliteStorage.open(db).close()
    checked = check_store(db, where=str(db), read_state=True)
    assert (checked.version, checked.fence, checked.last_seq) == (SCHEMA_VERSION, 1, 0)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        objects = {(t, n) for t, n in conn.execute("SELECT type, name FROM sqlite_master")}
        assert objects == {(t, n) for t, n, _table, _sql in expected_schema(SCHEMA_VERSION)}
        (store_id,) = conn.execute("SELECT store_id FROM meta").fetchone()
    finally:
        conn.close()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("s.sqlite")) == []
    other = tmp_path / "t.sqlite"
    SqliteStorage.open(other).close()
    with sqlite3.connect(other) as conn:
        assert conn.execute("SELECT store_id FROM meta").fetchone()[0] != store_id  # each store its own id


def test_a_store_linked_into_place_by_someone_else_while_opening_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """D6: an import may link a finished store at a free path without the path lock; when that
    file wins the race, this open did not make it and must check it (here: it carries a
    trigger agentcore never creates, so it is refused and left as it was)."""
    db = tmp_path / "s.sqlite"
    foreign = tmp_path / "foreign.sqlite"
    create_store_file(foreign)
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TRIGGER t AFTER INSERT ON entries BEGIN SELECT 1; END")
    conn.close()
    before = foreign.read_bytes()

    def linked_meanwhile(path: Path) -> tuple[int, int]:
        os.link(foreign, path)  # the importer's link wins; ours then finds the path taken
        os.unlink(foreign)
        raise FileExistsError(str(path))

    monkeypatch.setattr(sqlite_store, "create_store_file", linked_meanwhile)
    with pytest.raises(StoreError) as caught:
        SqliteStorage.open(db)
    assert caught.value.code == STORE_INVALID
    assert "trigger" in str(caught.value)
    assert db.read_bytes() == before


def test_every_new_store_image_is_stamped_with_its_own_identity() -> None:
    """D4: images made one after another in one process (from its one schema template) each
    carry a store id of their own and their creation time, and pass the read-only check."""
    from datetime import UTC, datetime

    from agentcore.harness.sqlite_schema import new_store_image

    stamps = []
    for _ in range(3):
        image = bytearray(new_store_image())
        assert image[18:20] == b"\x02\x02"  # marked WAL
        image[18:20] = b"\x01\x01"  # so an in-memory connection can read it
        conn = sqlite3.connect(":memory:")
        try:
            conn.deserialize(bytes(image))
            stamps.append(conn.execute("SELECT store_id, created, fence, last_seq FROM meta").fetchone())
        finally:
            conn.close()
    assert len({store_id for store_id, *_ in stamps}) == 3
    assert all(len(store_id) == 32 and int(store_id, 16) >= 0 for store_id, *_ in stamps)
    now = datetime.now(UTC)
    assert all(abs((now - datetime.fromisoformat(created)).total_seconds()) < 60 for _, created, *_ in stamps)
    assert {(fence, last_seq) for *_, fence, last_seq in stamps} == {(0, 0)}
