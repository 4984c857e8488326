"""The storage contract: what any backend (memory, SQLite, a user's ``storage=``) must do.

The runtime is a projection of the store. Every state change is one ``Commit`` applied
atomically with a strictly increasing ``seq``. Tables:

- entries: write-once records (messages, streamed fragments, tool intents, compaction
  summaries), each with a parent id so conversations form a tree.
- registers: small mutable values (operation program counters, config, plan). A write may
  carry ``expected_seq`` for compare-and-swap on the register's last-write sequence.
- usage: append-only ledger keyed by a stable ``record_id`` (a second write of the same id is
  ignored, so a replayed settlement cannot double count).
- receipts: request id → submission record, updated as the run progresses.
- tasks: durable task rows (status, checkpoint JSON, wake time).

Backends are synchronous: a commit is ~0.1 ms on SQLite, far cheaper than a thread hop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(slots=True, frozen=True)
class Entry:
    id: str
    conversation_id: str
    parent_id: str | None
    kind: str  # "message" | "fragment" | "tool_intent" | "compaction" | ...
    payload: dict[str, Any]
    seq: int = 0  # assigned by the store at commit


@dataclass(slots=True, frozen=True)
class RegisterWrite:
    key: str
    value: dict[str, Any] | None  # None deletes the register
    expected_seq: int | None = None  # CAS: the register's current seq must equal this (0 = absent)


@dataclass(slots=True, frozen=True)
class Register:
    key: str
    value: dict[str, Any]
    seq: int


@dataclass(slots=True, frozen=True)
class UsageRow:
    record_id: str
    conversation_id: str
    payload: dict[str, Any]
    seq: int = 0


@dataclass(slots=True, frozen=True)
class Receipt:
    request_id: str
    conversation_id: str
    payload: dict[str, Any]
    seq: int = 0


@dataclass(slots=True, frozen=True)
class TaskRow:
    task_id: str
    conversation_id: str
    payload: dict[str, Any]
    seq: int = 0


@dataclass(slots=True)
class Commit:
    entries: list[Entry] = field(default_factory=list)
    registers: list[RegisterWrite] = field(default_factory=list)
    usage: list[UsageRow] = field(default_factory=list)
    receipts: list[Receipt] = field(default_factory=list)  # upsert by request_id
    tasks: list[TaskRow] = field(default_factory=list)  # upsert by task_id

    def is_empty(self) -> bool:
        return not (self.entries or self.registers or self.usage or self.receipts or self.tasks)


@dataclass(slots=True)
class StoreState:
    """Everything loaded at open; the runtime keeps its projection from here on."""

    owner_id: str
    fence: int
    last_seq: int
    entries: list[Entry]  # in seq order
    registers: dict[str, Register]
    usage: list[UsageRow]  # in seq order
    receipts: dict[str, Receipt]
    tasks: dict[str, TaskRow]


class AgentStorage(Protocol):
    """An exclusive, open store. Obtained from a ``StorageFactory``; one owner at a time."""

    label: str

    def load(self) -> StoreState:
        """Read everything committed so far."""
        ...

    def commit(self, commit: Commit) -> int:
        """Apply atomically and return the new seq.

        Raises ``StoreError`` with code ``store_fenced`` if a newer owner opened the store
        since this one did, and with ``store_invalid`` on CAS mismatch or a duplicate entry id.
        A failed commit leaves the store unchanged; the caller must not retry in place.
        """
        ...

    def close(self) -> None:
        """Release resources and the owner lock. Writes nothing."""
        ...


class StorageFactory(Protocol):
    """``storage=`` option: ``open()`` takes the exclusive owner and returns (storage, release)."""

    label: str

    def open(self) -> tuple[AgentStorage, Any]: ...
