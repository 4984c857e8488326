"""The runtime's in-memory projection of a store: one ``StoreView`` and a ``ConversationLog``
per conversation (SPEC D1, S2; ARCHITECTURE "the store is the truth").

Every change goes through ``StoreView.commit()``: the store applies it first (atomically,
fenced), then the projection is updated from the same records — so memory is never ahead of
the store. A failed commit faults the view: the runtime must be reopened.

The view holds what a store shares across conversations (registers, receipts, the usage
ledger, task rows); each ``ConversationLog`` holds one conversation's model context and the
bookkeeping of its open operation. Conversations form a tree: a fork's first entry has the
entry it was forked from (in another conversation) as its parent, and its log starts from
that conversation's state at that entry.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from agentcore.clock import WallClock, system_clock
from agentcore.errors import STORE_INVALID, StoreError
from agentcore.harness.op_state import OpState
from agentcore.harness.storage import (
    AgentStorage,
    Commit,
    Entry,
    Receipt,
    Register,
    RegisterWrite,
    StoreState,
    TaskRow,
    UsageRow,
)
from agentcore.messages import (
    Message,
    UserMessage,
    message_from_dict,
    message_to_dict,
)

TOOL_HISTORY = 200  # finished tool calls a log remembers for the session snapshot
RESULT_PREVIEW = 2_000
CODE_HISTORY = 20  # finished code-mode runs a log remembers for the session snapshot

CommitListener = Callable[[Commit, int], None]


def new_id() -> str:
    """A random 128-bit hex id (the format of ``uuid4().hex``, at a quarter of its cost: one is
    made for every entry of the hot loop)."""
    return os.urandom(16).hex()


def op_key(conversation_id: str) -> str:
    return f"op:{conversation_id}"


def cancel_key(conversation_id: str) -> str:
    """The durable cancel marker of a conversation's open operation (DURABILITY 12)."""
    return f"cancel:{conversation_id}"


def conversation_key(conversation_id: str) -> str:
    """Metadata of a conversation the session protocol created (target id, kind, fork base)."""
    return f"conv:{conversation_id}"


@dataclass(slots=True)
class Fragment:
    step: int
    attempt: int
    index: int
    kind: str  # "text" | "thinking"
    text: str


