"""One open store as the host holds it: its runtime, its views, and what each view must re-render.

State apart from the work: the fold (``studio.host.fold``) changes it, the publisher reads it,
the host (``studio.host.session_host``) owns it. The snapshot is kept typed
(``agentcore.session.snapshot.SessionSnapshot``) and, for rendering and the channel layer, as
the JSON data the runtime produced — both from one build.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentcore.session.snapshot import ContextState, SessionSnapshot
from studio.host.contract import RUNNING_STATUSES, Regions, SessionConfig
from studio.host.live import ContextLive
from studio.text_stream import StreamState

if TYPE_CHECKING:
    from agentcore.runtime import AgentRuntime
    from studio.timeline import Picture
    from studio.timeline_store import TimelineFeed

TERMINAL_TURNS = ("completed", "failed", "aborted", "paused")


@dataclass(slots=True)
class View:
    """One page's live channel: a conversation of the store, its group and sequence numbers."""

    view_id: str
    target_id: int
    kind: str = "main"
    seq: int = 0
    dirty: Regions = field(default_factory=Regions)
    status: str = ""  # what the sessions list shows (written when it changes)
    # Each live text block's streaming state as the page has it (``studio.text_stream``), for
    # the turn ``text_turn``: what the next push continues from, and what a full render shows.
    text_sent: dict[str, StreamState] = field(default_factory=dict)
    text_turn: str = ""
    # Rows and contexts the page's regions read that change only with the session's settings or
    # title (``studio.pages.cached``): cleared when the host changes them.
    cache: dict[Any, Any] = field(default_factory=dict)
    # The Timeline rows the page was last sent (``studio.timeline.Picture``), which the next
    # push patches; None: the next push sends the whole region.
    timeline: Picture | None = None
    # Held while a push of this view takes its ``seq`` and goes out (``studio.host.publisher``:
    # the live turn's pushes and the pushes of regions that read rows are sent by two tasks).
    sending: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def group(self) -> str:
        return f"session-{self.view_id}"


@dataclass(slots=True)
class HostedSession:
    """One open store: its runtime, the lease that drives it, its views."""

    config: SessionConfig
    runtime: AgentRuntime | None = None
    lease: asyncio.Task[None] | None = None
    flusher: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # a lease is active: commands work
    dirty: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    snapshot: SessionSnapshot | None = None
    snapshot_data: dict[str, Any] | None = None  # the same snapshot as the runtime serialised it
    contexts: dict[int, ContextLive] = field(default_factory=dict)
    views: dict[int, View] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)  # request id → prompt text (turn starts)
    withdrawn: set[str] = field(default_factory=set)
    queued_steers: dict[int, dict[str, str]] = field(default_factory=dict)  # target → input id → prompt
    # Writers folding changes and writing their rows now (the lease folding an event, writing the
    # usage rows it held): the rows pusher renders nothing until they are done (``folding_changes``).
    folding: int = 0
    flushing: int = 0  # how many of the publisher's pushers are rendering or sending a push
    closing: bool = False
    caught_up: bool = False  # the lease has taken in the store's state at open (``effects.catch_up``)
    last_used: float = field(default_factory=time.monotonic)
    waiters: set[asyncio.Future[None]] = field(default_factory=set)  # wait_idle / wait_quiet
    ledger_pos: int = 0  # the store's usage ledger is reconciled up to here
    # Usage records this host wrote since the last reconciliation: a sync that finds only these
    # in the store's new ledger rows reads nothing back from Studio's table.
    usage_unsynced: set[str] = field(default_factory=set)
    counted_live: int = 0  # its live turns in the host's total for the stream window (``SessionHost.retune``)
    term: int = 0  # the lease term this host holds the session under (worker mode; 0 in-process)
    lost: bool = False  # another holder took the session over: publish and record nothing more
    timeline: TimelineFeed | None = None  # the store's live trace, once a page opened its Timeline

    @property
    def root_id(self) -> str:
        return self.config.root_id

    def context(self, target_id: int) -> ContextLive:
        ctx = self.contexts.get(target_id)
        if ctx is None:
            ctx = self.contexts[target_id] = ContextLive(target_id)
        return ctx

    def opened(self, snapshot: SessionSnapshot, data: dict[str, Any]) -> None:
        """Take the store's state as this host opened it: shown as it is, and its turns that
        had ended already are never live ones here."""
        self.snapshot, self.snapshot_data = snapshot, data
        for turn in snapshot.turns:
            if turn.status not in ("running", "queued"):
                self.context(turn.target_id).ended.add(turn.request_id)

    def snapshot_context(self, target_id: int) -> ContextState | None:
        for context in self.snapshot.contexts if self.snapshot is not None else []:
            if context.target_id == target_id:
                return context
        return None

    def context_status(self, target_id: int) -> str:
        context = self.snapshot_context(target_id)
        return context.status if context is not None else "idle"

    def live_turns(self) -> int:
        """How many of this store's conversations have a live turn now."""
        return sum(1 for ctx in self.contexts.values() if ctx.live is not None)

    def live(self, target_id: int) -> bool:
        ctx = self.contexts.get(target_id)
        return ctx is not None and ctx.live is not None

    def settled(self, target_id: int) -> bool:
        """Nothing runs in this conversation *and* every event of its turns has been folded.

        The snapshot can be ahead of the events (it is built when the lease reads the bus, the
        events of a fast turn may still be queued behind it): a turn the snapshot calls finished
        counts only once its ``end`` event was seen here.
        """
        if self.folding or self.live(target_id):
            return False
        if self.context_status(target_id) not in ("idle", "paused"):
            return False
        ctx = self.contexts.get(target_id)
        ended = ctx.ended if ctx is not None else set()
        for turn in self.snapshot.turns if self.snapshot is not None else []:
            if turn.target_id == target_id and turn.status in TERMINAL_TURNS and turn.request_id not in ended:
                return False
        return True

    def busy(self, target_id: int) -> bool:
        """Work is in progress in this conversation (a live turn, an open request, a queue)."""
        return self.live(target_id) or self.context_status(target_id) in ("running", "queued", "paused")

    def writing(self) -> bool:
        """A turn of some conversation is running or about to (a pause, a sleeping timer and
        other durable state survive closing the runtime; a turn in flight should not be cut)."""
        if any(ctx.live is not None for ctx in self.contexts.values()):
            return True
        contexts = self.snapshot.contexts if self.snapshot is not None else []
        return any(c.status in RUNNING_STATUSES for c in contexts)

    def quiet(self) -> bool:
        """Nothing at all is happening in the store (safe to close the runtime)."""
        if any(ctx.live is not None for ctx in self.contexts.values()):
            return False
        if self.snapshot is None:
            return True
        if self.snapshot.tasks:
            return False
        return all(c.status == "idle" for c in self.snapshot.contexts)

    def view_id(self, target_id: int) -> str | None:
        view = self.views.get(target_id)
        return view.view_id if view is not None else None


