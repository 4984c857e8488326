"""Read a session store's usage ledger (the truth Studio's usage is a projection of).

The agent store keeps one row per settled model attempt in its ``usage`` table, keyed by a
stable ``record_id`` (agentcore ``harness/storage.py``; DURABILITY invariant 5). Studio's
``UsageRecord`` rows are first written from run events for live display, but an event can be
lost for good: the runtime commits the row, then the process dies before Studio writes it,
and a resumed run never re-sends a settled report. So the host reconciles from this ledger
whenever it opens a session's store and after every run.

The position is a commit's ``seq`` on every backend: a commit's rows become visible together,
so "after seq N" never splits one. A store the host has open is read from its runtime
(``AgentRuntime.usage_ledger``: the rows it holds in memory, no second connection to the
store). agentcore has no public call that reads a closed or foreign-owned store's ledger, so
this module reads the table itself: read-only (``mode=ro``), which in WAL mode never blocks
the owner's writes and never takes its lock. The table's shape is frozen in schema v1. A
PostgreSQL store's ledger is read the same way from its ``usage`` table (a plain ``SELECT``:
readers never block the owner). The Records tab's
schema version of a store no runtime has open is read the same way (``meta.schema_version``);
an open one's comes with the snapshot's ``records``.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class LedgerRow:
    record_id: str
    payload: dict[str, Any]
    conversation_id: str = ""
    pos: int = 0  # the seq of the commit that wrote it


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    return conn


def read_schema_version(store_path: str) -> int | None:
    """The store's schema version (the Records tab), read the same read-only way; None when
    the store does not exist yet."""
    path = Path(store_path)
    if not path.is_file() or path.stat().st_size == 0:
        return None
    conn = _connect(path)
    try:
        row = conn.execute("SELECT schema_version FROM meta WHERE id = 1").fetchone()
    finally:
        conn.close()
    return int(row[0]) if row else None


def read_usage_ledger(store_path: str, after: int = 0) -> list[LedgerRow]:
    """The usage rows of the store in commit order, after commit ``after`` (``pos`` is the
    row's commit seq, as for PostgreSQL and the runtime's ``usage_ledger``); empty when the
    store does not exist yet."""
    path = Path(store_path)
    if not path.is_file() or path.stat().st_size == 0:
        return []
    conn = _connect(path)
    try:
        rows = conn.execute(
            "SELECT record_id, payload, conversation_id, seq FROM usage WHERE seq > ? ORDER BY seq, pos", (after,)
        ).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    finally:
        conn.close()
    out = []
    for record_id, payload, conversation_id, seq in rows:
        data = json.loads(payload)
        out.append(LedgerRow(str(record_id), data if isinstance(data, dict) else {}, str(conversation_id), int(seq)))
    return out


def read_first_prompt(store_path: str | Path) -> str:
    """The first message a person wrote in the store's main conversation ("" when none): what
    names an imported session, read the same read-only way (the entries table, schema v1)."""
    path = Path(store_path)
    if not path.is_file() or path.stat().st_size == 0:
        return ""
    try:
        conn = _connect(path)
    except sqlite3.DatabaseError:
        return ""
    try:
        rows = conn.execute("SELECT payload FROM entries WHERE kind = 'message' ORDER BY pos LIMIT 500").fetchall()
    except sqlite3.DatabaseError:  # not a store: agentcore's import says so
        return ""
    finally:
        conn.close()
    for (payload,) in rows:
        data = json.loads(payload)
        message = data.get("message") if isinstance(data, dict) else None
        if not isinstance(message, dict) or message.get("role") != "user" or data.get("synthetic"):
            continue
        text = " ".join(str(c.get("text", "")) for c in message.get("content") or [] if c.get("type") == "text")
        if text.strip():
            return text
    return ""


def read_postgres_usage_ledger(cursor: Any, schema: str, store: str, after: int = 0) -> list[LedgerRow]:
    """The usage rows of the PostgreSQL store ``store`` after commit ``after`` (``pos`` is the
    row's commit seq); empty when the schema or the store does not exist yet."""
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [f"{schema}.usage"])
    if not cursor.fetchone()[0]:
        return []
    cursor.execute(
        f"SELECT u.record_id, u.payload, u.conversation_id, u.seq FROM {schema}.usage u "
        f"JOIN {schema}.stores s ON s.store_id = u.store_id WHERE s.name = %s AND u.seq > %s ORDER BY u.seq, u.idx",
        [store, after],
    )
    out = []
    for record_id, payload, conversation_id, seq in cursor.fetchall():
        data = json.loads(payload)
        out.append(LedgerRow(str(record_id), data if isinstance(data, dict) else {}, str(conversation_id), int(seq)))
    return out
