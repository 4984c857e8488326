"""Writes: everything that changes Studio's records lives here (views and hosts call these).

The functions the session host calls are keyed by stable ids from the runtime
(``request_id``, ``tool_call_id``, ``record_id``, ``approval_id``) and written as upserts, so an
event seen twice (a resumed run replays its settled usage) never counts twice.
"""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.utils import timezone

from studio.live import clip
from studio.models import (
    Approval,
    Mode,
    RegisteredModel,
    Run,
    RunStatus,
    SessionStatus,
    StudioSession,
    ToolCall,
    UsageRecord,
)


class WorkdirError(ValueError):
    pass


def sessions_dir() -> Path:
    path = Path(settings.STUDIO_DATA_DIR) / "sessions"
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolve_workdir(raw: str, session_id: str) -> str:
    """An existing directory for the agent to work in (a fresh one under the data dir if blank).

    With ``STUDIO_WORKDIR_ROOT`` set, the directory must lie inside it (checked after
    resolving symlinks), so users of a shared Studio cannot point an agent at the whole disk.
    """
    root = settings.STUDIO_WORKDIR_ROOT
    if not raw.strip():
        base = Path(root) if root else Path(settings.STUDIO_DATA_DIR) / "workspaces"
        path = base / session_id
        path.mkdir(parents=True, exist_ok=True)
        return str(path.resolve())
    path = Path(os.path.expanduser(raw.strip()))
    if not path.is_absolute():
        raise WorkdirError("Use an absolute path.")
    resolved = path.resolve()
    if not resolved.is_dir():
        raise WorkdirError("No such directory.")
    if root and not resolved.is_relative_to(Path(root).resolve()):
        raise WorkdirError(f"The workdir must be inside {root}.")
    return str(resolved)


def session_create(
    *,
    owner: AbstractBaseUser,
    registered_model: RegisteredModel,
    workdir: str,
    permission_policy: str,
    effort: str,
    mode: str,
    title: str = "",
) -> StudioSession:
    session = StudioSession(
        owner=owner,
        registered_model=registered_model,
        permission_policy=permission_policy,
        effort=effort,
        mode=mode,
        title=title.strip()[:200],
    )
    session.workdir = resolve_workdir(workdir, str(session.id))
    session.store_path = str(sessions_dir() / f"{session.id}.sqlite")
    session.save()
    return session


def session_preferences_update(session: StudioSession, *, mode: str | None = None, effort: str | None = None) -> None:
    """Remember the composer's build/plan toggle and effort as the session's defaults."""
    fields = []
    if mode and mode != session.mode:
        session.mode = mode
        fields.append("mode")
    if effort and effort != session.effort:
        session.effort = effort
        fields.append("effort")
    if fields:
        session.save(update_fields=fields)


def _title_from(prompt: str) -> str:
    line = " ".join(prompt.split())
    return line if len(line) <= 80 else line[:77] + "…"


# --- called by the session host -----------------------------------------------------------------


def run_begin(session_id: str, *, request_id: str, prompt: str, agent: str, effort: str) -> None:
    with transaction.atomic():
        session = StudioSession.objects.select_for_update().get(pk=session_id)
        Run.objects.create(
            session=session, request_id=request_id, prompt=prompt, agent=agent or Mode.BUILD, effort=effort or ""
        )
        session.status = SessionStatus.RUNNING
        session.last_activity = timezone.now()
        fields = ["status", "last_activity"]
        if not session.title and prompt.strip():
            session.title = _title_from(prompt)
            fields.append("title")
        session.save(update_fields=fields)


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


_SESSION_STATUS = {
    RunStatus.COMPLETED: SessionStatus.IDLE,
    RunStatus.ABORTED: SessionStatus.IDLE,
    RunStatus.PAUSED: SessionStatus.WAITING,
    RunStatus.FAILED: SessionStatus.FAILED,
}


def run_end(
    session_id: str,
    request_id: str,
    *,
    status: str,
    error_code: str = "",
    error: str = "",
    pending: dict[str, Any] | None = None,
) -> None:
    now = timezone.now()
    with transaction.atomic():
        Run.objects.filter(session_id=session_id, request_id=request_id).update(
            status=status, error_code=error_code, error=error[:5000], pending=pending, ended_at=now
        )
        if status == RunStatus.ABORTED:
            ToolCall.objects.filter(session_id=session_id, request_id=request_id, status="running").update(
                status="interrupted"
            )
        if pending and pending.get("kind") == "plan" and pending.get("approval_id"):
            Approval.objects.update_or_create(
                session_id=session_id,
                approval_id=pending["approval_id"],
                defaults={"request_id": request_id, "plan": pending.get("plan") or ""},
            )
        StudioSession.objects.filter(pk=session_id).update(
            status=_SESSION_STATUS.get(RunStatus(status), SessionStatus.IDLE), last_activity=now
        )


