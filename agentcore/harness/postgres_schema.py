"""The PostgreSQL layout of agent stores: many stores in one schema, and its one commit function.

A *store* is what one SQLite file is: one session's conversations. Every store lives in the
same few tables of one schema (``agentcore`` by default), keyed by a small integer
``store_id`` handed out by the ``stores`` table, where each store also has its unique ``name``
(any text without NUL or control characters, at most 255 characters), its fencing counter and
its ``last_seq``. Tables keyed by ``store_id`` keep the catalog small however many sessions
exist (one schema per store would mean thousands of schemas); each store's rows are one
contiguous range of every primary key.

Row order: ``(seq, idx)``, where ``idx`` is the row's position inside its commit, gives the
order a SQLite store keeps in ``pos`` (entries, usage) or in ``seq, rowid`` (the keyed tables).

``apply_commit`` applies one ``Commit`` as one statement, so one transaction and one round
trip: it first moves ``last_seq`` on the store's row *if and only if* the caller's fence and
``last_seq`` still hold (that row lock also serialises every writer of the store), then writes
the rows; a fence mismatch, a failed compare-and-swap or a duplicate entry id raises, and the
whole statement rolls back. Its errors carry our own SQLSTATEs (``FENCED``, ``CAS_MISMATCH``)
and a JSON ``DETAIL``.

Versioning: ``meta`` holds the schema's version. ``CREATE`` statements are frozen per version;
a new version adds a migration (``MIGRATIONS[n - 1]`` upgrades ``n`` to ``n + 1``) that runs
inside the installer's transaction, carrying open operations' state along. ``check_schema``
verifies, read-only, that an existing schema is ours at a version we support before anything
writes to it: the ``meta`` marker, every table with exactly its columns (name, type, NOT NULL),
the commit function's exact source, and no triggers or rules on our tables (they would run on
every commit). Extra indexes are allowed: they are the operator's tuning, not a change of
meaning.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from psycopg import Connection, sql

from agentcore.errors import STORE_INVALID, StoreError

APPLICATION = "agentcore"
FENCED = "AGF01"  # SQLSTATEs raised by apply_commit
CAS_MISMATCH = "AGC01"


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[tuple[str, str, bool], ...]  # name, type as format_type() spells it, NOT NULL
    constraints: tuple[str, ...]


_SEQ = ("seq", "bigint", True)
_IDX = ("idx", "integer", True)
_STORE = ("store_id", "integer", True)

# Frozen: version 1 exactly as released. Never edit; add a migration instead.
TABLES_V1: tuple[Table, ...] = (
    Table(
        "meta",
        (("id", "integer", True), ("application", "text", True), ("schema_version", "integer", True),
         ("created", "timestamp with time zone", True)),
        ("PRIMARY KEY (id)", "CHECK (id = 1)"),
    ),
    Table(
        "stores",
        (("store_id", "integer", True), ("name", "text", True), ("fence", "bigint", True),
         ("last_seq", "bigint", True), ("store_uuid", "text", True), ("created", "timestamp with time zone", True)),
        ("PRIMARY KEY (store_id)", "UNIQUE (name)", "CHECK (fence >= 0)", "CHECK (last_seq >= 0)"),
    ),
    Table(
        "entries",
        (_STORE, _SEQ, _IDX, ("id", "text", True), ("conversation_id", "text", True), ("parent_id", "text", False),
         ("kind", "text", True), ("payload", "text", True)),
        ("PRIMARY KEY (store_id, seq, idx)", "UNIQUE (store_id, id)"),
    ),
    Table(
        "registers",
        (_STORE, ("key", "text", True), ("value", "text", True), _SEQ, _IDX),
        ("PRIMARY KEY (store_id, key)",),
    ),
    Table(
        "usage",
        (_STORE, _SEQ, _IDX, ("record_id", "text", True), ("conversation_id", "text", True), ("payload", "text", True)),
        ("PRIMARY KEY (store_id, seq, idx)", "UNIQUE (store_id, record_id)"),
    ),
    Table(
        "receipts",
        (_STORE, ("request_id", "text", True), ("conversation_id", "text", True), ("payload", "text", True),
         _SEQ, _IDX),
        ("PRIMARY KEY (store_id, request_id)",),
    ),
    Table(
        "tasks",
        (_STORE, ("task_id", "text", True), ("conversation_id", "text", True), ("payload", "text", True), _SEQ, _IDX),
        ("PRIMARY KEY (store_id, task_id)",),
    ),
)

# The body of apply_commit at version 1 ("@" stands for the quoted schema name). Frozen.
APPLY_COMMIT_V1 = """
DECLARE
  v_seq bigint := p_last_seq + 1;
  v_actual bigint;
  v_fence bigint;
  v_last bigint;
