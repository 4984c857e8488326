"""The session snapshot (SPEC S3, S4): one JSON document that says everything a host shows.

A ``session`` event carries it after every committed change of session state; the
``snapshot`` command returns it on demand. It is derived from the store's projection only,
so a host that reconnects renders exactly what a live one saw. ``revision`` rises strictly
within one owner, and a newer owner's revisions are always higher than any older owner's
(the store's fencing counter is the high part), so a stale owner can never suppress a newer
snapshot. Records never carry credentials.

Long sessions stay cheap: ``turns`` keeps the newest ``MAX_TURNS`` turns and ``history`` the
newest ``MAX_HISTORY`` finished tasks (``turns_total`` / ``history_total`` count them all).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_TURNS = 100
MAX_HISTORY = 200
MAX_RECEIPTS = 50
TERMINAL = ("completed", "failed", "aborted")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UsageTotals(_Model):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_input_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    calls: int = 0
    cost: float = 0.0


class ContextUsage(_Model):
    used: int
    total: int


class QueuedInput(_Model):
    input_id: str
    kind: Literal["input", "reset", "delivery"]
    mode: Literal["follow_up", "steer"]
    agent: Literal["build", "plan"] | None = None  # the agent mode of the turn it starts
    prompt: str
    images: int


class ContextConfig(_Model):
    version: int = 0
    model: dict[str, str] | None = None  # {provider, model_id}
    effort: str | None = None
    web_search: Literal["auto", "on", "off"] | None = None  # None: never configured (= auto)


class PlanItemState(_Model):
    id: str
    text: str
    status: Literal["pending", "in_progress", "completed"]


class PlanState(_Model):
    version: int = 0
    items: list[PlanItemState] = Field(default_factory=list)


class ContextState(_Model):
    """One conversation of the session: main (target 0), a fork or a subagent."""

    target_id: int
    conversation_id: str
    kind: Literal["main", "fork", "subagent"]
    parent_target_id: int | None = None
    label: str = ""
    status: Literal["idle", "running", "paused", "queued"]
    request_id: str | None = None  # the open operation
    context_usage: ContextUsage | None = None
    config: ContextConfig = Field(default_factory=ContextConfig)
    queue: list[QueuedInput] = Field(default_factory=list)
    plan: PlanState = Field(default_factory=PlanState)
    forked_from: dict[str, Any] | None = None  # {target_id, entry_id}


class TaskState(_Model):
    """An active or finished unit of work: a tool call, a subagent, a compaction, a durable task.

    ``stopping`` is true while a cancel was requested and the task has not ended; finished
    tasks always have ``stopping: false`` and their real status. ``detail`` carries what the
    kind adds (a durable task's definition version, phase, checkpoint, wake time, children).
    """

    task_id: str
    kind: Literal["tool", "subagent", "compaction", "task"]
    name: str
    status: str
    stopping: bool = False
    target_id: int
    parent_task_id: str | None = None
    request_id: str | None = None
    arguments: Any = None
    result: Any = None
    error: str | None = None
    background: bool = False
    detail: dict[str, Any] = Field(default_factory=dict)


class TurnState(_Model):
    """One input's turn. ``reason`` is the error code of a turn that did not complete and
    ``detail`` its full reason; ``usage`` sums every model response of the turn (tool loop,
    failed retries and in-turn compactions), never another turn's or context's.
    ``steer_missed``: the input was a steer, but the turn it was meant for ended before a tool
    call, so it ran as the next turn (a host should say so: the person asked for a steer)."""

    request_id: str
    target_id: int
    status: str
    reason: str | None = None
    detail: str | None = None
    steer_missed: bool = False
    usage: UsageTotals = Field(default_factory=UsageTotals)


class SessionUsage(_Model):
    """Usage of one context: its own model calls, and with its subagents (``total``)."""

    target_id: int
    own: UsageTotals
    total: UsageTotals


class SessionSnapshot(_Model):
    version: Literal[1] = 1
    owner_id: str
    revision: int
    contexts: list[ContextState]
    tasks: list[TaskState]
    history: list[TaskState]
    history_total: int
    turns: list[TurnState]
    turns_total: int
    plan: PlanState
    records: dict[str, Any]
    receipts: list[dict[str, Any]]
    usage: list[SessionUsage]
