"""Export and import of an agent store (SPEC D6).

SQLite to SQLite is described below. With ``database_url=`` instead of ``database_path=`` the
store on the PostgreSQL side is exported to, or imported from, a SQLite file with the same
guarantees (``postgres_backup``; psycopg is loaded only then).

Both directions are one operation, "copy a store to a path that does not exist yet":

1. take the owner lock of the source: its store-file lock, keyed on the file's identity, so an
   owner that opened it under any name refuses the copy (``store_locked``) and nobody writes it
   meanwhile. No lock file is created next to the source.
2. verify the source is an agent store by its raw header before SQLite opens it
   (``store_invalid`` otherwise; a foreign file is left untouched).
3. copy a consistent snapshot with SQLite's backup API, which includes committed pages still in
   the WAL, into a temporary file next to the destination. The source is read through a
   connection that writes nothing (``store_check.readonly_connection``).
4. import only: check the copy exactly as opening would (schema objects, meta, seqs, every
   payload; ``store_check``), since an imported file comes from elsewhere. Export copies what
   its owner wrote, damaged or not: a backup should not refuse to save what there is.
5. take the copy's store-file lock (the destination's owner lock) and link the copy into place,
   so the destination is never overwritten (``store_exists``) and never seen half-written, and
   an owner opening it meanwhile gets ``store_locked`` until the copy is finished.

On success only the destination appears; on any failure nothing does: the temporary file and
any directories this call created are removed. No ``.lock`` file is left next to either path
(the destination's is created by its first owner). The functions are synchronous (a 100 MB
copy takes a fraction of a second); async callers use ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from pathlib import Path
from typing import overload

from agentcore.errors import InputValidationError
from agentcore.harness.backup_paths import exists_error, make_parents, no_store_error
from agentcore.harness.lease import StoreFileLock
from agentcore.harness.postgres_target import PostgresTarget
from agentcore.harness.sqlite_schema import (
    check_path_length,
    check_supported,
    fsync_dir,
    fsync_file,
    link_new_file,
    read_schema_version,
)
from agentcore.harness.store_check import check_store, classify_store_file, readonly_connection, sqlite_error


def export_agent_database(
    *,
    database_path: str | os.PathLike[str] | None = None,
    destination: str | os.PathLike[str],
    database_url: str | None = None,
) -> Path:
    """Copy the store at ``database_path`` (a SQLite file) or ``database_url`` (a PostgreSQL
    store) to a new SQLite file at ``destination`` (which must not exist); return it."""
    if _one_source(database_path, database_url) == "database_url":
        from agentcore.harness.postgres_backup import export_postgres_store

        return export_postgres_store(_postgres_target(database_url), destination)
    assert database_path is not None
    return _copy_store(Path(database_path), Path(destination), validate=False)


@overload
def import_agent_database(*, source: str | os.PathLike[str], database_path: str | os.PathLike[str]) -> Path: ...
@overload
def import_agent_database(*, source: str | os.PathLike[str], database_url: str) -> str: ...
def import_agent_database(
    *,
    source: str | os.PathLike[str],
    database_path: str | os.PathLike[str] | None = None,
    database_url: str | None = None,
) -> Path | str:
    """Install a checked copy of the exported SQLite store ``source`` at ``database_path`` (a
    file that must not exist; returns its path) or as the PostgreSQL store ``database_url`` names
    (a store name not yet used; returns its label). A source that opening would refuse is
    refused here, and nothing is created."""
    if _one_source(database_path, database_url) == "database_url":
        from agentcore.harness.postgres_backup import import_postgres_store

        return import_postgres_store(source, _postgres_target(database_url))
    assert database_path is not None
    return _copy_store(Path(source), Path(database_path), validate=True)


def _one_source(database_path: object, database_url: object) -> str:
    if (database_path is None) == (database_url is None):
        raise InputValidationError("pass exactly one of database_path and database_url", field="database_url")
    return "database_url" if database_url is not None else "database_path"


def _postgres_target(database_url: object) -> PostgresTarget:
    from agentcore.harness.postgres_target import require_driver, target_from_url

    require_driver("database_url")
    return target_from_url(database_url, option="database_url")


def _copy_store(source: Path, target: Path, *, validate: bool) -> Path:
    if _same_file(source, target):
        raise exists_error(target)
    check_path_length(target)
    real_source = Path(os.path.realpath(source))
    with contextlib.ExitStack() as stack:
        try:
            source_lock = StoreFileLock.acquire(real_source)
        except FileNotFoundError:
            raise no_store_error(source) from None
        stack.callback(source_lock.release)
        if classify_store_file(source_lock.fd, real_source, source) != "agent":
            raise no_store_error(source)
        if target.exists() or target.is_symlink():
            raise exists_error(target)
        created = make_parents(target.parent)
        tmp = target.parent / f".agentcore-{uuid.uuid4().hex[:12]}.copy"
        linked = False
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o644))
            copy_lock = StoreFileLock.acquire(tmp)
            stack.callback(copy_lock.release)  # released last but one: after the copy is in place
            try:
                _backup(real_source, source, tmp)
            except sqlite3.Error as exc:
                raise sqlite_error(exc, source, "copy failed") from exc
            if validate:
                check_store(tmp, where=source, read_state=False)
            try:
                link_new_file(tmp, target)
            except FileExistsError:
                raise exists_error(target) from None
            linked = True
            fsync_dir(target.parent)
        finally:
            for leftover in (tmp, *(Path(f"{tmp}{suffix}") for suffix in ("-wal", "-shm", "-journal"))):
                leftover.unlink(missing_ok=True)
            if not linked:
                for directory in reversed(created):
                    with contextlib.suppress(OSError):
                        directory.rmdir()
    return target


def _backup(source: Path, where: Path, tmp: Path) -> None:
    with readonly_connection(source) as src:
        src.execute("PRAGMA busy_timeout = 5000")
        check_supported(read_schema_version(src, where), where)
        dst = sqlite3.connect(tmp, isolation_level=None)
        try:
            src.backup(dst)  # one step: a single consistent read snapshot of the source
            dst.execute("PRAGMA journal_mode = WAL")  # the copy closes checkpointed: one file
        finally:
            dst.close()
    fsync_file(tmp)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
