"""The channel layer the default single-machine Studio's processes share (W7; issue 25).

A real hub on a Unix socket and real clients: what crosses it is what daphne and the workers
exchange (host requests and replies, pushes to a page's group). Each client is its own
connection, as each Studio process is.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from studio.host.local_layer import LayerHub, LocalChannelLayer


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[LayerHub]:
    server = LayerHub(str(tmp_path / "layer.sock"), capacity=5)
    await server.start()
    yield server
    await server.close()


def _client(hub: LayerHub) -> LocalChannelLayer:
    return LocalChannelLayer(hub.path, capacity=5)


async def test_a_message_sent_by_one_process_reaches_the_receiver_in_another(hub: LayerHub) -> None:
    web, worker = _client(hub), _client(hub)
    reply_to = await web.new_channel()
    waiting = asyncio.ensure_future(web.receive(reply_to))
    await worker.send(reply_to, {"type": "host.reply", "ok": True, "result": [1, "two"]})
    assert await asyncio.wait_for(waiting, 5) == {"type": "host.reply", "ok": True, "result": [1, "two"]}
    await worker.send("studio-host", {"type": "host.request", "n": 1})  # queued: nobody receives yet
    assert await asyncio.wait_for(worker.receive("studio-host"), 5) == {"type": "host.request", "n": 1}
    await web.close()
    await worker.close()


async def test_a_group_send_reaches_every_member_once_in_order(hub: LayerHub) -> None:
    daphne, worker = _client(hub), _client(hub)
    pages = [await daphne.new_channel() for _ in range(3)]
    for page in pages:
        await daphne.group_add("session-abc", page)
    await daphne.group_discard("session-abc", pages[2])
    for seq in (1, 2, 3):
        await worker.group_send("session-abc", {"type": "session.push", "seq": seq})
    for page in pages[:2]:
        got = [await asyncio.wait_for(daphne.receive(page), 5) for _ in range(3)]
        assert [m["seq"] for m in got] == [1, 2, 3]
    await worker.send(pages[2], {"type": "marker"})
    assert await asyncio.wait_for(daphne.receive(pages[2]), 5) == {"type": "marker"}  # nothing else came
    await daphne.close()
    await worker.close()


async def test_a_cancelled_receive_loses_no_message(hub: LayerHub) -> None:
    """A receive cancelled as its message is on the way (a consumer that disconnects, a host
    call's liveness slice) puts the message back: the next receive gets it."""
    sender, receiver = _client(hub), _client(hub)
    channel = await receiver.new_channel()
    await receiver.group_add("warm", channel)  # the connection is open: a receive is written at once
    for n in range(20):
        pending = asyncio.ensure_future(receiver.receive(channel))
        await asyncio.sleep(0)  # the receive request is written: now race the message against the cancel
        await sender.send(channel, {"n": n})
        pending.cancel()
        try:
            got = await pending
        except asyncio.CancelledError:
            got = await asyncio.wait_for(receiver.receive(channel), 5)
        assert got == {"n": n}
    await sender.close()
    await receiver.close()


async def test_a_full_channel_drops_the_send_and_an_absent_process_is_forgotten(hub: LayerHub) -> None:
    sender, gone = _client(hub), _client(hub)
    channel = await gone.new_channel()
    await gone.group_add("warm", channel)  # connected: the receive below is on the hub at once
    waiting = asyncio.ensure_future(gone.receive(channel))
    await asyncio.sleep(0)
    await gone.close()  # the process died with a receive open
    with pytest.raises((ConnectionError, asyncio.CancelledError)):
        await asyncio.wait_for(waiting, 5)
    for n in range(8):
        await sender.send(channel, {"n": n})
    receiver = _client(hub)
    got = [await asyncio.wait_for(receiver.receive(channel), 5) for _ in range(5)]
    assert [m["n"] for m in got] == [0, 1, 2, 3, 4]  # capacity 5: the rest was dropped, none was taken
    assert hub.dropped == 3
    await sender.close()
    await receiver.close()
