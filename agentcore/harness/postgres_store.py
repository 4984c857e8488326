"""The PostgreSQL backend: many stores in one database, one owner per store, one statement per commit.

``create_agent(storage=postgres_storage(dsn, store="session-42"))`` or
``create_agent(database_url="postgresql://user@host/db?store=session-42")``. The layout (tables
keyed by ``store_id``, the ``apply_commit`` function) is in ``postgres_schema``; how an option
names a store and how we connect is in ``postgres_target``.

Same contract as ``SqliteStorage`` (SPEC D1, D4, D8; DURABILITY invariants 1-3, 15, 18):

- Every ``commit`` is one call of ``apply_commit`` on an autocommit connection: one statement,
  so one transaction and one round trip, all of it or none of it, with one new ``seq`` strictly
  above every earlier one. A fence mismatch, a failed compare-and-swap, a duplicate entry id
  roll the whole statement back; a payload that is not a JSON object, text that is not valid
  UTF-8 (a lone surrogate, refused alike by every backend) or a NUL character (which
  PostgreSQL text cannot hold) is refused before anything is sent. Same error codes as SQLite.
- One owner: the **owner lease** is a session-level advisory lock ``(namespace, store_id)``
  held by the owner's own connection, so the server releases it the moment that session ends
  — at once when the owner process dies (its socket closes), within ``lease_timeout`` when its
  host vanishes (TCP keepalives, ``tcp_user_timeout``). A refused opener gets ``store_locked``
  naming the holder's pid and host. The lock and the writes share one connection: a store
  never writes without the session that holds its lease.
- Fencing: the store's row holds a counter bumped inside the open transaction and checked (with
  ``last_seq``) by the first statement of every commit, which also takes the row lock that
  serialises writers; a stale owner (whose lease was lost anyway) can never write after a newer
  owner opened (``store_fenced``).
- Check first, write after: ``open`` verifies the schema (``postgres_schema``), then — holding
  the lease and the store row's lock — reads and decodes every row and checks every seq against
  ``last_seq`` before it bumps the fence; the rows it read serve the first ``load``.
- ``close()`` writes nothing: it closes the connection, which ends only this owner's lease.

The storage protocol is synchronous; a commit is one loopback round trip (see
``bench/store_postgres.py`` for what it costs against raw psycopg).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import psycopg
from psycopg import sql

from agentcore.errors import STORE_FENCED, STORE_INVALID, STORE_LOCKED, StoreError
from agentcore.harness.commit_codec import (
    EncodedCommit,
    cas_mismatch,
    closed_store,
    decode_objects,
    duplicate_entry,
    encode_commit,
)
from agentcore.harness.postgres_schema import (
    CAS_MISMATCH,
    FENCED,
    SCHEMA_VERSION,
    ensure_schema,
    installed_version,
    lock_namespace,
)
from agentcore.harness.postgres_target import (
    PostgresTarget,
    connect,
    make_target,
    target_from_url,
    unavailable,
)
from agentcore.harness.storage import Commit, Entry, Receipt, Register, StoreState, TaskRow, UsageRow

_BATCH = 4096


class StoreQueries:
    """Every statement of one schema, rendered once (a constant text lets psycopg prepare it)."""

    def __init__(self, schema: str) -> None:
        s = sql.Identifier(schema)

        def q(text: str) -> str:
            return sql.SQL(text).format(s=s).as_string(None)

        text = "%s::text[], " * 5 + "%s::text[], %s::text[], %s::bigint[], " + "%s::text[], " * 8 + "%s::text[]"
        self.apply = q("SELECT {s}.apply_commit(%s, %s, %s, " + text + ")")
        self.store_id = q("SELECT store_id FROM {s}.stores WHERE name = %s")
        self.create_store = q(
            "INSERT INTO {s}.stores (name, fence, last_seq, store_uuid, created) VALUES (%s, 0, 0, %s, now()) "
            "ON CONFLICT (name) DO NOTHING RETURNING store_id"
        )
        self.lock_row = q("SELECT fence, last_seq FROM {s}.stores WHERE store_id = %s FOR UPDATE")
        self.bump_fence = q("UPDATE {s}.stores SET fence = fence + 1 WHERE store_id = %s RETURNING fence")
        self.meta = q("SELECT fence, last_seq FROM {s}.stores WHERE store_id = %s")
        self.existing_entry = q("SELECT id FROM {s}.entries WHERE store_id = %s AND id = ANY(%s::text[]) LIMIT 1")
        self.reads: dict[str, tuple[str, int, str]] = {  # table -> (query, payload column, what a row is called)
            "entries": (
                q("SELECT id, conversation_id, parent_id, kind, payload, seq FROM {s}.entries "
                  "WHERE store_id = %s ORDER BY seq, idx"),
                4,
                "entry",
            ),
            "registers": (
                q("SELECT key, value, seq FROM {s}.registers WHERE store_id = %s ORDER BY seq, idx"), 1, "register"
            ),
            "usage": (
                q("SELECT record_id, conversation_id, payload, seq FROM {s}.usage "
                  "WHERE store_id = %s ORDER BY seq, idx"),
                2,
                "usage row",
            ),
            "receipts": (
                q("SELECT request_id, conversation_id, payload, seq FROM {s}.receipts "
                  "WHERE store_id = %s ORDER BY seq, idx"),
                2,
                "receipt",
            ),
            "tasks": (
                q("SELECT task_id, conversation_id, payload, seq FROM {s}.tasks WHERE store_id = %s ORDER BY seq, idx"),
                2,
                "task",
            ),
        }  # fmt: skip


class PostgresLease:
    """The owner lease: a session-level advisory lock held by the owner's connection.

    ``release`` unlocks it on that same connection while the connection lives (closing the
    connection ends it too); idempotent, and it can only ever release this session's lock.
    """

    __slots__ = ("_conn", "key")

    def __init__(self, conn: psycopg.Connection[Any], key: tuple[int, int]) -> None:
        self._conn: psycopg.Connection[Any] | None = conn
        self.key = key

    @property
    def held(self) -> bool:
        return self._conn is not None and not self._conn.closed

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            with contextlib.suppress(psycopg.Error):
                conn.execute("SELECT pg_catalog.pg_advisory_unlock(%s, %s)", self.key)


class PostgresStorage:
    """An open, exclusively owned agent store in a PostgreSQL database. Obtain with ``open()``.

    Thread-safe (one internal mutex); like SQLite it is called from the event loop thread.
    """

    kind: ClassVar[str] = "postgresql"
    schema_version: ClassVar[int] = SCHEMA_VERSION  # an open store is always at it (older ones migrate)

    def __init__(
        self,
        target: PostgresTarget,
        conn: psycopg.Connection[Any],
        queries: StoreQueries,
        store_id: int,
        lease: PostgresLease,
        fence: int,
        last_seq: int,
        preloaded: StoreState | None,
    ) -> None:
        self.label = target.label
        self.target = target
        self.store_id = store_id
        self.owner_id = uuid.uuid4().hex
        self._conn: psycopg.Connection[Any] | None = conn
        self._cursor = conn.cursor()
        self._q = queries
        self._lease = lease
        self._fence = fence
        self._last_seq = last_seq
        self._mutex = threading.Lock()
        if preloaded is not None:
            preloaded.owner_id, preloaded.fence = self.owner_id, fence
        self._preloaded = preloaded

    @classmethod
    def open(cls, target: PostgresTarget, *, create: bool = True) -> PostgresStorage:
        """Connect, check (or install) the schema, find or create the store's row, take the lease,
        then — under the store row's lock — read and check every row and bump the fence.

        Raises ``store_unavailable`` (server unreachable), ``input_validation`` (a connection
        string libpq refuses), ``store_locked`` (another owner holds the lease; the message names
        its pid and host) or ``store_invalid`` (a foreign or too-new schema, rows that are not
        what agentcore writes); nothing is written before those checks pass. With ``create=False``
        a store that does not exist yet is ``store_invalid`` (field: the option) instead of created.
        """
        conn = connect(target)
        try:
            queries = StoreQueries(target.schema)
            if not create and installed_version(conn, target.schema, target.label) is None:
                raise _missing(target)  # not even the schema: create nothing
            ensure_schema(conn, target.schema, target.label)
            store_id = _find_or_create(conn, queries, target) if create else _existing(conn, queries, target)
            lease = take_lease(conn, target, store_id)
            with conn.transaction():
                row = conn.execute(queries.lock_row, (store_id,)).fetchone()
                if row is None:
                    raise StoreError(STORE_INVALID, f"{target.label}: the store was deleted while it was being opened")
                fence, last_seq = int(row[0]), int(row[1])
                state = read_state(conn, queries, store_id, target.label, "", fence, last_seq)
                bumped = conn.execute(queries.bump_fence, (store_id,)).fetchone()
                assert bumped is not None
            return cls(target, conn, queries, store_id, lease, int(bumped[0]), last_seq, state)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, psycopg.OperationalError):
                raise unavailable(target, exc, "opening the store") from exc
            if isinstance(exc, psycopg.Error):
                raise StoreError(
                    STORE_INVALID, f"{target.label}: cannot open the store ({_first_line(exc)})", field=target.option
                ) from exc
            raise

    # -- AgentStorage --------------------------------------------------------------------

    def load(self) -> StoreState:
        """Everything committed, in seq order, from one repeatable-read snapshot."""
        with self._mutex:
            conn = self._require_open()
            preloaded, self._preloaded = self._preloaded, None
            try:
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    row = conn.execute(self._q.meta, (self.store_id,)).fetchone()
                    if row is None or row[0] != self._fence:
                        raise self._fenced(row)
                    if preloaded is not None:
                        return preloaded
                    return read_state(conn, self._q, self.store_id, self.label, self.owner_id, self._fence, int(row[1]))
            except psycopg.OperationalError as exc:
                raise unavailable(self.target, exc, "load") from exc
            except psycopg.Error as exc:
                raise StoreError(STORE_INVALID, f"{self.label}: load failed ({_first_line(exc)})") from exc

    def commit(self, commit: Commit) -> int:
        """Apply ``commit`` in one statement; return its new seq.

        Raises ``store_fenced`` if a newer owner opened the store, ``store_invalid`` on a
        compare-and-swap mismatch, a duplicate entry id, a non-JSON payload or text PostgreSQL
        cannot store, and ``store_unavailable`` when the connection is lost (the commit may or
        may not have been applied; the lease is gone with the session: reopen). On every error
        the store is unchanged by this owner.
        """
        rows = encode_commit(commit)
        with self._mutex:
            self._require_open()
            self._preloaded = None
            try:
                self._cursor.execute(self._q.apply, self._params(rows))
                result = self._cursor.fetchone()
            except (UnicodeEncodeError, psycopg.DataError) as exc:
                if isinstance(exc, psycopg.DataError) and exc.sqlstate is not None:
                    raise StoreError(STORE_INVALID, f"{self.label}: commit rejected ({_first_line(exc)})") from exc
                raise _unstorable_text(rows) from exc  # refused by the driver, before anything was sent
            except psycopg.OperationalError as exc:
                raise unavailable(self.target, exc, "commit") from exc
            except psycopg.Error as exc:
                raise self._commit_error(rows, exc) from exc
            assert result is not None
            seq = int(result[0])
            self._last_seq = seq
            return seq

    def close(self) -> None:
        """Close the connection, which ends this owner's lease and nobody else's. Writes nothing. Idempotent."""
        with self._mutex:
            conn, self._conn = self._conn, None
            self._preloaded = None
            if conn is not None:
                conn.close()
            self._lease.release()

    # -- internals -----------------------------------------------------------------------

    def _require_open(self) -> psycopg.Connection[Any]:
        if self._conn is None:
            raise closed_store(self.label)
        return self._conn

    def _params(self, rows: EncodedCommit) -> tuple[Any, ...]:
        """``apply_commit``'s arguments: one array per column; an absent table is NULL (cheaper
        to send than an empty array, and the function treats both alike)."""
        return (
            self.store_id, self._fence, self._last_seq,
            *_columns(rows.entries, 5), *_columns(rows.registers, 3), *_columns(rows.usage, 3),
            *_columns(rows.receipts, 3), *_columns(rows.tasks, 3),
        )  # fmt: skip

    def _commit_error(self, rows: EncodedCommit, exc: psycopg.Error) -> StoreError:
        """Translate a refused ``apply_commit`` (already rolled back) into the SQLite errors."""
        state = exc.sqlstate
        detail = _detail(exc)
        if state == FENCED:
            return self._fenced((detail.get("fence"), detail.get("last_seq")))
        if state == CAS_MISMATCH:
            return cas_mismatch(str(detail.get("key")), int(detail["expected_seq"]), int(detail["actual_seq"]))
        if isinstance(exc, psycopg.errors.UniqueViolation):
            seen: set[str] = set()
            for entry_id, *_ in rows.entries:
                if entry_id in seen:
                    return duplicate_entry(entry_id)
                seen.add(entry_id)
            with contextlib.suppress(psycopg.Error):
                found = self._cursor.execute(self._q.existing_entry, (self.store_id, list(seen))).fetchone()
                if found is not None:
                    return duplicate_entry(str(found[0]))
        return StoreError(STORE_INVALID, f"{self.label}: commit rejected ({_first_line(exc)})")

    def _fenced(self, row: Iterable[Any] | None) -> StoreError:
        fence, last_seq = tuple(row) if row is not None else (None, None)
        if fence != self._fence:
            reason = f"a newer owner opened the store (fence {fence}, ours {self._fence})"
        else:
            reason = f"the store was written outside this owner (seq {last_seq}, expected {self._last_seq})"
        return StoreError(
            STORE_FENCED,
            f"{self.label}: {reason}; this owner can no longer write and must be reopened",
            details={"fence": fence, "owner_fence": self._fence},
        )


class PostgresStorageFactory:
    """``storage=`` factory for one store in a PostgreSQL database (what ``database_url=``
    resolves to). ``open()`` returns ``(storage, release)``; ``release`` is ``storage.close``."""

    def __init__(self, target: PostgresTarget, *, create: bool = True) -> None:
        self.target = target
        self.label = target.label
        self.create = create  # False: a missing store is ``store_invalid`` (resuming, never starting)

    @classmethod
    def from_url(cls, url: object, *, option: str = "database_url", create: bool = True) -> PostgresStorageFactory:
        return cls(target_from_url(url, option=option), create=create)

    def open(self) -> tuple[PostgresStorage, Callable[[], None]]:
        storage = PostgresStorage.open(self.target, create=self.create)
        return storage, storage.close


def postgres_storage(
    dsn: str,
    store: str | None = None,
    *,
    schema: str | None = None,
    connect_timeout: float = 10.0,
    lease_timeout: float = 15.0,
    lock_timeout: float = 0.0,
) -> PostgresStorageFactory:
    """A ``storage=`` factory for the store ``store`` (default ``"default"``) in ``schema``
    (default ``"agentcore"``) of the database ``dsn`` (a libpq URL or ``key=value`` string; a
    URL may carry ``?store=`` and ``?schema=`` instead).

    ``lease_timeout``: how soon the server ends the session of an owner whose host vanished,
    freeing its lease (TCP keepalives; a dead *process* frees it at once). ``lock_timeout``: how
    long ``open()`` waits for another owner's lease before ``store_locked`` (0: refuse at once,
    like SQLite). Validates everything, connects to nothing.
    """
    return PostgresStorageFactory(
        make_target(
            dsn,
            store=store,
            schema=schema,
            connect_timeout=connect_timeout,
            lease_timeout=lease_timeout,
            lock_timeout=lock_timeout,
        )
    )


# -- shared with export / import and offline tools -------------------------------------------


def find_store(conn: psycopg.Connection[Any], queries: StoreQueries, name: str) -> int | None:
    row = conn.execute(queries.store_id, (name,)).fetchone()
    return None if row is None else int(row[0])


def _find_or_create(conn: psycopg.Connection[Any], queries: StoreQueries, target: PostgresTarget) -> int:
    """The store's id, creating its row on first use (an empty store: fence 0, last_seq 0)."""
    for _ in range(3):
        found = find_store(conn, queries, target.store)
        if found is not None:
            return found
        row = conn.execute(queries.create_store, (target.store, uuid.uuid4().hex)).fetchone()
        if row is not None:
            return int(row[0])
        # a concurrent creator (an opener or an import) committed the name first: read it
    raise StoreError(STORE_INVALID, f"{target.label}: the store row keeps changing while it is opened")


