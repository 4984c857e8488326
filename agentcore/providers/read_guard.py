"""Interrupting an awaited network read: our abort signal, the header and idle bounds (SPEC L2, L8).

Why a ticker and not ``asyncio.timeout`` per read: this is the hot path. A timer per read (or
per stream) costs a ``TimerHandle``, heap pushes with Python-level comparisons and a cancel
on every request; a clock read per event costs more again. Here an adapter keeps one
``Ticker`` per event loop that fires every ``period`` seconds (a quarter of the shorter
bound) while any of its streams is open, and each stream's ``ReadGuard`` counts the ticks.
A read costs two attribute stores, a real event one, a stream a set insert and removal.

The counting, for one stream:

- ``header``: the ticks since the request was sent cover ``header_s``;
- ``idle``: a tick during a read with no real event since the previous tick is quiet, and
  quiet ticks in a row cover ``idle_s``; a tick while the consumer holds the stream (not
  reading) starts the count again, so a slow consumer never causes an idle timeout;
- ``tail`` (waiting for the body's end after the terminal event): one quiet tick.

Ticks are shared, so a stream starts anywhere between two of them: each bound is counted
with one tick to spare and fires between the bound and the bound plus one tick (the idle
bound between ``idle_s`` and 1.25 x ``idle_s`` after the last event), never early. Ticks
are event-loop callbacks: a process that is not scheduled for a while gets one late tick,
not several, so a stall delays a bound rather than firing it.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Literal

from agentcore.providers.stream_limits import StreamTimeouts

Cause = Literal["abort", "header", "idle", "tail"]


class Ticker:
    """One periodic timer for the open streams of one adapter on one event loop; it stops
    by itself when none is left, so an idle adapter schedules nothing."""

    __slots__ = ("guards", "handle", "header_ticks", "idle_ticks", "loop", "period")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeouts: StreamTimeouts) -> None:
        self.loop = loop
        self.period = min(timeouts.header_s, timeouts.idle_s) / 4
        # +1: the first tick may come at once after a stream started (or last reset).
        self.header_ticks = math.ceil(timeouts.header_s / self.period - 1e-9) + 1
        self.idle_ticks = math.ceil(timeouts.idle_s / self.period - 1e-9)
        self.guards: set[ReadGuard] = set()
        self.handle: asyncio.TimerHandle | None = None

    def add(self, guard: ReadGuard) -> None:
        self.guards.add(guard)
        if self.handle is None:
            self.handle = self.loop.call_later(self.period, self._tick)

    def _tick(self) -> None:
        if not self.guards:
            self.handle = None
            return
        self.handle = self.loop.call_later(self.period, self._tick)
        for guard in list(self.guards):
            guard.tick()


class ReadGuard:
    """The bounds and the abort signal of one stream.

    While the adapter awaits the network (``enter`` … ``reading = False``), setting ``abort``
    or a bound expiring cancels the reading task — the mechanism ``asyncio.timeout`` uses,
    including ``uncancel``, so an outside cancellation is never swallowed. Outside reads
    nothing is interrupted: the adapter checks ``aborted`` before every read, and sets
    ``fresh`` for every real event (not for keep-alives)."""

    __slots__ = ("_elapsed", "_task", "_ticker", "_waiter", "abort", "cause", "fresh", "phase", "reading")

    def __init__(self, abort: asyncio.Event | None, ticker: Ticker) -> None:
        self.abort = abort
        self.reading = False
        self.fresh = False
        self.phase: Cause = "header"
        self.cause: Cause | None = None
        self._elapsed = 0
        self._ticker = ticker
        self._task: asyncio.Task[Any] | None = None
        self._waiter: asyncio.Future[Any] | None = None
        if abort is not None:
            self._waiter = asyncio.ensure_future(abort.wait())
            self._waiter.add_done_callback(self._on_abort)

    @property
    def aborted(self) -> bool:
        return self.abort is not None and self.abort.is_set()

    def start(self) -> None:
        """The request is about to be sent: the header bound starts now."""
        self._ticker.add(self)

    def enter(self) -> None:
        """About to await the network (set ``reading = False`` when the await returned).

        The loop is passed: ``current_task()`` without one looks the running loop up, which
        on CPython 3.11 calls ``os.getpid()`` (a real syscall on some VMs) once per read."""
        self._task = asyncio.current_task(self._ticker.loop)
        self.reading = True

    def switch(self, phase: Cause) -> None:
        """Headers arrived (``idle``: they count as an event), or the terminal event did (``tail``)."""
        self.phase = phase
        self._elapsed = 0
        self.fresh = phase == "idle"

    def tick(self) -> None:
        if self.cause is not None:
            return
        phase = self.phase
        if phase == "header":
            self._elapsed += 1
            limit = self._ticker.header_ticks
        elif self.fresh or not self.reading:
            self.fresh = False
            self._elapsed = 0
            return
        else:
            self._elapsed += 1
            limit = self._ticker.idle_ticks if phase == "idle" else 1
        if self._elapsed >= limit and self.reading and self._task is not None:
            self.cause = phase
            self._task.cancel()

    def _on_abort(self, waiter: asyncio.Future[Any]) -> None:
        if waiter.cancelled() or not self.reading or self.cause is not None or self._task is None:
            return
        self.cause = "abort"
        self._task.cancel()

    def absorb(self) -> Cause | None:
        """Inside ``except CancelledError``: the cause when the cancellation was ours alone."""
        self.reading = False
        cause, self.cause = self.cause, None
        if cause is None or self._task is None:
            return None
        return cause if self._task.uncancel() == 0 else None

    def close(self) -> None:
        self.reading = False
        self._ticker.guards.discard(self)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.cancel()
        if self.cause is not None and self._task is not None:
            self.cause = None  # fired, but the read ended another way: withdraw our cancel
            self._task.uncancel()
