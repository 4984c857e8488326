"""W7: the Redis channel layer as Studio configures it (``studio.redis_host``), on a
real redis-server. Scale mode's pushes and host requests all go through it, so two things must
hold whatever the installed redis-py does by default:

- a receive that is cancelled while its blocking pop waits on the server ends at once, and the
  process's other receives get their messages (a web process cancels a request's reply receive
  when the worker it asked dies; a consumer's receive is cancelled when its page goes away);
- a receive that stays idle longer than channels_redis's 5 s pop goes on waiting: an idle page
  keeps its socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from channels_redis.core import RedisChannelLayer
from redis import asyncio as aioredis

from studio.redis_host import redis_host

pytestmark = pytest.mark.django_db(transaction=False)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def layer(redis_url: str) -> AsyncIterator[RedisChannelLayer]:
    layer = RedisChannelLayer(hosts=[redis_host(redis_url)])
    try:
        yield layer
    finally:
        await layer.close_pools()


@pytest.fixture
async def server(redis_url: str) -> AsyncIterator[Any]:
    """A plain client on the same server, to read what the server itself says it is doing."""
    client = aioredis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


def test_a_receive_cancelled_as_its_pop_brings_another_channels_message_ends_and_loses_nothing(
    redis_url: str,
) -> None:
    """A request's reply receive waits in the blocking pop that serves every channel of the
    process; a push for the page arrives (the pop returns it for the page's channel) and the
    reply receive is cancelled just then (the worker asked has stopped). With a client-side read
    timeout on the socket (redis-py 8 sets 5 s unless told) that cancellation was swallowed now
    and then: the cancelled task read on for good, holding the process's receive lock, and every
    other receive of the process waited behind it — the page never got a push again. Run in a
    child process (``redis_cancel_child``): a hang there fails this test instead of hanging it."""
    child = subprocess.run(
        [sys.executable, "-m", "tests.studio.redis_cancel_child", redis_url, "40"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert child.stdout.strip(), child.stderr
    assert json.loads(child.stdout) == {"rounds": 40}, child.stderr[-3000:]


async def test_a_receive_idle_longer_than_the_pop_goes_on_waiting(layer: RedisChannelLayer, server: Any) -> None:
    """channels_redis pops with a 5 s server-side timeout and pops again when it ends; a client
    read timeout of the same 5 s raced that answer and failed the idle receive instead."""
    channel = await layer.new_channel()
    receiving = asyncio.ensure_future(layer.receive(channel))
    try:
        while (await server.info("commandstats")).get("cmdstat_bzpopmin", {}).get("calls", 0) < 2:
            assert not receiving.done(), receiving.exception()  # the first pop ended, the receive waits on
            await asyncio.sleep(0.05)  # polling the server's own count of pops
        await layer.send(channel, {"type": "session.push", "seq": 1})
        message = await asyncio.wait_for(receiving, 20)
        assert message["seq"] == 1
    finally:
        receiving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await receiving
