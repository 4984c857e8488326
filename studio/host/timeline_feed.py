"""The live Timeline of an open store: agentcore's incremental ``TraceBuilder``, fed from the
store after each commit, and the patches each view's pages need (SPEC W8).

The feed is made the first time a page asks the host for a view's Timeline (``SessionHost.
timeline``) and lives as long as the host holds the store: from then on every folded event
marks the views' ``timeline`` region, and the publisher's flush calls ``push``, which reads
the rows committed since the builder's last ``seq`` (O(log n) plus the new rows), lays the
view's conversation out (``studio.timeline``) and renders only the rows whose content changed,
against what the view's pages were last sent (``View.timeline``). A store nobody looked at
costs nothing. Reading and laying out run off the event loop (``asyncio.to_thread``); the
builder is shared by the flush and page requests, so it is used under a lock.

Everything shown passes agentcore's ``Redactor`` with every registered model's API key added
(``studio.timeline_store.studio_redactor``).
"""

from __future__ import annotations

import asyncio

from channels.db import database_sync_to_async

from studio import timeline, timeline_html
from studio.host.state import HostedSession, View
from studio.timeline_store import TimelineFeed, studio_redactor, trace_source


async def ensure(hs: HostedSession) -> TimelineFeed:
    """The store's feed, made (and filled from the store) on first use."""
    if hs.timeline is None:
        redactor = await database_sync_to_async(studio_redactor)()
        feed = TimelineFeed(trace_source(hs.config.store), redactor)
        await asyncio.to_thread(feed.refresh)
        if hs.timeline is None:
            hs.timeline = feed
    return hs.timeline


def conversation_of(hs: HostedSession, target_id: int) -> str:
    context = hs.snapshot_context(target_id)
    return context.conversation_id if context is not None else "main"


async def page(hs: HostedSession, view: View, *, request_id: str | None = None) -> str:
    """The Timeline region for a page (or one turn of it: ``request_id``), current as of now."""
    feed = await ensure(hs)
    conversation = conversation_of(hs, view.target_id)

    def render() -> str:
        feed.refresh()
        if request_id is not None:
            return timeline_html.turn_html(
                feed.lay_out(conversation, request_id=request_id, prefix="tls"), view.view_id
            )
        laid_out = feed.lay_out(conversation)
        if view.timeline is None:
            view.timeline = timeline.Picture.of(laid_out, feed.touched_seq)
        return timeline_html.region_html(laid_out, view.view_id)

    return await asyncio.to_thread(render)


async def push(hs: HostedSession, view: View) -> str:
    """What a live push carries for the Timeline: a patch against what the view's pages have,
    the whole region when a patch would not do, or "" (nothing changed, or nobody opened it)."""
    feed = hs.timeline
    if feed is None:
        return ""
    conversation = conversation_of(hs, view.target_id)

    def render() -> str:
        feed.refresh()
        if view.timeline is not None and view.timeline.seq >= feed.touched_seq:
            return ""  # no span changed since this view's last push (streamed text, say)
        laid_out = feed.lay_out(conversation)
        patch = timeline.diff(view.timeline, laid_out)
        view.timeline = timeline.Picture.of(laid_out, feed.touched_seq)
        if patch is None:
            return timeline_html.region_html(laid_out, view.view_id, oob=True)
        return timeline_html.patch_html(patch, laid_out, view.view_id)

    return await asyncio.to_thread(render)


async def span_page(hs: HostedSession, view: View, span_id: str) -> str | None:
    """A span's details panel (None: no such span in this view's conversation)."""
    feed = await ensure(hs)
    conversation = conversation_of(hs, view.target_id)

    def render() -> str | None:
        feed.refresh()
        span = feed.span(conversation, span_id)
        if span is None:
            return None
        return timeline_html.span_html(span, feed.details(span))

    return await asyncio.to_thread(render)
