"""The durable program counter of an operation: the value of the ``op:<conversation>`` register
(SPEC D1; ARCHITECTURE "program counter, not replay").

One register per conversation, overwritten at every step of the open operation and removed
by its terminal transaction. ``phase`` says what the next step is; the other fields carry
what that step needs. The stored form is plain JSON and is exactly these keys — the types
only name them for the checker (``OpState`` is a ``TypedDict``, not a model: nothing is
converted or validated on the hot path, and a store written by an earlier version opens as
it is). Keys an earlier version did not write are ``NotRequired`` and read with ``.get``.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

Phase: TypeAlias = Literal["model", "tools", "paused", "plan_review", "compact"]
PHASES: tuple[Phase, ...] = ("model", "tools", "paused", "plan_review", "compact")


class RetryBudgets(TypedDict):
    """Retry budgets of the current step (``engine.retry``): spent connection attempts and
    ``max_tokens`` continuations."""

    connection: int
    length: int


class ToolCallState(TypedDict):
    """One call of the assistant message whose tool round is open."""

    id: str
    name: str
    arguments: dict[str, Any]
    index: int
    refusal: NotRequired[str]  # refused before it entered the transcript (``call_limits``)
    oversize_tokens: NotRequired[int]  # how a register written before issue 22 marks a refusal


class PlanReviewState(TypedDict):
    """A plan-mode answer waiting for review (``phase: plan_review``)."""

    approval_id: str
    text: str


class OpState(TypedDict):
    """The program counter; see the module docstring."""

    request_id: str
    phase: Phase
    mode: str  # build | plan: the agent mode of the next request
    step: int  # the model request the operation is at
    attempt: int  # retries of that request
    budgets: RetryBudgets
    settings: dict[str, Any]  # the run's own settings (AgentInput overrides)
    pinned: NotRequired[dict[str, Any]]  # the model identity fixed at start (DURABILITY 13)
    trace: NotRequired[dict[str, str]]  # the request's trace anchor
    config_version: NotRequired[int]  # the session's ``configure`` version it runs on
    owner: NotRequired[str]  # who wrote it last, and when (``ConversationLog.set_op``)
    at_ms: NotRequired[int]
    # phase tools: the open round
    tool_calls: NotRequired[list[ToolCallState]]
    assistant_entry: NotRequired[str]
    approvals: NotRequired[dict[str, dict[str, Any]]]  # decided approvals of the round, by call key
    resolved_user_inputs: NotRequired[list[dict[str, Any]]]
    pause_turns: NotRequired[int]
    # phase paused: what the operation waits for (kind: ask_user | tool_approval | plan)
    pending: NotRequired[dict[str, Any]]
    # phase plan_review, and the reviews so far
    plan: NotRequired[PlanReviewState]
    plan_history: NotRequired[list[dict[str, Any]]]
    # compaction (C3–C5)
    compacted_step: NotRequired[int]
    force_compaction: NotRequired[bool]
    overflow_compacted: NotRequired[bool]