class StoreView:
    """What one open store holds, shared by all its conversations."""

    def __init__(self, storage: AgentStorage, state: StoreState, clock: WallClock = system_clock) -> None:
        self.storage = storage
        self.clock = clock  # the one wall clock of every time a commit records (``agentcore.clock``)
        self.owner_id = state.owner_id
        self.fence = state.fence
        self.last_seq = state.last_seq
        self.registers: dict[str, Register] = dict(state.registers)
        self.receipts: dict[str, Receipt] = dict(state.receipts)
        self.usage: dict[str, UsageRow] = {row.record_id: row for row in state.usage}
        self.tasks: dict[str, TaskRow] = dict(state.tasks)
        self.logs: dict[str, ConversationLog] = {}
        self.faulted: StoreError | None = None
        self._listeners: list[CommitListener] = []
        self._entries: dict[str, list[Entry]] | None = _by_conversation(state.entries)

    @classmethod
    def open(
        cls,
        storage: AgentStorage,
        state: StoreState,
        conversations: Iterable[str] = (),
        *,
        clock: WallClock = system_clock,
    ) -> StoreView:
        """A view with a log for each of ``conversations`` plus every conversation the session
        protocol registered; the loaded entries are dropped afterwards."""
        view = cls(storage, state, clock)
        wanted = {*conversations, *(key[len("conv:") :] for key in view.registers if key.startswith("conv:"))}
        for conversation_id in sorted(wanted):
            view.log(conversation_id)
        view._entries = None
        return view

    # --- reading ----------------------------------------------------------------------

    def log(self, conversation_id: str) -> ConversationLog:
        """The conversation's log, built on first use (forks replay their base first)."""
        log = self.logs.get(conversation_id)
        if log is None:
            log = self._build(conversation_id)
            self.logs[conversation_id] = log
        return log

    def new_log(self, conversation_id: str) -> ConversationLog:
        """The log of a conversation about to be created here (no entries yet, no fork base)."""
        if conversation_id in self.logs:
            raise StoreError(STORE_INVALID, f"conversation {conversation_id!r} already exists")
        log = self.logs[conversation_id] = ConversationLog(self, conversation_id)
        return log

    def register(self, key: str) -> dict[str, Any] | None:
        register = self.registers.get(key)
        return dict(register.value) if register is not None else None

    def register_seq(self, key: str) -> int:
        register = self.registers.get(key)
        return register.seq if register is not None else 0

    def on_commit(self, listener: CommitListener) -> None:
        """Call ``listener(commit, seq)`` after every applied commit (aggregates, snapshots)."""
        self._listeners.append(listener)

    # --- writing ----------------------------------------------------------------------

    def commit(self, commit: Commit) -> int:
        if self.faulted is not None:
            raise self.faulted
        heads: dict[str, str | None] = {}
        chained: list[Entry] = []
        for entry in commit.entries:
            conversation = entry.conversation_id
            if conversation not in heads:
                heads[conversation] = self.log(conversation).head
            linked = Entry(entry.id, conversation, entry.parent_id or heads[conversation], entry.kind, entry.payload)
            chained.append(linked)
            heads[conversation] = linked.id
        commit.entries = chained
        try:
            seq = self.storage.commit(commit)
        except StoreError as exc:
            self.faulted = exc
            raise
        except Exception as exc:  # a backend bug must not leave memory ahead of the store
            self.faulted = StoreError(STORE_INVALID, f"commit failed: {exc}")
            raise self.faulted from exc
        self.last_seq = seq
        for entry in chained:
            self.log(entry.conversation_id).apply_entry(
                Entry(entry.id, entry.conversation_id, entry.parent_id, entry.kind, entry.payload, seq)
            )
        for write in commit.registers:
            if write.value is None:
                self.registers.pop(write.key, None)
            else:
                self.registers[write.key] = Register(write.key, write.value, seq)
        for row in commit.usage:
            self.usage.setdefault(row.record_id, UsageRow(row.record_id, row.conversation_id, row.payload, seq))
        for receipt in commit.receipts:
            self.receipts[receipt.request_id] = Receipt(
                receipt.request_id, receipt.conversation_id, receipt.payload, seq
            )
        for task in commit.tasks:
            self.tasks[task.task_id] = TaskRow(task.task_id, task.conversation_id, task.payload, seq)
        for listener in self._listeners:
            listener(commit, seq)
        return seq

    # --- building logs ----------------------------------------------------------------

    def fork_log(self, conversation_id: str, base: dict[str, str]) -> ConversationLog:
        """The log of a fork about to be created: ``base``'s conversation up to its entry.

        Registered before the transaction that creates the fork, so that transaction's own
        entries chain onto the fork entry; drop it from ``logs`` if that transaction fails.
        """
        if conversation_id in self.logs:
            raise StoreError(STORE_INVALID, f"conversation {conversation_id!r} already exists")
        entries = self._entries if self._entries is not None else _by_conversation(self.storage.load().entries)
        log = ConversationLog(self, conversation_id)
        for entry in self._chain(base, entries):
            log.apply_entry(entry)
        self.logs[conversation_id] = log
        return log

    def _build(self, conversation_id: str) -> ConversationLog:
        entries = self._entries if self._entries is not None else _by_conversation(self.storage.load().entries)
        log = ConversationLog(self, conversation_id)
        base = (self.register(conversation_key(conversation_id)) or {}).get("base")
        for entry in self._chain(base, entries) if base else ():
            log.apply_entry(entry)
        own = entries.get(conversation_id, [])
        live_from = _live_from(own)
        for index, entry in enumerate(own):
            log.apply_entry(entry, superseded=index < live_from)
        return log

    def _chain(self, base: dict[str, str], entries: dict[str, list[Entry]]) -> list[Entry]:
        """The entries a fork inherits: its base conversation's chain up to the fork entry
        (which may itself be inherited, for a fork of a fork)."""
        source, until = str(base["conversation"]), str(base["entry"])
        source_base = (self.register(conversation_key(source)) or {}).get("base")
        chain = [*(self._chain(source_base, entries) if source_base else ()), *entries.get(source, [])]
        for index, entry in enumerate(chain):
            if entry.id == until:
                return chain[: index + 1]
        raise StoreError(STORE_INVALID, f"a fork of {source!r} starts at a missing entry {until!r}")


