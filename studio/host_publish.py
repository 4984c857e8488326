"""Publishing a session's views: consistent states and batched pushes over the channel layer.

Contract with the watchers (``studio.consumers``): every push is ``{"type": "session.push",
"epoch", "term", "seq", "full", "html"}``. ``seq`` rises by one per push of a view within one
host ``epoch`` (one process lifetime); ``term`` is the lease term the host holds the session
under (worker mode; 0 in-process), so a watcher never goes back to the picture of a holder that
lost the session. ``full`` pushes replace every region; the others patch whole blocks (never
deltas) and the snapshot-driven regions. ``state()`` returns a ``HostState`` whose ``seq``
already includes every change it shows.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Any

from channels.db import database_sync_to_async

from studio import selectors
from studio.host_session import RUNNING_STATUSES, HostedSession, HostState, View, context_usage, notify
from studio.live import LiveBlock

log = logging.getLogger("studio.hosts")


class Publisher:
    """Renders and sends one host's pushes (``epoch`` names the host's process lifetime)."""

    def __init__(self, epoch: str, layer: Callable[[], Any], interval: float) -> None:
        self.epoch = epoch
        self._layer = layer
        self.interval = interval

    def state(self, hs: HostedSession, view: View, *, transcript: bool = True) -> HostState:
        """The view's state; ``transcript=False`` for a live patch, which renders no settled turn
        (reading a long transcript on every push would cost what the page saves by windowing)."""
        ctx = hs.contexts.get(view.target_id)
        messages = (
            list(hs.runtime.read_transcript(view.target_id or None, entry_ids=True))
            if hs.runtime is not None and transcript
            else []
        )
        live = ctx.live if ctx is not None else None
        context = hs.snapshot_context(view.target_id) or {}
        return HostState(
            session_id=view.view_id,
            epoch=self.epoch,
            seq=view.seq,
            running=live is not None
            or context.get("status") in RUNNING_STATUSES,
            transcript=messages,
            base_len=ctx.settled_len(messages) if ctx is not None and live is not None and transcript else None,
            live=live.to_dict() if live is not None else None,
            context_usage=(ctx.context_usage if ctx is not None else None) or context_usage(hs.runtime, view.target_id),
            snapshot=hs.snapshot,
            target_id=view.target_id,
            term=hs.term,
        )

    async def flush_loop(self, hs: HostedSession) -> None:
        """Batch changes: at most one push per view and flush interval, never deltas.

        The window is leading-edge and opened by streamed text only: a change after a quiet
        interval is pushed at once, and changes that come while a window is open go out together
        when it closes. A full render (a turn opening or ending, a resync) opens no window, so
        the text that follows it is not held back by it.
        """
        loop = asyncio.get_running_loop()
        last_text = -math.inf
        while not hs.closing:
            await hs.dirty.wait()
            wait = last_text + self.interval - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)  # rate limit, not synchronisation: the window's rest
            hs.dirty.clear()
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
        if view.full:
            view.full = view.controls = view.trace = False
            if live is not None:
                live.take_changes()
            view.seq += 1
            state = self.state(hs, view)
            html = await database_sync_to_async(selectors.render_full_regions)(view.view_id, state)
            await self.send(hs, view, state.seq, full=True, html=html)
            return False
        added: list[LiveBlock] = []
        changed: list[LiveBlock] = []
        ring = False
        if live is not None and live.dirty:
            added, changed, ring, trace_changed = live.take_changes()
            view.trace = view.trace or trace_changed
        if not (added or changed or ring or view.controls or view.trace):
            return False
        controls, trace = view.controls, view.trace
        view.controls = view.trace = False
        view.seq += 1
        state = self.state(hs, view, transcript=False)
        html = await database_sync_to_async(selectors.render_patch_regions)(
            view.view_id, state, added=added, changed=changed, ring=ring, controls=controls, trace=trace
        )
        await self.send(hs, view, state.seq, full=False, html=html)
        return bool(added or changed)

    async def send(self, hs: HostedSession, view: View, seq: int, *, full: bool, html: str) -> None:
        if hs.lost:
            return
        message = {"type": "session.push", "epoch": self.epoch, "term": hs.term, "seq": seq, "full": full, "html": html}
        await self._layer().group_send(view.group, message)
