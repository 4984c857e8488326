"""Reading a provider stream with flush ticks.

Streamed fragments must be committed (and shown) within the flush window even when the
provider goes quiet mid-answer — otherwise a stall right after some text would leave that
text neither durable nor visible. ``with_ticks`` runs the stream in its own task and yields
``None`` whenever the caller's flush deadline passes while no event is waiting.

It sits on the hot path of every model request, so it avoids per-event tasks: one plain
future per wait and, only while fragments are buffered, one timer handle per *deadline* (not per
wait: a window spans several events, and a timer per event cost as much as the wait itself).
And it does not wake the caller for every event: while a deadline is pending, an event the
caller may ``hold`` (a delta that will only be buffered until that deadline anyway) waits in the
queue until the deadline passes or an event that may not wait arrives, so a window of several
tokens costs the caller one wake-up, not one per token.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import TypeVar

T = TypeVar("T")

_DONE = object()


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _never_hold(_item: object) -> bool:
    return False


async def with_ticks(
    stream: AsyncIterator[T],
    next_deadline: Callable[[], float | None],
    clock: Callable[[], float],
    *,
    hold: Callable[[T], bool] = _never_hold,
) -> AsyncGenerator[T | None, None]:
    """``stream``'s items in order, and ``None`` whenever ``next_deadline()`` passes while none
    is waiting. ``hold(item)``: the item may wait for the pending deadline (default: none may)."""
    loop = asyncio.get_running_loop()
    items: deque[object] = deque()
    waiter: asyncio.Future[None] | None = None
    timer: asyncio.TimerHandle | None = None
    armed: float | None = None  # the deadline ``timer`` fires at; None once it fired

    def wake() -> None:
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def deadline_passed() -> None:
        nonlocal armed
        armed = None  # a later wait for the same deadline arms again (fires at once)
        wake()

    async def pump() -> None:
        try:
            async for item in stream:
                items.append(item)
                if waiter is not None and (armed is None or not hold(item) or clock() >= armed):
                    wake()
        except Exception as exc:  # an adapter bug: surface it in the consumer
            items.append(_Failed(exc))
        finally:
            items.append(_DONE)
            wake()

    task = asyncio.create_task(pump())
    try:
        while True:
            if not items:
                waiter = loop.create_future()
                deadline = next_deadline()
                if deadline != armed or timer is None:
                    if timer is not None:
                        timer.cancel()
                    timer = None
                    if deadline is not None:
                        timer = loop.call_later(max(0.0, deadline - clock()), deadline_passed)
                    armed = deadline
                try:
                    await waiter
                finally:
                    waiter = None
                if not items:
                    yield None  # the flush deadline passed while the provider was quiet
                    continue
            item = items.popleft()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item  # type: ignore[misc]
    finally:
        if timer is not None:
            timer.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