def _existing(conn: psycopg.Connection[Any], queries: StoreQueries, target: PostgresTarget) -> int:
    found = find_store(conn, queries, target.store)
    if found is None:
        raise _missing(target)
    return found


def _missing(target: PostgresTarget) -> StoreError:
    return StoreError(
        STORE_INVALID,
        f"{target.label}: no agent store of this name",
        field=target.option,
        details={"label": target.label},
    )


def take_lease(conn: psycopg.Connection[Any], target: PostgresTarget, store_id: int) -> PostgresLease:
    """Take the store's advisory lock on ``conn`` (waiting up to ``lock_timeout``), or raise
    ``store_locked`` naming the holder."""
    key = (lock_namespace(target.schema), store_id)
    if target.lock_timeout > 0:
        try:
            conn.execute(f"SET lock_timeout = {int(target.lock_timeout * 1000)}")
            conn.execute("SELECT pg_catalog.pg_advisory_lock(%s, %s)", key)
            got = True
        except psycopg.errors.LockNotAvailable:
            got = False
        finally:
            if not conn.closed:
                conn.execute("RESET lock_timeout")
    else:
        row = conn.execute("SELECT pg_catalog.pg_try_advisory_lock(%s, %s)", key).fetchone()
        got = bool(row and row[0])
    if not got:
        raise _locked(conn, target, key)
    return PostgresLease(conn, key)


