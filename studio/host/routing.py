"""Reaching the session host: in this process, or in the worker that holds the session.

``inprocess`` (default): the host runs in the daphne process and a call is a plain await
(``LocalHostClient``). ``worker``: hosts run in ``manage.py runworker studio-host`` processes
on the Redis channel layer, and a call is a request/reply message (``ChannelHostClient``):

- **Routing.** A request for a session goes to the request channel of the live worker that
  holds its *main* session's lease (``studio.host.leases``), so every view of a store reaches the one
  process that owns it. With no live holder it goes to one of the least loaded live workers,
  which claims the lease itself; with no worker registered at all, to the shared
  ``studio-host`` channel every worker also consumes. A worker that finds the session held
  elsewhere answers ``moved`` with the holder's channel and the client follows (a few hops).
- **A holder that dies mid-request.** The client waits in short slices and checks between them
  that its worker is still live; if it is not, a read (``state``) is sent again to the new
  route, and a command is refused with ``unavailable`` (it may or may not have been applied:
  the page re-renders from the new holder's state and the person can see which).
- **The worker process** (``StudioWorker``, what ``runworker`` runs here): registers itself with
  a heartbeat and a request channel of its own, answers each request in a task of its own (a
  slow store open never holds up other sessions' requests), sweeps for sessions to take over,
  and on SIGTERM/SIGINT shuts down cleanly — runtimes closed, leases released at once, the
  other workers told to sweep now.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import signal
import time
import uuid
from typing import Any, ClassVar, Protocol

from channels.consumer import AsyncConsumer
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.worker import Worker
from django.conf import settings

from studio import selectors
from studio.host import leases
from studio.host.contract import HostError, HostState
from studio.host.session_host import SessionHost, get_session_host, set_session_host

log = logging.getLogger("studio.hosts")

HOST_CHANNEL = "studio-host"
#: Operations that only read: safe to send again when the worker handling them died.
READS = {"state", "position", "ping", "timeline", "timeline_span", "image"}


class HostClient(Protocol):
    async def call(self, op: str, session_id: str, **args: Any) -> Any: ...

    async def state(self, session_id: str) -> HostState: ...


_OPS = {
    "prompt",
    "withdraw",
    "promote",
    "stop",
    "cancel_task",
    "resume_plan",
    "answer",
    "fork",
    "reset",
    "configure",
    "start_task",
    "release",
    "export",
    "timeline",
    "timeline_span",
    "compact",
    "resend",
    "edit",
    "image",
}


async def _dispatch(host: SessionHost, op: str, session_id: str, args: dict[str, Any]) -> Any:
    if op == "ping":  # which process this is (health checks, tests)
        keeper = host.leases
        return {"pid": os.getpid(), "epoch": host.epoch, "worker": getattr(keeper, "worker_id", "")}
    if op == "state":
        return (await host.state(session_id)).to_dict()
    if op == "position":
        return list(await host.position(session_id))
    if op in _OPS:
        return await getattr(host, op)(session_id, **args)
    raise HostError("unknown_op", f"unknown host operation {op!r}")


class LocalHostClient:
    """In-process mode: the host lives in this event loop; calls are plain awaits."""

    def __init__(self, host: SessionHost) -> None:
        self.host = host

    async def call(self, op: str, session_id: str, **args: Any) -> Any:
        return await _dispatch(self.host, op, str(session_id), args)

    async def state(self, session_id: str) -> HostState:
        return await self.host.state(str(session_id))


class RouteCache:
    """What a web process knows about where sessions live, so a request usually reads no row:
    a view's main session (it never changes), the route to its holder (until a request finds
    it moved or gone, and for at most a third of a lease), and each worker's liveness (read once
    per ``fresh`` seconds, not once per waiting request and slice)."""

    def __init__(self, route_seconds: float, alive_seconds: float) -> None:
        self.route_seconds = route_seconds
        self.alive_seconds = alive_seconds
        self._roots: dict[str, str] = {}
        self._routes: dict[str, tuple[str, float]] = {}
        self._alive: dict[str, tuple[bool, float]] = {}

    async def root(self, session_id: str) -> str:
        root = self._roots.get(session_id)
        if root is None:
            root = self._roots[session_id] = await database_sync_to_async(selectors.root_of)(session_id)
        return root

    async def route(self, root_id: str) -> str | None:
        known = self._routes.get(root_id)
        if known is not None and time.monotonic() - known[1] < self.route_seconds:
            return known[0]
        channel = await database_sync_to_async(leases.route)(root_id)
        if channel is not None:
            self._routes[root_id] = (channel, time.monotonic())
        return channel

    def forget(self, root_id: str) -> None:
        self._routes.pop(root_id, None)

    async def alive(self, channel: str) -> bool:
        known = self._alive.get(channel)
        if known is not None and time.monotonic() - known[1] < self.alive_seconds:
            return known[0]
        alive = await database_sync_to_async(leases.worker_alive)(channel)
        self._alive[channel] = (alive, time.monotonic())
        return alive


class ChannelHostClient:
    """Worker mode: request/reply over the channel layer to the worker holding the session."""

    def __init__(self, channel_layer: Any = None, *, timeout: float | None = None, slice_seconds: float = 1.0) -> None:
        self._layer = channel_layer
        self.timeout = settings.STUDIO_HOST_TIMEOUT if timeout is None else timeout
        self.slice_seconds = slice_seconds
        self.routes = RouteCache(settings.STUDIO_LEASE_SECONDS / 3, slice_seconds / 2)

    @property
    def layer(self) -> Any:
        return self._layer if self._layer is not None else get_channel_layer()

    async def call(self, op: str, session_id: str, **args: Any) -> Any:
        root_id = await self.routes.root(str(session_id))
        if op in ("release", "export"):
            # Only the holder has the store open; with none, nobody needs to let go of it
            # (release) and the caller works on the store directly (export).
            holder = await database_sync_to_async(leases.holder_channel)(root_id)
            if holder is None:
                if op == "release":
                    return False
                raise HostError("unavailable", "No worker holds this session.")
            return await self._ask(holder, op, str(session_id), args, root_id, follow=False)
        return await self._ask(None, op, str(session_id), args, root_id, follow=True)

    async def state(self, session_id: str) -> HostState:
        return HostState.from_dict(await self.call("state", session_id))

    async def ping(self, channel: str) -> dict[str, Any]:
        """Ask one worker (by its request channel) who it is."""
        result: dict[str, Any] = await self._send_and_wait(channel, {"op": "ping", "session_id": "", "args": {}})
        return result

    async def _ask(
        self, channel: str | None, op: str, session_id: str, args: dict[str, Any], root_id: str, *, follow: bool
    ) -> Any:
        deadline = time.monotonic() + self.timeout
        request = {"op": op, "session_id": session_id, "args": args}
        for _hop in range(4):
            target = channel or await self.routes.route(root_id) or HOST_CHANNEL
            try:
                return await self._send_and_wait(target, request, deadline=deadline)
            except _Moved as moved:
                self.routes.forget(root_id)
                channel = moved.holder or None  # the holder it named, or a fresh route
            except _WorkerGone as gone:
                self.routes.forget(root_id)
                if op not in READS or not follow:
                    raise HostError(
                        "unavailable",
                        "The worker running this session stopped while handling the request; "
                        "another worker is taking the session over: check the page, then try again.",
                    ) from gone
                channel = None
            if not follow:
                break
        raise HostError("unavailable", "The session is moving between workers; try again in a moment.")

    async def _send_and_wait(self, channel: str, request: dict[str, Any], *, deadline: float | None = None) -> Any:
        deadline = deadline if deadline is not None else time.monotonic() + self.timeout
        reply_to = await self.layer.new_channel()
        await self.layer.send(channel, {"type": "host.request", "reply_to": reply_to, **request})
        # One receive for the whole wait, never cancelled between slices: channels_redis drops a
        # message that reaches a receive() at the moment it is cancelled, so a per-slice timeout
        # on the receive itself loses a reply now and then under load.
        receiving = asyncio.ensure_future(self.layer.receive(reply_to))
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise HostError(
                        "unavailable", "No session host answered; is `manage.py runworker studio-host` running?"
                    )
                done, _ = await asyncio.wait({receiving}, timeout=min(left, self.slice_seconds))
                if done:
                    reply = receiving.result()
                    break
                if channel != HOST_CHANNEL and not await self.routes.alive(channel):
                    raise _WorkerGone(channel)
        finally:
            if not receiving.done():
                receiving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await receiving
        if not reply.get("ok"):
            if reply.get("code") == "moved":
                raise _Moved(str(reply.get("message") or ""))
            raise HostError(reply.get("code", "error"), reply.get("message", "The session host refused."))
        return reply.get("result")


class _Moved(Exception):
    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


class _WorkerGone(Exception):
    pass


class HostWorkerConsumer(AsyncConsumer):
    """Worker mode: serves host requests arriving on the worker's channels.

    Each request is answered in a task of its own (in a fresh context: asgiref's thread-bound
    executor refuses concurrent calls from one context), so a slow one — opening a big store —
    never holds up the others; the work itself runs in the process's one ``SessionHost``.
    """

    _pending: ClassVar[set[asyncio.Task[None]]] = set()

    async def host_request(self, message: dict[str, Any]) -> None:
        task = asyncio.get_running_loop().create_task(self._answer(message), context=contextvars.Context())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def host_sweep(self, message: dict[str, Any]) -> None:
        """A peer shut down and released its sessions: look for work to take over now."""
        keeper = get_session_host().leases
        if isinstance(keeper, leases.LeaseKeeper):
            keeper.sweep_soon()

    async def _answer(self, message: dict[str, Any]) -> None:
        reply: dict[str, Any]
        try:
            result = await _dispatch(
                get_session_host(), message["op"], message["session_id"], message.get("args") or {}
            )
            reply = {"type": "host.reply", "ok": True, "result": result}
        except HostError as exc:
            reply = {"type": "host.reply", "ok": False, "code": exc.code, "message": exc.message}
        except Exception as exc:
            log.exception("host request %s failed", message.get("op"))
            reply = {"type": "host.reply", "ok": False, "code": "error", "message": str(exc)}
        await get_channel_layer().send(message["reply_to"], reply)


class StudioWorker(Worker):
    """``manage.py runworker studio-host``: a session-host worker that leases its sessions.

    Any other channel list runs as channels' plain ``Worker``.
    """

    own_channel = ""
    channels: list[str]

    async def handle(self) -> None:
        if HOST_CHANNEL not in self.channels:
            await super().handle()
            return
        layer = self.channel_layer
        await asyncio.to_thread(warm_up)
        self.own_channel = await layer.new_channel()
        worker_id = uuid.uuid4().hex
        keeper = leases.LeaseKeeper(worker_id, self.own_channel, settings.STUDIO_LEASE_SECONDS, get_session_host)
        set_session_host(SessionHost(channel_layer=layer, leases=keeper))
        await keeper.start()
        self.channels = [*self.channels, self.own_channel]
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        listening = loop.create_task(super().handle())
        stopped = loop.create_task(stop.wait())
        await asyncio.wait({listening, stopped}, return_when=asyncio.FIRST_COMPLETED)

        async def notify(channels: list[str]) -> None:
            for channel in channels:
                await layer.send(channel, {"type": "host.sweep"})

        await keeper.shutdown(notify)
        listening.cancel()
        with contextlib.suppress(BaseException):
            await listening

    async def listener(self, channel: str) -> None:
        if channel != self.own_channel:
            await super().listener(channel)
            return
        # The worker's own channel has a name made up at start: route it like the shared one.
        scope = {"type": "channel", "channel": HOST_CHANNEL}
        while True:
            message = await self.channel_layer.receive(channel)
            await self.get_or_create_application_instance(channel, scope).put(message)


def warm_up() -> None:
    """Load what serving a session needs before the worker registers (the runtime's modules, the
    providers, the templates), so its first sessions do not pay for imports and template parsing
    while other sessions stream."""
    import importlib

    from django.template.loader import get_template

    from studio import pages

    for module in (
        "agentcore.runtime",
        "agentcore.session.driver",
        "agentcore.providers.openai_completions",
        "agentcore.providers.openai_responses",
        "agentcore.providers.anthropic_messages",
        "agentcore.demo",
    ):
        importlib.import_module(module)
    for templates in pages.REGION_TEMPLATES.values():
        for name in templates:
            get_template(name)
    for name in ("studio/_live_turn.html", "studio/_block.html", "studio/_block_parts.html", "studio/_turn.html"):
        get_template(name)


_channel_client: ChannelHostClient | None = None


def get_host_client() -> HostClient:
    """How this process reaches session hosts; in worker mode one client per process, so its
    routes are learnt once for every request."""
    global _channel_client
    if settings.STUDIO_HOST_MODE == "worker":
        if _channel_client is None:
            _channel_client = ChannelHostClient()
        return _channel_client
    return LocalHostClient(get_session_host())
