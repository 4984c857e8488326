"""The owner lease: one execution owner per store (SPEC D4, ARCHITECTURE "one writer").

Two OS locks, both ``flock(LOCK_EX | LOCK_NB)``, which the OS releases the moment the holder
dies, so a SIGKILLed owner never blocks the next one:

- the **store-file lock** (``StoreFileLock``) is taken on the database file itself, so it is
  keyed on the file's identity (device + inode), not on a name: the path the store was created
  under, a symlink, a hard link or a bind mount all meet the same lock. This is the lock that
  makes an owner; export and import take it too. A file with several hard links is refused
  here: the lock would cover every name, but SQLite's write-ahead log belongs to one name.
- the **path lock** (``OwnerLease.acquire``) on the sidecar ``<realpath>.lock`` serialises the
  *creation* of a store at a path (a file that does not exist yet cannot be locked) and records
  the holder's pid for the next opener's message. An owner holds both for its whole life.

``flock`` locks belong to an open file description, so a second opener in the *same* process
conflicts too: two runtimes on one file in one process would be two writers.

``flock`` and SQLite's POSIX (``fcntl``) locks are independent on Linux, but POSIX locks have a
trap: closing *any* descriptor of a file drops every POSIX lock the process holds on that file,
SQLite's included. Hence two rules. The owner closes its store-file descriptor only after its
SQLite connection (``SqliteStorage.close`` closes the connection first). And a second opener in
the same process is refused from the process's table of held files before it opens any
descriptor; one that raced into opening the file anyway never closes that descriptor while the
holder lives: it is parked with the holder and closed at the holder's release. The table is
process-wide because POSIX locks are (SQLite keeps the same kind of per-inode table).

Lock files are never deleted: unlinking one would let a waiter lock the old inode while a
newcomer locks a fresh one. The lease is only half of the protection; the fencing counter
inside the store (DURABILITY invariant 18) rejects a stale owner whose lock was lost anyway.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

from agentcore.errors import STORE_INVALID, STORE_LOCKED, StoreError

FileIdentity = tuple[int, int]  # (st_dev, st_ino)


def lock_path_for(database_path: str | os.PathLike[str]) -> Path:
    """The path lock of a store: ``<database>.lock`` next to the file its path resolves to
    (symlinks resolved, so a symlink and its target share one path lock)."""
    return Path(os.path.realpath(database_path) + ".lock")


@dataclass(slots=True)
class _Held:
    owner: StoreFileLock
    parked: list[int] = field(default_factory=list)  # descriptors of refused openers in this process


_held: dict[FileIdentity, _Held] = {}  # process-wide, like the POSIX locks it protects
_held_mutex = threading.Lock()


class StoreFileLock:
    """An exclusive lock on one database file, whatever name reaches it.

    ``acquire`` raises ``FileNotFoundError`` when nothing is at the path, ``store_invalid`` when
    it is not a regular file (a FIFO or a device is never opened for reading), and
    ``store_locked`` naming the holder's pid when another owner holds the file. ``fd`` stays
    open (and may be read) until ``release``, which is idempotent and only ever releases this
    lock.
    """

    __slots__ = ("_fd", "identity", "path")

    def __init__(self, path: Path, identity: FileIdentity, fd: int) -> None:
        self.path = path
        self.identity = identity
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: str | os.PathLike[str]) -> StoreFileLock:
        path = Path(path)
        before = os.stat(path)
        if not stat.S_ISREG(before.st_mode):  # before open(): a FIFO would block, a device react
            raise _not_a_file(path)
        with _held_mutex:  # held here: refuse without opening a descriptor at all
            held = _held.get((before.st_dev, before.st_ino))
            if held is not None:
                raise _locked(path, os.getpid(), f"held in this process as {held.owner.path}")
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # replaced between stat() and open()
                raise _not_a_file(path)
            identity = (st.st_dev, st.st_ino)
            with _held_mutex:
                held = _held.get(identity)
                if held is not None:
                    held.parked.append(fd)  # closing it would drop the holder's SQLite locks
                    fd = -1
                    raise _locked(path, os.getpid(), f"held in this process as {held.owner.path}")
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise _locked(path, _flock_holder(identity), "held by another process") from None
                names = os.fstat(fd).st_nlink  # under the lock: an import's link-then-unlink is over
                if names > 1:
                    raise _several_names(path, names)
                lock = cls(path, identity, fd)
                _held[identity] = _Held(lock)
                return lock
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise

    @property
    def held(self) -> bool:
        return self._fd is not None

    @property
    def fd(self) -> int:
        if self._fd is None:
            raise ValueError("the store-file lock was released")
        return self._fd

    def release(self) -> None:
        """Drop the lock. Call it only after this process's SQLite connections to the file are
        closed (closing the descriptor drops their POSIX locks). Idempotent."""
        with _held_mutex:  # closed under the mutex: a new opener never meets our stale flock
            fd, self._fd = self._fd, None
            if fd is None:
                return
            held = _held.get(self.identity)
            parked: list[int] = []
            if held is not None and held.owner is self:
                del _held[self.identity]
                parked = held.parked
            for other in parked:
                with contextlib.suppress(OSError):
                    os.close(other)
            os.close(fd)


class OwnerLease:
    """The lease of one owner: the path lock, plus the store-file lock once the file exists.

    ``acquire(lock_path)`` takes the path lock (``store_locked`` naming the holder's pid when
    someone else holds it); ``hold_store_file`` adds the store-file lock. ``release`` drops the
    store-file lock first, then the path lock; it is idempotent and only ever releases this
    lease's own locks.
    """

    __slots__ = ("_fd", "path", "store_file")

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd
        self.store_file: StoreFileLock | None = None

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

    def hold_store_file(self, database_path: str | os.PathLike[str]) -> StoreFileLock:
        """Take the store-file lock of ``database_path`` for this lease (see ``StoreFileLock``)."""
        if self.store_file is not None:
            raise ValueError("this lease already holds a store file")
        self.store_file = StoreFileLock.acquire(database_path)
        return self.store_file

    def drop_store_file(self) -> None:
        """Release the store-file lock only (e.g. before replacing an empty file)."""
        store_file, self.store_file = self.store_file, None
        if store_file is not None:
            store_file.release()

    def release(self) -> None:
        """Drop both locks (clearing the pid first, while still holding the path lock). Idempotent."""
        self.drop_store_file()
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the descriptor releases the flock


def _locked(path: Path, holder: int | None, where: str) -> StoreError:
    return StoreError(
        STORE_LOCKED,
        f"{path}: the store is already open by another owner (pid {holder or 'unknown'}; the same file is {where})",
        details={"holder_pid": holder, "path": str(path)},
    )


def _several_names(path: Path, names: int) -> StoreError:
    """A store file with hard links: SQLite keeps the write-ahead log next to the *name* it opens,
    so an owner killed before a checkpoint leaves committed transactions in ``<name>-wal`` that an
    opener through another name never sees (and a write there would fork the store)."""
    return StoreError(
        STORE_INVALID,
        f"{path}: the store file has {names} names (hard links); SQLite keeps its write-ahead log next to "
        "the name it is opened by, so a store reached by several names can lose committed work — remove "
        "the extra links (a symlink is fine)",
        details={"path": str(path), "links": names},
    )


def _not_a_file(path: Path) -> StoreError:
    return StoreError(STORE_INVALID, f"{path}: not a regular file", details={"path": str(path)})


def _flock_holder(identity: FileIdentity) -> int | None:
    """The pid holding a ``flock`` on the file, from the kernel's lock table (Linux)."""
    dev, ino = identity
    key = f"{os.major(dev):02x}:{os.minor(dev):02x}:{ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as table:
            for line in table:
                parts = line.split()  # "1: FLOCK  ADVISORY  WRITE 11649 fe:00:2146935 0 EOF"
                if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == key and parts[4].isdigit():
                    return int(parts[4]) or None
    except OSError:
        pass
    return None


def _read_holder(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