BEGIN
  UPDATE @.stores SET last_seq = v_seq WHERE store_id = p_store AND fence = p_fence AND last_seq = p_last_seq;
  IF NOT FOUND THEN
    SELECT fence, last_seq INTO v_fence, v_last FROM @.stores WHERE store_id = p_store;
    RAISE EXCEPTION USING ERRCODE = 'AGF01', MESSAGE = 'store fenced',
      DETAIL = json_build_object('fence', v_fence, 'last_seq', v_last)::text;
  END IF;
  IF cardinality(e_ids) > 0 THEN
    INSERT INTO @.entries (store_id, seq, idx, id, conversation_id, parent_id, kind, payload)
    SELECT p_store, v_seq, t.n, t.id, t.c, t.p, t.k, t.v
    FROM unnest(e_ids, e_convs, e_parents, e_kinds, e_payloads) WITH ORDINALITY AS t(id, c, p, k, v, n);
  END IF;
  FOR i IN 1 .. coalesce(cardinality(r_keys), 0) LOOP
    IF r_expected[i] IS NOT NULL THEN
      SELECT seq INTO v_actual FROM @.registers WHERE store_id = p_store AND key = r_keys[i];
      IF coalesce(v_actual, 0) <> r_expected[i] THEN
        RAISE EXCEPTION USING ERRCODE = 'AGC01', MESSAGE = 'compare-and-swap failed',
          DETAIL = json_build_object('key', r_keys[i], 'expected_seq', r_expected[i],
                                     'actual_seq', coalesce(v_actual, 0))::text;
      END IF;
    END IF;
    IF r_values[i] IS NULL THEN
      DELETE FROM @.registers WHERE store_id = p_store AND key = r_keys[i];
    ELSE
      INSERT INTO @.registers (store_id, key, value, seq, idx) VALUES (p_store, r_keys[i], r_values[i], v_seq, i)
      ON CONFLICT (store_id, key) DO UPDATE SET value = excluded.value, seq = excluded.seq, idx = excluded.idx;
    END IF;
  END LOOP;
  IF cardinality(u_ids) > 0 THEN
    INSERT INTO @.usage (store_id, seq, idx, record_id, conversation_id, payload)
    SELECT p_store, v_seq, t.n, t.id, t.c, t.v
    FROM unnest(u_ids, u_convs, u_payloads) WITH ORDINALITY AS t(id, c, v, n) ORDER BY t.n
    ON CONFLICT (store_id, record_id) DO NOTHING;
  END IF;
  IF cardinality(c_ids) > 0 THEN
    INSERT INTO @.receipts (store_id, request_id, conversation_id, payload, seq, idx)
    SELECT DISTINCT ON (t.id) p_store, t.id, t.c, t.v, v_seq, t.n
    FROM unnest(c_ids, c_convs, c_payloads) WITH ORDINALITY AS t(id, c, v, n) ORDER BY t.id, t.n DESC
    ON CONFLICT (store_id, request_id) DO UPDATE
      SET conversation_id = excluded.conversation_id, payload = excluded.payload,
          seq = excluded.seq, idx = excluded.idx;
  END IF;
  IF cardinality(t_ids) > 0 THEN
    INSERT INTO @.tasks (store_id, task_id, conversation_id, payload, seq, idx)
    SELECT DISTINCT ON (t.id) p_store, t.id, t.c, t.v, v_seq, t.n
    FROM unnest(t_ids, t_convs, t_payloads) WITH ORDINALITY AS t(id, c, v, n) ORDER BY t.id, t.n DESC
    ON CONFLICT (store_id, task_id) DO UPDATE
      SET conversation_id = excluded.conversation_id, payload = excluded.payload,
          seq = excluded.seq, idx = excluded.idx;
  END IF;
  RETURN v_seq;
