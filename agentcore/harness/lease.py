"""The owner lease: one execution owner per store (SPEC D4, ARCHITECTURE "one writer").

An ``OwnerLease`` is an OS exclusive lock (``flock(LOCK_EX | LOCK_NB)``) on a sidecar file
``<database>.lock``. The OS releases it the moment the holder dies, so a SIGKILLed owner never
blocks the next one. ``flock`` locks belong to an open file description, so a second opener in
the *same* process conflicts too, which is what we want: two runtimes on one file in one
process would be two writers.

The lock file is never deleted: unlinking it would let a waiter lock the old inode while a
newcomer locks a fresh one, and then two owners would both believe they hold the lease. The
lease is only half of the protection; the fencing counter inside the store (DURABILITY
invariant 18) rejects a stale owner whose lock was lost anyway.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from agentcore.errors import STORE_LOCKED, StoreError


def lock_path_for(database_path: str | os.PathLike[str]) -> Path:
    """The sidecar lock file of a store: ``<database>.lock`` next to it."""
    return Path(os.fspath(database_path) + ".lock")


class OwnerLease:
    """An exclusive, process-death-safe lock held until ``release()``.

    ``acquire`` raises ``StoreError(store_locked)`` naming the holder's pid when someone else
    holds it. ``release`` is idempotent and only ever releases this lease's own lock.
    """

    __slots__ = ("_fd", "path")

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, lock_path: str | os.PathLike[str]) -> OwnerLease:
        path = Path(lock_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise StoreError(
                STORE_LOCKED,
                f"the store is already open by another owner (pid {holder or 'unknown'}; lock file {path})",
                details={"holder_pid": holder, "lock_path": str(path)},
            ) from None
        except BaseException:
            os.close(fd)
            raise
        # We hold the lock: record who we are for the next opener's error message.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock (clearing the pid first, while still holding it). Idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the descriptor releases the flock


def _read_holder(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
