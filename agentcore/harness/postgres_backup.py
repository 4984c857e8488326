"""Moving a store between PostgreSQL and a SQLite file (SPEC D6): backup, restore, migration.

Export (PostgreSQL → a new SQLite file) and import (a SQLite file → a new PostgreSQL store)
keep the promises of ``backup``'s file-to-file copy:

- The source's owner lease is taken first, so an owner that has it open refuses the copy
  (``store_locked``) and nobody writes the source meanwhile; the copy is one consistent
  snapshot (a repeatable-read transaction on PostgreSQL; the file lock on SQLite).
- The target must not exist (``store_exists``): a file at the destination path, or a store of
  that name in the schema. It is never overwritten and never seen half-written: the SQLite
  file is built next to the destination and linked into place (holding its store-file lock);
  the PostgreSQL store's row and every one of its rows are inserted in one transaction.
- Import checks the source exactly as opening it would (``store_check``) and refuses text
  PostgreSQL cannot store (a NUL in an id), naming the row, before it connects. Export copies
  what there is. Seqs, the fence, ``last_seq``, the order of rows and every payload's text are
  carried over unchanged, so a round trip gives back the same store.
- On any failure nothing is created: no file, no directory, no store row. Export writes
  nothing to the database (not even the schema); import may install the schema.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from agentcore.errors import STORE_EXISTS, STORE_INVALID, StoreError
from agentcore.harness.backup_paths import exists_error, make_parents, no_store_error
from agentcore.harness.lease import StoreFileLock
from agentcore.harness.postgres_schema import ensure_schema, installed_version
from agentcore.harness.postgres_store import StoreQueries, find_store, take_lease
from agentcore.harness.postgres_target import PostgresTarget, connect, unavailable
from agentcore.harness.sqlite_schema import check_path_length, create_store_file, fsync_dir, fsync_file, link_new_file
from agentcore.harness.store_check import check_store, classify_store_file, readonly_connection, sqlite_error

# table -> its columns as both backends name them, in SQLite order (seq included)
_COLUMNS: dict[str, tuple[str, ...]] = {
    "entries": ("id", "conversation_id", "parent_id", "kind", "payload", "seq"),
    "registers": ("key", "value", "seq"),
    "usage": ("record_id", "conversation_id", "payload", "seq"),
    "receipts": ("request_id", "conversation_id", "payload", "seq"),
    "tasks": ("task_id", "conversation_id", "payload", "seq"),
}
_SQLITE_ORDER = {
    "entries": "pos", "usage": "pos", "registers": "seq, rowid", "receipts": "seq, rowid", "tasks": "seq, rowid"
}
_WHAT = {"entries": "entry", "registers": "register", "usage": "usage row", "receipts": "receipt", "tasks": "task"}

Rows = dict[str, list[tuple[Any, ...]]]


def export_postgres_store(target: PostgresTarget, destination: str | os.PathLike[str]) -> Path:
    """Copy the PostgreSQL store ``target`` names into a new SQLite store at ``destination``."""
    dest = Path(destination)
    check_path_length(dest)
    if dest.exists() or dest.is_symlink():
        raise exists_error(dest)
    conn = connect(target)
    try:
        try:
            queries = StoreQueries(target.schema)
            store_id = (
                find_store(conn, queries, target.store)
                if installed_version(conn, target.schema, target.label) is not None
                else None
            )
            if store_id is None:
                raise StoreError(
                    STORE_INVALID, f"{target.label}: no agent store of this name", details={"label": target.label}
                )
            take_lease(conn, target, store_id)  # closing the connection ends it
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                meta = conn.execute(
                    sql.SQL("SELECT fence, last_seq, store_uuid FROM {}.stores WHERE store_id = %s").format(
                        sql.Identifier(target.schema)
                    ),
                    (store_id,),
                ).fetchone()
                assert meta is not None
                rows = {table: _pg_rows(conn, target.schema, table, store_id) for table in _COLUMNS}
        except psycopg.OperationalError as exc:
            raise unavailable(target, exc, "export") from exc
        _write_sqlite_store(dest, rows, fence=int(meta[0]), last_seq=int(meta[1]), store_uuid=str(meta[2]))
    finally:
        conn.close()
    return dest


def import_postgres_store(source: str | os.PathLike[str], target: PostgresTarget) -> str:
    """Install a checked copy of the SQLite store at ``source`` as the new PostgreSQL store
    ``target`` names; return the store's label."""
    path = Path(source)
    real = Path(os.path.realpath(path))
    try:
        source_lock = StoreFileLock.acquire(real)
    except FileNotFoundError:
        raise no_store_error(path) from None
    try:
        if classify_store_file(source_lock.fd, real, path) != "agent":
            raise no_store_error(path)
        check_store(real, where=path, read_state=False)
        try:
            meta, rows = _sqlite_rows(real)
        except sqlite3.Error as exc:
            raise sqlite_error(exc, path, "the database is damaged or unreadable") from exc
        _check_storable(rows, path)
        conn = connect(target)
        try:
            ensure_schema(conn, target.schema, target.label)
            with conn.transaction():
                _insert_store(conn, target, meta, rows)
        except psycopg.OperationalError as exc:
            raise unavailable(target, exc, "import") from exc
        except psycopg.Error as exc:
            raise StoreError(STORE_INVALID, f"{target.label}: import rejected ({exc})") from exc
        finally:
            conn.close()
    finally:
        source_lock.release()
    return target.label


