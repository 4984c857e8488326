"""Reading a provider stream with flush ticks.

Streamed fragments must be committed (and shown) within the flush window even when the
provider goes quiet mid-answer — otherwise a stall right after some text would leave that
text neither durable nor visible. ``with_ticks`` runs the stream in its own task and yields
``None`` whenever the caller's flush deadline passes while no event is waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import TypeVar

T = TypeVar("T")

_DONE = object()


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


async def with_ticks(
    stream: AsyncIterator[T], next_deadline: Callable[[], float | None], clock: Callable[[], float]
) -> AsyncGenerator[T | None, None]:
    queue: asyncio.Queue[object] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for item in stream:
                queue.put_nowait(item)
        except Exception as exc:  # an adapter bug: surface it in the consumer
            queue.put_nowait(_Failed(exc))
        finally:
            queue.put_nowait(_DONE)

    task = asyncio.create_task(pump())
    getter: asyncio.Future[object] | None = None
    try:
        while True:
            if getter is None and not queue.empty():
                item = queue.get_nowait()
            else:
                if getter is None:
                    getter = asyncio.ensure_future(queue.get())
                deadline = next_deadline()
                timeout = None if deadline is None else max(0.0, deadline - clock())
                done, _ = await asyncio.wait({getter}, timeout=timeout)
                if not done:
                    yield None
                    continue
                item = getter.result()
                getter = None
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item  # type: ignore[misc]
    finally:
        if getter is not None:
            getter.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
