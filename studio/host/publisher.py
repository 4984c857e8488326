"""Publishing a session's views: consistent states and batched pushes over the channel layer.

Contract with the watchers (``studio.consumers``): every push is ``{"type": "session.push",
"epoch", "term", "seq", "full", "html"}``. ``seq`` rises by one per push of a view within one
host ``epoch`` (one process lifetime); ``term`` is the lease term the host holds the session
under (worker mode; 0 in-process), so a watcher never goes back to the picture of a holder that
lost the session. ``full`` pushes replace every region; the others carry only the regions
marked dirty since the last push (``Regions``) and the live turn's new and changed blocks.
``state()`` returns a ``HostState`` whose ``seq`` already includes every change it shows.

A push that needs no row of Studio's (streamed text, the context ring) is rendered right here
on the event loop; only a push that reads rows goes through Django's database thread, so text
never queues behind another session's database work.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Any, Literal

from channels.db import database_sync_to_async

from studio import pages, rendering, text_stream
from studio.host import timeline_feed
from studio.host.contract import RUNNING_STATUSES, HostState
from studio.host.live import LiveBlock, LiveTurn
from studio.host.state import HostedSession, View, notify

log = logging.getLogger("studio.hosts")


class Publisher:
    """Renders and sends one host's pushes (``epoch`` names the host's process lifetime)."""

    def __init__(self, epoch: str, layer: Callable[[], Any], interval: float) -> None:
        self.epoch = epoch
        self._layer = layer
        self.interval = interval

    def state(self, hs: HostedSession, view: View) -> HostState:
        """The view's state for a page that renders it whole (a page load, a watcher's resync):
        what its pages show is then what the host has now, so the controls the pushes sent last
        (``pages.SHOWN``) no longer say what every page shows."""
        view.cache.pop(pages.SHOWN, None)
        return self._state(hs, view)

    def _state(self, hs: HostedSession, view: View, *, transcript: bool = True) -> HostState:
        """The view's state; ``transcript=False`` for a live patch, which renders no settled turn
        (reading a long transcript on every push would cost what the page saves by windowing)."""
        ctx = hs.contexts.get(view.target_id)
        runtime = hs.runtime
        messages = (
            list(runtime.read_transcript(view.target_id or None, entry_ids=True)) if runtime and transcript else []
        )
        live = ctx.live if ctx is not None else None
        context = hs.snapshot_context(view.target_id)
        usage = ctx.context_usage if ctx is not None else None
        if usage is None and context is not None and context.context_usage is not None:
            usage = context.context_usage.model_dump()
        waiting = (ctx is not None and ctx.paused) or (context is not None and context.status == "paused")
        return HostState(
            session_id=view.view_id,
            epoch=self.epoch,
            seq=view.seq,
            running=live is not None or (context is not None and context.status in RUNNING_STATUSES),
            transcript=messages,
            base_len=ctx.settled_len(messages) if ctx is not None and live is not None and transcript else None,
            live=self._live(hs, view, live) if live is not None else None,
            context_usage=usage,
            snapshot=hs.snapshot_data,
            target_id=view.target_id,
            term=hs.term,
            waiting=waiting,
        )

    @staticmethod
    def _live(hs: HostedSession, view: View, live: LiveTurn) -> dict[str, Any]:
        sent = view.text_sent if view.text_turn == live.request_id else {}
        streams = {key: text_stream.to_data(state) for key, state in sent.items()}
        return {**live.to_dict(), "prompt": hs.prompts.get(live.request_id), "streams": streams}

    async def flush_loop(self, hs: HostedSession) -> None:
        """Batch changes: at most one push per view and flush interval, never deltas.

        The window is leading-edge and opened by streamed text only: a change after a quiet
        interval is pushed at once, and changes that come while a window is open go out together
        when it closes. A push of regions (a turn opening or ending, a snapshot) opens no window,
        so the text that follows it is not held back by it.
        """
        loop = asyncio.get_running_loop()
        last_text = -math.inf
        while not hs.closing:
            await hs.dirty.wait()
            wait = last_text + self.interval - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)  # rate limit, not synchronisation: the window's rest
            hs.dirty.clear()
            if hs.folding:
                # An event is being folded and its rows written: what it marked is pushed after
                # them (the fold wakes this loop when it is done), so a turn's end is never
                # rendered from a row that does not say yet how the turn ended.
                continue
            started = loop.time()
            hs.flushing = True
            try:
                for view in list(hs.views.values()):
                    if hs.lost:
                        return  # the new holder publishes now
                    try:
                        if await self.flush(hs, view):
                            last_text = started
                    except Exception:
                        log.exception("flush failed for session %s", view.view_id)
            finally:
                hs.flushing = False
            notify(hs)

    async def flush(self, hs: HostedSession, view: View) -> bool:
        """Push what changed in ``view``; True when the push carried live text (a patch of the
        live turn's blocks), which is what the flush window rate-limits."""
        ctx = hs.contexts.get(view.target_id)
        live = ctx.live if ctx is not None else None
        regions = view.dirty.take()
        timeline = await timeline_feed.push(hs, view) if regions.timeline else ""
        regions.timeline = False
        added: list[LiveBlock] = []
        changed: list[LiveBlock] = []
        if live is not None and live.dirty:
            added, changed, ring = live.take_changes()
            regions.ring = regions.ring or ring
        if not (added or changed or regions.any() or timeline):
            return False
        view.seq += 1
        if regions.full:
            view.cache.clear()  # a resync (a new holder, a reset): settings may have changed
        sent = self._advance_text(view, live, [*added, *changed])
        if regions.ring_only():
            # Streamed work only (text, a tool's progress, the ring): rendered from the live turn.
            usage: dict[str, int] | Literal[False] | None = self._ring(hs, view, live) if regions.ring else False
            html = self._streamed(hs, view, live, added, changed, sent, usage)
            await self.send(hs, view, view.seq, full=False, html=html + timeline)
            return bool(added or changed)
        state = self._state(hs, view, transcript=regions.full or regions.conversation or regions.opening)
        # Taken here, on the loop: a page rendered from the state while this push renders in the
        # database thread drops it (``state``), and what this push records goes nowhere.
        shown = view.cache.setdefault(pages.SHOWN, {})
        if pages.reads_rows(regions, state):
            render = database_sync_to_async(pages.render_regions)
            html = await render(
                view.view_id, state, regions, added=added, changed=changed, sent=sent, cache=view.cache, shown=shown
            )
        else:
            html = pages.render_regions(
                view.view_id, state, regions, added=added, changed=changed, sent=sent, cache=view.cache, shown=shown
            )
        await self.send(hs, view, state.seq, full=regions.full, html=html + timeline)
        return bool(added or changed)

    @staticmethod
    def _streamed(
        hs: HostedSession,
        view: View,
        live: LiveTurn | None,
        added: list[LiveBlock],
        changed: list[LiveBlock],
        sent: dict[str, text_stream.StreamState],
        ring: dict[str, int] | Literal[False] | None,
    ) -> str:
        if live is None:
            return rendering.render_context_ring(ring or None, oob=True) if ring is not False else ""
        streams = {key: text_stream.to_data(state) for key, state in view.text_sent.items()}
        return pages.render_live_patch(
            live, added, changed, snapshot=hs.snapshot_data, streams=streams, sent=sent, ring=ring
        )

    @staticmethod
    def _ring(hs: HostedSession, view: View, live: LiveTurn | None) -> dict[str, int] | None:
        """The context usage the ring shows: the live turn's, else the conversation's last known,
        else the snapshot's (what ``HostState`` gives a full render)."""
        if live is not None and live.context_usage:
            return live.context_usage
        ctx = hs.contexts.get(view.target_id)
        if ctx is not None and ctx.context_usage is not None:
            return ctx.context_usage
        context = hs.snapshot_context(view.target_id)
        return context.context_usage.model_dump() if context is not None and context.context_usage else None

    @staticmethod
    def _advance_text(
        view: View, live: LiveTurn | None, touched: list[LiveBlock]
    ) -> dict[str, text_stream.StreamState]:
        """Move each live text block's streaming state on to its text now (only the ``touched``
        blocks' text changed; a block the view has no state for yet gets one); returns the states
        before (what the page has, which the push's patches continue from)."""
        if live is None:
            view.text_sent, view.text_turn = {}, ""
            return {}
        before = view.text_sent if view.text_turn == live.request_id else {}
        keys = {b.key for b in touched}
        after = dict(before)
        for block in live.blocks:
            if block.kind == "text" and (block.key in keys or block.key not in before):
                after[block.key] = text_stream.advance(block.text, before.get(block.key))
        view.text_sent, view.text_turn = after, live.request_id
        return before

    async def send(self, hs: HostedSession, view: View, seq: int, *, full: bool, html: str) -> None:
        if hs.lost:
            return
        message = {"type": "session.push", "epoch": self.epoch, "term": hs.term, "seq": seq, "full": full, "html": html}
        await self._layer().group_send(view.group, message)
