"""Reads: every query a page, a consumer or the session host makes, and the page context.

``session_page_context`` is the single place that turns a session (Studio's records) plus a
``HostState`` (the store's transcript and the live turn) into what the templates show. The
full page, a watcher's re-render and the host's full pushes all go through it, so they cannot
disagree.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.db.models import Case, QuerySet, Value, When
from django.http import Http404

from studio import rendering
from studio.models import (
    Approval,
    Provider,
    RegisteredModel,
    Run,
    RunStatus,
    StudioSession,
    ToolCall,
    UsageRecord,
)

if TYPE_CHECKING:
    from studio.hosts import HostState, SessionConfig


def session_list_for_user(user: Any) -> QuerySet[StudioSession]:
    return StudioSession.objects.filter(owner=user).select_related("registered_model").order_by("-last_activity")


def session_for_user(user: Any, session_id: Any) -> StudioSession:
    """The session if ``user`` owns it, else 404 — the same answer whether the id does not
    exist or belongs to someone else, so ids of other users' sessions cannot be probed."""
    if not user.is_authenticated:
        raise Http404("No such session.")
    try:
        return StudioSession.objects.select_related("registered_model", "owner").get(pk=session_id, owner_id=user.pk)
    except (StudioSession.DoesNotExist, ValueError, TypeError, ValidationError) as exc:
        raise Http404("No such session.") from exc


def user_owns_session(user_id: int, session_id: str) -> bool:
    try:
        return StudioSession.objects.filter(pk=session_id, owner_id=user_id).exists()
    except Exception:  # a malformed id is simply not owned
        return False


def registered_models() -> QuerySet[RegisteredModel]:
    """Enabled models, the offline demo first, then by name."""
    demo_first = Case(When(provider=Provider.DEMO, then=Value(0)), default=Value(1))
    return RegisteredModel.objects.filter(enabled=True).order_by(demo_first, "name")


def default_model_for(user: Any) -> RegisteredModel | None:
    """The model a new session of ``user`` starts with: the one this person chose last time.

    Registering a model in the admin never changes anyone's default (a model nobody chose
    may have no network or no key); before a person has chosen, it is the offline demo.
    """
    models = registered_models()
    last = (
        StudioSession.objects.filter(owner=user, registered_model__enabled=True)
        .order_by("-created_at")
        .values_list("registered_model_id", flat=True)
        .first()
        if getattr(user, "is_authenticated", False)
        else None
    )
    return (models.filter(pk=last).first() if last else None) or models.filter(provider=Provider.DEMO).first()


def session_config(session_id: str) -> SessionConfig:
    from studio.hosts import SessionConfig

    session = StudioSession.objects.select_related("registered_model").get(pk=session_id)
    return SessionConfig(
        session_id=str(session.pk),
        store_path=session.store_path,
        workdir=session.workdir,
        permission_policy=session.permission_policy,
        effort=session.effort,
        mode=session.mode,
        model_options=session.registered_model.runtime_options(),
    )


def _run_dict(run: Run) -> dict[str, Any]:
    return {"request_id": run.request_id, "agent": run.agent, "pending": run.pending, "status": run.status}


def pending_run(session_id: str) -> dict[str, Any] | None:
    """The run paused for a plan review or questions, if any (the newest one)."""
    run = Run.objects.filter(session_id=session_id, status=RunStatus.PAUSED).order_by("-started_at", "-id").first()
    return _run_dict(run) if run is not None else None


def normalize_questions(questions: list[Any]) -> list[dict[str, Any]]:
    """``ask_user`` questions in one shape for the form: options as plain strings."""
    out = []
    for index, q in enumerate(questions):
        if not isinstance(q, dict):
            continue
        options = []
        for option in q.get("options") or []:
            label = option.get("label") if isinstance(option, dict) else option
            if label is not None and str(label):
                options.append(str(label))
        out.append(
            {
                "id": str(q.get("id") or f"q{index + 1}"),
                "question": str(q.get("question") or ""),
                "options": options,
                "multi_select": bool(q.get("multi_select")),
                "allow_free_text": bool(q.get("allow_free_text", not options)),
            }
        )
    return out


def interrupted_run(session_id: str) -> dict[str, Any] | None:
    """A run Studio recorded as running that no host is running (the process was restarted)."""
    run = Run.objects.filter(session_id=session_id, status=RunStatus.RUNNING).order_by("-started_at", "-id").first()
    return _run_dict(run) if run is not None else None


def tool_timings(session_id: str) -> dict[str, dict[str, Any]]:
    return {
        t.tool_call_id: {"status": t.status, "duration_ms": t.duration_ms}
        for t in ToolCall.objects.filter(session_id=session_id).only("tool_call_id", "status", "duration_ms")
    }


