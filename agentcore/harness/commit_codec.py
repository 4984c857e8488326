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
from agentcore.harness.storage import Commit, Entry, RegisterWrite

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
        text = _encoder.encode(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(STORE_INVALID, f"{where} is not JSON-serializable: {exc}", details={"where": where}) from None
    return utf8_text(text, where)


def utf8_text(text: str, where: str) -> str:
    """``text`` if it can be stored as UTF-8, else ``store_invalid`` naming ``where``.

    A lone surrogate (``"\\ud83d"``) is a valid Python string but not valid UTF-8: SQLite's
    driver would fail with a raw ``UnicodeEncodeError`` mid-transaction and PostgreSQL refuses
    it, while a memory store would keep it. Checking here makes every backend refuse it the
    same way, before the transaction begins. (The runtime sanitises model and tool text at
    its boundaries, so this only catches a caller's or an extension's own payloads.)
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StoreError(
            STORE_INVALID,
            f"{where} holds text that is not valid UTF-8 (a lone surrogate at character {exc.start})",
            details={"where": where},
        ) from None
    return text


def _checked(where: str, *texts: str | None) -> str:
    for text in texts:
        if text is not None:
            utf8_text(text, where)
    return where


def _entry_row(e: Entry) -> EntryRow:
    where = _checked(f"entry {e.id!r}", e.id, e.conversation_id, e.parent_id, e.kind)
    return (e.id, e.conversation_id, e.parent_id, e.kind, encode_json(e.payload, where))


def _register_row(r: RegisterWrite) -> RegisterRow:
    where = _checked(f"register {r.key!r}", r.key)
    return (r.key, None if r.value is None else encode_json(r.value, where), r.expected_seq)


def _keyed_row(kind: str, key: str, conversation_id: str, payload: Any) -> KeyedRow:
    where = _checked(f"{kind} {key!r}", key, conversation_id)
    return (key, conversation_id, encode_json(payload, where))


def encode_commit(commit: Commit) -> EncodedCommit:
    return EncodedCommit(
        entries=[_entry_row(e) for e in commit.entries],
        registers=[_register_row(r) for r in commit.registers],
        usage=[_keyed_row("usage", u.record_id, u.conversation_id, u.payload) for u in commit.usage],
        receipts=[_keyed_row("receipt", r.request_id, r.conversation_id, r.payload) for r in commit.receipts],
        tasks=[_keyed_row("task", t.task_id, t.conversation_id, t.payload) for t in commit.tasks],
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
