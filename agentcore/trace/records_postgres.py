"""Reading a PostgreSQL store's rows for the Trace (needs the ``postgres`` extra).

A connection of its own, never the owner's and never its lease: every read is one
``REPEATABLE READ, READ ONLY`` snapshot of plain ``SELECT``s (readers never block the owner).
Rows are found by ``seq``, which leads every table's primary key order (``seq, idx``).
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from agentcore.errors import STORE_INVALID, StoreError
from agentcore.harness.postgres_target import PostgresTarget, connect
from agentcore.harness.storage import Entry
from agentcore.trace.rows import COLUMNS, KEYS, TABLES, TraceRecords, to_records


class PostgresSource:
    """One PostgreSQL store, read (never written) on a connection of the reader's own."""

    def __init__(self, target: PostgresTarget) -> None:
        self.target = target
        self.label = target.label
        schema = sql.Identifier(target.schema)
        self._queries = {
            table: sql.SQL(
                f"SELECT {COLUMNS[table]} FROM {{s}}.{table} WHERE store_id = %s AND seq > %s ORDER BY seq, idx"
            ).format(s=schema)
            for table in TABLES
        }
        self._store = sql.SQL("SELECT store_id, last_seq FROM {s}.stores WHERE name = %s").format(s=schema)
        self._by_id = sql.SQL(
            f"SELECT {COLUMNS['entries']} FROM {{s}}.entries WHERE store_id = %s AND id = ANY(%s::text[])"
        ).format(s=schema)

    def read(self, after_seq: int = 0) -> TraceRecords:
        with connect(self.target) as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            store_id, last_seq = self._store_row(conn)
            out = TraceRecords(self.label, after_seq, last_seq)
            for table in TABLES:
                rows = conn.execute(self._queries[table], (store_id, after_seq)).fetchall()
                setattr(out, table, to_records(table, rows, self.label))
            return out

    def entries_by_id(self, ids: list[str]) -> dict[str, Entry]:
        """The entries with these ids (a span's details)."""
        if not ids:
            return {}
        with connect(self.target) as conn:
            store_id, _ = self._store_row(conn)
            rows = conn.execute(self._by_id, (store_id, ids)).fetchall()
        return {e.id: e for e in to_records("entries", rows, self.label)}

    def row(self, table: str, key: str) -> Any:
        """One receipt or task row by its key (None when there is none)."""
        query = sql.SQL(
            f"SELECT {COLUMNS[table]} FROM {{s}}.{table} WHERE store_id = %s AND {KEYS[table]} = %s"
        ).format(s=sql.Identifier(self.target.schema))
        with connect(self.target) as conn:
            store_id, _ = self._store_row(conn)
            found = to_records(table, conn.execute(query, (store_id, key)).fetchall(), self.label)
        return found[0] if found else None

    def _store_row(self, conn: Any) -> tuple[int, int]:
        row = conn.execute(self._store, (self.target.store,)).fetchone()
        if row is None:
            raise StoreError(STORE_INVALID, f"{self.label}: no such store", field="source")
        return int(row[0]), int(row[1])
