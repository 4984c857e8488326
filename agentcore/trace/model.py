"""The Trace's span model: what a timeline shows of a run, built from the store (SPEC W8).

A span is one interval of a run on one time axis (epoch ms of the store's clock): a turn, a
model request attempt, a tool call, a code-mode script and its nested calls, a subagent run, a
compaction, a wait for a person, a durable task and its phases, sleeps and waits, or the gap a
crash left before a resume. Times are ``None`` when the store does not know them (records
written before agentcore kept them, or an interval still open): such a span is shown with
unknown times, never dropped. ``refs`` name the records a span was built from, so a UI can load
a span's details (what was sent and received) lazily with ``span_details``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

SpanKind: TypeAlias = Literal[
    "turn",  # one operation (a request id): a prompt's run to its end
    "subagent",  # a subagent's operation, under the tool call that started it
    "model",  # one model request attempt (retries and continuations are attempts of their own)
    "tool",  # one tool call of the model
    "script",  # a code-mode script's execution, under its codemode tool call
    "nested_call",  # a tool call a code-mode script made
    "compaction",  # a summary of the context (automatic, manual or in the background)
    "wait",  # the run waited for a person: a plan review, an ask_user answer, a tool approval
    "gap",  # nothing ran: a crash, a close or a failover, until an owner resumed the operation
    "task",  # a durable task, from creation to its end
    "task_phase",  # one phase of a task
    "task_sleep",  # a task sleeping until its wake time
    "task_wait",  # a task waiting on its children
]
SpanStatus: TypeAlias = Literal["ok", "error", "running", "waiting", "queued", "interrupted", "cancelled", "unknown"]
SPAN_KINDS: tuple[str, ...] = SpanKind.__args__  # type: ignore[attr-defined]
SPAN_STATUSES: tuple[str, ...] = SpanStatus.__args__  # type: ignore[attr-defined]


@dataclass(slots=True)
class TraceSpan:
    """One span. ``seq`` is the store sequence number of the newest record it was built from:
    spans with ``seq`` above a reader's last one are what changed."""

    id: str
    kind: SpanKind
    name: str
    conversation_id: str
    parent_id: str | None = None
    request_id: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    status: SpanStatus = "unknown"
    attributes: dict[str, Any] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    seq: int = 0

    @property
    def duration_ms(self) -> int | None:
        if self.start_ms is None or self.end_ms is None:
            return None
        return max(0, self.end_ms - self.start_ms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parent_id": self.parent_id,
            "kind": self.kind,
            "name": self.name,
            "conversation_id": self.conversation_id,
            "request_id": self.request_id,
            "start_ms": self.start_ms,
            "end_ms": self.end_ms,
            "duration_ms": self.duration_ms,
            "status": self.status,
            "attributes": dict(self.attributes),
            "refs": dict(self.refs),
            "seq": self.seq,
        }


@dataclass(slots=True, frozen=True)
class TraceConversation:
    """A conversation of the store: the main one, a fork (``base``: the conversation and entry it
    was forked from) or a subagent (``owner_request`` / ``owner_call``: the turn and tool call
    that started it)."""

    conversation_id: str
    kind: Literal["main", "fork", "subagent"]
    target_id: int
    parent_conversation_id: str | None = None
    base: dict[str, str] | None = None
    owner_request: str | None = None
    owner_call: str | None = None
    label: str = ""
    created_ms: int | None = None
    deleted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "kind": self.kind,
            "target_id": self.target_id,
            "parent_conversation_id": self.parent_conversation_id,
            "base": self.base,
            "owner_request": self.owner_request,
            "owner_call": self.owner_call,
            "label": self.label,
            "created_ms": self.created_ms,
            "deleted": self.deleted,
        }


@dataclass(slots=True, frozen=True)
class Trace:
    """Spans in timeline order (start time, unknown starts by store order), with the
    conversations they belong to and the store position they are current as of."""

    spans: tuple[TraceSpan, ...]
    conversations: tuple[TraceConversation, ...]
    last_seq: int
    label: str = ""

    def span(self, span_id: str) -> TraceSpan | None:
        return next((s for s in self.spans if s.id == span_id), None)
