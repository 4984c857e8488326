"""What makes a file an agent store, checked read-only before anything writes to it (SPEC D4, D6).

Opening and importing refuse a foreign or damaged store with ``store_invalid`` *before* they
write anything, so the file and its ``-wal``/``-journal`` sidecars stay byte-for-byte as they
were. The checks, cheapest first:

1. Without SQLite (``classify_store_file``): the raw 100-byte header (SQLite's magic, our
   ``application_id``, a valid page size, a file shorter than its header says) and the logs
   next to it. A zero-byte file is a new store only when no non-empty ``-wal``/``-journal`` lies
   next to it (SQLite would silently delete that WAL); a hot rollback journal means another
   program wrote the file (agentcore stores are always in WAL mode) and rolling it back would
   be a write.
2. Through a connection that can neither create nor change any file (``readonly_connection``):
   the schema version, the exact schema objects of that version (a trigger, view or extra
   table or index was not made by agentcore, and a trigger would run on every commit), the
   ``meta`` row, the column types (import: every column; open: the seqs, the payloads by
   decoding them), ``meta.last_seq`` against the highest seq of every table (a
   rewound counter would hand out a seq twice), and every payload (valid JSON, an object).

Reading every row also reads every table page, so a corrupt page is found here. Index pages
are not read: a corrupt index surfaces at the first commit that touches it, and a failed
commit changes nothing.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import stat
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentcore.errors import STORE_INVALID, STORE_LOCKED, StoreError
from agentcore.harness.commit_codec import decode_objects
from agentcore.harness.sqlite_schema import (
    APPLICATION_ID,
    HEADER_SIZE,
    MIGRATIONS,
    SCHEMA_V1,
    SQLITE_MAGIC,
    check_supported,
    read_schema_version,
)
from agentcore.harness.storage import Entry, Receipt, Register, StoreState, TaskRow, UsageRow

Where = str | os.PathLike[str]
FileKind = Literal["empty", "agent"]
SchemaObject = tuple[str, str, str, str | None]  # type, name, table, normalised SQL

_BATCH = 4096
_JOURNAL_SUFFIXES = ("-wal", "-journal")

# Per table: the typed columns, a key to name a bad row by, and the read that builds the state.
_COLUMNS: dict[str, tuple[str, str]] = {
    "entries": (
        "id",
        "typeof(id) = 'text' AND typeof(conversation_id) = 'text' AND typeof(parent_id) IN ('text', 'null') "
        "AND typeof(kind) = 'text' AND typeof(payload) = 'text' AND typeof(seq) = 'integer'",
    ),
    "registers": ("key", "typeof(key) = 'text' AND typeof(value) = 'text' AND typeof(seq) = 'integer'"),
    "usage": (
        "record_id",
        "typeof(record_id) = 'text' AND typeof(conversation_id) = 'text' AND typeof(payload) = 'text' "
        "AND typeof(seq) = 'integer'",
    ),
    "receipts": (
        "request_id",
        "typeof(request_id) = 'text' AND typeof(conversation_id) = 'text' AND typeof(payload) = 'text' "
        "AND typeof(seq) = 'integer'",
    ),
    "tasks": (
        "task_id",
        "typeof(task_id) = 'text' AND typeof(conversation_id) = 'text' AND typeof(payload) = 'text' "
        "AND typeof(seq) = 'integer'",
    ),
}
_READS: dict[str, tuple[str, int, str]] = {  # table -> (query, payload column, what a row is called)
    "entries": ("SELECT id, conversation_id, parent_id, kind, payload, seq FROM entries ORDER BY pos", 4, "entry"),
    "registers": ("SELECT key, value, seq FROM registers ORDER BY seq, rowid", 1, "register"),
    "usage": ("SELECT record_id, conversation_id, payload, seq FROM usage ORDER BY pos", 2, "usage row"),
    "receipts": (
        "SELECT request_id, conversation_id, payload, seq FROM receipts ORDER BY seq, rowid",
        2,
        "receipt",
    ),
    "tasks": ("SELECT task_id, conversation_id, payload, seq FROM tasks ORDER BY seq, rowid", 2, "task"),
}


@dataclass(slots=True, frozen=True)
class CheckedStore:
    """What a successful check saw: the snapshot the caller may rely on (``state`` when asked)."""

    version: int
    fence: int
    last_seq: int
    state: StoreState | None


# -- 1. without SQLite ---------------------------------------------------------------------


def classify_store_file(fd: int, path: Path, where: Where) -> FileKind:
    """``empty`` (zero bytes, no log next to it: nothing to protect) or ``agent``; anything
    else raises ``store_invalid``. Reads through ``fd`` (the caller's lock descriptor), so no
    other descriptor of the file is opened and closed."""
    size = os.fstat(fd).st_size
    wal = _log_size(path, "-wal", where)
    journal = _log_size(path, "-journal", where)
    _log_size(path, "-shm", where)  # a FIFO there would block SQLite's open forever
    if size == 0:
        for suffix, log_size in (("-wal", wal), ("-journal", journal)):
            if log_size:
                raise _invalid(
                    where,
                    f"a zero-byte database next to a {log_size}-byte log ({path}{suffix}) is not a new store: "
                    "it is left untouched; restore the database file or remove the log",
                )
        return "empty"
    header = os.pread(fd, HEADER_SIZE, 0)
    if len(header) < HEADER_SIZE or not header.startswith(SQLITE_MAGIC):
        raise _invalid(where, "not a SQLite database (corrupt or foreign file)")
    app_id = int.from_bytes(header[68:72], "big", signed=True)
    if app_id != APPLICATION_ID:
        raise _invalid(where, f"a SQLite database of another application (application_id {app_id})")
    if journal and _journal_is_hot(Path(f"{path}-journal")):
        raise _invalid(
            where,
            f"an unfinished rollback journal ({path}-journal) lies next to the store: another program wrote it; "
            "agentcore leaves both untouched",
        )
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
        raise _invalid(where, f"corrupt header (page size {page_size})")
    if not wal:  # with WAL content the main file may legitimately lag behind its header
        pages = int.from_bytes(header[28:32], "big")
        if header[92:96] == header[24:28] and pages * page_size > size:
            raise _invalid(where, f"truncated: the header says {pages * page_size} bytes, the file has {size}")
    return "agent"


def _log_size(path: Path, suffix: str, where: Where) -> int:
    try:
        st = os.stat(f"{path}{suffix}")
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise _invalid(where, f"cannot inspect {path}{suffix} ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise _invalid(where, f"{path}{suffix} is not a regular file")
    return st.st_size


def _journal_is_hot(journal: Path) -> bool:
    """SQLite's test: a non-empty journal whose header is not zeroed would be rolled back."""
    try:
        fd = os.open(journal, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return True
    try:
        return os.pread(fd, 1, 0) not in (b"", b"\x00")
    finally:
        os.close(fd)


# -- 2. through a read-only connection -----------------------------------------------------


@contextlib.contextmanager
def readonly_connection(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection that creates, checkpoints, rolls back and deletes nothing.

    Without WAL content the main file is the whole store: ``immutable=1`` reads it with no
    locks and no sidecars. With WAL content and its ``-shm``: ``mode=ro&readonly_shm=1`` reads
    the log and writes neither file. A WAL without ``-shm`` needs one built; the connection
    creates it, and it is removed again afterwards (it is a cache of the WAL, no data).
    """
    wal = os.path.getsize(f"{path}-wal") if os.path.exists(f"{path}-wal") else 0
    shm = Path(f"{path}-shm")
    shm_existed = shm.exists()
    if not wal:
        params = "immutable=1"
    elif shm_existed:
        params = "mode=ro&readonly_shm=1"
    else:
        params = "mode=ro"
    quoted = urllib.parse.quote(os.fsencode(os.path.abspath(path)), safe="/")
    conn = sqlite3.connect(f"file:{quoted}?{params}", uri=True, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only = 1")
        yield conn
    finally:
        conn.close()
        if wal and not shm_existed:
            shm.unlink(missing_ok=True)


def check_store(path: Path, *, where: Where, read_state: bool) -> CheckedStore:
    """Run every check of this module's step 2 on the store at ``path`` (whose store-file lock
    the caller holds) in one read snapshot. ``read_state`` keeps the decoded rows (what opening
    needs anyway); otherwise they are checked and dropped batch by batch (import)."""
    try:
        with readonly_connection(path) as conn:
            conn.execute("BEGIN")
            version = read_schema_version(conn, where)
            check_supported(version, where)
            check_schema_objects(conn, version, where)
            fence, last_seq = _check_meta(conn, where)
            _check_columns(conn, last_seq, where, all_columns=not read_state)
            state = read_state_rows(conn, "", fence, where) if read_state else None
            if state is None:
                for table in _READS:
                    for _ in _decoded(conn, table, where):
                        pass
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise sqlite_error(exc, where, "the database is damaged or unreadable") from exc
    return CheckedStore(version, fence, last_seq, state)


def check_schema_objects(conn: sqlite3.Connection, version: int, where: Where) -> None:
    """The store holds exactly the tables and indexes agentcore creates at ``version``."""
    actual = _schema_of(conn)
    expected = expected_schema(version)
    if actual == expected:
        return
    by_name = {obj[1]: obj for obj in expected}
    problems: list[str] = []
    for obj in sorted(actual - expected, key=lambda o: o[1]):
        kind, name, table = obj[0], obj[1], obj[2]
        if name in by_name and by_name[name][0] == kind:
            problems.append(f"{kind} {name!r} is defined differently")
        else:
            problems.append(f"unknown {kind} {name!r}" + (f" on {table!r}" if table != name else ""))
    names = {obj[1] for obj in actual}
    missing = sorted(expected - actual, key=lambda o: o[1])
    problems.extend(f"missing {obj[0]} {obj[1]!r}" for obj in missing if obj[1] not in names)
    raise _invalid(
        where,
        f"schema objects agentcore does not create at version {version}: {'; '.join(problems)}",
        schema_problems=problems,
    )


@functools.cache
def expected_schema(version: int) -> frozenset[SchemaObject]:
    """The schema objects of a store at ``version``: the frozen v1 DDL plus its migrations,
    built in memory (so the expectation can never drift from what creation does)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for statement in SCHEMA_V1:
            conn.execute(statement)
        for step in MIGRATIONS[: version - 1]:
            step(conn)
        return _schema_of(conn)
    finally:
        conn.close()


def _schema_of(conn: sqlite3.Connection) -> frozenset[SchemaObject]:
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    return frozenset(
        (kind, name, table, " ".join(sql.split()) if isinstance(sql, str) else None)
        for kind, name, table, sql in rows
        if not str(name).startswith("sqlite_stat")  # ANALYZE statistics: SQLite's own, planning only
    )


def _check_meta(conn: sqlite3.Connection, where: Where) -> tuple[int, int]:
    rows = conn.execute("SELECT id, fence, store_id, created, last_seq FROM meta").fetchall()
    if len(rows) != 1:
        raise _invalid(where, f"the meta table must hold one row, it holds {len(rows)}")
    _, fence, store_id, created, last_seq = rows[0]
    for name, value in (("fence", fence), ("last_seq", last_seq)):
        if not isinstance(value, int) or value < 0:
            raise _invalid(where, f"meta.{name} is {value!r}, not a non-negative integer")
    for name, value in (("store_id", store_id), ("created", created)):
        if not isinstance(value, str):
            raise _invalid(where, f"meta.{name} is {value!r}, not text")
    return fence, last_seq


def _check_columns(conn: sqlite3.Connection, last_seq: int, where: Where, *, all_columns: bool) -> None:
    """Every seq is an integer in ``0..last_seq``. ``all_columns`` (import) also checks the
    type of every key and payload column; opening leaves those to the read itself (a payload
    that is not text fails to decode), which keeps a 100k-entry open one scan cheaper."""
    for table, (key, typed) in _COLUMNS.items():
        typed = typed if all_columns else "typeof(seq) = 'integer'"
        top, bottom, bad = conn.execute(
            f"SELECT max(seq), min(seq), count(*) FILTER (WHERE NOT ({typed})) FROM {table}"
        ).fetchone()
        if bad:
            (name,) = conn.execute(f"SELECT {key} FROM {table} WHERE NOT ({typed}) LIMIT 1").fetchone()
            raise _invalid(where, f"{table}: row {name!r} has a value of the wrong type ({bad} such rows)")
        if top is not None and top > last_seq:
            raise _invalid(
                where,
                f"meta.last_seq is {last_seq} but {table} holds seq {top}: the next commit would reuse a seq",
                table=table,
            )
        if bottom is not None and bottom < 0:
            raise _invalid(where, f"{table} holds a negative seq ({bottom})", table=table)


# -- reading the state (also what ``SqliteStorage.load`` does) ----------------------------


def read_state_rows(conn: sqlite3.Connection, owner_id: str, fence: int, where: Where) -> StoreState:
    """Every committed row, decoded, in seq order (the caller holds a read transaction).

    A payload that is not a JSON object raises ``store_invalid`` naming its table and key,
    never a raw ``JSONDecodeError``.
    """
    (last_seq,) = conn.execute("SELECT last_seq FROM meta WHERE id = 1").fetchone()
    entries: list[Entry] = []
    for rows, values in _decoded(conn, "entries", where):
        entries.extend(Entry(i, c, p, k, v, s) for (i, c, p, k, _, s), v in zip(rows, values, strict=True))
    registers: dict[str, Register] = {}
    for rows, values in _decoded(conn, "registers", where):
        registers.update((k, Register(k, v, s)) for (k, _, s), v in zip(rows, values, strict=True))
    usage: list[UsageRow] = []
    for rows, values in _decoded(conn, "usage", where):
        usage.extend(UsageRow(r, c, v, s) for (r, c, _, s), v in zip(rows, values, strict=True))
    receipts: dict[str, Receipt] = {}
    for rows, values in _decoded(conn, "receipts", where):
        receipts.update((r, Receipt(r, c, v, s)) for (r, c, _, s), v in zip(rows, values, strict=True))
    tasks: dict[str, TaskRow] = {}
    for rows, values in _decoded(conn, "tasks", where):
        tasks.update((t, TaskRow(t, c, v, s)) for (t, c, _, s), v in zip(rows, values, strict=True))
    return StoreState(owner_id, fence, last_seq, entries, registers, usage, receipts, tasks)


def _decoded(conn: sqlite3.Connection, table: str, where: Where) -> Iterator[tuple[list[Any], list[Any]]]:
    query, at, what = _READS[table]
    cursor = conn.execute(query)
    while rows := cursor.fetchmany(_BATCH):
        yield rows, decode_objects([row[at] for row in rows], _row_namer(table, what, rows), where)


def _row_namer(table: str, what: str, rows: list[Any]) -> Callable[[int], str]:
    return lambda n: f"{table}: {what} {rows[n][0]!r}"


# -- errors ----------------------------------------------------------------------------------


def sqlite_error(exc: sqlite3.Error, where: Where, reason: str | None = None) -> StoreError:
    """A SQLite failure as a typed error: busy → ``store_locked``, anything else ``store_invalid``."""
    name = getattr(exc, "sqlite_errorname", "")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StoreError(STORE_LOCKED, f"{where}: the database is busy ({exc})", details={"sqlite_error": name})
    text = f"{reason} ({exc})" if reason else str(exc)
    return StoreError(STORE_INVALID, f"{where}: {text}", details={"sqlite_error": name, "path": os.fspath(where)})


def _invalid(where: Where, reason: str, **details: object) -> StoreError:
    return StoreError(STORE_INVALID, f"{os.fspath(where)}: {reason}", details={"path": os.fspath(where), **details})
