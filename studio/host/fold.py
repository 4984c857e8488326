"""The one fold: a runtime's typed events (and snapshots) into the host's state, plus effects.

``fold_event`` and ``fold_snapshot`` are pure — no database, no channel layer, no runtime call.
They change the in-memory state (the live turns, the snapshot, what each view must re-render)
and return the *effects* that Studio's tables need (``studio.host.effects`` writes them), so an
event passes this module once, and the writes and pushes follow from what it returned.

Every event is keyed by ``event.request_id`` (the runtime stamps the turn it belongs to):
a live turn is opened, recorded and ended by that id, never by guessing from the snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentcore.events import (
    AgentEvent,
    ApprovalEvent,
    ContextUsageEvent,
    PlanEvent,
    RetryEvent,
    RunEndEvent,
    SessionEvent,
    ToolEvent,
    UsageEvent,
)
from agentcore.session.snapshot import SessionSnapshot
from studio.host.live import OPENING_EVENTS, STEER_MISSED, ContextLive
from studio.host.state import HostedSession, config_versions, touch, view_status, wake

#: Only turns the snapshot still lists can matter for ``ContextLive.ended`` past this many.
ENDED_KEPT = 1000
#: Events that change no span of the Timeline (unless a delta opens a new block: a new request).
QUIET_EVENTS = frozenset({"text_delta", "thinking_delta", "context_usage"})


# --- what the fold asks Studio's tables for ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSubmitted:
    """A prompt the person sent was accepted (``running``) or queued."""

    view_id: str
    request_id: str
    prompt: str
    agent: str
    status: str
    mode: str


@dataclass(frozen=True, slots=True)
class RunEnded:
    view_id: str
    request_id: str
    status: str
    error_code: str
    error: str
    pending: dict[str, Any] | None
    prompt: str


@dataclass(frozen=True, slots=True)
class ToolRecorded:
    root_id: str
    request_id: str
    event: ToolEvent


@dataclass(frozen=True, slots=True)
class UsageRecorded:
    root_id: str
    request_id: str
    target_id: int
    event: UsageEvent


@dataclass(frozen=True, slots=True)
class PlanRecorded:
    view_id: str
    request_id: str
    event: PlanEvent


@dataclass(frozen=True, slots=True)
class ApprovalRecorded:
    view_id: str
    request_id: str
    event: ApprovalEvent


@dataclass(frozen=True, slots=True)
class RetryRecorded:
    view_id: str
    request_id: str
    event: RetryEvent


@dataclass(frozen=True, slots=True)
class RunPlaced:
    """A queued steer joined the running turn."""

    view_id: str
    request_id: str


@dataclass(frozen=True, slots=True)
class StatusesChanged:
    """The sessions list's status of these views (view id → status)."""

    statuses: dict[str, str]


@dataclass(frozen=True, slots=True)
class LedgerSync:
    """A turn ended: reconcile Studio's usage with the store's ledger."""


Effect = (
    RunSubmitted
    | RunEnded
    | ToolRecorded
    | UsageRecorded
    | PlanRecorded
    | ApprovalRecorded
    | RetryRecorded
    | RunPlaced
    | StatusesChanged
    | LedgerSync
)


# --- the fold ------------------------------------------------------------------------------------


