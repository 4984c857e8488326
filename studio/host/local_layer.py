"""A channel layer for the processes of one machine that needs no service to be installed.

The default single-machine Studio runs daphne and a session-host worker per core (``manage.py
studio``, ``studio.host.supervisor``). They must exchange messages (host requests and replies,
pushes to the pages' groups) the way the Redis layer lets processes on many machines do — but
a fresh machine has no Redis. So the supervisor process holds the layer's state (``LayerHub``:
channels' queues, groups, waiting receivers) and serves it on a Unix socket in the data dir;
every Studio process uses ``LocalChannelLayer``, one connection per event loop, carrying
msgpack objects back to back. Sends are one-way (no round trip per message); a receive is a
request the hub answers when a message arrives, so a message reaches exactly one receiver.

Semantics follow channels' in-memory layer: a channel holds at most ``capacity`` messages for at
most ``expiry`` seconds (a full channel drops the send, as ``group_send`` does in every layer;
Studio's pushes carry sequence numbers, so a watcher that misses one re-renders); a group
membership lasts ``group_expiry`` seconds unless renewed. A receive that is cancelled before the
hub answered it is withdrawn; a message already on its way back is put back at the front of its
channel, so none is lost (the failure channels_redis has, which ``routing`` works around).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import secrets
import time
from collections import deque
from collections.abc import Iterable
from typing import Any, ClassVar, cast

import msgpack
from channels.layers import BaseChannelLayer

log = logging.getLogger("studio.layer")


def _pack(payload: Any) -> bytes:
    packed: bytes = msgpack.packb(payload, use_bin_type=True)
    return packed


class _Framed(asyncio.Protocol):
    """msgpack objects back to back on a stream: every complete one is handled as it arrives,
    with no await per message (the layer's cost per push is what matters at scale)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._unpacker = msgpack.Unpacker(raw=False)
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream's transport; cast, not checked: uvloop's do not subclass asyncio.Transport
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._unpacker.feed(data)
        for item in self._unpacker:
            self.handle(item)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        self.lost()

    def write(self, payload: Any) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_pack(payload))

    def handle(self, item: Any) -> None:
        raise NotImplementedError

    def lost(self) -> None:
        pass


# --- the hub (the supervisor process) ----------------------------------------------------------


class _Peer(_Framed):
    """One process's connection to the hub."""

    def __init__(self, hub: LayerHub) -> None:
        super().__init__()
        self.hub = hub
        self.waiting: dict[int, str] = {}  # receive id → channel

    def handle(self, item: Any) -> None:
        op, *args = item
        self.hub.apply(self, op, args)

    def deliver(self, rid: int, message: Any) -> None:
        self.write(["msg", rid, message])

    def lost(self) -> None:
        self.hub.forget(self)


class LayerHub:
    """The layer's state, served on a Unix socket (``path``) to the processes of one machine."""

    def __init__(self, path: str, *, capacity: int = 1500, expiry: float = 60, group_expiry: float = 86400) -> None:
        self.path = path
        self.capacity = capacity
        self.expiry = expiry
        self.group_expiry = group_expiry
        self._queues: dict[str, deque[tuple[float, Any]]] = {}
        self._waiters: dict[str, deque[tuple[_Peer, int]]] = {}
        self._groups: dict[str, dict[str, float]] = {}
        self._server: asyncio.AbstractServer | None = None
        self.dropped = 0

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_unix_server(lambda: _Peer(self), path=self.path)
        os.chmod(self.path, 0o600)  # only this user's processes may speak on it

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def forget(self, peer: _Peer) -> None:
        """A process went away: its waiting receives end with it."""
        for rid, channel in list(peer.waiting.items()):
            self._withdraw(peer, rid, channel)
        peer.waiting.clear()

    def _withdraw(self, peer: _Peer, rid: int, channel: str) -> None:
        waiters = self._waiters.get(channel)
        if waiters is not None:
            remaining = deque(w for w in waiters if w != (peer, rid))
            if remaining:
                self._waiters[channel] = remaining
            else:
                del self._waiters[channel]

    def apply(self, peer: _Peer, op: str, args: list[Any]) -> None:
        if op == "send":
            self.send(args[0], args[1])
        elif op == "gsend":
            for channel in self._members(args[0]):
                self.send(channel, args[1])
        elif op == "gadd":
            self._groups.setdefault(args[0], {})[args[1]] = time.monotonic() + self.group_expiry
        elif op == "gdiscard":
            members = self._groups.get(args[0])
            if members is not None:
                members.pop(args[1], None)
                if not members:
                    del self._groups[args[0]]
        elif op == "recv":
            self._receive(peer, args[0], int(args[1]))
        elif op == "cancel":
            rid = int(args[0])
            if rid in peer.waiting:
                self._withdraw(peer, rid, peer.waiting.pop(rid))
        elif op == "requeue":
            self._queues.setdefault(args[0], deque()).appendleft((time.monotonic() + self.expiry, args[1]))
            self._wake(args[0])
        elif op == "flush":
            self._queues.clear()
            self._groups.clear()

    def _members(self, group: str) -> Iterable[str]:
        members = self._groups.get(group)
        if not members:
            return []
        now = time.monotonic()
        for channel in [c for c, until in members.items() if until < now]:
            del members[channel]
        return list(members)

    def send(self, channel: str, message: Any) -> None:
        queue = self._queues.setdefault(channel, deque())
        now = time.monotonic()
        while queue and queue[0][0] < now:
            queue.popleft()
        if len(queue) >= self.capacity:
            self.dropped += 1
            return
        queue.append((now + self.expiry, message))
        self._wake(channel)

    def _wake(self, channel: str) -> None:
        queue = self._queues.get(channel)
        waiters = self._waiters.get(channel)
        while queue and waiters:
            peer, rid = waiters.popleft()
            if peer.waiting.pop(rid, None) is None:
                continue  # cancelled meanwhile
            _expires, message = queue.popleft()
            peer.deliver(rid, message)
        if queue is not None and not queue:
            del self._queues[channel]
        if waiters is not None and not waiters:
            del self._waiters[channel]

    def _receive(self, peer: _Peer, channel: str, rid: int) -> None:
        peer.waiting[rid] = channel
        self._waiters.setdefault(channel, deque()).append((peer, rid))
        self._wake(channel)


