"""The stream pump (``agentcore.engine.pump.with_ticks``): a provider stream read in its own task
with flush ticks (SPEC D1, D3, E1; issue 25). Items that may wait for the pending flush deadline
are handed over together when it passes — never later, even when the provider goes quiet right
after them — and an item that may not wait is handed over at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from agentcore.engine.pump import with_ticks


async def _source(items: asyncio.Queue[str], quiet: asyncio.Event) -> AsyncIterator[str]:
    while True:
        item = await items.get()
        if item == "quiet":
            await quiet.wait()  # the provider goes silent and never speaks again
            return
        yield item


async def test_held_items_arrive_by_the_deadline_when_the_provider_goes_quiet() -> None:
    """Two tokens that may wait, then silence: both arrive in order once the deadline passes
    (no later token wakes the reader), followed by ticks; an urgent item after that is handed
    over at once, long before the next deadline."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    quiet = asyncio.Event()
    deadline = [time.monotonic() + 0.05]
    stream = with_ticks(_source(queue, quiet), lambda: deadline[0], time.monotonic, hold=lambda item: item != "end")
    seen: list[str | None] = []
    for item in ("a", "b"):
        queue.put_nowait(item)
    got = await anext(stream)
    assert got == "a"
    assert await anext(stream) == "b"
    seen.append(await anext(stream))  # quiet until the deadline: a tick
    assert seen == [None]
    assert time.monotonic() >= deadline[0]
    deadline[0] = time.monotonic() + 60.0  # a far deadline: only an urgent item may come now
    queue.put_nowait("end")
    started = time.monotonic()
    assert await asyncio.wait_for(anext(stream), timeout=5.0) == "end"
    assert time.monotonic() - started < 30.0
    quiet.set()
    queue.put_nowait("quiet")
    await stream.aclose()
