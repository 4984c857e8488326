"""Writes: everything that changes Studio's records lives here (views and hosts call these).

The functions the session host calls are keyed by stable ids from the runtime
(``request_id``, ``tool_call_id``, ``record_id``, ``approval_id``) and written as upserts, so an
event seen twice (a resumed run replays its settled usage) never counts twice.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from agentcore.demo import seed_demo_workspace
from agentcore.events import ToolEvent
from studio import sql
from studio.confinement import isolation_for_new_session
from studio.host.live import clip
from studio.models import (
    Approval,
    Mode,
    RegisteredModel,
    Run,
    RunStatus,
    SessionKind,
    SessionStatus,
    StudioSession,
    ToolCall,
    ToolIsolation,
    UsageRecord,
)
from studio.stores import new_store_location
from studio.workspaces import WorkdirError as WorkdirError  # raised by session_create (re-exported)
from studio.workspaces import resolve_workdir


def session_create(
    *,
    owner: AbstractBaseUser,
    registered_model: RegisteredModel,
    workdir: str,
    permission_policy: str,
    effort: str,
    mode: str,
    title: str = "",
    tool_isolation: str = "",
) -> StudioSession:
    """A new main session of ``owner``. ``tool_isolation`` is a staff member's choice of where
    its tools run ("" = the model's choice, else by person: ``studio.confinement``); the workdir
    must be one this person may use (``studio.workspaces``), else ``WorkdirError``."""
    session = StudioSession(
        owner=owner,
        registered_model=registered_model,
        permission_policy=permission_policy,
        effort=effort,
        mode=mode,
        title=title.strip()[:200],
        tool_isolation=isolation_for_new_session(owner, registered_model, tool_isolation),
    )
    own = StudioSession.objects.filter(owner_id=owner.pk).values_list("pk", flat=True)
    session.workdir = resolve_workdir(
        workdir,
        str(session.id),
        owner_sessions={str(pk) for pk in own},
        confined=session.tool_isolation != ToolIsolation.HOST,
    )
    location = new_store_location(str(session.id))
    session.store_backend = location.backend
    session.store_path = location.label
    session.save()
    if registered_model.is_demo and not workdir.strip():
        # The demo's tools need something to show: a workspace Studio just made for a demo
        # session gets the demo's sample files (never a folder the person picked).
        seed_demo_workspace(Path(session.workdir))
    return session


def session_copy(session: StudioSession, *, title: str) -> StudioSession:
    """A new main session with ``session``'s settings and working directory (editing the
    first message of a conversation: nothing comes before it to fork from)."""
    root = session.root or session
    return session_create(
        owner=root.owner,
        registered_model=root.registered_model,
        workdir=root.workdir,
        permission_policy=root.permission_policy,
        effort=root.effort,
        mode=session.mode,
        title=title,
        tool_isolation=root.tool_isolation,
    )


def title_from(prompt: str) -> str:
    """A session's title from its first prompt (one line, at most 80 characters)."""
    line = " ".join(prompt.split())
    return line if len(line) <= 80 else line[:77] + "…"


# --- called by the session host -----------------------------------------------------------------