def _archived(run: CodeRun) -> CodeRun:
    """A finished run as the snapshot needs it: nested results cut to previews, so the
    history holds at most ``CODE_HISTORY`` runs' worth of previews, not every tool output."""
    results = {}
    for index, result in run.results.items():
        short = dict(result)
        for key in ("value", "error"):
            value = short.get(key)
            if value is not None and not isinstance(value, str):
                value = json.dumps(value, ensure_ascii=False)
            if isinstance(value, str) and len(value) > RESULT_PREVIEW:
                short[key] = value[:RESULT_PREVIEW]
        results[index] = short
    return CodeRun(run.parent, run.header, dict(run.intents), results, run.end)


def _live_from(entries: list[Entry]) -> int:
    """The index of the first of ``entries`` whose message can still be in the context: the
    last reset, or the entry the last compaction kept from. Messages before it were dropped from
    the context, so opening a long session need not rebuild them (only their tool calls and
    results are tracked). 0 when unsure (a compaction keeping from a fork's base)."""
    for index in range(len(entries) - 1, -1, -1):
        entry = entries[index]
        if entry.kind == "reset":
            return index
        if entry.kind == "compaction":
            keep = entry.payload.get("keep_from_entry")
            if keep is None:
                return index
            return next((j for j in range(index - 1, -1, -1) if entries[j].id == keep), 0)
    return 0


def _by_conversation(entries: list[Entry]) -> dict[str, list[Entry]]:
    grouped: dict[str, list[Entry]] = {}
    for entry in entries:
        grouped.setdefault(entry.conversation_id, []).append(entry)
    return grouped


@dataclass(slots=True)
class CodeRun:
    """The execution log of one tool call that calls other tools (code mode, SPEC X4).

    ``header`` is the ``code_run`` entry (script, sandbox fingerprint, limits, seed, clock),
    written before the script first starts; ``intents`` / ``results`` are the ``nested_intent``
    / ``nested_result`` entries by call index (a blocked or refused call has a result and no
    intent); ``end`` is the ``code_run_end`` record committed with the parent call's result.
    Recovery replays the run from these (``agentcore.engine.nested``).
    """

    parent: str  # the parent call's key, "<request>/<step>/<index>"
    header: dict[str, Any]
    intents: dict[int, dict[str, Any]] = field(default_factory=dict)
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    end: dict[str, Any] | None = None


