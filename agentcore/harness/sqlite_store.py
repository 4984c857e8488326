"""The SQLite backend: one file per store, WAL, one ``BEGIN IMMEDIATE`` transaction per commit.

Guarantees (SPEC D1, D4, D8; DURABILITY invariants 1-3, 15, 18):

- Every ``commit`` is one immediate transaction: all of it or none of it, with one new ``seq``
  strictly above every earlier one. ``isolation_level=None`` keeps Python's ``sqlite3`` from
  opening implicit *deferred* transactions, which fail under contention when they upgrade from
  a stale snapshot (see DURABILITY pitfalls).
- ``synchronous=NORMAL`` (the default) in WAL mode: a commit that returned survives the
  process being killed at any instant, which is the guarantee the runtime relies on. After a
  power loss or OS crash the last few commits may be lost, but the file is still some prefix
  of committed transactions. ``synchronous="full"`` fsyncs each commit for power-loss
  durability at the price of one fsync per commit.
- One owner: an ``OwnerLease`` (the path lock on ``<realpath>.lock`` and the store-file lock on
  the database file itself, so every name of the file meets it), plus a fencing counter bumped
  inside the open transaction and checked by every commit, so an owner whose lock was lost
  anyway can never write after a newer owner opened (``store_fenced``).
- Check first, write after: ``open`` runs every ``store_check`` check read-only (and keeps the
  rows it read for the first ``load``) before the migration and the fence bump, so a refused
  file and its logs stay byte-for-byte as they were. A store the same ``open`` has just created
  (and whose file it holds the lock of, by identity) is not read back: its content is known.
- ``close()`` writes nothing (SQLite may checkpoint the WAL, which changes no content) and
  releases only this storage's own lease.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, Literal

from agentcore.errors import STORE_FENCED, STORE_INVALID, StoreError
from agentcore.harness.commit_codec import EncodedCommit, cas_mismatch, closed_store, duplicate_entry, encode_commit
from agentcore.harness.lease import OwnerLease, lock_path_for
from agentcore.harness.sqlite_schema import (
    SCHEMA_VERSION,
    check_path_length,
    create_store_file,
    migrate,
    read_schema_version,
)
from agentcore.harness.storage import Commit, StoreState
from agentcore.harness.store_check import CheckedStore, check_store, classify_store_file, read_state_rows, sqlite_error

Synchronous = Literal["normal", "full"]
CHECKPOINT_EVERY = 500  # commits between background WAL checkpoints

_INSERT_ENTRY = "INSERT INTO entries (id, conversation_id, parent_id, kind, payload, seq) VALUES (?, ?, ?, ?, ?, ?)"
_UPSERT_REGISTER = (
    "INSERT INTO registers (key, value, seq) VALUES (?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value, seq = excluded.seq"
)
_INSERT_USAGE = "INSERT OR IGNORE INTO usage (record_id, conversation_id, payload, seq) VALUES (?, ?, ?, ?)"
_UPSERT_RECEIPT = (
    "INSERT INTO receipts (request_id, conversation_id, payload, seq) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (request_id) DO UPDATE SET conversation_id = excluded.conversation_id, "
    "payload = excluded.payload, seq = excluded.seq"
)
_UPSERT_TASK = (
    "INSERT INTO tasks (task_id, conversation_id, payload, seq) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (task_id) DO UPDATE SET conversation_id = excluded.conversation_id, "
    "payload = excluded.payload, seq = excluded.seq"
)


class SqliteStorage:
    """An open, exclusively owned agent store in one SQLite file. Obtain with ``open()``.

    Thread-safe (one internal mutex); intended to be called from the event loop thread, since a
    commit costs less than a hop to a worker thread.
    """

    kind: ClassVar[str] = "sqlite"
    schema_version: ClassVar[int] = SCHEMA_VERSION  # an open store is always at it (older ones migrate)

    def __init__(
        self,
        label: str,
        conn: sqlite3.Connection,
        lease: OwnerLease,
        fence: int,
        last_seq: int,
        preloaded: StoreState | None = None,
    ) -> None:
        self.label = label
        self.owner_id = uuid.uuid4().hex
        self._conn: sqlite3.Connection | None = conn
        self._lease = lease
        self._fence = fence
        self._last_seq = last_seq
        self._mutex = threading.Lock()
        self._since_checkpoint = 0
        self._checkpointer: threading.Thread | None = None
        self._file = Path(label)
        if preloaded is not None:
            preloaded.owner_id, preloaded.fence = self.owner_id, fence
        self._preloaded = preloaded  # the rows open() checked, served once by the first load()
        self._created = False

    @classmethod
    def open(
        cls,
        database_path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "normal",
        busy_timeout_ms: int = 5000,
    ) -> SqliteStorage:
        """Take the owner lease, create the file if needed, check it, then migrate it and bump the fence.

        Raises ``store_locked`` (another owner holds the path or the file under any name; the
        message names its pid) or ``store_invalid`` (a foreign, corrupt or too-new file, left
        byte-for-byte untouched together with its logs).
        """
        path = Path(database_path)
        label = os.fspath(database_path)
        check_path_length(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            real = Path(os.path.realpath(path))
            lease = OwnerLease.acquire(lock_path_for(real))
        except OSError as exc:
            raise StoreError(
                STORE_INVALID, f"{path}: cannot create the store here ({exc.strerror})", details={"path": str(path)}
            ) from exc
        conn: sqlite3.Connection | None = None
        try:
            created = _hold_store_file(lease, real, label)
            if created:
                checked = _new_store_checked()  # made by this call, under both locks: nothing to distrust
            else:
                checked = check_store(real, where=label, read_state=True)  # read-only: refuse before any write
            conn = sqlite3.connect(real, isolation_level=None, check_same_thread=False)
            _check_identity(lease, real, label)
            fence, last_seq = _prepare(conn, label, checked, synchronous, busy_timeout_ms)
            preloaded = checked.state if checked.version == SCHEMA_VERSION else None  # a migration may change rows
            storage = cls(label, conn, lease, fence, last_seq, preloaded)
            storage._file, storage._created = real, created
            return storage
        except BaseException as exc:
            if conn is not None:
                conn.close()
            lease.release()  # after the connection: closing the lock's descriptor drops SQLite's locks
            if isinstance(exc, sqlite3.Error):
                raise sqlite_error(exc, label) from exc
            if isinstance(exc, OSError):
                raise StoreError(STORE_INVALID, f"{path}: {exc}", details={"path": str(path)}) from exc
            raise

    @property
    def created(self) -> bool:
        """This open created the store (nothing was at the path): it held no rows before, so a
        host that mirrors a store's rows elsewhere has nothing to catch up on."""
        return self._created

    @property
    def path(self) -> Path:
        """The store file (its real path): what a read-only reader such as the Trace opens."""
        return self._file

    # -- AgentStorage --------------------------------------------------------------------

    def load(self) -> StoreState:
        """Everything committed, in seq order (one read transaction, so one consistent view)."""
        with self._mutex:
            conn = self._require_open()
            preloaded, self._preloaded = self._preloaded, None
            try:
                conn.execute("BEGIN")
                try:
                    if conn.execute("SELECT fence FROM meta WHERE id = 1").fetchone()[0] != self._fence:
                        raise self._fenced(conn)
                    if preloaded is not None:
                        return preloaded
                    return read_state_rows(conn, self.owner_id, self._fence, self.label)
                finally:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise sqlite_error(exc, self.label) from exc

    def commit(self, commit: Commit) -> int:
        """Apply ``commit`` in one immediate transaction; return its new seq.

        Raises ``store_fenced`` if a newer owner opened the store, ``store_invalid`` on a
        compare-and-swap mismatch, a duplicate entry id or a non-JSON payload. On any error
        the transaction is rolled back: the store is unchanged.
        """
        rows = encode_commit(commit)
        with self._mutex:
            conn = self._require_open()
            self._preloaded = None
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    seq = self._apply(conn, rows)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise
            except sqlite3.IntegrityError as exc:
                raise self._integrity_error(conn, rows, exc) from exc
            except sqlite3.Error as exc:
                raise sqlite_error(exc, self.label) from exc
            self._last_seq = seq
            self._since_checkpoint += 1
            if self._since_checkpoint >= CHECKPOINT_EVERY:
                self._checkpoint_in_background()
            return seq

    def _checkpoint_in_background(self) -> None:
        """Copy the WAL into the database file on another thread and connection.

        SQLite's automatic checkpoint runs inside whichever commit crosses its threshold, so a
        long run's commits slowed down as the WAL grew (measured: ~2x per commit by a few
        thousand commits). A PASSIVE checkpoint never blocks this owner's writes and changes no
        content; a crash during it is as safe as any SQLite checkpoint.
        """
        if self._checkpointer is not None and self._checkpointer.is_alive():
            return
        self._since_checkpoint = 0
        self._checkpointer = threading.Thread(target=_checkpoint, args=(self._file,), daemon=True)
        self._checkpointer.start()

    def close(self) -> None:
        """Close the connection, then release this storage's own lease. Writes nothing. Idempotent."""
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            checkpointer.join()  # its connection must be gone before the lease is
        with self._mutex:
            conn, self._conn = self._conn, None
            self._preloaded = None
            if conn is not None:
                conn.close()
            self._lease.release()

    # -- internals -----------------------------------------------------------------------

    def _require_open(self) -> sqlite3.Connection:
        if self._conn is None:
            raise closed_store(self.label)
        return self._conn

    def _apply(self, conn: sqlite3.Connection, rows: EncodedCommit) -> int:
        seq = self._last_seq + 1
        # The fence check and the seq bump are one statement: it matches only if no newer owner
        # opened (fence) and nobody wrote behind our back (last_seq).
        cur = conn.execute(
            "UPDATE meta SET last_seq = ? WHERE id = 1 AND fence = ? AND last_seq = ?",
            (seq, self._fence, self._last_seq),
        )
        if cur.rowcount != 1:
            raise self._fenced(conn)
        if rows.entries:
            conn.executemany(_INSERT_ENTRY, [(*row, seq) for row in rows.entries])
        for key, value, expected in rows.registers:
            if expected is not None:
                found = conn.execute("SELECT seq FROM registers WHERE key = ?", (key,)).fetchone()
                actual = found[0] if found else 0
                if actual != expected:
                    raise cas_mismatch(key, expected, actual)
            if value is None:
                conn.execute("DELETE FROM registers WHERE key = ?", (key,))
            else:
                conn.execute(_UPSERT_REGISTER, (key, value, seq))
        if rows.usage:
            conn.executemany(_INSERT_USAGE, [(*row, seq) for row in rows.usage])
        if rows.receipts:
            conn.executemany(_UPSERT_RECEIPT, [(*row, seq) for row in rows.receipts])
        if rows.tasks:
            conn.executemany(_UPSERT_TASK, [(*row, seq) for row in rows.tasks])
        return seq

    def _fenced(self, conn: sqlite3.Connection) -> StoreError:
        fence, last_seq = conn.execute("SELECT fence, last_seq FROM meta WHERE id = 1").fetchone()
        if fence != self._fence:
            reason = f"a newer owner opened the store (fence {fence}, ours {self._fence})"
        else:
            reason = f"the store was written outside this owner (seq {last_seq}, expected {self._last_seq})"
        return StoreError(
            STORE_FENCED,
            f"{self.label}: {reason}; this owner can no longer write and must be reopened",
            details={"fence": fence, "owner_fence": self._fence},
        )

    def _integrity_error(
        self, conn: sqlite3.Connection, rows: EncodedCommit, exc: sqlite3.IntegrityError
    ) -> StoreError:
        """Name the offending entry id (the transaction is already rolled back)."""
        seen: set[str] = set()
        for entry_id, *_ in rows.entries:
            if entry_id in seen:
                return duplicate_entry(entry_id)
            seen.add(entry_id)
        for entry_id, *_ in rows.entries:
            if conn.execute("SELECT 1 FROM entries WHERE id = ?", (entry_id,)).fetchone():
                return duplicate_entry(entry_id)
        return StoreError(STORE_INVALID, f"{self.label}: commit rejected ({exc})")