class SessionRows:
    """The changes a batch of the host's writes makes to session rows, written as one ``UPDATE``
    per session (``write``) instead of one per change: a turn's start, its usage, its end and the
    sessions list's status each touched the same row with a statement of their own, and each ORM
    statement costs far more CPU to build than to run — so the one left is a plain statement
    (``studio.sql.Update``)."""

    def __init__(self) -> None:
        self._fields: dict[str, dict[str, Any]] = {}
        self._added: dict[str, dict[str, Any]] = {}
        self._if_empty: dict[str, dict[str, str]] = {}
        self._at_least: dict[str, dict[str, int]] = {}

    def set(self, session_id: str, **fields: Any) -> None:
        self._fields.setdefault(str(session_id), {}).update(fields)
        for name in fields:
            self._if_empty.get(str(session_id), {}).pop(name, None)
            self._at_least.get(str(session_id), {}).pop(name, None)

    def add(self, session_id: str, **deltas: Any) -> None:
        """Add to counters (the row's value plus ``delta``, computed by the database)."""
        added = self._added.setdefault(str(session_id), {})
        for name, delta in deltas.items():
            added[name] = added.get(name, 0) + delta

    def title_if_empty(self, session_id: str, title: str) -> None:
        self._fields.get(str(session_id), {}).pop("title", None)
        self._if_empty.setdefault(str(session_id), {})["title"] = title

    def ledger_at_least(self, session_id: str, pos: int) -> None:
        self._fields.get(str(session_id), {}).pop("ledger_pos", None)
        at_least = self._at_least.setdefault(str(session_id), {})
        at_least["ledger_pos"] = max(pos, at_least.get("ledger_pos", pos))

    def write(self) -> None:
        for session_id in {*self._fields, *self._added, *self._if_empty, *self._at_least}:
            update = sql.Update(StudioSession, id=session_id)
            for name, value in self._fields.get(session_id, {}).items():
                update.set(name, value)
            for name, delta in self._added.get(session_id, {}).items():
                update.add(name, delta)
            for name, text in self._if_empty.get(session_id, {}).items():
                update.set_if_empty(name, text)
            for name, pos in self._at_least.get(session_id, {}).items():
                update.at_least(name, pos)
            update.run()
        self._fields.clear()
        self._added.clear()
        self._if_empty.clear()
        self._at_least.clear()


def run_submitted(
    session_id: str,
    *,
    request_id: str,
    prompt: str,
    agent: str,
    status: str,
    mode: str = "",
    effort: str = "",
    rows: SessionRows | None = None,
) -> None:
    """A prompt the person sent: a turn that runs now (``running``) or waits (``queued``).

    The request id is new (the host makes one per prompt), so the row is inserted; the session's
    activity, status, build/plan default (the composer's choice for this prompt becomes the
    session's: recorded here, with the run, so a page's socket need not remember the row as it
    was when it connected — another tab may have changed it since) and — for its first prompt —
    title go into ``rows`` (written here when none is given)."""
    own = rows is None
    rows = rows or SessionRows()
    with transaction.atomic(savepoint=False):
        sql.insert(
            Run,
            {
                "session_id": session_id,
                "request_id": request_id,
                "prompt": prompt,
                "agent": agent or Mode.BUILD,
                "effort": effort or "",
                "status": status,
                "mode": mode if mode in ("follow_up", "steer") else "",
            },
        )
        rows.set(session_id, last_activity=timezone.now())
        if agent in Mode.values:
            rows.set(session_id, mode=agent)
        if status == str(RunStatus.RUNNING):
            rows.set(session_id, status=SessionStatus.RUNNING)
        if prompt.strip():
            rows.title_if_empty(session_id, title_from(prompt))
        if own:
            rows.write()


def run_begin(session_id: str, *, request_id: str, prompt: str, agent: str, effort: str) -> None:
    """A turn that starts now (kept for callers of the first Studio API)."""
    run_submitted(session_id, request_id=request_id, prompt=prompt, agent=agent, status="running", effort=effort)


def run_status(session_id: str, request_id: str, status: str) -> None:
    """A queued input's fate: withdrawn, placed in the running turn, cancelled."""
    Run.objects.filter(session_id=session_id, request_id=request_id).update(status=status)


def run_mode(session_id: str, request_id: str, mode: str) -> None:
    Run.objects.filter(session_id=session_id, request_id=request_id).update(mode=mode)


def run_resumed(session_id: str, request_id: str) -> None:
    now = timezone.now()
    Run.objects.filter(session_id=session_id, request_id=request_id).update(
        status=RunStatus.RUNNING, pending=None, error="", error_code="", ended_at=None
    )
    StudioSession.objects.filter(pk=session_id).update(status=SessionStatus.RUNNING, last_activity=now)