_HOLDER = re.compile(r"^agentcore pid (\d+) on (.*)$")


def _locked(conn: psycopg.Connection[Any], target: PostgresTarget, key: tuple[int, int]) -> StoreError:
    row = conn.execute(
        "SELECT l.pid, a.application_name, pg_catalog.host(a.client_addr) FROM pg_catalog.pg_locks l "
        "LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 "
        "AND l.classid::bigint = %s AND l.objid::bigint = %s "
        "AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())",
        key,
    ).fetchone()
    backend, app, addr = row if row is not None else (None, None, None)
    match = _HOLDER.match(app or "")
    pid = int(match.group(1)) if match else None
    host = match.group(2) if match else addr
    holder = f"pid {pid or 'unknown'}" + (f" on {host}" if host else "")
    if backend:
        holder += f"; server session {backend}"
    return StoreError(
        STORE_LOCKED,
        f"{target.label}: the store is already open by another owner ({holder})",
        details={"holder_pid": pid, "holder_host": host, "backend_pid": backend},
    )


def read_state(
    conn: psycopg.Connection[Any],
    queries: StoreQueries,
    store_id: int,
    where: str,
    owner_id: str,
    fence: int,
    last_seq: int,
) -> StoreState:
    """Every row of the store, decoded, in seq order (the caller holds a consistent view).

    A payload that is not a JSON object, or a seq outside ``0..last_seq`` (a rewound counter
    would hand out a seq twice), raises ``store_invalid`` naming the table and row.
    """
    entries: list[Entry] = []
    for rows, values in _decoded(conn, queries, "entries", store_id, where, last_seq):
        entries.extend(Entry(i, c, p, k, v, s) for (i, c, p, k, _, s), v in zip(rows, values, strict=True))
    registers: dict[str, Register] = {}
    for rows, values in _decoded(conn, queries, "registers", store_id, where, last_seq):
        registers.update((k, Register(k, v, s)) for (k, _, s), v in zip(rows, values, strict=True))
    usage: list[UsageRow] = []
    for rows, values in _decoded(conn, queries, "usage", store_id, where, last_seq):
        usage.extend(UsageRow(r, c, v, s) for (r, c, _, s), v in zip(rows, values, strict=True))
    receipts: dict[str, Receipt] = {}
    for rows, values in _decoded(conn, queries, "receipts", store_id, where, last_seq):
        receipts.update((r, Receipt(r, c, v, s)) for (r, c, _, s), v in zip(rows, values, strict=True))
    tasks: dict[str, TaskRow] = {}
    for rows, values in _decoded(conn, queries, "tasks", store_id, where, last_seq):
        tasks.update((t, TaskRow(t, c, v, s)) for (t, c, _, s), v in zip(rows, values, strict=True))
    return StoreState(owner_id, fence, last_seq, entries, registers, usage, receipts, tasks)


