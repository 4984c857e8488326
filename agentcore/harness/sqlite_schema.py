"""The SQLite file format of an agent store: its schema, creation and migrations.

A file is an agent store when its 100-byte SQLite header carries our ``application_id`` and it
holds exactly the schema objects of its version; ``store_check`` verifies that (read-only)
before anything writes to a file.

A new store is built in memory (every header field in its image), marked WAL, written whole to
a temporary file, fsynced, and only then linked into place. A crash during creation
leaves at most a stray temp file, never a half-made store under the real name.

Migrations: ``MIGRATIONS[n - 1]`` upgrades version ``n`` to ``n + 1``. A fresh store runs the
frozen v1 DDL and then every migration, so new and migrated stores have one shape. Migrations
run inside the caller's transaction and must carry open operations' state along (DURABILITY
pitfalls), never only finished data.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from agentcore.errors import STORE_INVALID, StoreError

APPLICATION_ID = 0x41474E54  # "AGNT" in the SQLite header, offset 68
SQLITE_MAGIC = b"SQLite format 3\x00"
HEADER_SIZE = 100
SQLITE_MAX_PATHNAME = 512  # MAX_PATHNAME of SQLite's unix VFS

# Frozen: the schema of version 1 exactly as released. Never edit; add a migration instead.
SCHEMA_V1: tuple[str, ...] = (
    """CREATE TABLE meta (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        schema_version INTEGER NOT NULL,
        fence INTEGER NOT NULL,
        store_id TEXT NOT NULL,
        created TEXT NOT NULL,
        last_seq INTEGER NOT NULL
    )""",
    """CREATE TABLE entries (
        pos INTEGER PRIMARY KEY,
        seq INTEGER NOT NULL,
        id TEXT NOT NULL UNIQUE,
        conversation_id TEXT NOT NULL,
        parent_id TEXT,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL
    )""",
    """CREATE TABLE registers (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        seq INTEGER NOT NULL
    )""",
    """CREATE TABLE usage (
        pos INTEGER PRIMARY KEY,
        record_id TEXT NOT NULL UNIQUE,
        conversation_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        seq INTEGER NOT NULL
    )""",
    """CREATE TABLE receipts (
        request_id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        seq INTEGER NOT NULL
    )""",
    """CREATE TABLE tasks (
        task_id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        seq INTEGER NOT NULL
    )""",
)

Migration = Callable[[sqlite3.Connection], None]


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """v2: per-conversation indexes, so one session's transcript or ledger reads without a scan
    (Studio views, offline cancel). Pure additions: open operations are unaffected."""
    conn.execute("CREATE INDEX entries_by_conversation ON entries (conversation_id, pos)")
    conn.execute("CREATE INDEX usage_by_conversation ON usage (conversation_id, pos)")


MIGRATIONS: tuple[Migration, ...] = (_v1_to_v2,)
SCHEMA_VERSION = len(MIGRATIONS) + 1


def check_path_length(path: Path) -> None:
    """SQLite's unix VFS refuses paths over 512 bytes (its sidecar names add up to 8): say so
    clearly, before any directory is created, instead of "unable to open database file"."""
    resolved = os.path.realpath(path)
    if len(os.fsencode(resolved)) + len("-journal") > SQLITE_MAX_PATHNAME:
        raise _invalid(
            path,
            f"the resolved path is {len(os.fsencode(resolved))} bytes; SQLite accepts at most "
            f"{SQLITE_MAX_PATHNAME - len('-journal')}",
        )


def read_schema_version(conn: sqlite3.Connection, path: str | os.PathLike[str]) -> int:
    """The store's schema version, or ``store_invalid`` if it lacks our ``meta`` row."""
    try:
        row = conn.execute("SELECT schema_version FROM meta WHERE id = 1").fetchone()
    except sqlite3.DatabaseError as exc:
        raise _invalid(path, f"not an agent store ({exc})") from None
    if row is None or not isinstance(row[0], int):
        raise _invalid(path, "not an agent store (no meta row)")
    return int(row[0])


