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

from studio.host.contract import HostError
from studio.host.routing import HOST_CHANNEL, ChannelHostClient, HostWorkerConsumer
from studio.host.session_host import SessionHost
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


async def test_a_worker_shutting_down_sends_a_request_on_to_the_sessions_new_holder(
    user: Any, make_session: Any
) -> None:
    """A web process's route still names a worker that is shutting down (its runtimes closed,
    its leases released, its listener still up): that worker answers "moved" without a holder,
    and the client asks the lease table again and reaches the worker that took the session."""
    from asgiref.sync import sync_to_async

    from studio.host import leases
    from studio.host.session_host import set_session_host

    layer = get_channel_layer()  # the one the worker's consumer replies on
    host: SessionHost
    keeper = leases.LeaseKeeper("w1", "chan-w1", 30, lambda: host)
    host = SessionHost(flush_interval=0.01, leases=keeper)
    set_session_host(host)
    worker = Worker(
        application=ChannelNameRouter({name: HostWorkerConsumer.as_asgi() for name in (HOST_CHANNEL, "chan-w1")}),
        channels=[HOST_CHANNEL, "chan-w1"],
        channel_layer=layer,
    )
    serving = asyncio.create_task(worker.handle())
    asked: list[dict[str, Any]] = []

    async def new_holder() -> None:  # w2's side of the protocol: one request, one reply
        request = await layer.receive("chan-w2")
        asked.append(request)
        await layer.send(request["reply_to"], {"type": "host.reply", "ok": True, "result": ["w2-epoch", 0, 2]})

    try:
        await keeper.register()
        root = str((await sync_to_async(make_session)(user)).pk)
        client = ChannelHostClient(layer, timeout=5)
        await client.state(root)  # w1 opens the session under its lease (term 1)
        assert await client.call("position", root) == [host.epoch, 0, 1]
        assert await client.routes.route(root) == "chan-w1"  # the route the client keeps for a while

        def taken_over() -> None:
            leases.release_all("w1", {root: True})
            leases.register_worker("w2", "chan-w2", 30)
            assert leases.claim(root, "w2", 30) == 2

        keeper.stopped = True  # w1's shutdown, as ``LeaseKeeper.shutdown`` runs it, up to its release
        await host.close()
        await sync_to_async(taken_over)()
        answering = asyncio.create_task(new_holder())
        assert await client.call("position", root) == ["w2-epoch", 0, 2]
        await answering
        assert [(r["op"], r["session_id"]) for r in asked] == [("position", root)]
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        await host.close()
        set_session_host(None)


@pytest.mark.django_db(transaction=False)
async def test_no_reply_is_lost_while_the_client_checks_on_its_worker_between_slices(redis_url: str) -> None:
    """W7: the web process waits for a worker's reply in short slices (checking between them
    that the worker still lives). Hundreds of requests over real Redis, 80 in flight at a time,
    each answered after a random few milliseconds, with slices far shorter than that: every one
    gets its reply. (Cancelling the receive at each slice's end lost replies that arrived just
    then.)"""
    import random

    from channels_redis.core import RedisChannelLayer

    from studio.redis_host import redis_host

    client_layer = RedisChannelLayer(hosts=[redis_host(redis_url)], capacity=5000)
    worker_layer = RedisChannelLayer(hosts=[redis_host(redis_url)], capacity=5000)
    client = ChannelHostClient(client_layer, timeout=5, slice_seconds=0.001)
    count = 400

    async def answer(message: dict[str, Any]) -> None:
        await asyncio.sleep(random.uniform(0, 0.03))  # a worker's work: replies land at any moment
        await worker_layer.send(message["reply_to"], {"ok": True, "result": message["args"]["n"]})

    async def worker() -> None:
        pending = set()
        while True:
            message = await worker_layer.receive(HOST_CHANNEL)
            task = asyncio.create_task(answer(message))
            pending.add(task)
            task.add_done_callback(pending.discard)

    serving = asyncio.create_task(worker())
    try:
        requests = [{"op": "ping", "session_id": "", "args": {"n": n}} for n in range(count)]
        in_flight = asyncio.Semaphore(80)  # what one web process has outstanding under load

        async def ask(request: dict[str, Any]) -> Any:
            async with in_flight:
                return await client._send_and_wait(HOST_CHANNEL, request)

        results = await asyncio.gather(*(ask(r) for r in requests), return_exceptions=True)
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        await client_layer.close_pools()
        await worker_layer.close_pools()
    lost = [n for n, result in enumerate(results) if result != n]
    assert not lost, f"{len(lost)} of {count} replies never arrived: {results[lost[0]]!r}"
