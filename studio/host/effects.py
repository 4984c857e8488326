"""The effects a fold returned, written to Studio's tables (the only writes the host makes).

One ``database_sync_to_async`` hop and one transaction per batch of effects, however many it
holds, so a session's bookkeeping queues once on Django's database thread instead of once per
row, and every change to a session row in the batch is one ``UPDATE`` (``services.SessionRows``).
A usage ledger sync (after a turn) reads the store's own ledger first — off that thread for a
SQLite file, so a big first read never holds up other sessions' writes — and is reconciled in
the same hop as the turn's end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from channels.db import database_sync_to_async
from django.db import transaction

from agentcore.events import AgentEvent, SessionEvent
from agentcore.session.snapshot import SessionSnapshot
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
    RunSubmitted,
    StatusesChanged,
    ToolRecorded,
    UsageRecorded,
)
from studio.host.state import HostedSession, subtrees, touch, wake
from studio.ledger import LedgerRow

log = logging.getLogger("studio.hosts")


def with_held_usage(
    hs: HostedSession, held: list[Effect], effects: Sequence[Effect]
) -> tuple[list[Effect], list[Effect]]:
    """``(to write now, still held)`` for one folded event, holding a live turn's usage rows
    back: they are written with the next event that writes rows of its own — the tool call the
    model asked for, a retry, the turn's end — in its transaction (one hop and one transaction
    fewer per model call on Django's database thread, where every session's writes queue).
    Events that write nothing (text, the context ring) pass them by. A model call is always
    followed by such an event (agentcore starts the tool round, retries, pauses or ends the
    turn); rows a host never wrote are restored from the store's ledger (``LedgerSync``)."""
    if not effects:
        return [], held
    rows = [*held, *effects]
    if all(isinstance(e, UsageRecorded) and hs.live(e.target_id) for e in rows):
        return [], rows
    return rows, []


async def apply(hs: HostedSession, effects: Sequence[Effect]) -> None:
    """Write ``effects`` in order, in one hop and one transaction (a usage ledger sync with
    them); nothing once the session was lost to another holder. A written usage row marks its
    view's usage region (which reads the rows)."""
    if hs.lost or not effects:
        return
    rows = [e for e in effects if not isinstance(e, LedgerSync)]
    sync: _LedgerSync | None = None
    if any(isinstance(e, LedgerSync) for e in effects):
        snapshot = hs.snapshot
        targets = {c.conversation_id: c.target_id for c in snapshot.contexts} if snapshot is not None else {}
        try:
            sync = _LedgerSync(hs.root_id, await _read_ledger(hs), targets, subtrees(snapshot))
        except Exception:
            log.exception("could not read the usage ledger of session %s", hs.root_id)
    if rows or sync is not None:
        await database_sync_to_async(write)(rows, hs.usage_unsynced, sync)
    if sync is not None:
        _synced(hs, sync)
    for effect in rows:
        if isinstance(effect, UsageRecorded):
            touch(hs, hs.views.get(effect.target_id), usage=True)
    statuses = {k: v for e in rows if isinstance(e, StatusesChanged) for k, v in e.statuses.items()}
    await status_feed.publish(statuses, hs.config.owner_id)


def write(effects: Sequence[Effect], known: set[str] | None = None, sync: _LedgerSync | None = None) -> None:
    """The table writes of ``effects`` and of a ledger ``sync`` (sync: Django's ORM), in one
    transaction. ``known`` collects the usage records written here (until a sync reconciles
    them, so it needs not read them back)."""
    with transaction.atomic():
        rows = services.SessionRows()
        for effect in effects:
            _write(effect, rows, known)
        if sync is not None:
            # This batch's usage rows are Studio's by now too (a turn's last ones come with its end).
            batch = {e.event.record_id for e in effects if isinstance(e, UsageRecorded)}
            sync.run(rows, known | batch if known is not None else None)
        rows.write()


def _write(effect: Effect, rows: services.SessionRows, known: set[str] | None) -> None:
    if isinstance(effect, RunSubmitted):
        services.run_submitted(
            effect.view_id,
            request_id=effect.request_id,
            prompt=effect.prompt,
            agent=effect.agent,
            status=effect.status,
            mode=effect.mode,
            rows=rows,
        )
    elif isinstance(effect, RunEnded):
        services.run_end(
            effect.view_id,
            effect.request_id,
            status=effect.status,
            error_code=effect.error_code,
            error=effect.error,
            pending=effect.pending,
            prompt=effect.prompt,
            rows=rows,
        )
    elif isinstance(effect, ToolRecorded):
        services.tool_record(effect.root_id, effect.request_id, effect.event)
    elif isinstance(effect, UsageRecorded):
        services.record_usage(
            effect.root_id, effect.request_id, effect.event.model_dump(), target_id=effect.target_id, rows=rows
        )
        if known is not None:  # once committed: Studio has the row (new, or recorded before)
            record_id = effect.event.record_id
            transaction.on_commit(lambda: known.add(record_id))
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
        services.view_statuses(effect.statuses, rows)