def subtree_targets(snapshot: SessionSnapshot, target_id: int) -> set[int]:
    """A conversation and its subagents, however deep (never its forks)."""
    out = {target_id}
    grew = True
    while grew:
        grew = False
        for context in snapshot.contexts:
            if context.kind == "subagent" and context.parent_target_id in out and context.target_id not in out:
                out.add(context.target_id)
                grew = True
    return out


def subtrees(snapshot: SessionSnapshot | None) -> dict[int, set[int]]:
    """Per context, the targets whose usage it includes: itself and its subagents (not forks)."""
    if snapshot is None:
        return {}
    return {c.target_id: subtree_targets(snapshot, c.target_id) for c in snapshot.contexts}


def view_status(snapshot: SessionSnapshot, target_id: int, *, live: bool = False) -> str:
    """What the sessions list says about a conversation: running, waiting (for you), failed or
    idle. Background work (a sleeping timer, a subagent) counts as running."""
    context = next((c for c in snapshot.contexts if c.target_id == target_id), None)
    status = context.status if context is not None else None
    if live or status in ("running", "queued"):
        return "running"
    if status == "paused":
        return "waiting"
    targets = subtree_targets(snapshot, target_id)
    if any(t.target_id in targets and t.kind != "tool" for t in snapshot.tasks):
        return "running"
    turns = [t for t in snapshot.turns if t.target_id == target_id]
    if turns and turns[-1].status == "failed":
        return "failed"
    return "idle"


def config_versions(snapshot: SessionSnapshot) -> dict[int, int]:
    return {c.target_id: c.config.version for c in snapshot.contexts}


def touch(hs: HostedSession, view: View | None, **regions: bool) -> None:
    """Mark what ``view`` must re-render at the next flush, and wake the flusher."""
    if view is not None:
        view.dirty.mark(**regions)
    wake(hs)


def wake(hs: HostedSession) -> None:
    """Something changed: the flush loop pushes it, and whoever waits in ``changed`` looks."""
    hs.dirty.set()
    notify(hs)


@contextlib.contextmanager
def folding_changes(hs: HostedSession) -> Iterator[None]:
    """Fold changes and write their rows as one step for the publisher: a region marked inside
    is rendered once the rows say what the change did (a turn's end with its run's row and its
    last usage), not once with half of it and again when the rest is written."""
    hs.folding += 1
    try:
        yield
    finally:
        hs.folding -= 1
        wake(hs)


def notify(hs: HostedSession) -> None:
    """Wake whoever waits in ``changed`` (a flush went out) without asking for another flush:
    setting ``dirty`` here kept an idle session's flush loop turning once per window forever."""
    for waiter in list(hs.waiters):
        if not waiter.done():
            waiter.set_result(None)


async def changed(hs: HostedSession) -> None:
    """Wait for the next processed event, snapshot or flush of ``hs``."""
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    hs.waiters.add(waiter)
    try:
        await waiter
    finally:
        hs.waiters.discard(waiter)


# --- waiting on a store's host-side state (tests and admin actions: never on time) ------------


async def until_idle(hs: HostedSession, view: View) -> None:
    """Wait until ``view``'s conversation has nothing running and its pushes are out. Each
    processed snapshot and event wakes it (``changed``)."""
    while not (hs.settled(view.target_id) and not hs.flushing and not view.dirty.any()):
        await changed(hs)


async def until_pushed(hs: HostedSession, view: View) -> None:
    """Wait until everything folded so far has been pushed to ``view``'s page (nothing being
    folded, marked or flushed): for tests that compare a page mid-turn."""
    while True:
        ctx = hs.contexts.get(view.target_id)
        live_dirty = ctx is not None and ctx.live is not None and ctx.live.dirty
        if not (hs.folding or hs.flushing or hs.dirty.is_set() or view.dirty.any() or live_dirty):
            return
        await changed(hs)


async def until_live(hs: HostedSession, view: View) -> None:
    """Wait until ``view`` shows a live turn (its first event was folded)."""
    while (ctx := hs.contexts.get(view.target_id)) is None or ctx.live is None:
        await changed(hs)


async def until_quiet(hs: HostedSession) -> None:
    """Wait until nothing at all runs in the store (turns, queues, background tasks)."""
    while not hs.quiet():
        await changed(hs)
