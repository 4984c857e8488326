"""Reading a store's committed rows for the Trace, from a sequence number on (SPEC W8, W11).

The Trace is built from the store, never from events, so a reload or a restarted Studio shows
the same timeline. A reader returns the rows committed after ``after_seq`` (entries and ledger
rows are append-only; registers, receipts and task rows are upserted, so a row changed after
``after_seq`` comes back with its new value), which is what makes rebuilding after every commit
cheap: a caller keeps ``last_seq`` and asks only for what is new.

Readers never take the owner lock and never write: a SQLite file is read through a read-only
connection (WAL readers never block the owner); a PostgreSQL store with plain ``SELECT``s in
one read-only snapshot; any other store (memory, a custom ``storage=``) through its owner's
``load()``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agentcore.errors import STORE_INVALID, InputValidationError, StoreError
from agentcore.harness.storage import AgentStorage, Entry, StoreState
from agentcore.harness.store_check import readonly_connection, sqlite_error
from agentcore.trace.rows import COLUMNS, KEYS, TABLES, TraceRecords, TraceSource, to_records


def open_trace_source(source: Any) -> TraceSource:
    """A reader for ``source``: a SQLite store path, a ``postgresql://`` URL naming a store, an
    open ``AgentStorage`` (the owner's: SQLite and PostgreSQL are then read on a connection of
    their own), an ``AgentRuntime`` (its store), a ``StoreState`` or a ``TraceSource``.
    ``input_validation`` (field ``source``) for anything else."""
    if hasattr(source, "read") and hasattr(source, "label"):
        return source  # type: ignore[no-any-return]
    if isinstance(source, StoreState):
        return _StateSource(lambda: source, "state")
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        if text.startswith(("postgresql://", "postgres://")):
            from agentcore.harness.postgres_target import target_from_url
            from agentcore.trace.records_postgres import PostgresSource

            return PostgresSource(target_from_url(text, option="source"))
        return SqliteSource(Path(text))
    storage = _storage_of(source)
    if storage is not None:
        kind = getattr(storage, "kind", "")
        if kind == "sqlite":
            return SqliteSource(Path(storage.path), label=storage.label)  # type: ignore[attr-defined]
        if kind == "postgresql":
            from agentcore.trace.records_postgres import PostgresSource

            return PostgresSource(storage.target)  # type: ignore[attr-defined]
        return _StateSource(storage.load, storage.label)
    raise InputValidationError(
        f"source must be a store path, a postgresql:// URL, a storage or a runtime (got {type(source).__name__})",
        field="source",
    )


def read_trace_records(source: Any, after_seq: int = 0) -> TraceRecords:
    """The rows of ``source`` (see ``open_trace_source``) committed after ``after_seq``."""
    return open_trace_source(source).read(after_seq)


def _storage_of(source: Any) -> AgentStorage | None:
    if hasattr(source, "load") and hasattr(source, "commit") and hasattr(source, "label"):
        return source  # type: ignore[no-any-return]
    log = getattr(source, "log", None)  # an AgentRuntime
    storage = getattr(log, "storage", None)
    return storage if storage is not None and hasattr(storage, "load") else None


class _StateSource:
    """A store read through ``load()`` (memory, custom backends): the whole state each time."""

    def __init__(self, load: Callable[[], StoreState], label: str) -> None:
        self._load = load
        self.label = label

    def read(self, after_seq: int = 0) -> TraceRecords:
        return TraceRecords.from_state(self._load(), self.label, after_seq)


class SqliteSource:
    """A SQLite store file, read without its owner lock through a read-only connection.

    Entries and ledger rows are found from ``after_seq`` with a binary search over their
    position (``pos`` rises with ``seq``; there is no index on ``seq``), so an incremental read
    costs O(log n + new rows); the upserted tables are small and read with ``seq > after_seq``.
    """

    def __init__(self, path: Path, *, label: str | None = None) -> None:
        self.path = path
        self.label = label or os.fspath(path)

    def read(self, after_seq: int = 0) -> TraceRecords:
        if not self.path.is_file():
            raise StoreError(STORE_INVALID, f"{self.label}: no such store file", details={"path": self.label})
        try:
            with _reader(self.path) as conn:
                conn.execute("BEGIN")
                try:
                    return self._read(conn, after_seq)
                finally:
                    conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise sqlite_error(exc, self.label, "the store cannot be read") from exc

    def _read(self, conn: sqlite3.Connection, after_seq: int) -> TraceRecords:
        row = conn.execute("SELECT last_seq FROM meta WHERE id = 1").fetchone()
        if row is None:
            raise StoreError(STORE_INVALID, f"{self.label}: not an agent store (no meta row)")
        out = TraceRecords(self.label, after_seq, int(row[0]))
        for table in TABLES:
            if table in ("entries", "usage"):
                start = _first_pos(conn, table, after_seq)
                query = f"SELECT {COLUMNS[table]} FROM {table} WHERE pos > ? AND seq > ? ORDER BY pos"
                rows = conn.execute(query, (start, after_seq)).fetchall()
            else:
                query = f"SELECT {COLUMNS[table]} FROM {table} WHERE seq > ? ORDER BY seq, rowid"
                rows = conn.execute(query, (after_seq,)).fetchall()
            setattr(out, table, to_records(table, rows, self.label))
        return out

    def entries_by_id(self, ids: list[str]) -> dict[str, Entry]:
        """The entries with these ids (a span's details), read through the unique id index."""
        if not ids:
            return {}
        with _reader(self.path) as conn:
            marks = ",".join("?" * len(ids))
            rows = conn.execute(f"SELECT {COLUMNS['entries']} FROM entries WHERE id IN ({marks})", ids).fetchall()
        return {e.id: e for e in to_records("entries", rows, self.label)}

    def row(self, table: str, key: str) -> Any:
        """One receipt or task row by its key (None when there is none)."""
        with _reader(self.path) as conn:
            rows = conn.execute(f"SELECT {COLUMNS[table]} FROM {table} WHERE {KEYS[table]} = ?", (key,)).fetchall()
        found = to_records(table, rows, self.label)
        return found[0] if found else None


def _first_pos(conn: sqlite3.Connection, table: str, after_seq: int) -> int:
    """The largest ``pos`` whose row (and every row before it) was committed at or before
    ``after_seq``: rows after it are the new ones. ``pos`` and ``seq`` rise together."""
    if after_seq <= 0:
        return 0
    (top,) = conn.execute(f"SELECT coalesce(max(pos), 0) FROM {table}").fetchone()
    lo, hi = 0, int(top)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        row = conn.execute(f"SELECT seq FROM {table} WHERE pos <= ? ORDER BY pos DESC LIMIT 1", (mid,)).fetchone()
        if row is None or int(row[0]) <= after_seq:
            lo = mid
        else:
            hi = mid - 1
    return lo


@contextlib.contextmanager
def _reader(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection that changes nothing. While an owner has the store open its ``-shm`` exists
    and a plain ``mode=ro`` reader shares it (as every WAL reader does); otherwise the store
    check's read-only connection, which creates no sidecar file that stays behind."""
    if Path(f"{path}-shm").exists():
        quoted = urllib.parse.quote(os.fsencode(os.path.abspath(path)), safe="/")
        conn = sqlite3.connect(f"file:{quoted}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout = 5000")
            conn.execute("PRAGMA query_only = 1")
            yield conn
        finally:
            conn.close()
    else:
        with readonly_connection(path) as conn:
            yield conn


__all__ = ["SqliteSource", "TraceRecords", "TraceSource", "open_trace_source", "read_trace_records"]