def plan_decided(session_id: str, request_id: str, approval_id: str, approved: bool, notes: str) -> None:
    with transaction.atomic():
        Approval.objects.update_or_create(
            session_id=session_id,
            approval_id=approval_id,
            defaults={
                "request_id": request_id,
                "decision": "approved" if approved else "rejected",
                "notes": notes,
                "decided_at": timezone.now(),
            },
        )
        run_resumed(session_id, request_id)
        if approved:  # the plan is being built: what comes next is build work, not planning
            StudioSession.objects.filter(pk=session_id).update(mode=Mode.BUILD)


def run_end(
    session_id: str,
    request_id: str,
    *,
    status: str,
    error_code: str = "",
    error: str = "",
    pending: dict[str, Any] | None = None,
    prompt: str = "",
    rows: SessionRows | None = None,
) -> None:
    """A turn ended (or paused). Turns Studio did not start (a subagent's, a delivered result)
    get their row here, so every turn of a view has one. The session's activity goes into
    ``rows`` (written here when none is given)."""
    now = timezone.now()
    own = rows is None
    rows = rows or SessionRows()
    ended = {"status": status, "error_code": error_code, "error": error[:5000], "pending": pending, "ended_at": now}
    with transaction.atomic(savepoint=False):
        update = sql.Update(Run, session_id=session_id, request_id=request_id)
        for name, value in ended.items():
            update.set(name, value)
        if not update.run():
            sql.insert(Run, {"session_id": session_id, "request_id": request_id, "prompt": prompt, **ended})
        if status == str(RunStatus.ABORTED):
            ToolCall.objects.filter(request_id=request_id, status="running").update(status="interrupted")
        if pending and pending.get("kind") == "plan" and pending.get("approval_id"):
            Approval.objects.update_or_create(
                session_id=session_id,
                approval_id=pending["approval_id"],
                defaults={"request_id": request_id, "plan": pending.get("plan") or ""},
            )
        rows.set(session_id, last_activity=now)
        if own:
            rows.write()


