"""One JSON encoding and one set of error messages shared by every built-in backend.

Payloads are encoded *before* a transaction begins, so a value that is not JSON fails the
commit without touching the store. The memory backend keeps the same encoded rows, which makes
it behave exactly like SQLite: tuples come back as lists, non-string keys as strings, and no
caller can mutate committed state through an object it still holds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentcore.errors import STORE_INVALID, StoreError
from agentcore.harness.storage import Commit

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)

EntryRow = tuple[str, str, str | None, str, str]  # id, conversation_id, parent_id, kind, payload
RegisterRow = tuple[str, str | None, int | None]  # key, value (None = delete), expected_seq
KeyedRow = tuple[str, str, str]  # record/request/task id, conversation_id, payload


@dataclass(slots=True, frozen=True)
class EncodedCommit:
    entries: list[EntryRow]
    registers: list[RegisterRow]
    usage: list[KeyedRow]
    receipts: list[KeyedRow]
    tasks: list[KeyedRow]


def encode_json(value: Any, where: str) -> str:
    """The stored text of one payload. Payloads are JSON *objects*: a store holding anything
    else is refused at open (``store_check``), so a commit must never write one either."""
    if not isinstance(value, dict):
        raise StoreError(
            STORE_INVALID, f"{where} is not a JSON object (got {type(value).__name__})", details={"where": where}
        )
    try:
        return _encoder.encode(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(STORE_INVALID, f"{where} is not JSON-serializable: {exc}", details={"where": where}) from None


def encode_commit(commit: Commit) -> EncodedCommit:
    return EncodedCommit(
        entries=[
            (e.id, e.conversation_id, e.parent_id, e.kind, encode_json(e.payload, f"entry {e.id!r}"))
            for e in commit.entries
        ],
        registers=[
            (r.key, None if r.value is None else encode_json(r.value, f"register {r.key!r}"), r.expected_seq)
            for r in commit.registers
        ],
        usage=[
            (u.record_id, u.conversation_id, encode_json(u.payload, f"usage {u.record_id!r}")) for u in commit.usage
        ],
        receipts=[
            (r.request_id, r.conversation_id, encode_json(r.payload, f"receipt {r.request_id!r}"))
            for r in commit.receipts
        ],
        tasks=[(t.task_id, t.conversation_id, encode_json(t.payload, f"task {t.task_id!r}")) for t in commit.tasks],
    )


def decode_objects(texts: list[str], name: Callable[[int], str], where: str | os.PathLike[str]) -> list[Any]:
    """Decode many stored payloads at once; each must be a JSON object.

    One ``json.loads`` of a joined array is ~3x faster than one call per row for the small
    payloads that dominate a transcript (streamed fragments), which is what makes resuming a
    100k-entry store fast. If that fails, or does not give one object per row, the rows are
    decoded one by one and the first bad one is named: ``store_invalid`` with ``name(n)``,
    never a raw ``JSONDecodeError``.
    """
    if not texts:
        return []
    try:
        values = json.loads("[" + ",".join(texts) + "]")
        if isinstance(values, list) and len(values) == len(texts) and all(type(v) is dict for v in values):
            return values
    except (ValueError, TypeError):  # TypeError: a payload that is not text
        pass
    out: list[Any] = []
    for n, text in enumerate(texts):
        try:
            value = json.loads(text)
        except (ValueError, TypeError) as exc:
            raise _corrupt(where, f"{name(n)} is not valid JSON ({exc})") from None
        if type(value) is not dict:
            raise _corrupt(where, f"{name(n)} is not a JSON object (got {type(value).__name__})")
        out.append(value)
    return out


def _corrupt(where: str | os.PathLike[str], reason: str) -> StoreError:
    return StoreError(STORE_INVALID, f"{os.fspath(where)}: {reason}", details={"path": os.fspath(where)})


def cas_mismatch(key: str, expected: int, actual: int) -> StoreError:
    return StoreError(
        STORE_INVALID,
        f"register {key!r} changed: expected seq {expected}, found {actual} (compare-and-swap failed)",
        details={"key": key, "expected_seq": expected, "actual_seq": actual},
    )


def duplicate_entry(entry_id: str) -> StoreError:
    return StoreError(
        STORE_INVALID,
        f"entry id {entry_id!r} already exists (entries are write-once)",
        details={"entry_id": entry_id},
    )


def closed_store(label: str) -> StoreError:
    return StoreError(STORE_INVALID, f"{label}: the storage is closed", details={"label": label})
