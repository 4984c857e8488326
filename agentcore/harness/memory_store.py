"""The memory backend: the SQLite semantics without a file (SPEC D8 default, D9).

Same contract as ``SqliteStorage``: a strictly increasing seq per commit, all-or-nothing
commits (the whole commit is validated against a scratch view before any of it is applied),
compare-and-swap on register seqs, write-once entry ids, usage rows ignored on a repeated
``record_id``, upserted receipts and tasks, a fence bumped on every open and checked on every
commit. Payloads are stored as the same JSON text SQLite would hold, so ``load()`` returns
fresh objects exactly like a reopened file.

The data lives in the ``MemoryStorageFactory`` object, not in the storage: closing and
reopening through the same factory keeps it (approval pauses inside one runtime, D9); a new
factory starts empty. There is no OS lock: an in-process owner flag refuses a second open with
``store_locked`` until the first owner closes.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from agentcore.errors import STORE_FENCED, STORE_LOCKED, StoreError
from agentcore.harness.commit_codec import (
    EntryRow,
    KeyedRow,
    cas_mismatch,
    closed_store,
    decode_objects,
    duplicate_entry,
    encode_commit,
)
from agentcore.harness.storage import Commit, Entry, Receipt, Register, StoreState, TaskRow, UsageRow


@dataclass(slots=True)
class _MemoryData:
    """Committed state of one memory store; mutated only under ``mutex`` by its owner."""

    mutex: threading.Lock = field(default_factory=threading.Lock)
    owner: object | None = None  # the lease token of the current owner
    fence: int = 0
    last_seq: int = 0
    entries: list[tuple[EntryRow, int]] = field(default_factory=list)
    entry_ids: set[str] = field(default_factory=set)
    registers: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (value json, seq)
    usage: list[tuple[KeyedRow, int]] = field(default_factory=list)
    usage_ids: set[str] = field(default_factory=set)
    receipts: dict[str, tuple[KeyedRow, int]] = field(default_factory=dict)
    tasks: dict[str, tuple[KeyedRow, int]] = field(default_factory=dict)


class _MemoryLease:
    """The in-process stand-in for ``OwnerLease``; ``release`` frees only its own ownership."""

    __slots__ = ("_data",)

    def __init__(self, data: _MemoryData) -> None:
        self._data: _MemoryData | None = data

    def release(self) -> None:
        data, self._data = self._data, None
        if data is not None:
            with data.mutex:
                if data.owner is self:
                    data.owner = None


class MemoryStorage:
    """An open, exclusively owned memory store. Obtain with ``MemoryStorageFactory.open()``."""

    kind: ClassVar[str] = "memory"

    def __init__(self, label: str, data: _MemoryData) -> None:
        self.label = label
        self.owner_id = uuid.uuid4().hex
        self._data = data
        self._lease = _MemoryLease(data)
        self._closed = False
        with data.mutex:
            if data.owner is not None:
                raise StoreError(
                    STORE_LOCKED,
                    f"{label}: the memory store is already open by another owner in this process (pid {os.getpid()})",
                    details={"holder_pid": os.getpid()},
                )
            data.owner = self._lease
            data.fence += 1
            self._fence = data.fence

    def load(self) -> StoreState:
        loads = json.loads
        data = self._data
        with data.mutex:
            self._check_writable()
            return StoreState(
                owner_id=self.owner_id,
                fence=self._fence,
                last_seq=data.last_seq,
                entries=[
                    Entry(i, c, p, k, v, s)
                    for ((i, c, p, k, _), s), v in zip(
                        data.entries,
                        decode_objects([row[4] for row, _ in data.entries], lambda n: f"entry #{n}", self.label),
                        strict=True,
                    )
                ],
                registers={k: Register(k, loads(v), s) for k, (v, s) in data.registers.items()},
                usage=[UsageRow(r, c, loads(v), s) for (r, c, v), s in data.usage],
                receipts={r: Receipt(r, c, loads(v), s) for r, ((_, c, v), s) in data.receipts.items()},
                tasks={t: TaskRow(t, c, loads(v), s) for t, ((_, c, v), s) in data.tasks.items()},
            )

    def commit(self, commit: Commit) -> int:
        """Validate everything, then apply everything; see ``AgentStorage.commit``."""
        rows = encode_commit(commit)
        data = self._data
        with data.mutex:
            self._check_writable()
            seq = data.last_seq + 1
            new_ids: set[str] = set()
            for entry_id, *_ in rows.entries:
                if entry_id in data.entry_ids or entry_id in new_ids:
                    raise duplicate_entry(entry_id)
                new_ids.add(entry_id)
            register_seqs: dict[str, int] = {}  # scratch view: writes earlier in this commit count
            for key, value, expected in rows.registers:
                if expected is not None:
                    actual = register_seqs.get(key, data.registers[key][1] if key in data.registers else 0)
                    if actual != expected:
                        raise cas_mismatch(key, expected, actual)
                register_seqs[key] = 0 if value is None else seq
            # Validated: apply. Nothing below can fail.
            data.last_seq = seq
            data.entries.extend((row, seq) for row in rows.entries)
            data.entry_ids |= new_ids
            for key, value, _ in rows.registers:
                if value is None:
                    data.registers.pop(key, None)
                else:
                    data.registers.pop(key, None)  # re-insert so dict order stays seq order
                    data.registers[key] = (value, seq)
            for row in rows.usage:
                if row[0] not in data.usage_ids:
                    data.usage_ids.add(row[0])
                    data.usage.append((row, seq))
            for row in rows.receipts:
                data.receipts.pop(row[0], None)
                data.receipts[row[0]] = (row, seq)
            for row in rows.tasks:
                data.tasks.pop(row[0], None)
                data.tasks[row[0]] = (row, seq)
            return seq

    def close(self) -> None:
        """Release this storage's ownership; the data stays in the factory. Writes nothing."""
        self._closed = True
        self._lease.release()

    def _check_writable(self) -> None:
        if self._closed:
            raise closed_store(self.label)
        if self._data.fence != self._fence:
            raise StoreError(
                STORE_FENCED,
                f"{self.label}: a newer owner opened the store (fence {self._data.fence}, ours {self._fence}); "
                "this owner can no longer write and must be reopened",
                details={"fence": self._data.fence, "owner_fence": self._fence},
            )


class MemoryStorageFactory:
    """``storage=`` factory whose data lives in this object for the life of the process."""

    def __init__(self, label: str = "memory") -> None:
        self.label = label
        self._data = _MemoryData()

    def open(self) -> tuple[MemoryStorage, Callable[[], None]]:
        storage = MemoryStorage(self.label, self._data)
        return storage, storage.close
