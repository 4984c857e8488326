"""Durable task rows as spans: the task from creation to its end, and its phases, sleeps and
waits on children from the row's ``history`` (``agentcore.extensions.tasks.history``).

A row is upserted on every change, so its spans are rebuilt from the row each time it changes
(the history is bounded, so this is cheap). A row written before agentcore kept a history gives
one task span from ``created_ms`` to its last update.
"""

from __future__ import annotations

from typing import Any

from agentcore.harness.storage import TaskRow
from agentcore.trace.model import SpanStatus, TraceSpan
from agentcore.trace.redact import Redactor

TASK_STATUS: dict[str, SpanStatus] = {
    "completed": "ok",
    "failed": "error",
    "aborted": "cancelled",
    "orphaned": "cancelled",
    "running": "running",
    "waiting": "waiting",
    "blocked": "waiting",
}
_TERMINAL = frozenset({"completed", "failed", "aborted", "orphaned"})


def task_spans(row: TaskRow, parent_id: str | None, redact: Redactor) -> list[TraceSpan]:
    """The task's span first, then its children (phases, sleeps, waits, resume gaps); its free
    texts (error, reasons) without credentials."""
    payload = row.payload
    status = str(payload.get("status") or "")
    history: list[dict[str, Any]] = [e for e in payload.get("history") or [] if isinstance(e, dict)]
    terminal = status in _TERMINAL
    end: int | None = None
    if terminal:
        end = _int(history[-1].get("at_ms")) if history else _int(payload.get("updated_ms"))
    task_id = f"task:{row.task_id}"
    outcome = payload.get("outcome") if isinstance(payload.get("outcome"), dict) else {}
    task = TraceSpan(
        id=task_id,
        kind="task",
        name=f"task {payload.get('name', row.task_id)}",
        conversation_id=row.conversation_id,
        parent_id=parent_id,
        start_ms=_int(payload.get("created_ms")),
        end_ms=end,
        status=TASK_STATUS.get(status, "unknown"),
        attributes={
            "task_id": row.task_id,
            "name": payload.get("name"),
            "version": payload.get("version"),
            "status": status,
            "phase": payload.get("phase"),
            "background": payload.get("background"),
            "wake_at": payload.get("wake_at"),
            "waiting_on": payload.get("waiting_on") or [],
            "error": redact.text(payload["error"]) if isinstance(payload.get("error"), str) else None,
            "outcome_status": (outcome or {}).get("status"),
            "history_dropped": int(payload.get("history_dropped") or 0),
        },
        refs={"task_id": row.task_id},
        seq=row.seq,
    )
    return [task, *_children(row, task_id, history, end, redact)]


def _children(
    row: TaskRow, task_id: str, history: list[dict[str, Any]], task_end: int | None, redact: Redactor
) -> list[TraceSpan]:
    spans: list[TraceSpan] = []
    current: TraceSpan | None = None  # the open phase or wait

    def close(at: int | None) -> None:
        nonlocal current
        if current is not None:
            current.end_ms = at
            if current.status == "running":
                current.status = "ok"
            current = None

    def child(n: int, kind: Any, name: str, at: int | None, **attributes: Any) -> TraceSpan:
        span = TraceSpan(
            id=f"{task_id}:{n}",
            kind=kind,
            name=name,
            conversation_id=row.conversation_id,
            parent_id=task_id,
            start_ms=at,
            status="running",
            attributes=attributes,
            refs={"task_id": row.task_id},
            seq=row.seq,
        )
        spans.append(span)
        return span

    for n, event in enumerate(history):
        at = _int(event.get("at_ms"))
        kind = event.get("event")
        if kind in ("created", "phase"):
            close(at)
            current = child(n, "task_phase", f"phase {event.get('phase')}", at, phase=event.get("phase"))
        elif kind == "sleep":
            wake = _int(event.get("wake_at"))
            sleep = child(n, "task_sleep", "sleep", at, wake_at=wake)
            sleep.end_ms, sleep.status = wake, "ok"
        elif kind == "waiting":
            close(at)
            current = child(n, "task_wait", "wait for children", at, waiting_on=event.get("waiting_on") or [])
            current.status = "waiting"
        elif kind == "resumed":
            previous = _int(history[n - 1].get("at_ms")) if n else None
            close(previous)
            gap = child(n, "gap", "not running", previous, owner_id=event.get("owner_id"))
            gap.end_ms, gap.status = at, "ok"
        elif kind == "ended":
            close(at)
        elif kind == "blocked" and current is not None:
            current.attributes["blocked"] = redact.text(str(event.get("reason")))
    if task_end is not None:
        close(task_end)
    elif current is not None and current.status == "waiting":
        pass  # still waiting on its children
    return spans


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
