"""Export and import of a SQLite agent store (SPEC D6).

Both directions are one operation, "copy a store to a path that does not exist yet":

1. take the owner lease of the source *and* of the destination (``store_locked`` if either is
   owned, so nobody writes the source or races us to the destination during the copy);
2. verify the source is an agent store by its raw header, before SQLite opens it, then by its
   ``meta`` row (``store_invalid`` otherwise; a foreign file is left untouched);
3. copy a consistent snapshot with SQLite's backup API, which includes committed pages still
   in the WAL, into a temporary file next to the destination, then link it into place, so the
   destination is never overwritten (``store_exists``) and never seen half-written;
4. release both leases. The lock files are never copied: the copy is immediately openable.

The functions are synchronous (a 100 MB copy takes a fraction of a second to seconds); async
callers use ``await asyncio.to_thread(export_agent_database, ...)``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from pathlib import Path

from agentcore.errors import STORE_EXISTS, STORE_INVALID, StoreError
from agentcore.harness.lease import OwnerLease, lock_path_for
from agentcore.harness.sqlite_schema import (
    check_path_length,
    check_supported,
    fsync_file,
    inspect_store_file,
    link_new_file,
    read_schema_version,
)


def export_agent_database(*, database_path: str | os.PathLike[str], destination: str | os.PathLike[str]) -> Path:
    """Copy the store at ``database_path`` to ``destination`` (which must not exist); return it."""
    return _copy_store(Path(database_path), Path(destination))


def import_agent_database(*, source: str | os.PathLike[str], database_path: str | os.PathLike[str]) -> Path:
    """Install a copy of the exported store ``source`` at ``database_path`` (which must not exist)."""
    return _copy_store(Path(source), Path(database_path))


def _copy_store(source: Path, target: Path) -> Path:
    if _same_file(source, target):
        raise _exists(target)
    check_path_length(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        stack.callback(OwnerLease.acquire(lock_path_for(source)).release)
        stack.callback(OwnerLease.acquire(lock_path_for(target)).release)
        if inspect_store_file(source) != "agent":
            raise StoreError(STORE_INVALID, f"{source}: no agent store at this path", details={"path": str(source)})
        if target.exists() or target.is_symlink():
            raise _exists(target)
        tmp = target.parent / f".agentcore-{uuid.uuid4().hex[:12]}.copy"
        stack.callback(tmp.unlink, missing_ok=True)
        try:
            _backup(source, tmp)
        except sqlite3.Error as exc:
            raise StoreError(STORE_INVALID, f"{source}: copy failed ({exc})", details={"path": str(source)}) from exc
        try:
            link_new_file(tmp, target)
        except FileExistsError:
            raise _exists(target) from None
    return target


def _backup(source: Path, tmp: Path) -> None:
    src = sqlite3.connect(source, isolation_level=None)
    try:
        src.execute("PRAGMA busy_timeout = 5000")
        check_supported(read_schema_version(src, source), source)
        dst = sqlite3.connect(tmp, isolation_level=None)
        try:
            src.backup(dst)  # one step: a single consistent read snapshot of the source
            dst.execute("PRAGMA journal_mode = WAL")  # the copy closes checkpointed: one file
        finally:
            dst.close()
    finally:
        src.close()
    fsync_file(tmp)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _exists(target: Path) -> StoreError:
    return StoreError(
        STORE_EXISTS,
        f"{target}: the destination already exists and is never overwritten",
        details={"path": str(target)},
    )
