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
from django.db.models import F
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


def record_usage(session_id: str, request_id: str, usage: dict[str, Any]) -> bool:
    """Upsert one usage record; session totals grow only when the record is new."""
    fields = ("input_tokens", "cached_input_tokens", "cache_creation_tokens", "output_tokens", "reasoning_tokens")
    values = {f: int(usage.get(f) or 0) for f in fields}
    cost = Decimal(str(usage.get("cost") or 0)).quantize(Decimal("0.000001"))
    try:
        with transaction.atomic():
            UsageRecord.objects.create(
                session_id=session_id,
                record_id=str(usage["record_id"]),
                request_id=request_id,
                model=str(usage.get("model") or ""),
                cost=cost,
                **values,
            )
            StudioSession.objects.filter(pk=session_id).update(
                cost=F("cost") + cost,
                last_activity=timezone.now(),
                **{f: F(f) + v for f, v in values.items()},
            )
    except IntegrityError:
        return False  # already recorded: a replayed report must not count twice
    return True