class SqliteStorageFactory:
    """``storage=`` factory for one SQLite file (what ``database_path=`` resolves to, SPEC D8).

    ``open()`` returns ``(storage, release)``; ``release`` is ``storage.close`` (idempotent).
    """

    def __init__(
        self,
        database_path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "normal",
        busy_timeout_ms: int = 5000,
    ) -> None:
        self.database_path = Path(database_path)
        self.label = os.fspath(database_path)
        self.synchronous: Synchronous = synchronous
        self.busy_timeout_ms = busy_timeout_ms

    def open(self) -> tuple[SqliteStorage, Callable[[], None]]:
        storage = SqliteStorage.open(
            self.database_path, synchronous=self.synchronous, busy_timeout_ms=self.busy_timeout_ms
        )
        return storage, storage.close


def _hold_store_file(lease: OwnerLease, real: Path, label: str) -> bool:
    """Take the store-file lock, creating the store first if the path is free (under the path
    lock). A zero-byte file with no log next to it holds nothing and becomes a new store.

    Returns whether the file now held is the very one this call created (same device and
    inode): its content is then exactly ``new_store_image``'s, which nobody else could have
    written — the path lock kept other openers out, and the store-file lock is held from here on."""
    created: tuple[int, int] | None = None
    for _ in range(4):
        try:
            store_file = lease.hold_store_file(real)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):  # an import linked a finished store here meanwhile
                created = create_store_file(real)
            continue
        if classify_store_file(store_file.fd, real, label) == "agent":
            return created is not None and store_file.identity == created
        real.unlink()  # while still holding its lock
        lease.drop_store_file()
    raise StoreError(STORE_INVALID, f"{label}: the file at this path keeps changing while it is opened")


