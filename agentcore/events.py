"""Events yielded by ``AgentRuntime.run()`` (SPEC E1–E2).

Each event is a small pydantic model with a literal ``type`` so hosts can ``match`` on it and
serialise it with ``model_dump()``. The union ``AgentEvent`` is discriminated on ``type``.
Events are emitted only after the fragment they describe was committed to the store, so a
client that reconnects and renders from the store never sees less than a live client saw.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)

    target_id: int | None = None  # session mode: set on events of another context (a fork, a subagent)
    # Session mode: the request (turn) the event belongs to, so a host can tell turns apart on
    # one event stream; None for session events and outside session mode (the caller knows).
    request_id: str | None = None


class TextDeltaEvent(_Event):
    type: Literal["text_delta"] = "text_delta"
    index: int
    delta: str


class ThinkingDeltaEvent(_Event):
    type: Literal["thinking_delta"] = "thinking_delta"
    index: int
    delta: str


class ToolEvent(_Event):
    """A tool call's lifecycle. ``tool_call_id`` is a stable, opaque display identity."""

    type: Literal["tool"] = "tool"
    phase: Literal["start", "update", "end"]
    tool_call_id: str
    name: str
    index: int | None = None
    arguments: dict[str, Any] | None = None
    partial: str | None = None  # update: streamed output so far
    result: str | None = None  # end: the text given back to the model
    is_error: bool = False
    duration_ms: float | None = None


class WebSearchEvent(_Event):
    type: Literal["web_search"] = "web_search"
    search: dict[str, Any]


class SourcesEvent(_Event):
    type: Literal["sources"] = "sources"
    sources: list[dict[str, Any]]


class PlanEvent(_Event):
    type: Literal["plan"] = "plan"
    phase: Literal["start", "end"]
    approval_id: str
    text: str | None = None


class CompactionEvent(_Event):
    type: Literal["compaction"] = "compaction"
    phase: Literal["start", "end"]
    auto: bool = False
    summary: str | None = None


class RetryEvent(_Event):
    type: Literal["retry"] = "retry"
    attempt: int
    max_attempts: int
    reason: str
    kind: Literal["dropped", "connect", "length", "lost-call", "recovery"]
    delay_s: float = 0.0
    endpoint: str | None = None  # ``connect``: the "host:port" that could not be reached


class ContextUsageEvent(_Event):
    type: Literal["context_usage"] = "context_usage"
    used: int
    total: int


class ApprovalEvent(_Event):
    type: Literal["approval"] = "approval"
    approval_id: str
    decision: Literal["approved", "rejected"]
    notes: str | None = None


class UsageEvent(_Event):
    """One settled model response's usage (also sent to ``host.report_usage``)."""

    type: Literal["usage"] = "usage"
    record_id: str
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    cache_creation_tokens: int
    reasoning_tokens: int
    cost: float
    cost_detail: dict[str, float] = Field(default_factory=dict)  # input / output / cache_read / cache_write
    model: str


class SessionEvent(_Event):
    type: Literal["session"] = "session"
    snapshot: dict[str, Any]


class RunEndEvent(_Event):
    """The final event: how the run ended.

    ``status`` is ``completed`` | ``failed`` | ``aborted`` | ``paused``. A paused run carries
    ``error_code="user_input_required"`` and ``pending`` (what the host must answer); resume
    with the same ``request_id`` and ``plan_resume`` / ``ask_resume``.
    """

    type: Literal["end"] = "end"
    status: Literal["completed", "failed", "aborted", "paused"]
    request_id: str
    text: str = ""
    error_code: str | None = None
    error: str | None = None
    pending: dict[str, Any] | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    replayed: bool = False


AgentEvent: TypeAlias = Annotated[
    TextDeltaEvent
    | ThinkingDeltaEvent
    | ToolEvent
    | WebSearchEvent
    | SourcesEvent
    | PlanEvent
    | CompactionEvent
    | RetryEvent
    | ContextUsageEvent
    | ApprovalEvent
    | UsageEvent
    | SessionEvent
    | RunEndEvent,
    Field(discriminator="type"),
]