def run_notices(session_id: str, *, exclude_request_id: str | None = None) -> list[dict[str, str] | None]:
    """Per prompt-carrying run, how it ended when that deserves a notice in the conversation.

    ``exclude_request_id``: the run being shown live (its turn is not in the settled
    transcript yet), so the earlier runs' notices stay in place while it runs.
    """
    notices: list[dict[str, str] | None] = []
    runs = Run.objects.filter(session_id=session_id).exclude(prompt="").order_by("started_at", "id")
    if exclude_request_id:
        runs = runs.exclude(request_id=exclude_request_id)
    for run in runs:
        if run.status == RunStatus.FAILED:
            notices.append({"level": "error", "title": "The run failed", "code": run.error_code, "text": run.error})
        elif run.status == RunStatus.ABORTED and run.error_code == "cancelled_offline":
            notices.append({"level": "stopped", "title": "Stopped", "code": "", "text": "Cancelled by an admin."})
        elif run.status == RunStatus.ABORTED:
            notices.append({"level": "stopped", "title": "Stopped", "code": "", "text": ""})
        elif dropped := [r for r in run.retries if r.get("kind") == "dropped"]:
            notices.append(
                {
                    "level": "info",
                    "title": f"Recovered after {len(dropped)} network retr{'y' if len(dropped) == 1 else 'ies'}",
                    "code": "",
                    "text": str(dropped[-1].get("reason") or ""),
                }
            )
        else:
            notices.append(None)
    return notices


# --- trace tabs --------------------------------------------------------------------------------

_TOKEN_FIELDS = ("input_tokens", "cached_input_tokens", "cache_creation_tokens", "output_tokens", "reasoning_tokens")
_COST_FIELDS = ("cost_input", "cost_output", "cost_cache_read", "cost_cache_write")


def usage_context(session: StudioSession) -> dict[str, Any]:
    """Usage per turn and per session, each token class priced separately, never summed twice.

    Reasoning tokens are part of output tokens (they are shown, not added again).
    """
    prompts = dict(Run.objects.filter(session=session).values_list("request_id", "prompt"))
    turns: OrderedDict[str, dict[str, Any]] = OrderedDict()
    for record in UsageRecord.objects.filter(session=session).order_by("created_at", "id"):
        turn = turns.setdefault(
            record.request_id,
            {
                "request_id": record.request_id,
                "prompt": prompts.get(record.request_id, ""),
                "calls": 0,
                "cost": Decimal(0),
            }
            | dict.fromkeys(_TOKEN_FIELDS, 0)
            | dict.fromkeys(_COST_FIELDS, Decimal(0)),
        )
        turn["calls"] += 1
        turn["cost"] += record.cost
        for f in _TOKEN_FIELDS + _COST_FIELDS:
            turn[f] += getattr(record, f)
    rows = list(turns.values())
    totals: dict[str, Any] = {
        "calls": sum(r["calls"] for r in rows),
        "cost": sum((r["cost"] for r in rows), Decimal(0)),
    }
    for f in _TOKEN_FIELDS:
        totals[f] = sum(r[f] for r in rows)
    for f in _COST_FIELDS:
        totals[f] = sum((r[f] for r in rows), Decimal(0))
    priced = any(totals[f] for f in _COST_FIELDS)

    def class_costs(row: dict[str, Any]) -> dict[str, Decimal] | None:
        """Per token class, as the runtime priced it (``UsageEvent.cost_detail``)."""
        if not priced:
            return None
        return {
            "input": row["cost_input"],
            "cached": row["cost_cache_read"],
            "cache_write": row["cost_cache_write"],
            "output": row["cost_output"],
        }

    for row in rows:
        row["class_costs"] = class_costs(row)
    totals["class_costs"] = class_costs(totals)
    return {"usage_rows": rows, "usage_totals": totals, "usage_chart": _usage_chart(rows)}


