"""A durable task's timeline, kept in its row: what the Trace shows of it (SPEC X1, W8).

A task row is upserted on every change (it is the task's program counter), so its past would be
lost; each write therefore appends one event to the row's ``history`` — created, each phase it
enters, each sleep with its wake time, each wait on children, blocks, stops, resumes after a
restart and the end — stamped with the store view's clock. The list is bounded: the first event
(creation) and the newest ``HISTORY_KEPT - 1`` are kept, and ``history_dropped`` counts the rest.
"""

from __future__ import annotations

from typing import Any

HISTORY_KEPT = 200
TERMINAL = frozenset({"completed", "failed", "aborted", "orphaned"})


def history_event(before: dict[str, Any], after: dict[str, Any], at_ms: int) -> dict[str, Any]:
    """The event a write from ``before`` to ``after`` adds (``before`` empty: the creation)."""
    status = after.get("status")
    event: dict[str, Any] = {"at_ms": at_ms, "status": status, "phase": after.get("phase")}
    if not before:
        event["event"] = "created"
    elif status in TERMINAL:
        event["event"] = "ended"
        if after.get("error"):
            event["error"] = after["error"]
    elif status == "waiting":
        event["event"] = "waiting"
        event["waiting_on"] = list(after.get("waiting_on") or [])
    elif status == "blocked":
        event["event"] = "blocked"
        event["reason"] = after.get("blocked_reason")
    elif after.get("stopping") and not before.get("stopping"):
        event["event"] = "stopping"
        event["reason"] = after.get("stop_reason")
    elif after.get("wake_at") is not None and after.get("wake_at") != before.get("wake_at"):
        event["event"] = "sleep"
        event["wake_at"] = after["wake_at"]
    elif status == "running" and (before.get("status") != "running" or before.get("phase") != after.get("phase")):
        event["event"] = "phase"
    else:
        event["event"] = "update"
    return event


def with_history(
    before: dict[str, Any], after: dict[str, Any], at_ms: int, *, resumed: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``after`` with its write's event (and a ``resumed`` event before it) appended."""
    events = [*(before.get("history") or [])]
    if resumed is not None:
        events.append(resumed)
    events.append(history_event(before, after, at_ms))
    dropped = int(before.get("history_dropped") or 0)
    if len(events) > HISTORY_KEPT:
        cut = len(events) - HISTORY_KEPT
        dropped += cut
        events = [events[0], *events[cut + 1 :]]
    out = dict(after, history=events)
    if dropped:
        out["history_dropped"] = dropped
    return out