END
"""

APPLY_COMMIT_ARGS = (
    "p_store integer, p_fence bigint, p_last_seq bigint, "
    "e_ids text[], e_convs text[], e_parents text[], e_kinds text[], e_payloads text[], "
    "r_keys text[], r_values text[], r_expected bigint[], "
    "u_ids text[], u_convs text[], u_payloads text[], "
    "c_ids text[], c_convs text[], c_payloads text[], "
    "t_ids text[], t_convs text[], t_payloads text[]"
)

Migration = Callable[[Connection[Any], str], None]
MIGRATIONS: tuple[Migration, ...] = ()
SCHEMA_VERSION = len(MIGRATIONS) + 1


def lock_namespace(schema: str) -> int:
    """The first key of every advisory lock of ``schema``'s stores (``pg_try_advisory_lock(ns,
    store_id)``): a 31-bit CRC of the schema name, so two schemas in one database do not share
    locks and the key reads the same in ``pg_locks.classid``."""
    return zlib.crc32(f"agentcore:{schema}".encode()) & 0x7FFFFFFF


def function_body(schema: str) -> str:
    return APPLY_COMMIT_V1.replace("@", _quote(schema))


def _quote(schema: str) -> str:
    return '"' + schema.replace('"', '""') + '"'


def create_statements(schema: str) -> list[sql.Composed]:
    """Every statement that creates version ``SCHEMA_VERSION`` of the schema (run by ``install``)."""
    ident = sql.Identifier(schema)
    statements: list[sql.Composed] = [sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident)]
    for table in TABLES_V1:
        parts: list[sql.Composable] = [
            sql.SQL("{} {}{}").format(
                sql.Identifier(name), sql.SQL(kind), sql.SQL(" NOT NULL" if not_null else "")
            )
            for name, kind, not_null in table.columns
        ]
        if table.name == "stores":
            parts[0] = sql.SQL("store_id integer GENERATED ALWAYS AS IDENTITY NOT NULL")
        parts.extend(sql.SQL(c) for c in table.constraints)
        statements.append(
            sql.SQL("CREATE TABLE {}.{} ({})").format(ident, sql.Identifier(table.name), sql.SQL(", ").join(parts))
        )
    statements.append(
        sql.SQL(
            "CREATE FUNCTION {}.apply_commit({}) RETURNS bigint LANGUAGE plpgsql "
            "SET search_path = pg_catalog, pg_temp AS {}"
        ).format(
            ident, sql.SQL(APPLY_COMMIT_ARGS), sql.Literal(function_body(schema))
        )
    )
    statements.append(
        sql.SQL("INSERT INTO {}.meta (id, application, schema_version, created) VALUES (1, {}, {}, now())").format(
            ident, sql.Literal(APPLICATION), sql.Literal(SCHEMA_VERSION)
        )
    )
    return statements


def installed_version(conn: Connection[Any], schema: str, where: str) -> int | None:
    """``None`` when ``schema`` does not exist or is empty; its checked version otherwise
    (``store_invalid`` if it holds anything but a supported agentcore schema). Reads only."""
    row = conn.execute("SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    if row is None:
        return None
    oid = row[0]
    columns: dict[str, list[tuple[str, str, bool]]] = {}
    for table, column, kind, not_null in conn.execute(
        "SELECT c.relname, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull "
        "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid "
        "WHERE c.relnamespace = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND a.attnum > 0 "
        "AND NOT a.attisdropped ORDER BY c.relname, a.attnum",
        (oid,),
    ):
        columns.setdefault(table, []).append((column, kind, not_null))
    functions = conn.execute(
        "SELECT proname, pg_catalog.md5(prosrc) FROM pg_catalog.pg_proc WHERE pronamespace = %s", (oid,)
    ).fetchall()
    if not columns and not functions:
        return None  # an empty schema (an administrator may create it for us): install into it
    if columns.get("meta") != list(_table("meta").columns):
        raise _invalid(
            where, f"schema {schema!r} is not an agentcore store schema (its meta table is missing or foreign)"
        )
    meta = conn.execute(
        sql.SQL("SELECT application, schema_version FROM {}.meta").format(sql.Identifier(schema))
    ).fetchall()
    if len(meta) != 1 or meta[0][0] != APPLICATION or not isinstance(meta[0][1], int):
        raise _invalid(where, f"schema {schema!r} is not an agentcore store schema (meta holds {meta!r})")
    version = int(meta[0][1])
    if version > SCHEMA_VERSION:
        raise _invalid(
            where,
            f"schema {schema!r} is at version {version}, newer than this agentcore supports ({SCHEMA_VERSION}); "
            "upgrade agentcore to open it",
            store_version=version,
            supported_version=SCHEMA_VERSION,
        )
    if version < 1:
        raise _invalid(where, f"schema {schema!r} has an invalid version {version}")
    problems = _table_problems(columns)
    extras = conn.execute(
        "SELECT 'trigger ' || t.tgname || ' on ' || c.relname FROM pg_catalog.pg_trigger t "
        "JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = %s AND NOT t.tgisinternal "
        "UNION ALL SELECT 'rule ' || r.rulename || ' on ' || c.relname FROM pg_catalog.pg_rewrite r "
        "JOIN pg_catalog.pg_class c ON c.oid = r.ev_class WHERE c.relnamespace = %s AND c.relkind = 'r' "
        "ORDER BY 1",
        (oid, oid),
    ).fetchall()
    problems.extend(f"unknown {row[0]}" for row in extras)
    expected_function = ("apply_commit", hashlib.md5(function_body(schema).encode()).hexdigest())
    if expected_function not in functions:
        problems.append("the function apply_commit is missing or defined differently")
    problems.extend(f"unknown function {name!r}" for name, _ in functions if name != "apply_commit")
    if problems:
        raise _invalid(
            where,
            f"schema {schema!r}: objects agentcore does not create at version {version}: {'; '.join(problems)}",
            schema_problems=problems,
        )
    return version


def _table(name: str) -> Table:
    return next(t for t in TABLES_V1 if t.name == name)


def _table_problems(columns: dict[str, list[tuple[str, str, bool]]]) -> list[str]:
    problems: list[str] = []
    expected = {t.name: list(t.columns) for t in TABLES_V1}
    for name in sorted(set(columns) - set(expected)):
        problems.append(f"unknown table {name!r}")
    for name in sorted(set(expected) - set(columns)):
        problems.append(f"missing table {name!r}")
    for name in sorted(set(expected) & set(columns)):
        if columns[name] != expected[name]:
            problems.append(f"table {name!r} is defined differently")
    return problems


def ensure_schema(conn: Connection[Any], schema: str, where: str) -> None:
    """Make ``schema`` hold this version's layout: check it (read-only) and return if it does;
    otherwise install or migrate it in one transaction under an advisory lock, so concurrent
    first openers serialise and the loser finds the winner's schema. A foreign or too-new schema
    is refused before anything is written."""
    if installed_version(conn, schema, where) == SCHEMA_VERSION:
        return
    with conn.transaction():
        conn.execute("SELECT pg_catalog.pg_advisory_xact_lock(%s, 0)", (lock_namespace(schema),))
        version = installed_version(conn, schema, where)
        if version is None:
            for statement in create_statements(schema):
                conn.execute(statement)
        elif version < SCHEMA_VERSION:
            migrate(conn, schema, version)


def migrate(conn: Connection[Any], schema: str, from_version: int) -> None:
    """Run every migration after ``from_version`` inside the caller's transaction."""
    for step in MIGRATIONS[from_version - 1 :]:
        step(conn, schema)
    conn.execute(
        sql.SQL("UPDATE {}.meta SET schema_version = %s WHERE id = 1").format(sql.Identifier(schema)),
        (SCHEMA_VERSION,),
    )


def _invalid(where: str, reason: str, **details: object) -> StoreError:
    return StoreError(STORE_INVALID, f"{where}: {reason}", details={"where": where, **details})