def _new_store_checked() -> CheckedStore:
    """What ``check_store`` reads from a store ``create_store_file`` just made: version
    ``SCHEMA_VERSION``, fence and seq 0, no rows. ``_prepare`` still compares these with the
    file inside its immediate transaction before the first write."""
    return CheckedStore(SCHEMA_VERSION, 0, 0, StoreState("", 0, 0, [], {}, [], {}, {}))


def _check_identity(lease: OwnerLease, real: Path, label: str) -> None:
    """SQLite opened the file by name: make sure it is the file we hold the lock of."""
    st = os.stat(real)
    if lease.store_file is None or (st.st_dev, st.st_ino) != lease.store_file.identity:
        raise StoreError(STORE_INVALID, f"{label}: the file was replaced while it was being opened")


def _checkpoint(path: Path) -> None:
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            conn.close()
    except sqlite3.Error:
        pass  # a checkpoint that cannot run now runs later (or at the next open's close)


def _prepare(
    conn: sqlite3.Connection, label: str, checked: CheckedStore, synchronous: Synchronous, busy_timeout_ms: int
) -> tuple[int, int]:
    """Pragmas, migration and fence bump: the first writes, in one immediate transaction, on
    exactly the content ``checked`` saw."""
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")  # checkpoints run off the commit path (see commit)
    conn.execute(f"PRAGMA synchronous = {'FULL' if synchronous == 'full' else 'NORMAL'}")
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = read_schema_version(conn, label)
        fence, last_seq = conn.execute("SELECT fence, last_seq FROM meta WHERE id = 1").fetchone()
        if (version, fence, last_seq) != (checked.version, checked.fence, checked.last_seq):
            raise StoreError(
                STORE_INVALID, f"{label}: the store changed while it was being opened (another program writes it)"
            )
        if version < SCHEMA_VERSION:
            migrate(conn, version)
        conn.execute("UPDATE meta SET fence = fence + 1 WHERE id = 1")
        fence, last_seq = conn.execute("SELECT fence, last_seq FROM meta WHERE id = 1").fetchone()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
    return int(fence), int(last_seq)
