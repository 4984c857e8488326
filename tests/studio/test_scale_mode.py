"""W7: worker mode — session hosts as channel workers reached over the channel layer.

With Redis, ``manage.py runworker studio-host`` runs ``StudioWorker`` in its own process (see
``tests/e2e/test_scale_redis.py`` and ``tests/e2e/test_failover.py``). Here the same consumer
runs in-process on the in-memory layer: the request/reply protocol, the routing through the
lease table and the consumer are the code that runs in production.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer, get_channel_layer
from channels.routing import ChannelNameRouter
from channels.worker import Worker

from studio.host_routing import HOST_CHANNEL, ChannelHostClient, HostWorkerConsumer
from studio.hosts import HostError, SessionHost
from studio.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


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
        client = ChannelHostClient(layer)  # no worker registered: the shared channel
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
    client = ChannelHostClient(InMemoryChannelLayer(), timeout=0.2)
    with pytest.raises(HostError) as err:
        await client.state(str(session.pk))
    assert err.value.code == "unavailable"


async def test_release_and_export_need_no_worker_when_nobody_holds_the_session(user: Any, make_session: Any) -> None:
    """Only a holder has the store open: with none, ``release`` is a no-op (nothing is claimed
    just to let go of it) and ``export`` is the caller's to do directly."""
    from asgiref.sync import sync_to_async

    from studio.models import SessionLease

    session = await sync_to_async(make_session)(user)
    client = ChannelHostClient(InMemoryChannelLayer(), timeout=0.2)
    assert await client.call("release", str(session.pk)) is False
    with pytest.raises(HostError) as err:
        await client.call("export", str(session.pk), destination="/nowhere.sqlite")
    assert err.value.code == "unavailable"
    assert not await SessionLease.objects.filter(session_id=session.pk).aexists()