class _LedgerSync:
    """One reconciliation of Studio's usage with the store's ledger rows read after the host's
    position: run inside a batch's transaction, its outcome read back by ``_synced``."""

    def __init__(self, root_id: str, ledger: list[Any], targets: dict[str, int], trees: dict[int, set[int]]) -> None:
        self.root_id, self.ledger, self.targets, self.trees = root_id, ledger, targets, trees
        self.added = 0
        self.done = False

    def run(self, rows: services.SessionRows, known: set[str] | None) -> None:
        """Add what the ledger has and Studio lacks; recompute the views' totals when rows were
        added or other views (forks, subagents) share the store (the main view's grow live)."""
        if known is not None and len(self.trees) <= 1 and all(row.record_id in known for row in self.ledger):
            # Only the host's own records since the last sync: nothing to read, add or recompute.
            self.done = True
            services.usage_sync(self.root_id, self.ledger, self.targets, known=known, rows=rows)
            return
        try:
            with transaction.atomic():  # a failed reconciliation must not undo the batch's writes
                self.added = services.usage_sync(self.root_id, self.ledger, self.targets, known=known, rows=rows)
                if self.added or len(self.trees) > 1:
                    rows.write()
                    services.view_totals(self.root_id, self.trees)
        except Exception:
            log.exception("could not reconcile the usage of session %s with its store", self.root_id)
            return
        self.done = True


def _synced(hs: HostedSession, sync: _LedgerSync) -> None:
    if not sync.done:
        return
    if sync.ledger:
        hs.ledger_pos = sync.ledger[-1].pos
        for row in sync.ledger:
            hs.usage_unsynced.discard(row.record_id)
    if sync.added:
        log.info("session %s: %d usage record(s) recovered from the store's ledger", hs.root_id, sync.added)
        for view in hs.views.values():
            view.dirty.mark(usage=True)
        wake(hs)


async def _read_ledger(hs: HostedSession) -> list[Any]:
    """The store's ledger rows after the host's position (a commit seq). An open runtime has
    them in memory (every sync of a hosted session: at its open and after each run), which
    costs no connection, file descriptors or thread. Without one, a PostgreSQL ledger is read on
    Django's connection (same database); a SQLite file off the ORM's thread, so a big read
    never holds up Studio's own writes."""
    if hs.runtime is not None and not hs.closing:
        return [
            LedgerRow(row.record_id, row.payload, row.conversation_id, row.seq)
            for row in hs.runtime.usage_ledger(hs.ledger_pos)
        ]
    store = hs.config.store
    read: Callable[[int], Any] = (
        database_sync_to_async(store.usage_ledger) if store.is_postgres else _in_thread(store.usage_ledger)
    )
    return list(await read(hs.ledger_pos))


async def catch_up(hs: HostedSession, event: AgentEvent) -> None:
    """The store as the host opened it, before any command runs (the lease sets ``ready``
    after this): ``serve()`` starts with a ``session`` event of the state it found — the one
    snapshot built at open, so folding that same event then changes no page — and Studio's
    rows follow what the store did unwatched (``follow_store``)."""
    if isinstance(event, SessionEvent):
        hs.opened(SessionSnapshot.model_validate(event.snapshot), event.snapshot)
    elif hs.runtime is not None:  # serve() always starts with one; should it not, build it here
        snapshot = hs.runtime.session_snapshot(published=True)
        hs.opened(snapshot, snapshot.model_dump(mode="json"))
    await follow_store(hs)
    hs.caught_up = True


async def follow_store(hs: HostedSession) -> None:
    """Studio's rows follow what the store did while no host of this process watched it (turns
    a dead process left open, usage it did not copy), as the host opens the store.

    A store the runtime's open has just created held nothing before, so there is nothing to
    follow: no turn to close, no ledger row to copy (its ledger starts at position 0). A backend
    that cannot tell (PostgreSQL, a custom ``storage=``) is followed as always. Studio's turn
    rows are read only when the store has turns, and in the same hop as the ledger position."""
    runtime = hs.runtime
    if runtime is not None and getattr(runtime.parts.storage, "created", False):
        hs.ledger_pos = 0
        return
    views = {target: view.view_id for target, view in hs.views.items()}
    turns = (hs.snapshot_data or {}).get("turns") or []

    def reconcile() -> int:
        if turns:  # no turn in the store: no Studio row can take a store's outcome
            services.runs_reconcile(views, turns)
        return services.ledger_position(hs.root_id)

    hs.ledger_pos = await database_sync_to_async(reconcile)()
    await sync_usage(hs)


async def sync_usage(hs: HostedSession) -> None:
    """Reconcile Studio's usage with the store's ledger (see ``studio.ledger``) on its own (when
    a store is opened)."""
    await apply(hs, [LedgerSync()])


def _in_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    async def call(*args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    return call
