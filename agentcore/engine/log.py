"""The conversation log: the runtime's in-memory projection of one conversation in the store.

Every change goes through ``commit()``: the store applies it first (atomically, fenced),
then the projection is updated from the same records — so memory is never ahead of the
store. A failed commit faults the log: the runtime must be reopened (the store is the truth).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from agentcore.errors import STORE_INVALID, StoreError
from agentcore.harness.storage import (
    AgentStorage,
    Commit,
    Entry,
    Receipt,
    Register,
    RegisterWrite,
    StoreState,
    UsageRow,
)
from agentcore.messages import Message, UserMessage, message_from_dict, message_to_dict


def new_id() -> str:
    return uuid.uuid4().hex


def op_key(conversation_id: str) -> str:
    return f"op:{conversation_id}"


def cancel_key(conversation_id: str) -> str:
    """The durable cancel marker of a conversation's open operation (DURABILITY 12)."""
    return f"cancel:{conversation_id}"


@dataclass(slots=True)
class Fragment:
    step: int
    attempt: int
    index: int
    kind: str  # "text" | "thinking"
    text: str


@dataclass(slots=True)
class ConversationLog:
    storage: AgentStorage
    conversation_id: str
    owner_id: str
    messages: list[Message] = field(default_factory=list)
    message_entry_ids: list[str] = field(default_factory=list)
    message_ops: list[str | None] = field(default_factory=list)
    message_synthetic: list[bool] = field(default_factory=list)  # runtime-written prompts, not the user's
    head: str | None = None
    registers: dict[str, Register] = field(default_factory=dict)
    receipts: dict[str, Receipt] = field(default_factory=dict)
    usage: dict[str, UsageRow] = field(default_factory=dict)
    fragments: dict[str, list[Fragment]] = field(default_factory=dict)  # by op request id
    intents: dict[str, dict[str, Any]] = field(default_factory=dict)  # by "op/step/call_id"
    results: set[str] = field(default_factory=set)  # "op/step/call_id" settled
    compaction_generation: int = 0
    faulted: StoreError | None = None
    _built: dict[str, Message] = field(default_factory=dict)  # messages of entries not yet committed

    @classmethod
    def load(cls, storage: AgentStorage, state: StoreState, conversation_id: str) -> ConversationLog:
        log = cls(storage=storage, conversation_id=conversation_id, owner_id=state.owner_id)
        log.registers = dict(state.registers)
        log.receipts = {k: v for k, v in state.receipts.items() if v.conversation_id == conversation_id}
        log.usage = {row.record_id: row for row in state.usage if row.conversation_id == conversation_id}
        for entry in state.entries:
            if entry.conversation_id == conversation_id:
                log._apply_entry(entry)
        return log

    # --- reading ---------------------------------------------------------------------

    @property
    def op(self) -> dict[str, Any] | None:
        register = self.registers.get(op_key(self.conversation_id))
        return dict(register.value) if register else None

    @property
    def cancel_marker(self) -> dict[str, Any] | None:
        """The committed cancel request of the open operation, if any."""
        register = self.registers.get(cancel_key(self.conversation_id))
        op = self.op
        if register is None or op is None or register.value.get("request_id") != op["request_id"]:
            return None
        return dict(register.value)

    def op_seq(self) -> int:
        register = self.registers.get(op_key(self.conversation_id))
        return register.seq if register else 0

    # --- writing ---------------------------------------------------------------------

    def entry(self, kind: str, payload: dict[str, Any], parent: str | None = None) -> Entry:
        return Entry(new_id(), self.conversation_id, parent, kind, payload)

    def message_entry(self, message: Message, op: str | None, **extra: Any) -> Entry:
        payload: dict[str, Any] = {"message": message_to_dict(message), "op": op}
        payload.update(extra)
        entry = self.entry("message", payload)
        self._built[entry.id] = message  # the projection reuses it instead of re-parsing the dict
        return entry

    def set_op(self, value: dict[str, Any] | None) -> RegisterWrite:
        """A CAS write of the operation register against the seq we last saw."""
        return RegisterWrite(op_key(self.conversation_id), value, expected_seq=self.op_seq())

    def receipt(self, request_id: str, payload: dict[str, Any]) -> Receipt:
        return Receipt(request_id, self.conversation_id, payload)

    def usage_row(self, record_id: str, payload: dict[str, Any]) -> UsageRow:
        return UsageRow(record_id, self.conversation_id, payload)

    def commit(self, commit: Commit) -> int:
        if self.faulted is not None:
            raise self.faulted
        chained: list[Entry] = []
        parent = self.head
        for entry in commit.entries:
            linked = Entry(entry.id, entry.conversation_id, entry.parent_id or parent, entry.kind, entry.payload)
            chained.append(linked)
            parent = linked.id
        commit.entries = chained
        try:
            seq = self.storage.commit(commit)
        except StoreError as exc:
            self.faulted = exc
            raise
        except Exception as exc:  # a backend bug must not leave memory ahead of the store
            self.faulted = StoreError(STORE_INVALID, f"commit failed: {exc}")
            raise self.faulted from exc
        for entry in chained:
            self._apply_entry(entry)
        for write in commit.registers:
            if write.value is None:
                self.registers.pop(write.key, None)
            else:
                self.registers[write.key] = Register(write.key, write.value, seq)
        for row in commit.usage:
            self.usage.setdefault(row.record_id, row)
        for receipt in commit.receipts:
            self.receipts[receipt.request_id] = receipt
        return seq

    # --- projection ------------------------------------------------------------------

    def _apply_entry(self, entry: Entry) -> None:
        self.head = entry.id
        payload = entry.payload
        kind = entry.kind
        if kind == "message":
            built = self._built.pop(entry.id, None)
            self.messages.append(built if built is not None else message_from_dict(payload["message"]))
            self.message_entry_ids.append(entry.id)
            self.message_ops.append(payload.get("op"))
            self.message_synthetic.append(bool(payload.get("synthetic")))
            call_key = payload.get("call_key")
            if call_key:
                self.results.add(call_key)
            op = payload.get("op")
            if op and payload.get("settles_fragments"):
                self.fragments.pop(op, None)
        elif kind == "fragment":
            self.fragments.setdefault(payload["op"], []).append(
                Fragment(payload["step"], payload["attempt"], payload["index"], payload["kind"], payload["text"])
            )
        elif kind == "tool_intent":
            self.intents[payload["call_key"]] = payload
        elif kind == "compaction":
            keep_from = payload.get("keep_from_entry")
            start = (
                self.message_entry_ids.index(keep_from) if keep_from in self.message_entry_ids else len(self.messages)
            )
            summary = message_from_dict(payload["summary_message"])
            self.messages = [summary, *self.messages[start:]]
            self.message_entry_ids = [entry.id, *self.message_entry_ids[start:]]
            self.message_ops = [None, *self.message_ops[start:]]
            self.message_synthetic = [True, *self.message_synthetic[start:]]
            self.compaction_generation += 1
        elif kind == "reset":
            self.messages = []
            self.message_entry_ids = []
            self.message_ops = []
            self.message_synthetic = []
            self.compaction_generation += 1
        elif kind == "transcript":
            for raw in payload["messages"]:
                self.messages.append(message_from_dict(raw))
                self.message_entry_ids.append(entry.id)
                self.message_ops.append(None)
                self.message_synthetic.append(False)

    def last_user_index(self) -> int:
        for index in range(len(self.messages) - 1, -1, -1):
            if isinstance(self.messages[index], UserMessage):
                return index
        return -1
