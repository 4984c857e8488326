"""Cancelled receives on a real Redis, in a process of their own:
``python -m tests.studio.redis_cancel_child <redis url> <rounds>``, with Studio's options
(``studio.redis_host``).

Each round: a receive (a request's reply) waits in the blocking pop that serves every channel
of the process; a message for another channel (a page's push) arrives; the receive is cancelled
just then. The cancelled receive must end, the push must reach its channel, and a new receive
must get its reply. Prints ``{"rounds": n}`` when all did, or ``{"round": n, "failed": why}``.

A child process because the failure is a task that never ends: in the test's own event loop it
would hang the test's teardown (which waits for every task) instead of failing it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from channels_redis.core import RedisChannelLayer
from redis import asyncio as aioredis

from studio.redis_host import redis_host

WAIT = 20  # seconds: far beyond any answer on loopback; reaching it means a hang


async def ended(task: asyncio.Future[Any]) -> bool:
    """Whether ``task`` ends within ``WAIT`` (never cancelling it: the cancel is what's tested)."""
    done, _ = await asyncio.wait({task}, timeout=WAIT)
    return bool(done)


async def blocked(server: Any) -> bool:
    """Until the server holds a client in a blocking pop (its own count, polled)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if (await server.info("clients"))["blocked_clients"] >= 1:
            return True
        await asyncio.sleep(0.005)
    return False


async def rounds(url: str, count: int) -> dict[str, Any]:
    layer = RedisChannelLayer(hosts=[redis_host(url)])
    server = aioredis.from_url(url)
    for n in range(count):
        page = await layer.new_channel()
        reply = asyncio.ensure_future(layer.receive(await layer.new_channel()))
        if not await blocked(server):
            return {"round": n, "failed": "the receive never reached the server's blocking pop"}
        await layer.send(page, {"type": "session.push", "seq": n})
        reply.cancel()
        if not await ended(reply):
            return {"round": n, "failed": f"the cancelled receive never ended: {reply!r}"}
        pushed = asyncio.ensure_future(layer.receive(page))
        if not await ended(pushed) or pushed.result().get("seq") != n:
            return {"round": n, "failed": "the page's push never arrived"}
        channel = await layer.new_channel()
        answer = asyncio.ensure_future(layer.receive(channel))
        await layer.send(channel, {"type": "host.reply", "ok": True})
        if not await ended(answer):
            return {"round": n, "failed": "the next request's reply never arrived"}
    return {"rounds": count}


def main() -> None:
    url, count = sys.argv[1], int(sys.argv[2])
    result = asyncio.run(asyncio.wait_for(rounds(url, count), WAIT * 3 * count))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        sys.stdout.flush()
        os._exit(0)  # a receive that never ended must not hold the process at exit
