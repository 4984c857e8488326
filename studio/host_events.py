"""Folding a runtime's events into the host's picture of a session (``studio.hosts`` drives it).

Each event updates the live turn of its conversation (``ContextLive``), Studio's records
(``studio.services``: runs, tool calls, usage, statuses) and marks what each view must
re-render; a ``session`` event's snapshot replaces the snapshot-driven regions. After a turn
ends, Studio's usage is reconciled with the store's own ledger (``sync_usage``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async

from studio import services
from studio.host_session import (
    OPENING_EVENTS,
    HostedSession,
    config_versions,
    context_usage,
    request_of,
    subtrees,
    touch,
    wake,
)
from studio.live import ContextLive
from studio.trace import view_status

log = logging.getLogger("studio.hosts")


async def fold_event(hs: HostedSession, event: dict[str, Any]) -> None:
    """Fold one event; nothing at all once the session was lost to another holder (its pages
    follow the new holder, and the runs it records are the new holder's to end)."""
    if hs.lost:
        return
    kind = event["type"]
    if kind == "session":
        await fold_snapshot(hs, event["snapshot"])
        return
    target = int(event.get("target_id") or 0)
    ctx = hs.context(target)
    view = hs.views.get(target)
    view_id = view.view_id if view is not None else None
    if kind == "end":
        request_id = str(event.get("request_id") or "")
        if view_id is not None:
            await database_sync_to_async(services.run_end)(
                view_id,
                request_id,
                status=event["status"],
                error_code=event.get("error_code") or "",
                error=event.get("error") or "",
                pending=event.get("pending") if event["status"] == "paused" else None,
                prompt=hs.prompts.get(request_id, ""),
            )
        ctx.end(request_id)
        hs.prompts.pop(request_id, None)
        if len(ctx.ended) > 1000:  # only turns the snapshot still lists can matter
            listed = {str(t["request_id"]) for t in (hs.snapshot or {}).get("turns", [])}
            ctx.ended &= listed | {request_id}
        ctx.context_usage = context_usage(hs.runtime, target) or ctx.context_usage
        await sync_usage(hs)
        await refresh_statuses(hs)
        touch(hs, view, full=True, trace=True)
        return
    if kind == "context_usage":
        ctx.context_usage = {"used": int(event["used"]), "total": int(event["total"])}
        if ctx.live is not None:
            ctx.live.apply(event)
        touch(hs, view)
        return
    if ctx.live is None and kind in OPENING_EVENTS:
        _begin_live(hs, ctx)
        touch(hs, view, full=True)
    if ctx.live is not None:
        ctx.live.apply(event)
    if kind in ("tool", "usage", "plan", "approval", "retry"):
        request_id = ctx.live.request_id if ctx.live is not None else ""
        if kind == "usage":
            request_id = request_of(str(event.get("record_id") or ""))
        await database_sync_to_async(services.record_event)(
            hs.root_id, view_id, request_id, dict(event, target_id=target)
        )
        if kind in ("usage", "plan", "approval"):
            touch(hs, view, trace=True)
    touch(hs, view)


def _begin_live(hs: HostedSession, ctx: ContextLive) -> None:
    transcript = hs.runtime.read_transcript(ctx.target_id or None, entry_ids=True)
    request_id = _expected_request(hs, ctx)
    ctx.begin(transcript, request_id=request_id, expected_prompt=hs.prompts.get(request_id))


def _expected_request(hs: HostedSession, ctx: ContextLive) -> str:
    """The request whose turn is going live: the oldest started, not yet ended turn."""
    for turn in (hs.snapshot or {}).get("turns", []):
        if int(turn.get("target_id") or 0) != ctx.target_id:
            continue
        request_id = str(turn["request_id"])
        if request_id in ctx.ended or turn.get("status") in ("queued", "withdrawn", "cancelled", "rejected"):
            continue
        return request_id
    context = hs.snapshot_context(ctx.target_id) or {}
    return str(context.get("request_id") or "")


async def fold_snapshot(hs: HostedSession, snapshot: dict[str, Any]) -> None:
    previous = hs.snapshot
    if previous is not None and int(snapshot.get("revision") or 0) < int(previous.get("revision") or 0):
        return  # an older picture than the one shown (a command's fresh snapshot came first)
    hs.snapshot = snapshot
    for context in snapshot.get("contexts", []):
        target = int(context["target_id"])
        for item in context.get("queue") or []:
            hs.prompts.setdefault(str(item["input_id"]), str(item.get("prompt") or ""))
        view = hs.views.get(target)
        for input_id in _note_placed_steers(hs, target, context, snapshot):
            if view is not None:
                await database_sync_to_async(services.run_status)(view.view_id, input_id, "placed")
    for view in hs.views.values():
        view.controls = True
        view.trace = True
    await refresh_statuses(hs)
    if previous is None or config_versions(previous) != config_versions(snapshot):
        for view in hs.views.values():
            view.full = True
    wake(hs)


async def refresh_statuses(hs: HostedSession) -> None:
    """Write each view's status for the sessions list when it changed (snapshot or turn end)."""
    if hs.snapshot is None:
        return
    statuses: dict[str, str] = {}
    for view in hs.views.values():
        ctx = hs.contexts.get(view.target_id)
        status = view_status(hs.snapshot, view.target_id, live=ctx is not None and ctx.live is not None)
        if status != view.status:
            view.status = status
            statuses[view.view_id] = status
    if statuses:
        await database_sync_to_async(services.view_statuses)(statuses)


def _note_placed_steers(hs: HostedSession, target: int, context: dict[str, Any], snapshot: dict[str, Any]) -> list[str]:
    """A queued steer that left the queue without becoming a turn joined the live turn;
    returns the input ids placed."""
    waiting = hs.queued_steers.get(target)
    if not waiting:
        return []
    placed: list[str] = []
    queued = {str(item["input_id"]) for item in context.get("queue") or []}
    turns = {str(turn["request_id"]) for turn in snapshot.get("turns", [])}
    ctx = hs.context(target)
    for input_id in [i for i in waiting if i not in queued]:
        prompt = waiting.pop(input_id)
        if input_id in turns or input_id in hs.withdrawn or ctx.live is None:
            continue  # it became a turn of its own (or was taken back)
        transcript = hs.runtime.read_transcript(target or None, entry_ids=True)
        ctx.note_steer(transcript, prompt)
        placed.append(input_id)
    return placed


async def sync_usage(hs: HostedSession) -> None:
    """Reconcile Studio's usage with the store's ledger (see ``studio.ledger``)."""
    targets = {
        str(c.get("conversation_id")): int(c.get("target_id") or 0) for c in (hs.snapshot or {}).get("contexts", [])
    }
    try:
        store = hs.config.store
        # A PostgreSQL ledger is read on Django's connection (same database); a SQLite file
        # off the ORM's thread, so a big first read never holds up Studio's own writes.
        read = database_sync_to_async(store.usage_ledger) if store.is_postgres else _in_thread(store.usage_ledger)
        ledger = await read(hs.ledger_pos)
        added = await database_sync_to_async(services.usage_sync)(hs.root_id, ledger, targets)
        if ledger:
            hs.ledger_pos = ledger[-1].pos
        await database_sync_to_async(services.view_totals)(hs.root_id, subtrees(hs.snapshot))
    except Exception:
        log.exception("could not reconcile the usage of session %s with its store", hs.root_id)
        return
    if added:
        log.info("session %s: %d usage record(s) recovered from the store's ledger", hs.root_id, added)


def _in_thread(fn: Any) -> Any:
    async def call(*args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    return call
