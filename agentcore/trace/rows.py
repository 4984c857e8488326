"""The rows the Trace reads and what every reader shares (SPEC W8, W11): ``TraceRecords``, the
``TraceSource`` protocol, the tables and their columns in backend order, and decoding a table's
rows into the store's record types. The readers are ``records`` (SQLite, any storage) and
``records_postgres``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from agentcore.harness.commit_codec import decode_objects
from agentcore.harness.storage import Entry, Receipt, Register, StoreState, TaskRow, UsageRow


@dataclass(slots=True)
class TraceRecords:
    """The rows committed in ``(after_seq, last_seq]``, each table in commit order."""

    label: str
    after_seq: int
    last_seq: int
    entries: list[Entry] = field(default_factory=list)
    usage: list[UsageRow] = field(default_factory=list)
    receipts: list[Receipt] = field(default_factory=list)
    tasks: list[TaskRow] = field(default_factory=list)
    registers: list[Register] = field(default_factory=list)

    @classmethod
    def from_state(cls, state: StoreState, label: str = "", after_seq: int = 0) -> TraceRecords:
        """The rows of a loaded ``StoreState`` committed after ``after_seq``."""
        return cls(
            label=label,
            after_seq=after_seq,
            last_seq=state.last_seq,
            entries=[e for e in state.entries if e.seq > after_seq],
            usage=[u for u in state.usage if u.seq > after_seq],
            receipts=sorted((r for r in state.receipts.values() if r.seq > after_seq), key=lambda r: r.seq),
            tasks=sorted((t for t in state.tasks.values() if t.seq > after_seq), key=lambda t: t.seq),
            registers=sorted((r for r in state.registers.values() if r.seq > after_seq), key=lambda r: r.seq),
        )


class TraceSource(Protocol):
    """Where the Trace reads a store from."""

    label: str

    def read(self, after_seq: int = 0) -> TraceRecords: ...


TABLES = ("registers", "entries", "usage", "receipts", "tasks")
COLUMNS = {  # the same columns, in the same order, in every backend
    "entries": "id, conversation_id, parent_id, kind, payload, seq",
    "usage": "record_id, conversation_id, payload, seq",
    "receipts": "request_id, conversation_id, payload, seq",
    "tasks": "task_id, conversation_id, payload, seq",
    "registers": "key, value, seq",
}

KEYS = {"receipts": "request_id", "tasks": "task_id"}


def to_records(table: str, rows: list[Any], where: str) -> list[Any]:
    """Rows of ``table`` (``COLUMNS`` order) as the store's record types, payloads decoded
    (``store_invalid`` naming the row for one that is not a JSON object)."""
    at = {"entries": 4, "registers": 1}.get(table, 2)
    values = decode_objects([row[at] for row in rows], lambda n: f"{table}: row {rows[n][0]!r}", where)
    if table == "entries":
        return [Entry(i, c, p, k, v, s) for (i, c, p, k, _, s), v in zip(rows, values, strict=True)]
    if table == "registers":
        return [Register(k, v, s) for (k, _, s), v in zip(rows, values, strict=True)]
    make = {"usage": UsageRow, "receipts": Receipt, "tasks": TaskRow}[table]
    return [make(key, c, v, s) for (key, c, _, s), v in zip(rows, values, strict=True)]