# -- PostgreSQL side ---------------------------------------------------------------------------


def _pg_rows(conn: psycopg.Connection[Any], schema: str, table: str, store_id: int) -> list[tuple[Any, ...]]:
    query = sql.SQL("SELECT {} FROM {}.{} WHERE store_id = %s ORDER BY seq, idx").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in _COLUMNS[table]), sql.Identifier(schema), sql.Identifier(table)
    )
    return conn.execute(query, (store_id,)).fetchall()


def _insert_store(conn: psycopg.Connection[Any], target: PostgresTarget, meta: tuple[Any, ...], rows: Rows) -> None:
    schema = sql.Identifier(target.schema)
    fence, last_seq, store_uuid = meta
    created = conn.execute(
        sql.SQL(
            "INSERT INTO {}.stores (name, fence, last_seq, store_uuid, created) VALUES (%s, %s, %s, %s, now()) "
            "ON CONFLICT (name) DO NOTHING RETURNING store_id"
        ).format(schema),
        (target.store, fence, last_seq, store_uuid),
    ).fetchone()
    if created is None:
        raise StoreError(
            STORE_EXISTS,
            f"{target.label}: a store of this name already exists and is never overwritten",
            details={"label": target.label},
        )
    store_id = int(created[0])
    for table, columns in _COLUMNS.items():
        if not rows[table]:
            continue
        copy_sql = sql.SQL("COPY {}.{} ({}) FROM STDIN").format(
            schema,
            sql.Identifier(table),
            sql.SQL(", ").join(sql.Identifier(c) for c in ("store_id", "idx", *columns)),
        )
        with conn.cursor().copy(copy_sql) as copy:
            for idx, row in _indexed(rows[table]):
                copy.write_row((store_id, idx, *row))


def _indexed(rows: list[tuple[Any, ...]]) -> Iterator[tuple[int, tuple[Any, ...]]]:
    """Each row with its position inside its commit (``idx``), rows being in commit order."""
    seq, idx = None, 0
    for row in rows:
        idx = idx + 1 if row[-1] == seq else 1
        seq = row[-1]
        yield idx, row


# -- SQLite side -------------------------------------------------------------------------------


def _sqlite_rows(path: Path) -> tuple[tuple[Any, ...], Rows]:
    with readonly_connection(path) as src:
        src.execute("BEGIN")
        try:
            meta = src.execute("SELECT fence, last_seq, store_id FROM meta WHERE id = 1").fetchone()
            rows = {
                table: src.execute(
                    f"SELECT {', '.join(columns)} FROM {table} ORDER BY {_SQLITE_ORDER[table]}"
                ).fetchall()
                for table, columns in _COLUMNS.items()
            }
        finally:
            src.execute("COMMIT")
    return tuple(meta), rows


def _check_storable(rows: Rows, where: Path) -> None:
    """PostgreSQL text cannot hold NUL (payloads are JSON, where NUL is escaped; ids are not)."""
    for table, table_rows in rows.items():
        for row in table_rows:
            if any(isinstance(value, str) and "\x00" in value for value in row):
                raise StoreError(
                    STORE_INVALID,
                    f"{where}: {table}: {_WHAT[table]} {row[0]!r} contains a NUL character, which PostgreSQL "
                    "text cannot store; nothing was imported",
                    details={"path": str(where), "table": table},
                )


def _write_sqlite_store(dest: Path, rows: Rows, *, fence: int, last_seq: int, store_uuid: str) -> None:
    created = make_parents(dest.parent)
    tmp = dest.parent / f".agentcore-{uuid.uuid4().hex[:12]}.copy"
    linked = False
    lock: StoreFileLock | None = None
    try:
        create_store_file(tmp)
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            # Nobody sees the file before it is fsynced and linked: build it without a journal
            # (one write per page instead of WAL + checkpoint), then switch back to WAL.
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("PRAGMA synchronous = OFF")
            conn.execute("PRAGMA cache_size = -65536")
            conn.execute("BEGIN IMMEDIATE")
            for table, columns in _COLUMNS.items():
                conn.executemany(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                    rows[table],
                )
            conn.execute(
                "UPDATE meta SET fence = ?, last_seq = ?, store_id = ? WHERE id = 1", (fence, last_seq, store_uuid)
            )
            conn.execute("COMMIT")
            conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.Error as exc:
            raise sqlite_error(exc, dest, "writing the copy failed") from exc
        finally:
            conn.close()  # the last connection: SQLite checkpoints the WAL into the file
        fsync_file(tmp)
        lock = StoreFileLock.acquire(tmp)  # an owner opening the destination now waits for us
        try:
            link_new_file(tmp, dest)
        except FileExistsError:
            raise exists_error(dest) from None
        linked = True
        fsync_dir(dest.parent)
    finally:
        if lock is not None:
            lock.release()
        for leftover in (tmp, *(Path(f"{tmp}{suffix}") for suffix in ("-wal", "-shm", "-journal"))):
            leftover.unlink(missing_ok=True)
        if not linked:
            for directory in reversed(created):
                with contextlib.suppress(OSError):
                    directory.rmdir()