def fold_event(hs: HostedSession, event: AgentEvent) -> list[Effect]:
    """Fold one event; nothing at all once the session was lost to another holder (its pages
    follow the new holder, and the runs it records are the new holder's to end)."""
    if hs.lost:
        return []
    if event.type not in QUIET_EVENTS:
        _timeline_changed(hs)
    if isinstance(event, SessionEvent):
        return fold_snapshot(hs, SessionSnapshot.model_validate(event.snapshot), event.snapshot)
    target = int(event.target_id or 0)
    ctx = hs.context(target)
    view = hs.views.get(target)
    view_id = view.view_id if view is not None else None
    effects: list[Effect] = []
    if isinstance(event, RunEndEvent):
        request_id = event.request_id
        if view_id is not None:
            effects.append(
                RunEnded(
                    view_id,
                    request_id,
                    status=event.status,
                    error_code=event.error_code or "",
                    error=event.error or "",
                    pending=event.pending if event.status == "paused" else None,
                    prompt=hs.prompts.get(request_id, ""),
                )
            )
        if ctx.live is not None and ctx.live.context_usage is not None:
            ctx.context_usage = ctx.live.context_usage
        ctx.end(request_id)
        ctx.paused = event.status == "paused"
        hs.prompts.pop(request_id, None)
        if len(ctx.ended) > ENDED_KEPT and hs.snapshot is not None:
            ctx.ended &= {t.request_id for t in hs.snapshot.turns} | {request_id}
        effects.append(LedgerSync())
        effects.extend(_statuses(hs))
        paused = event.status == "paused"
        touch(hs, view, conversation=True, controls=True, ring=True, pending=paused, plan=paused)
        return effects
    if isinstance(event, ContextUsageEvent):
        ctx.context_usage = {"used": event.used, "total": event.total}
        if ctx.live is not None:
            ctx.live.apply(event)
        touch(hs, view, ring=True)
        return effects
    request_id = event.request_id or _open_request(hs, target)
    if event.type in OPENING_EVENTS and request_id and request_id not in ctx.ended:
        if ctx.live is None or ctx.live.request_id != request_id:
            _open(hs, ctx, request_id)
            effects.extend(_statuses(hs))
    live = ctx.live if ctx.live is not None and ctx.live.request_id == request_id else None
    if live is not None:
        live.apply(event)
        if event.type in QUIET_EVENTS and live.added:  # a new block: likely a new model request
            _timeline_changed(hs)
    if isinstance(event, ToolEvent):
        effects.append(ToolRecorded(hs.root_id, request_id, event))
        touch(hs, view, tasks=True)
    elif isinstance(event, UsageEvent):
        # The usage region is marked when this row is written (``effects.apply``): it reads it.
        effects.append(UsageRecorded(hs.root_id, event.request_id or request_of(event.record_id), target, event))
    elif isinstance(event, PlanEvent):
        if event.approval_id:
            effects.append(PlanRecorded(view_id or hs.root_id, request_id, event))
        touch(hs, view, plan=True)
    elif isinstance(event, ApprovalEvent):
        effects.append(ApprovalRecorded(view_id or hs.root_id, request_id, event))
        touch(hs, view, plan=True)
    elif isinstance(event, RetryEvent) and view_id is not None:
        effects.append(RetryRecorded(view_id, request_id, event))
    wake(hs)
    return effects


def _timeline_changed(hs: HostedSession) -> None:
    """Every view's Timeline may show a change (a subagent's spans are in its parent's): marked
    only once a page opened the store's Timeline (``studio.host.timeline_feed``)."""
    if hs.timeline is not None:
        for view in hs.views.values():
            view.dirty.mark(timeline=True)


def open_turn(hs: HostedSession, target_id: int, request_id: str, *, agent: str = "build") -> None:
    """A turn was accepted (its prompt is committed): open it live now, so its first token
    goes out as a patch of an already open turn, not with a render of the whole page."""
    ctx = hs.context(target_id)
    if ctx.live is not None and ctx.live.request_id == request_id:
        return
    ctx.begin(request_id, agent=agent)
    touch(hs, hs.views.get(target_id), opening=True, controls=True)


def _open(hs: HostedSession, ctx: ContextLive, request_id: str) -> None:
    """The first event of a turn Studio did not start (a queued follow-up, a delivered result,
    a turn a restarted host resumes) opens it live."""
    turn = next((t for t in hs.snapshot.turns if t.request_id == request_id), None) if hs.snapshot else None
    agent = "build"
    if turn is None and hs.snapshot is not None:
        context = hs.snapshot_context(ctx.target_id)
        queued = [q for q in context.queue if q.input_id == request_id] if context is not None else []
        agent = (queued[0].agent if queued else None) or "build"
    live = ctx.begin(request_id, agent=agent)
    if turn is not None and turn.steer_missed:  # the person asked for a steer: say what became of it
        live.note("notice", STEER_MISSED)
    touch(hs, hs.views.get(ctx.target_id), opening=True, controls=True)


def request_of(record_id: str) -> str:
    """The request a usage record belongs to (``<request_id>:<step>:<attempt>``), for a usage
    event the runtime did not stamp."""
    parts = record_id.rsplit(":", 2)
    return parts[0] if len(parts) == 3 else record_id


def _open_request(hs: HostedSession, target_id: int) -> str:
    """An event without a request id (never in session mode): the conversation's open one."""
    context = hs.snapshot_context(target_id)
    return (context.request_id or "") if context is not None else ""


