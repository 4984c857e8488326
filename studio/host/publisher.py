"""Publishing a session's views: consistent states and batched pushes over the channel layer.

Contract with the watchers (``studio.consumers``): every push is ``{"type": "session.push",
"epoch", "term", "seq", "full", "html"}``. ``seq`` rises by one per push of a view within one
host ``epoch`` (one process lifetime); ``term`` is the lease term the host holds the session
under (worker mode; 0 in-process), so a watcher never goes back to the picture of a holder that
lost the session. ``full`` pushes replace every region; the others carry only the regions
marked dirty since the last push (``Regions``) and the live turn's new and changed blocks.
``state()`` returns a ``HostState`` whose ``seq`` already includes every change it shows.

Two pushers per store (``flush_loop``): the live turns' work (streamed text, a tool's progress,
a turn's opening, the context ring) is rendered right here on the event loop and pushed as it
comes; the regions that read Studio's rows go through Django's database thread in pushes of
their own. So text never queues behind a row — this session's or another's — and a turn's
last tokens go out before its end is folded (``text_out``), never with the end's push.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import math
from collections.abc import Callable
from typing import Any, Literal

from channels.db import database_sync_to_async

from studio import pages, rendering, selectors, text_stream
from studio.host import timeline_feed
from studio.host.contract import RUNNING_STATUSES, HostState, Regions, live_prefix
from studio.host.live import LiveBlock, LiveTurn
from studio.host.state import HostedSession, View, notify
from studio.host.state import changed as next_change
from studio.trace import code_mode_runs

log = logging.getLogger("studio.hosts")


class Publisher:
    """Renders and sends one host's pushes (``epoch`` names the host's process lifetime)."""

    def __init__(
        self, epoch: str, layer: Callable[[], Any], interval: float, models: selectors.ModelCatalog | None = None
    ) -> None:
        """``models``: the host's catalog of the registered models (the one its openings use),
        so a version's options and keys are read once per host, not once more for the pushes."""
        self.epoch = epoch
        self._layer = layer
        self.interval = interval
        self._rendering: set[str] = set()  # views whose push of rows is being rendered
        self.models = models if models is not None else selectors.ModelCatalog()

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
            confinement=hs.config.confinement.shown() if hs.config.confinement is not None else None,
        )

    @staticmethod
    def _live(hs: HostedSession, view: View, live: LiveTurn) -> dict[str, Any]:
        sent = view.text_sent if view.text_turn == live.request_id else {}
        streams = {key: text_stream.to_data(state) for key, state in sent.items()}
        return {**live.to_dict(), "prompt": hs.prompts.get(live.request_id), "streams": streams}

    async def flush_loop(self, hs: HostedSession) -> None:
        """Push ``hs``'s changes as they come, with two pushers: this loop sends the live turns'
        work (``push_live``: a turn's opening, its text, a tool's progress, the ring), rendered
        here on the event loop; ``_rows_loop`` sends the regions that read Studio's rows
        (``push_rows``), rendered on Django's one database thread, where every session's writes
        and renders queue. So streamed text never waits behind a row — the controls at a turn's
        start, another session's turn end — and each view's pushes still go out one ``seq``
        after another (``View.sending``).

        The live pushes are batched: at most one per view and flush interval, never deltas. The
        window is leading-edge and opened by streamed text only: a change after a quiet interval
        is pushed at once, and changes that come while a window is open go out together when it
        closes. A turn's opening or the ring alone opens no window.
        """
        rows = asyncio.create_task(self._rows_loop(hs), name=f"studio-rows-{hs.root_id}", context=contextvars.Context())
        try:
            await self._live_loop(hs)
        finally:
            rows.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await rows

    async def _live_loop(self, hs: HostedSession) -> None:
        loop = asyncio.get_running_loop()
        last_text = -math.inf
        while not hs.closing:
            await hs.dirty.wait()
            wait = last_text + self.interval - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)  # rate limit, not synchronisation: the window's rest
            hs.dirty.clear()
            started = loop.time()
            hs.flushing += 1
            try:
                for view in list(hs.views.values()):
                    if hs.lost:
                        return  # the new holder publishes now
                    try:
                        if await self.push_live(hs, view):
                            last_text = started
                    except Exception:
                        log.exception("flush failed for session %s", view.view_id)
            finally:
                hs.flushing -= 1
            notify(hs)  # the rows pusher looks again (a region the fold marked), as do waiters

    async def _rows_loop(self, hs: HostedSession) -> None:
        """Push each view's regions that read rows, one push at a time. Never while an event is
        being folded and its rows written: what it marked is pushed after them (the fold wakes
        this loop when it is done), so a turn's end is never rendered from a row that does not
        say yet how the turn ended."""
        while not hs.closing:
            if hs.folding or not any(_rows_marked(view.dirty) for view in hs.views.values()):
                await next_change(hs)
                continue
            hs.flushing += 1
            try:
                for view in list(hs.views.values()):
                    if hs.lost:
                        return
                    if hs.folding:
                        break
                    try:
                        await self.push_rows(hs, view)
                    except Exception:
                        log.exception("flush failed for session %s", view.view_id)
            finally:
                hs.flushing -= 1
            notify(hs)

    async def text_out(self, hs: HostedSession) -> None:
        """Push every view's unsent live text now, ahead of the flush window. The lease calls
        this before it folds a turn's end: the end hands the turn's blocks to the settled
        conversation, whose push waits for the end's rows and the database thread — the turn's
        last tokens must not wait with it."""
        for view in list(hs.views.values()):
            if hs.lost:
                return
            await self.push_live(hs, view, text_only=True)

    async def push_live(self, hs: HostedSession, view: View, *, text_only: bool = False) -> bool:
        """Push the live turn's work in ``view`` (its opening, new and changed blocks), rendered
        from the host's memory, with the ring when it changed; True when the push carried live
        text (a patch of the live turn's blocks), which is what the flush window rate-limits.

        A changed ring alone is pushed here only when no region that reads rows is marked (else
        it goes with that push, rendered as it goes out): one push fewer at a turn's end.
        ``text_only``: nothing unless there are blocks to push (a turn's end: ``text_out``)."""
        async with view.sending:
            ctx = hs.contexts.get(view.target_id)
            live = ctx.live if ctx is not None else None
            marks = view.dirty
            if live is None:
                marks.opening = False  # the turn ended before it was shown: its end renders it
            opening = marks.opening and live is not None
            blocks = live is not None and bool(live.added or live.changed)
            if not (opening or blocks):
                rows_coming = _rows_marked(marks) or view.view_id in self._rendering
                if text_only or not _ring_changed(marks, live) or rows_coming:
                    return False
            added, changed, ring = live.take_changes() if live is not None else ([], [], False)
            ring = ring or marks.ring
            marks.opening = marks.ring = False
            sent = self._advance_text(view, live, [*added, *changed])
            view.seq += 1
            if opening:
                # The turn's user message and reply so far; its place (in place of the greeting
                # for a conversation's first turn) is read from the store's transcript.
                state = self._state(hs, view)
                html = pages.render_regions(
                    view.view_id, state, Regions(opening=True, ring=ring), added=added, changed=changed, sent=sent
                )
            else:
                usage: dict[str, int] | Literal[False] | None = self._ring(hs, view, live) if ring else False
                html = self._streamed(hs, view, live, added, changed, sent, usage)
            await self.send(hs, view, view.seq, full=False, html=html)
            return bool(added or changed)

    async def push_rows(self, hs: HostedSession, view: View) -> None:
        """Push the regions of ``view`` that read rows. A push that re-renders the live turn
        whole (a resync, the conversation) holds the view's sending until it is out, and takes
        the live turn's changes with it; any other renders first and then takes its ``seq``, so
        the live pushes go on meanwhile: it carries no part of the live turn but what is
        rendered as it goes out (the ring, and the code-mode blocks a snapshot settles)."""
        if not _rows_marked(view.dirty):
            return
        if view.dirty.full or view.dirty.conversation:
            async with view.sending:
                await self._push_whole(hs, view)
            return
        regions = view.dirty.take()
        view.dirty.mark(opening=regions.opening, ring=regions.ring)  # the live pusher's
        regions.opening = regions.ring = False
        timeline = await timeline_feed.push(hs, view) if regions.timeline else ""
        regions.timeline = False
        html = ""
        if regions.any():
            state = self._state(hs, view, transcript=False)
            self._rendering.add(view.view_id)
            try:
                html = await self._render(hs, view, state, regions, live_blocks=False)
            finally:
                self._rendering.discard(view.view_id)
        async with view.sending:
            ctx = hs.contexts.get(view.target_id)
            live = ctx.live if ctx is not None else None
            if regions.tasks and live is not None:
                html += self._code_mode_blocks(hs, view, live)
            if _ring_changed(view.dirty, live):
                view.dirty.ring = False
                if live is not None:
                    live.context_changed = False
                html += rendering.render_context_ring(self._ring(hs, view, live), oob=True)
            if not (html or timeline):
                return
            view.seq += 1
            await self.send(hs, view, view.seq, full=False, html=html + timeline)

    async def _push_whole(self, hs: HostedSession, view: View) -> None:
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
        view.seq += 1
        if regions.full:
            view.cache.clear()  # a resync (a new holder, a reset): settings may have changed
        sent = self._advance_text(view, live, [*added, *changed])
        state = self._state(hs, view)
        html = await self._render(hs, view, state, regions, added=added, changed=changed, sent=sent)
        await self.send(hs, view, state.seq, full=regions.full, html=html + timeline)

    async def _render(
        self,
        hs: HostedSession,
        view: View,
        state: HostState,
        regions: Regions,
        *,
        added: list[LiveBlock] | None = None,
        changed: list[LiveBlock] | None = None,
        sent: dict[str, text_stream.StreamState] | None = None,
        live_blocks: bool = True,
    ) -> str:
        """``pages.render_regions`` — on the database thread when it reads rows."""
        # Taken here, on the loop: a page rendered from the state while this push renders in the
        # database thread drops it (``state``), and what this push records goes nowhere.
        shown = view.cache.setdefault(pages.SHOWN, {})
        render = functools.partial(
            pages.render_regions,
            view.view_id,
            state,
            regions,
            added=added,
            changed=changed,
            sent=sent,
            cache=view.cache,
            shown=shown,
            live_blocks=live_blocks,
            models=selectors.ModelMenu(self.models, hs.config.model_rows),
        )
        if pages.reads_rows(regions, state):
            html: str = await database_sync_to_async(render)()
            return html
        return render()

    @staticmethod
    def _code_mode_blocks(hs: HostedSession, view: View, live: LiveTurn) -> str:
        """The live turn's code-mode blocks again (a script's nested calls settle in snapshots,
        not in events), as the live turn and the snapshot have them now."""
        runs = code_mode_runs(hs.snapshot_data)
        if not runs:
            return ""
        streams = {key: text_stream.to_data(state) for key, state in view.text_sent.items()}
        prefix = live_prefix(live.request_id)
        return "".join(pages.live_block_parts(prefix, runs, streams, [], [], every=live.blocks))

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


#: The marks the live pusher takes (rendered from the host's memory); the rows pusher the rest.
LIVE_MARKS = ("opening", "ring")


def _ring_changed(marks: Regions, live: LiveTurn | None) -> bool:
    return marks.ring or (live is not None and live.context_changed)


def _rows_marked(marks: Regions) -> bool:
    """Some region the rows pusher renders is marked."""
    return any(getattr(marks, name) for name in marks.__slots__ if name not in LIVE_MARKS)