# --- the client (every Studio process) -----------------------------------------------------------


class _Connection(_Framed):
    """One process's connection to the hub, bound to one event loop."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self.ids = itertools.count(1)

    def handle(self, item: Any) -> None:
        _op, rid, message = item
        entry = self.pending.pop(int(rid), None)
        if entry is None:
            return
        channel, future = entry
        if future.done():
            # The receive was cancelled as the message came back: put it back first in line.
            self.write(["requeue", channel, message])
            return
        future.set_result(message)

    def lost(self) -> None:
        for _channel, future in self.pending.values():
            if not future.done():
                future.set_exception(ConnectionError("the channel layer's hub went away"))
        self.pending.clear()

    async def receive(self, channel: str) -> Any:
        rid = next(self.ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[rid] = (channel, future)
        self.write(["recv", channel, rid])
        try:
            return await future
        except asyncio.CancelledError:
            if rid in self.pending:
                self.write(["cancel", rid])  # a message already on its way back is requeued
            raise


class LocalChannelLayer(BaseChannelLayer):
    """``CHANNEL_LAYERS`` backend for the processes of one machine (``STUDIO_LOCAL_LAYER``)."""

    extensions: ClassVar[list[str]] = ["groups", "flush"]

    def __init__(
        self, path: str, expiry: float = 60, capacity: int = 1500, group_expiry: float = 86400, **_: Any
    ) -> None:
        super().__init__(expiry=expiry, capacity=capacity)
        self.path = path
        self.group_expiry = group_expiry
        self._connections: dict[asyncio.AbstractEventLoop, _Connection] = {}
        self._prefix = f"{os.getpid()}.{secrets.token_hex(4)}"

    async def _connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        connection = self._connections.get(loop)
        if connection is None or connection.closed.done():
            _transport, connection = await loop.create_unix_connection(_Connection, self.path)
            self._connections[loop] = connection
        return connection

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        self.require_valid_channel_name(channel)
        (await self._connection()).write(["send", channel, message])

    async def receive(self, channel: str) -> dict[str, Any]:
        self.require_valid_channel_name(channel)
        message: dict[str, Any] = await (await self._connection()).receive(channel)
        return message

    async def new_channel(self, prefix: str = "specific") -> str:
        return f"{prefix}.{self._prefix}!{secrets.token_hex(6)}"

    async def group_add(self, group: str, channel: str) -> None:
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        (await self._connection()).write(["gadd", group, channel])

    async def group_discard(self, group: str, channel: str) -> None:
        (await self._connection()).write(["gdiscard", group, channel])

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.require_valid_group_name(group)
        (await self._connection()).write(["gsend", group, message])

    async def flush(self) -> None:
        (await self._connection()).write(["flush"])

    async def close(self) -> None:
        for connection in self._connections.values():
            if connection.transport is not None:
                connection.transport.close()
        self._connections.clear()