def record_event(session_id: str, request_id: str, event: dict[str, Any]) -> None:
    """Keep what the trace tabs need from one run event (tool, usage, plan, approval, retry)."""
    kind = event["type"]
    if kind == "tool":
        _record_tool(session_id, request_id, event)
    elif kind == "usage":
        record_usage(session_id, request_id, event)
    elif kind == "plan" and event.get("approval_id"):
        defaults: dict[str, Any] = {"request_id": request_id}
        if event.get("text"):
            defaults["plan"] = event["text"]
        Approval.objects.update_or_create(session_id=session_id, approval_id=event["approval_id"], defaults=defaults)
    elif kind == "approval":
        Approval.objects.update_or_create(
            session_id=session_id,
            approval_id=event["approval_id"],
            defaults={
                "request_id": request_id,
                "decision": event.get("decision") or "",
                "notes": event.get("notes") or "",
                "decided_at": timezone.now(),
            },
        )
    elif kind == "retry":
        with transaction.atomic():
            run = Run.objects.select_for_update().filter(session_id=session_id, request_id=request_id).first()
            if run is not None:
                run.retries = [
                    *run.retries,
                    {k: event.get(k) for k in ("attempt", "max_attempts", "reason", "kind")},
                ][-50:]
                run.save(update_fields=["retries"])


def _record_tool(session_id: str, request_id: str, event: dict[str, Any]) -> None:
    defaults: dict[str, Any] = {"name": event.get("name") or ""}
    if event.get("arguments") is not None:
        defaults["arguments"] = event["arguments"]
    if event.get("phase") == "end":
        defaults["status"] = "error" if event.get("is_error") else "ok"
        defaults["result"] = clip(str(event.get("result") or ""))
        defaults["duration_ms"] = event.get("duration_ms")
    ToolCall.objects.update_or_create(
        session_id=session_id, request_id=request_id, tool_call_id=str(event["tool_call_id"]), defaults=defaults
    )


def record_usage(session_id: str, request_id: str, usage: dict[str, Any], *, touch: bool = True) -> bool:
    """Upsert one usage record; session totals grow only when the record is new.

    ``touch=False`` (a reconciliation, not new activity) leaves ``last_activity`` alone."""
    fields = ("input_tokens", "cached_input_tokens", "cache_creation_tokens", "output_tokens", "reasoning_tokens")
    values = {f: int(usage.get(f) or 0) for f in fields}
    cost = _usd(usage.get("cost"))
    detail = usage.get("cost_detail") or {}
    class_costs = {f"cost_{k}": _usd(detail.get(k)) for k in ("input", "output", "cache_read", "cache_write")}
    try:
        with transaction.atomic():
            UsageRecord.objects.create(
                session_id=session_id,
                record_id=str(usage["record_id"]),
                request_id=request_id,
                model=str(usage.get("model") or ""),
                cost=cost,
                **class_costs,
                **values,
            )
            StudioSession.objects.filter(pk=session_id).update(
                cost=F("cost") + cost,
                **({"last_activity": timezone.now()} if touch else {}),
                **{f: F(f) + v for f, v in values.items()},
            )
    except IntegrityError:
        return False  # already recorded: a replayed report must not count twice
    return True


def usage_sync(session_id: str, ledger: list[Any]) -> int:
    """Make Studio's usage equal the store's ledger (a projection of it); returns rows added.

    Rows the store committed but Studio never saw (lost events: a crash between the
    runtime's commit and Studio's write) are added, keyed by ``record_id`` so nothing counts
    twice; then the session totals are recomputed as sums of the records, never adjusted.
    """
    known = set(UsageRecord.objects.filter(session_id=session_id).values_list("record_id", flat=True))
    added = 0
    for row in ledger:
        if row.record_id in known:
            continue
        payload = {**row.payload, "record_id": row.record_id}
        if record_usage(session_id, str(payload.get("request_id") or ""), payload, touch=False):
            added += 1
    usage_totals_recompute(session_id)
    return added


def usage_totals_recompute(session_id: str) -> None:
    """Session totals = the sums of its usage records (DURABILITY invariant 5)."""
    fields = ("input_tokens", "cached_input_tokens", "cache_creation_tokens", "output_tokens", "reasoning_tokens")
    with transaction.atomic():
        sums = UsageRecord.objects.filter(session_id=session_id).aggregate(
            cost=Sum("cost"), **{f: Sum(f) for f in fields}
        )
        StudioSession.objects.filter(pk=session_id).update(
            cost=sums["cost"] or Decimal(0), **{f: sums[f] or 0 for f in fields}
        )


def _usd(value: Any) -> Decimal:
    return Decimal(str(value or 0)).quantize(Decimal("0.000001"))


# --- store administration (the admin's import and offline cancel) ----------------------------


class StoreAdminError(Exception):
    """An import or offline cancel that could not be done; the message is for the admin."""