def check_supported(version: int, path: str | os.PathLike[str]) -> None:
    if version > SCHEMA_VERSION:
        raise _invalid(
            path,
            f"store schema version {version} is newer than this agentcore supports ({SCHEMA_VERSION}); "
            "upgrade agentcore to open it",
            store_version=version,
            supported_version=SCHEMA_VERSION,
        )
    if version < 1:
        raise _invalid(path, f"store schema version {version} is not valid")


def migrate(conn: sqlite3.Connection, from_version: int) -> None:
    """Run every migration after ``from_version`` (inside the caller's transaction)."""
    for step in MIGRATIONS[from_version - 1 :]:
        step(conn)
    conn.execute("UPDATE meta SET schema_version = ? WHERE id = 1", (SCHEMA_VERSION,))


#: The SQLite header's file format write and read versions (offsets 18 and 19): 1 is the
#: rollback journal, 2 is WAL (https://www.sqlite.org/fileformat2.html#file_format_version_numbers).
_HEADER_FORMAT_VERSIONS = slice(18, 20)
_WAL_FORMAT = b"\x02\x02"


def create_store_file(path: Path) -> tuple[int, int]:
    """Create a fresh, empty agent store at ``path``; ``FileExistsError`` if a file appeared
    there meanwhile (an import links finished stores without the path lock). Returns the new
    file's identity (device, inode): an opener that then holds the lock of that very file knows
    its whole content (``new_store_image``) without reading it back.

    The caller holds the path lock. Leftover ``-wal``/``-shm``/``-journal`` files of a deleted
    database are removed first: SQLite would otherwise replay a stale WAL into the new file.
    The image is written whole and fsynced under a temporary name, then linked into place, so a
    crash leaves at most a stray temp file, never a half-made store under the real name.
    """
    for suffix in ("-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    tmp = path.parent / f".agentcore-{uuid.uuid4().hex[:12]}.new"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            image = memoryview(new_store_image())
            while image:
                image = image[os.write(fd, image) :]
            os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        link_new_file(tmp, path)
        fsync_dir(path.parent)
        return st.st_dev, st.st_ino
    finally:
        tmp.unlink(missing_ok=True)


def new_store_image() -> bytes:
    """The bytes of a new, empty agent store at ``SCHEMA_VERSION`` with a store id and creation
    time of its own: the process's ``_schema_image`` (the frozen v1 DDL and every migration, so
    new and migrated stores have one shape) with its meta row stamped, in memory — no journal,
    no file — and marked as a WAL database in its header, as ``PRAGMA journal_mode=WAL`` would
    mark it (agentcore stores are always in WAL mode). Stamping one row of a copy costs a
    third of running the DDL and migrations again for every store a host opens."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.deserialize(_schema_image())  # a copy: the template stays as it was
        conn.execute(
            "UPDATE meta SET store_id = ?, created = ? WHERE id = 1",
            (uuid.uuid4().hex, datetime.now(UTC).isoformat(timespec="seconds")),
        )
        image = bytearray(conn.serialize())
    finally:
        conn.close()
    image[_HEADER_FORMAT_VERSIONS] = _WAL_FORMAT
    return bytes(image)


@functools.cache
def _schema_image() -> bytes:
    """An empty store at ``SCHEMA_VERSION`` whose meta row has no identity yet (empty store id
    and creation time), in SQLite's rollback format (so it deserializes). Built once per
    process: it depends only on this code's DDL and migrations."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("BEGIN IMMEDIATE")
        for statement in SCHEMA_V1:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO meta (id, schema_version, fence, store_id, created, last_seq) VALUES (1, 1, 0, '', '', 0)"
        )
        migrate(conn, 1)
        conn.execute("COMMIT")
        return conn.serialize()
    finally:
        conn.close()


def link_new_file(tmp: Path, path: Path) -> None:
    """Move the finished file ``tmp`` to ``path``, never overwriting: ``FileExistsError`` if taken."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError:  # file systems without hard links: the owner lease still serializes agent writers
        if path.exists() or path.is_symlink():
            raise FileExistsError(str(path)) from None
        os.rename(tmp, path)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _invalid(path: str | os.PathLike[str], reason: str, **details: object) -> StoreError:
    return StoreError(STORE_INVALID, f"{os.fspath(path)}: {reason}", details={"path": os.fspath(path), **details})