def _decoded(
    conn: psycopg.Connection[Any], queries: StoreQueries, table: str, store_id: int, where: str, last_seq: int
) -> Iterable[tuple[list[Any], list[Any]]]:
    query, at, what = queries.reads[table]
    cursor = conn.execute(query, (store_id,))
    while rows := cursor.fetchmany(_BATCH):
        top, bottom = max(row[-1] for row in rows), min(row[-1] for row in rows)
        if top > last_seq or bottom < 0:
            bad = next(row for row in rows if not 0 <= row[-1] <= last_seq)
            raise StoreError(
                STORE_INVALID,
                f"{where}: {table}: {what} {bad[0]!r} has seq {bad[-1]}, outside 0..{last_seq} (the store's last_seq): "
                "the next commit would reuse a seq",
                details={"table": table},
            )
        yield rows, decode_objects([row[at] for row in rows], _namer(table, what, rows), where)


def _namer(table: str, what: str, rows: list[Any]) -> Callable[[int], str]:
    return lambda n: f"{table}: {what} {rows[n][0]!r}"


def _columns(rows: list[Any], width: int) -> list[list[Any] | None]:
    if not rows:
        return [None] * width
    return [list(column) for column in zip(*rows, strict=True)]


def _unstorable_text(rows: EncodedCommit) -> StoreError:
    """Name the first value with a NUL character, which PostgreSQL text cannot hold (the codec
    already refused text that is not valid UTF-8, alike for every backend)."""
    named: list[tuple[str, Iterable[str | None]]] = []
    named += [(f"entry {r[0]!r}", r) for r in rows.entries]
    named += [(f"register {r[0]!r}", r[:2]) for r in rows.registers]
    named += [(f"usage {r[0]!r}", r) for r in rows.usage]
    named += [(f"receipt {r[0]!r}", r) for r in rows.receipts]
    named += [(f"task {r[0]!r}", r) for r in rows.tasks]
    for where, values in named:
        if any(isinstance(value, str) and "\x00" in value for value in values):
            return StoreError(
                STORE_INVALID,
                f"{where} contains a NUL character, which PostgreSQL text cannot store",
                details={"where": where},
            )
    return StoreError(STORE_INVALID, "the commit holds text PostgreSQL cannot store")


def _detail(exc: psycopg.Error) -> dict[str, Any]:
    try:
        value = json.loads(exc.diag.message_detail or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
