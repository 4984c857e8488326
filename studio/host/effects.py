"""The effects a fold returned, written to Studio's tables (the only writes the host makes).

One ``database_sync_to_async`` hop per fold, however many effects it returned, so a session's
bookkeeping queues once on Django's database thread instead of once per row. A usage ledger
sync (after a turn) reads the store's own ledger first — off that thread for a SQLite file, so
a big first read never holds up other sessions' writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from channels.db import database_sync_to_async

from studio import services
from studio.host import status_feed
from studio.host.fold import (
    ApprovalRecorded,
    Effect,
    LedgerSync,
    PlanRecorded,
    RetryRecorded,
    RunEnded,
    RunPlaced,
    StatusesChanged,
    ToolRecorded,
    UsageRecorded,
)
from studio.host.state import HostedSession, subtrees, wake

log = logging.getLogger("studio.hosts")


async def apply(hs: HostedSession, effects: Sequence[Effect]) -> None:
    """Write ``effects`` in order; nothing once the session was lost to another holder."""
    if hs.lost or not effects:
        return
    rows = [e for e in effects if not isinstance(e, LedgerSync)]
    if rows:
        await database_sync_to_async(write)(rows)
        await status_feed.publish({k: v for e in rows if isinstance(e, StatusesChanged) for k, v in e.statuses.items()})
    if any(isinstance(e, LedgerSync) for e in effects):
        await sync_usage(hs)


def write(effects: Sequence[Effect]) -> None:
    """The table writes of ``effects`` (sync: Django's ORM)."""
    for effect in effects:
        if isinstance(effect, RunEnded):
            services.run_end(
                effect.view_id,
                effect.request_id,
                status=effect.status,
                error_code=effect.error_code,
                error=effect.error,
                pending=effect.pending,
                prompt=effect.prompt,
            )
        elif isinstance(effect, ToolRecorded):
            services.tool_record(effect.root_id, effect.request_id, effect.event)
        elif isinstance(effect, UsageRecorded):
            services.record_usage(
                effect.root_id, effect.request_id, effect.event.model_dump(), target_id=effect.target_id
            )
        elif isinstance(effect, PlanRecorded):
            services.plan_record(effect.view_id, effect.request_id, effect.event.approval_id, effect.event.text)
        elif isinstance(effect, ApprovalRecorded):
            approval = effect.event
            services.approval_record(
                effect.view_id, effect.request_id, approval.approval_id, approval.decision, approval.notes
            )
        elif isinstance(effect, RetryRecorded):
            retry = effect.event
            services.retry_record(
                effect.view_id, effect.request_id, retry.attempt, retry.max_attempts, retry.reason, retry.kind
            )
        elif isinstance(effect, RunPlaced):
            services.run_status(effect.view_id, effect.request_id, "placed")
        elif isinstance(effect, StatusesChanged):
            services.view_statuses(effect.statuses)


async def sync_usage(hs: HostedSession) -> None:
    """Reconcile Studio's usage with the store's ledger (see ``studio.ledger``)."""
    snapshot = hs.snapshot
    targets = {c.conversation_id: c.target_id for c in snapshot.contexts} if snapshot is not None else {}
    try:
        store = hs.config.store
        # A PostgreSQL ledger is read on Django's connection (same database); a SQLite file
        # off the ORM's thread, so a big first read never holds up Studio's own writes.
        read: Callable[[int], Any] = (
            database_sync_to_async(store.usage_ledger) if store.is_postgres else _in_thread(store.usage_ledger)
        )
        ledger = await read(hs.ledger_pos)
        added = await database_sync_to_async(_reconcile)(hs.root_id, ledger, targets, subtrees(snapshot))
        if ledger:
            hs.ledger_pos = ledger[-1].pos
    except Exception:
        log.exception("could not reconcile the usage of session %s with its store", hs.root_id)
        return
    if added:
        log.info("session %s: %d usage record(s) recovered from the store's ledger", hs.root_id, added)
        for view in hs.views.values():
            view.dirty.mark(usage=True)
        wake(hs)


def _reconcile(root_id: str, ledger: list[Any], targets: dict[str, int], trees: dict[int, set[int]]) -> int:
    """Add what the ledger has and Studio lacks; recompute the views' totals when rows were added
    or other views (forks, subagents) share the store (the main view's totals grow live)."""
    added = services.usage_sync(root_id, ledger, targets)
    if added or len(trees) > 1:
        services.view_totals(root_id, trees)
    return added


def _in_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    async def call(*args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    return call