@dataclass(slots=True)
class ConversationLog:
    """One conversation: its model-visible messages and its open operation's bookkeeping."""

    view: StoreView
    conversation_id: str
    messages: list[Message] = field(default_factory=list)
    message_entry_ids: list[str] = field(default_factory=list)
    message_ops: list[str | None] = field(default_factory=list)
    message_synthetic: list[bool] = field(default_factory=list)  # runtime-written prompts, not the user's
    head: str | None = None
    fragments: dict[str, list[Fragment]] = field(default_factory=dict)  # by op request id
    intents: dict[str, dict[str, Any]] = field(default_factory=dict)  # by "op/step/call_id"
    results: set[str] = field(default_factory=set)  # "op/step/call_id" settled
    compaction_generation: int = 0
    plan: dict[str, Any] = field(default_factory=lambda: {"version": 0, "items": []})  # as of the head
    entry_ids: set[str] = field(default_factory=set)  # the chain's entries but fragments: fork points
    tool_history: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=TOOL_HISTORY))
    tools_finished: int = 0  # every finished tool call (``tool_history`` keeps the newest)
    code_runs: dict[str, CodeRun] = field(default_factory=dict)  # by parent call key, until it is settled
    code_history: deque[CodeRun] = field(default_factory=lambda: deque(maxlen=CODE_HISTORY))
    _open_calls: dict[str, dict[str, Any]] = field(default_factory=dict)  # call id → the committed call
    _built: dict[str, Message] = field(default_factory=dict)  # messages of entries not yet committed

    @classmethod
    def load(
        cls, storage: AgentStorage, state: StoreState, conversation_id: str, *, clock: WallClock = system_clock
    ) -> ConversationLog:
        """A log over a fresh view of ``state`` (one-off users: offline cancel, hosted runs)."""
        return StoreView.open(storage, state, [conversation_id], clock=clock).log(conversation_id)

    # --- shared store state (through the view) ------------------------------------------

    @property
    def storage(self) -> AgentStorage:
        return self.view.storage

    @property
    def owner_id(self) -> str:
        return self.view.owner_id

    @property
    def registers(self) -> dict[str, Register]:
        return self.view.registers

    @property
    def receipts(self) -> dict[str, Receipt]:
        return self.view.receipts

    @property
    def usage(self) -> dict[str, UsageRow]:
        return self.view.usage

    @property
    def faulted(self) -> StoreError | None:
        return self.view.faulted

    def now_ms(self) -> int:
        """The store view's wall clock (epoch ms): what every timing field is read from."""
        return self.view.clock()

    # --- reading ---------------------------------------------------------------------

    @property
    def op(self) -> OpState | None:
        """The open operation's program counter (``op_state``), if one is open."""
        return cast("OpState | None", self.view.register(op_key(self.conversation_id)))

    def op_seq(self) -> int:
        return self.view.register_seq(op_key(self.conversation_id))

    @property
    def cancel_marker(self) -> dict[str, Any] | None:
        """The committed cancel request of the open operation, if any."""
        marker = self.view.register(cancel_key(self.conversation_id))
        op = self.op
        if marker is None or op is None or marker.get("request_id") != op["request_id"]:
            return None
        return marker

    def last_user_index(self) -> int:
        for index in range(len(self.messages) - 1, -1, -1):
            if isinstance(self.messages[index], UserMessage):
                return index
        return -1

    # --- writing ---------------------------------------------------------------------

    def entry(self, kind: str, payload: dict[str, Any], parent: str | None = None) -> Entry:
        return Entry(new_id(), self.conversation_id, parent, kind, payload)

    def message_entry(self, message: Message, op: str | None, **extra: Any) -> Entry:
        payload: dict[str, Any] = {"message": message_to_dict(message), "op": op}
        payload.update(extra)
        entry = self.entry("message", payload)
        self._built[entry.id] = message  # the projection reuses it instead of re-parsing the dict
        return entry

    def set_op(self, value: OpState | None) -> RegisterWrite:
        """A CAS write of the operation register against the seq we last saw.

        Each write is stamped with the writing owner and the time (``owner``, ``at_ms``): an
        engine that finds another owner's stamp is resuming the operation (a crash, a close, a
        failover) and records when, and the gap since the last write, in a ``resume`` entry."""
        stamped = None if value is None else {**value, "owner": self.owner_id, "at_ms": self.view.clock()}
        return RegisterWrite(op_key(self.conversation_id), stamped, expected_seq=self.op_seq())

    def receipt(self, request_id: str, payload: dict[str, Any]) -> Receipt:
        return Receipt(request_id, self.conversation_id, payload)

    def usage_row(self, record_id: str, payload: dict[str, Any]) -> UsageRow:
        return UsageRow(record_id, self.conversation_id, payload)

    def commit(self, commit: Commit) -> int:
        return self.view.commit(commit)

    # --- projection ------------------------------------------------------------------

    def apply_entry(self, entry: Entry, *, superseded: bool = False) -> None:
        """Project one committed entry. ``superseded``: a later reset or compaction drops this
        entry's messages from the context, so they are not rebuilt (everything else is)."""
        self.head = entry.id
        payload = entry.payload
        kind = entry.kind
        if kind != "fragment":
            self.entry_ids.add(entry.id)
        if kind == "message":
            self._track_tools(entry, payload["message"])
            if not superseded:
                built = self._built.pop(entry.id, None)
                self.messages.append(built if built is not None else message_from_dict(payload["message"]))
                self.message_entry_ids.append(entry.id)
                self.message_ops.append(payload.get("op"))
                self.message_synthetic.append(bool(payload.get("synthetic")))
            call_key = payload.get("call_key")
            if call_key:
                self.results.add(call_key)
                run = self.code_runs.pop(call_key, None)
                if run is not None:
                    self.code_history.append(_archived(run))
            op = payload.get("op")
            if op and payload.get("settles_fragments"):
                self.fragments.pop(op, None)
        elif kind == "fragment":
            self.fragments.setdefault(payload["op"], []).append(
                Fragment(payload["step"], payload["attempt"], payload["index"], payload["kind"], payload["text"])
            )
        elif kind == "tool_intent":
            self.intents[payload["call_key"]] = payload
        elif kind == "compaction" and superseded:
            self.compaction_generation += 1
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
            handoff = payload.get("handoff")
            if handoff:
                self.messages.append(message_from_dict(handoff))
                self.message_entry_ids.append(entry.id)
                self.message_ops.append(None)
                self.message_synthetic.append(True)
        elif kind == "transcript":
            for raw in () if superseded else payload["messages"]:
                self.messages.append(message_from_dict(raw))
                self.message_entry_ids.append(entry.id)
                self.message_ops.append(None)
                self.message_synthetic.append(False)
        elif kind == "plan":
            self.plan = {"version": payload["version"], "items": payload["items"]}
        elif kind in ("code_run", "nested_intent", "nested_result", "code_run_end"):
            self._apply_code_entry(kind, payload)

    def _apply_code_entry(self, kind: str, payload: dict[str, Any]) -> None:
        parent = str(payload["parent"])
        if kind == "code_run":
            self.code_runs[parent] = CodeRun(parent, payload)
            return
        run = self.code_runs.get(parent)
        if run is None:  # a log without its header: kept, so that recovery can refuse it clearly
            run = self.code_runs[parent] = CodeRun(parent, {})
        if kind == "nested_intent":
            run.intents[int(payload["index"])] = payload
        elif kind == "nested_result":
            run.results[int(payload["index"])] = payload
        else:
            run.end = payload

    def _track_tools(self, entry: Entry, message: dict[str, Any]) -> None:
        """Tool calls as tasks (S4): each bound to its committed assistant entry, so a model that
        reuses call ids never makes two calls look alike; finished ones go to ``tool_history``.
        Read from the committed dict (``message_to_dict``'s format), which every entry has,
        whether or not its message object is rebuilt."""
        role = message.get("role")
        if role == "assistant":
            for block in message["content"]:
                if block.get("type") == "tool_call":
                    self._open_calls[block["id"]] = {
                        "task_id": f"{entry.id[:12]}:{block['id']}",
                        "name": block["name"],
                        "arguments": dict(block["arguments"]),
                        "request_id": entry.payload.get("op"),
                    }
        elif role == "tool_result":
            call = self._open_calls.pop(message["tool_call_id"], None)
            if call is not None:
                text = "".join(b["text"] for b in message["content"] if b.get("type") == "text")
                status = "failed" if message.get("is_error") else "completed"
                self.tool_history.append(dict(call, status=status, result=text[:RESULT_PREVIEW], seq=entry.seq))
                self.tools_finished += 1

    def open_call(self, call_id: str) -> dict[str, Any] | None:
        """The committed, not yet answered tool call ``call_id`` (its task id and arguments)."""
        return self._open_calls.get(call_id)