def _usage_chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Stacked bars (input, cached input, cache write, output) per turn, as SVG geometry."""
    width, height, gap = 300, 90, 4
    shown = rows[-24:]
    if not shown:
        return {"bars": [], "width": width, "height": height}
    peak = max(sum(r[f] for f in _TOKEN_FIELDS[:4]) for r in shown) or 1
    bar_w = max(4, (width - gap * (len(shown) - 1)) // max(len(shown), 1))
    bar_w = min(bar_w, 28)
    bars = []
    for i, row in enumerate(shown):
        x = i * (bar_w + gap)
        y = height
        segments = []
        for f, css in zip(_TOKEN_FIELDS[:4], ("seg-input", "seg-cached", "seg-write", "seg-output"), strict=True):
            h = round(row[f] / peak * (height - 2), 2)
            if h <= 0:
                continue
            y -= h
            segments.append({"y": round(y, 2), "h": h, "css": css})
        total = sum(row[f] for f in _TOKEN_FIELDS[:4])
        bars.append({"x": x, "w": bar_w, "segments": segments, "label": f"Turn {i + 1}: {total:,} tokens"})
    return {"bars": bars, "width": width, "height": height}


def _tools_exposed(session: StudioSession) -> list[str]:
    read_tools = ["read", "grep", "find", "ls"]
    if session.mode == "plan":
        return [*read_tools, "ask_user"]
    if session.permission_policy == "read-only":
        return read_tools
    return [*read_tools, "write", "edit", "bash"]


def records_context(session: StudioSession) -> dict[str, Any]:
    try:
        size = os.path.getsize(session.store_path)
    except OSError:
        size = None
    model = session.registered_model
    return {
        "records": {
            "model": model.public_description(),
            "is_demo": model.is_demo,
            "tools": _tools_exposed(session),
            "permission_policy": session.get_permission_policy_display(),
            "mode": session.get_mode_display(),
            "effort": session.get_effort_display(),
            "store_path": session.store_path,
            "store_size": size,
            "workdir": session.workdir,
            "owner": session.owner.get_username(),
            "attributes_json": rendering.pretty_json(model.attributes) if model.attributes else "",
        }
    }


def plan_context(session: StudioSession) -> dict[str, Any]:
    approvals = list(Approval.objects.filter(session=session).order_by("created_at", "id"))
    latest = approvals[-1] if approvals else None
    return {
        "approvals": list(reversed(approvals)),
        "latest_plan": latest,
        "latest_plan_items": rendering.plan_items(latest.plan) if latest else [],
        "latest_plan_html": rendering.render_markdown(latest.plan) if latest else "",
    }


def trace_context(session: StudioSession) -> dict[str, Any]:
    tasks = list(ToolCall.objects.filter(session=session).order_by("started_at", "id"))[-200:]
    for task in tasks:
        task.args_json = rendering.pretty_json(task.arguments)  # type: ignore[attr-defined]
        task.key_arg = rendering.key_argument(task.name, task.arguments)  # type: ignore[attr-defined]
    return {
        "session": session,
        "tasks": tasks,
        "tasks_running": sum(1 for t in tasks if t.status == "running"),
        **usage_context(session),
        **plan_context(session),
        **records_context(session),
    }


def session_page_context(session: StudioSession, state: HostState) -> dict[str, Any]:
    from studio.hosts import live_prefix

    session.refresh_from_db()
    pending = pending_run(str(session.pk)) if not state.running else None
    pending_info = (pending or {}).get("pending")
    if pending_info and pending_info.get("kind") == "ask_user":
        pending_info = {**pending_info, "questions": normalize_questions(pending_info.get("questions") or [])}
    live = state.live_turn()
    turns = rendering.transcript_turns(
        state.settled_transcript,
        tool_timings=tool_timings(str(session.pk)),
        run_notices=run_notices(
            str(session.pk), exclude_request_id=live["request_id"] if live and live["prompt"] is not None else None
        ),
    )
    if pending_info and pending_info.get("kind") == "plan":
        rendering.drop_plan_answer(turns, pending_info.get("plan") or "")
    context = {
        "session": session,
        "model": session.registered_model,
        "running": state.running,
        "turns": turns,
        "live": live,
        "live_prefix": live_prefix(live["request_id"]) if live else "",
        "pending": pending_info,
        "pending_plan_items": rendering.plan_items(pending_info.get("plan") or "")
        if pending_info and pending_info.get("kind") == "plan"
        else [],
        "pending_plan_html": rendering.render_markdown(pending_info.get("plan") or "")
        if pending_info and pending_info.get("kind") == "plan"
        else "",
        "context_usage": (live or {}).get("context_usage") or state.context_usage,
        "host_epoch": state.epoch,
        "host_seq": state.seq,
    }
    context.update(trace_context(session))
    return context


def render_full_regions(session_id: str, state: HostState) -> str:
    session = StudioSession.objects.select_related("registered_model", "owner").get(pk=session_id)
    return rendering.render_regions(session_page_context(session, state))


def render_trace_regions(session_id: str) -> str:
    session = StudioSession.objects.select_related("registered_model", "owner").get(pk=session_id)
    return rendering.render_trace(trace_context(session))