def fold_snapshot(hs: HostedSession, snapshot: SessionSnapshot, data: dict[str, Any]) -> list[Effect]:
    """A new snapshot: mark each view's regions whose part of the snapshot changed."""
    previous, before = hs.snapshot, hs.snapshot_data or {}
    if previous is not None and snapshot.revision < previous.revision:
        return []  # an older picture than the one shown (a command's fresh snapshot came first)
    hs.snapshot, hs.snapshot_data = snapshot, data
    effects: list[Effect] = []
    for context in snapshot.contexts:
        for item in context.queue:
            hs.prompts.setdefault(item.input_id, item.prompt)
        view_id = hs.view_id(context.target_id)
        for input_id in _placed_steers(hs, context.target_id, {q.input_id for q in context.queue}, snapshot):
            if view_id is not None:
                effects.append(RunPlaced(view_id, input_id))
    parts = {name: digest(before) != digest(data) for name, digest in SNAPSHOT_PARTS.items()} if before else None
    versions_changed = previous is None or config_versions(previous) != config_versions(snapshot)
    compacted = _compactions_changed(previous, snapshot)
    for view in hs.views.values():
        if view.target_id in compacted:
            # A background compaction started or ended (C3 "Compact now"): the conversation shows
            # its divider, and an applied summary changes the context and so the ring.
            view.dirty.mark(conversation=True, ring=True)
            _take_context_usage(hs, view.target_id)
        if parts is None:
            view.dirty.mark(controls=True, tasks=True, usage=True, plan=True, records=True, config=True)
            continue
        view.dirty.mark(
            controls=parts["controls"],
            tasks=parts["tasks"],
            usage=parts["usage"],
            plan=parts["plan"],
            records=parts["records"],
            config=versions_changed,
        )
    _timeline_changed(hs)
    effects.extend(_statuses(hs))
    wake(hs)
    return effects


def _compactions_changed(previous: SessionSnapshot | None, snapshot: SessionSnapshot) -> set[int]:
    """Conversations whose background compactions started or ended since ``previous``."""
    if previous is None:
        return set()

    def running(shot: SessionSnapshot) -> set[tuple[int, str]]:
        return {(t.target_id, t.task_id) for t in shot.tasks if t.kind == "compaction"}

    return {target for target, _task in running(previous) ^ running(snapshot)}


def _take_context_usage(hs: HostedSession, target_id: int) -> None:
    """The ring follows the snapshot's estimate after a background compaction (no
    ``context_usage`` event reports the smaller context)."""
    context = hs.snapshot_context(target_id)
    if context is not None and context.context_usage is not None and not hs.live(target_id):
        hs.context(target_id).context_usage = context.context_usage.model_dump()


def _controls_part(data: dict[str, Any]) -> Any:
    """What the controls show: each context's status, queue and settings, whether background
    work runs, and how each conversation's last turn ended."""
    contexts = [
        (c.get("target_id"), c.get("status"), c.get("queue"), c.get("config"), c.get("label"))
        for c in data.get("contexts", [])
    ]
    background = sorted((t.get("target_id") or 0, t.get("kind")) for t in data.get("tasks", []))
    last: dict[Any, Any] = {}
    for turn in data.get("turns", []):
        last[turn.get("target_id")] = turn.get("status")
    return contexts, background, sorted(last.items(), key=lambda item: str(item[0]))


#: Each region's part of a snapshot: a region is re-rendered only when its part changed.
SNAPSHOT_PARTS: dict[str, Any] = {
    "controls": _controls_part,
    "tasks": lambda data: (data.get("tasks"), data.get("history"), data.get("history_total")),
    "usage": lambda data: data.get("usage"),
    "plan": lambda data: [(c.get("target_id"), c.get("plan")) for c in data.get("contexts", [])],
    "records": lambda data: data.get("records"),
}


def _statuses(hs: HostedSession) -> list[Effect]:
    """Each view's status for the sessions list, when it changed (snapshot or turn end)."""
    if hs.snapshot is None:
        return []
    statuses: dict[str, str] = {}
    for view in hs.views.values():
        status = view_status(hs.snapshot, view.target_id, live=hs.live(view.target_id))
        if status != view.status:
            view.status = status
            statuses[view.view_id] = status
    return [StatusesChanged(statuses)] if statuses else []


def _placed_steers(hs: HostedSession, target: int, queued: set[str], snapshot: SessionSnapshot) -> list[str]:
    """A queued steer that left the queue without becoming a turn of its own joined the live
    turn: shown there now; returns the input ids placed."""
    waiting = hs.queued_steers.get(target)
    if not waiting:
        return []
    placed: list[str] = []
    turns = {t.request_id for t in snapshot.turns}
    ctx = hs.context(target)
    for input_id in [i for i in waiting if i not in queued]:
        prompt = waiting.pop(input_id)
        if input_id in turns or input_id in hs.withdrawn or ctx.live is None:
            continue  # it became a turn of its own (or was taken back)
        ctx.live.note("steer", prompt)
        placed.append(input_id)
    return placed