_STORE_MESSAGES = {
    "store_exists": "The target store already exists; an import never overwrites a store.",
    "store_invalid": "The source is not an agentcore session store (export one with “Export a consistent copy”).",
    "store_locked": "A session host still has this store open. Stop the run (or wait until the host "
    "releases it) and try again.",
    "store_version_unsupported": "The source store was written by a newer agentcore than this one.",
}


def _store_error(exc: Exception) -> StoreAdminError:
    code = str(getattr(exc, "code", "") or exc.__class__.__name__)
    detail = str(getattr(exc, "message", None) or exc)
    message = _STORE_MESSAGES.get(code)
    return StoreAdminError(f"{message} ({code}: {detail})" if message else f"{code}: {detail}")


def store_export(session_id: str, destination: Path) -> Path:
    """Export the session's store through the session host, which owns it (see
    ``SessionHost.export``). With no host answering (worker mode, no worker running) nobody
    holds the store and agentcore exports it directly; its owner lock still decides."""
    from asgiref.sync import async_to_sync

    from agentcore import export_agent_database
    from studio.hosts import HostError, get_host_client

    try:
        async_to_sync(get_host_client().call)("export", session_id, destination=str(destination))
    except HostError as exc:
        if exc.code == "busy":
            raise StoreAdminError(exc.message) from exc
        if exc.code != "unavailable":
            raise _store_error(exc) from exc
        session = StudioSession.objects.get(pk=session_id)
        try:
            export_agent_database(database_path=session.store_path, destination=destination)
        except Exception as direct:
            raise _store_error(direct) from direct
    return destination


def store_import(
    *,
    source: str | os.PathLike[str],
    session: StudioSession | None = None,
    owner: AbstractBaseUser | None = None,
    registered_model: RegisteredModel | None = None,
    title: str = "",
    workdir: str = "",
) -> StudioSession:
    """Install a copy of an exported store (``agentcore.import_agent_database``).

    Into ``session`` when given (a session whose store file was lost: the target must not
    exist), else into a new session of ``owner``. The source is validated by agentcore.
    """
    from agentcore import import_agent_database

    source_path = Path(source)
    if not source_path.is_absolute():
        raise StoreAdminError("Give the source as an absolute path on the server.")
    if not source_path.is_file():
        raise StoreAdminError(f"No file at {source_path}.")
    created = session is None
    if session is None:
        if owner is None or registered_model is None:
            raise StoreAdminError("Choose the owner and the model of the new session.")
        try:
            session = session_create(
                owner=owner,
                registered_model=registered_model,
                workdir=workdir,
                permission_policy="workspace",
                effort="medium",
                mode="build",
                title=title or f"Imported {source_path.stem}"[:200],
            )
        except WorkdirError as exc:
            raise StoreAdminError(f"Working directory: {exc}") from exc
    elif Path(session.store_path).exists():
        raise StoreAdminError(
            f"“{session}” already has a store at {session.store_path}; an import never overwrites a store."
        )
    try:
        import_agent_database(source=source_path, database_path=session.store_path)
    except Exception as exc:
        if created:
            session.delete()
        raise _store_error(exc) from exc
    StudioSession.objects.filter(pk=session.pk).update(status=SessionStatus.IDLE, last_activity=timezone.now())
    return session


def store_cancel_offline(session: StudioSession) -> dict[str, list[str]]:
    """End the session's unfinished work with ``agentcore.cancel_agent_conversation``.

    Needs the store's owner lock (no host may hold it: ``store_locked`` otherwise). Studio's
    own records follow: every run still running or waiting ends as stopped.
    """
    from asgiref.sync import async_to_sync

    from agentcore import cancel_agent_conversation

    store = Path(session.store_path)
    if not store.exists():
        raise StoreAdminError("This session has no store yet: nothing to cancel.")
    # Studio's layout is <sessions dir>/<session id>.sqlite; an unusual path is passed as a file.
    in_layout = store == sessions_dir() / f"{session.pk}.sqlite"
    try:
        result: dict[str, list[str]] = async_to_sync(cancel_agent_conversation)(
            agent_store_dir=sessions_dir() if in_layout else store, conversation_id=str(session.pk)
        )
    except Exception as exc:
        raise _store_error(exc) from exc
    now = timezone.now()
    with transaction.atomic():
        open_runs = Run.objects.filter(session=session, status__in=(RunStatus.RUNNING, RunStatus.PAUSED))
        request_ids = list(open_runs.values_list("request_id", flat=True))
        open_runs.update(
            status=RunStatus.ABORTED,
            pending=None,
            error_code="cancelled_offline",
            error="Cancelled offline.",
            ended_at=now,
        )
        ToolCall.objects.filter(session=session, request_id__in=request_ids, status="running").update(
            status="interrupted"
        )
        StudioSession.objects.filter(pk=session.pk).update(status=SessionStatus.IDLE, last_activity=now)
    return result
