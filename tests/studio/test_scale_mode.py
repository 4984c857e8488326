"""W7: scale mode — session hosts as channel workers reached over the channel layer.

With Redis, ``manage.py runworker studio-host`` runs ``HostWorkerConsumer`` in its own process.
Here the same worker runs in-process on the in-memory layer: the request/reply protocol, the
shard routing and the consumer are the code that runs in production.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer, get_channel_layer
from channels.routing import ChannelNameRouter
from channels.worker import Worker

from studio.hosts import HOST_CHANNEL, ChannelHostClient, HostError, HostWorkerConsumer, SessionHost, shard_channel
from studio.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


def test_sessions_are_sharded_stably() -> None:
    ids = [str(uuid.uuid4()) for _ in range(50)]
    assert {shard_channel(i, 1) for i in ids} == {HOST_CHANNEL}
    shards = {shard_channel(i, 3) for i in ids}
    assert shards <= {f"{HOST_CHANNEL}-{k}" for k in range(3)} and len(shards) > 1
    assert all(shard_channel(i, 3) == shard_channel(i, 3) for i in ids)


async def test_worker_runs_sessions_for_the_web_process(user: Any, make_session: Any, host: SessionHost) -> None:
    from asgiref.sync import sync_to_async

    layer = get_channel_layer()
    worker = Worker(
        application=ChannelNameRouter({HOST_CHANNEL: HostWorkerConsumer.as_asgi()}),
        channels=[HOST_CHANNEL],
        channel_layer=layer,
    )
    task = asyncio.create_task(worker.handle())
    try:
        session = await sync_to_async(make_session)(user)
        client = ChannelHostClient(layer, shards=1)
        sent = await client.call("prompt", str(session.pk), prompt="hello there", agent="build")
        request_id = sent["request_id"]
        await host.wait_idle(str(session.pk))
        state = await client.state(str(session.pk))
        assert not state.running
        assert "hello there" in str(state.transcript[-1])
        assert (await Run.objects.aget(request_id=request_id)).status == "completed"
        with pytest.raises(HostError) as err:
            await client.call("resume_plan", str(session.pk), approved=True)
        assert err.value.code == "not_waiting"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_no_worker_gives_a_clear_error(user: Any, make_session: Any) -> None:
    from asgiref.sync import sync_to_async

    session = await sync_to_async(make_session)(user)
    client = ChannelHostClient(InMemoryChannelLayer(), shards=1, timeout=0.2)
    with pytest.raises(HostError) as err:
        await client.state(str(session.pk))
    assert err.value.code == "unavailable"