def _open_runs(view_ids: list[str], statuses: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """(session id, request id) of the views' runs in ``statuses``: one plain statement (read
    at every store's opening)."""
    if not view_ids:
        return []
    c = {name: sql.column(Run, name) for name in ("session", "request_id", "status")}
    ids = ", ".join(["%s"] * len(view_ids))
    wanted = ", ".join(["%s"] * len(statuses))
    statement = (
        f"SELECT {c['session']}, {c['request_id']} FROM {sql.table(Run)}"
        f" WHERE {c['session']} IN ({ids}) AND {c['status']} IN ({wanted})"
    )
    params = [sql.param(Run, "session", v) for v in view_ids] + [str(s) for s in statuses]
    return sql.fetch(statement, params, [(Run, "session"), (Run, "request_id")])


def runs_reconcile(views: dict[int, str], turns: list[dict[str, Any]]) -> int:
    """Studio's turn rows follow the store: a turn Studio still shows as running (or queued)
    that the store finished while no host watched — the process died before the end event
    reached Studio — takes the store's outcome. Returns the rows changed. (One query when, as
    usually, nothing is open.)"""
    read = _open_runs(list(views.values()), (str(RunStatus.RUNNING), str(RunStatus.QUEUED)))
    open_runs = {(str(session_id), request_id) for session_id, request_id in read}
    changed = 0
    for turn in turns:
        status = str(turn.get("status"))
        view_id = views.get(int(turn.get("target_id") or 0))
        if view_id is None or (view_id, turn["request_id"]) not in open_runs:
            continue
        if status not in ("completed", "failed", "aborted", "withdrawn", "cancelled"):
            continue  # still open, or paused: a pause is written by its end event, which a resume replays
        updates: dict[str, Any] = {"status": status, "ended_at": timezone.now()}
        if status in ("failed", "aborted"):
            updates.update(error_code=turn.get("reason") or "", error=(turn.get("detail") or "")[:5000])
        changed += Run.objects.filter(session_id=view_id, request_id=turn["request_id"]).update(**updates)
    return changed


def view_statuses(statuses: dict[str, str], rows: SessionRows | None = None) -> None:
    """The sessions list's status of each view, as the latest snapshot says (into ``rows``,
    written here when none is given)."""
    own = rows is None
    rows = rows or SessionRows()
    for session_id, status in statuses.items():
        rows.set(session_id, status=status)
    if own:
        rows.write()


def fork_create(session_id: str, *, target_id: int) -> str:
    """A fork (a new conversation of the same store) as its own Studio session."""
    view = StudioSession.objects.select_related("root").get(pk=session_id)
    root = view.root or view
    fork, _created = StudioSession.objects.get_or_create(
        root=root,
        target_id=target_id,
        defaults={
            "owner_id": view.owner_id,
            "kind": SessionKind.FORK,
            "title": f"Fork of {view}"[:200],
            "registered_model_id": root.registered_model_id,
            "workdir": root.workdir,
            "store_path": root.store_path,
            "store_backend": root.store_backend,
            "permission_policy": root.permission_policy,
            "effort": root.effort,
            "mode": Mode.BUILD,
        },
    )
    return str(fork.pk)


def subagent_view(root: StudioSession, target_id: int, label: str) -> StudioSession:
    """The read-only page of a subagent (created the first time someone opens it)."""
    view, _created = StudioSession.objects.get_or_create(
        root=root,
        target_id=target_id,
        defaults={
            "owner_id": root.owner_id,
            "kind": SessionKind.SUBAGENT,
            "title": (f"Subagent: {label}" if label else f"Subagent {target_id}")[:200],
            "registered_model_id": root.registered_model_id,
            "workdir": root.workdir,
            "store_path": root.store_path,
            "store_backend": root.store_backend,
            "permission_policy": root.permission_policy,
            "effort": root.effort,
            "mode": Mode.BUILD,
        },
    )
    return view


def tool_record(root_id: str, request_id: str, event: ToolEvent) -> None:
    """A tool call's timing and outcome (keyed by the runtime's display call id)."""
    defaults: dict[str, Any] = {"name": event.name}
    if event.arguments is not None:
        defaults["arguments"] = event.arguments
    if event.phase == "end":
        defaults["status"] = "error" if event.is_error else "ok"
        defaults["result"] = clip(event.result or "")
        defaults["duration_ms"] = event.duration_ms
    ToolCall.objects.update_or_create(
        session_id=root_id, request_id=request_id, tool_call_id=event.tool_call_id, defaults=defaults
    )


def plan_record(view_id: str, request_id: str, approval_id: str, text: str | None) -> None:
    """A plan that waits for review (its text, once the plan event carries it)."""
    defaults: dict[str, Any] = {"request_id": request_id}
    if text:
        defaults["plan"] = text
    Approval.objects.update_or_create(session_id=view_id, approval_id=approval_id, defaults=defaults)


def approval_record(view_id: str, request_id: str, approval_id: str, decision: str, notes: str | None) -> None:
    Approval.objects.update_or_create(
        session_id=view_id,
        approval_id=approval_id,
        defaults={"request_id": request_id, "decision": decision, "notes": notes or "", "decided_at": timezone.now()},
    )


def retry_record(view_id: str, request_id: str, attempt: int, max_attempts: int, reason: str, kind: str) -> None:
    """A retry of the turn (its notice says how many network retries it needed)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(session_id=view_id, request_id=request_id).first()
        if run is not None:
            retry = {"attempt": attempt, "max_attempts": max_attempts, "reason": reason, "kind": kind}
            run.retries = [*run.retries, retry][-50:]
            run.save(update_fields=["retries"])


def record_usage(
    session_id: str,
    request_id: str,
    usage: dict[str, Any],
    *,
    touch: bool = True,
    target_id: int = 0,
    rows: SessionRows | None = None,
) -> bool:
    """Upsert one usage record; session totals grow only when the record is new (in ``rows``,
    written here when none is given).

    ``touch=False`` (a reconciliation, not new activity) leaves ``last_activity`` alone."""
    fields = ("input_tokens", "cached_input_tokens", "cache_creation_tokens", "output_tokens", "reasoning_tokens")
    values = {f: int(usage.get(f) or 0) for f in fields}
    cost = _usd(usage.get("cost"))
    detail = usage.get("cost_detail") or {}
    class_costs = {f"cost_{k}": _usd(detail.get(k)) for k in ("input", "output", "cache_read", "cache_write")}
    record = {
        "session_id": session_id,
        "record_id": str(usage["record_id"]),
        "request_id": request_id,
        "target_id": target_id,
        "model": str(usage.get("model") or ""),
        "at": timezone.now(),
        "cost": cost,
        **class_costs,
        **values,
    }
    if not sql.insert(UsageRecord, record, ignore_conflict=True):
        return False  # already recorded: a replayed report must not count twice
    if target_id == 0:  # the main conversation's totals grow live; views are summed per turn
        own = rows is None
        rows = rows or SessionRows()
        rows.add(session_id, cost=cost, **values)
        if touch:
            rows.set(session_id, last_activity=timezone.now())
        if own:
            rows.write()
    return True


def usage_sync(
    session_id: str,
    ledger: list[Any],
    targets: dict[str, int] | None = None,
    *,
    known: set[str] | None = None,
    rows: SessionRows | None = None,
) -> int:
    """Make Studio's usage equal the store's ledger (a projection of it); returns rows added.

    Rows the store committed but Studio never saw (lost events: a crash between the
    runtime's commit and Studio's write; background compactions, which report no event) are
    added, keyed by ``record_id`` so nothing counts twice — in bulk, since a store opened for
    the first time may hold thousands; then the session totals are recomputed as sums of the
    records, never adjusted. ``targets`` maps the store's conversation ids to target ids.
    ``known``: record ids the caller knows Studio has (the host's own writes since the last
    sync): when the ledger has nothing else, Studio's rows are not read at all. The ledger
    position goes into ``rows`` (written here when none is given).
    """
    targets = targets or {}
    ids = [row.record_id for row in ledger]
    if known is not None and all(i in known for i in ids):
        known = set(ids)
    else:
        known = set()
        for start in range(0, len(ids), 500):
            known.update(
                UsageRecord.objects.filter(session_id=session_id, record_id__in=ids[start : start + 500]).values_list(
                    "record_id", flat=True
                )
            )
    fields = ("input_tokens", "cached_input_tokens", "cache_creation_tokens", "output_tokens", "reasoning_tokens")
    new_rows = []
    for row in ledger:
        if row.record_id in known:
            continue
        known.add(row.record_id)
        payload = row.payload
        detail = payload.get("cost_detail") or {}
        new_rows.append(
            UsageRecord(
                session_id=session_id,
                record_id=row.record_id,
                request_id=str(payload.get("request_id") or "") or _request_of(row.record_id),
                target_id=targets.get(getattr(row, "conversation_id", ""), 0),
                model=str(payload.get("model") or ""),
                at=_ledger_time(payload),
                cost=_usd(payload.get("cost")),
                **{f"cost_{k}": _usd(detail.get(k)) for k in ("input", "output", "cache_read", "cache_write")},
                **{f: int(payload.get(f) or 0) for f in fields},
            )
        )
    if new_rows:
        UsageRecord.objects.bulk_create(new_rows, batch_size=500, ignore_conflicts=True)
        if rows is not None:
            rows.write()  # counters added before are in the sums now: never add them again
        usage_totals_recompute(session_id)
    positions = [int(getattr(row, "pos", 0) or 0) for row in ledger]
    if positions:
        own = rows is None
        rows = rows or SessionRows()
        rows.ledger_at_least(session_id, max(positions))
        if own:
            rows.write()
    return len(new_rows)


def _ledger_time(payload: dict[str, Any]) -> datetime:
    """When a ledger row's call ended (its start, for a row without an end), else now."""
    for key in ("ended_ms", "started_ms"):
        value = payload.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return datetime.fromtimestamp(value / 1000, tz=UTC)
    return timezone.now()


def ledger_position(session_id: str) -> int:
    """Where the store's ledger was last reconciled for this session (see ``usage_sync``)."""
    pos, key = sql.column(StudioSession, "ledger_pos"), sql.column(StudioSession, "id")
    statement = f"SELECT {pos} FROM {sql.table(StudioSession)} WHERE {key} = %s"
    read = sql.fetch(statement, [sql.param(StudioSession, "id", session_id)], [(StudioSession, "ledger_pos")])
    return int(read[0][0] or 0) if read else 0  # a plain statement: read at every store's opening


def _request_of(record_id: str) -> str:
    parts = record_id.rsplit(":", 2)
    return parts[0] if len(parts) == 3 else record_id


def usage_totals_recompute(session_id: str, targets: set[int] | None = None, *, into: str | None = None) -> None:
    """Session totals = the sums of its usage records (DURABILITY invariant 5).

    ``targets`` sums only some conversations of the store (default: the main one and its
    subagents is what the view shows; with no snapshot yet, every record); ``into`` writes the
    sums on another row (a fork's view, whose records are kept on the main session)."""
    fields = ("input_tokens", "cached_input_tokens", "cache_creation_tokens", "output_tokens", "reasoning_tokens")
    with transaction.atomic():
        records = UsageRecord.objects.filter(session_id=session_id)
        if targets is not None:
            records = records.filter(target_id__in=targets)
        sums = records.aggregate(cost=Sum("cost"), **{f: Sum(f) for f in fields})
        StudioSession.objects.filter(pk=into or session_id).update(
            cost=sums["cost"] or Decimal(0), **{f: sums[f] or 0 for f in fields}
        )


def view_totals(root_id: str, subtrees: dict[int, set[int]]) -> None:
    """Every view's tokens and cost: its conversation and its subagents (never a fork's)."""
    if not subtrees:
        usage_totals_recompute(root_id)
        return
    for view_id, target_id in StudioSession.objects.filter(Q(pk=root_id) | Q(root_id=root_id)).values_list(
        "pk", "target_id"
    ):
        usage_totals_recompute(root_id, subtrees.get(int(target_id), {int(target_id)}), into=str(view_id))


def _usd(value: Any) -> Decimal:
    return Decimal(str(value or 0)).quantize(Decimal("0.000001"))


# --- the operator's sessions list ----------------------------------------------------------------


def session_rename(session: StudioSession, title: str) -> None:
    StudioSession.objects.filter(pk=session.pk).update(title=title.strip()[:200])


def session_archive(session: StudioSession, archived: bool) -> None:
    """Archive (hide from the list) or bring back a session; its forks follow a main session."""
    views = Q(pk=session.pk) | Q(root=session) if session.kind == SessionKind.MAIN else Q(pk=session.pk)
    StudioSession.objects.filter(views).update(archived=archived)


def session_delete(session: StudioSession) -> list[str]:
    """Delete a session's rows: a main session with its forks and subagents (their rows go with
    it), a fork alone. Returns the ids deleted. The caller removes the store first (a main
    session's; a fork's conversation stays in its main session's store)."""
    if session.kind == SessionKind.MAIN:
        ids = [
            str(pk)
            for pk in StudioSession.objects.filter(Q(pk=session.pk) | Q(root=session)).values_list("pk", flat=True)
        ]
    else:
        ids = [str(session.pk)]
    with transaction.atomic():
        StudioSession.objects.filter(pk__in=ids).delete()
    return ids
