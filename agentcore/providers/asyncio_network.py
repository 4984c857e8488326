"""An httpcore network backend on plain asyncio: a socket read costs no anyio, no timer, no task lookup.

httpcore's default backend on asyncio is anyio's: every ``read`` enters ``anyio.fail_after``
(a ``CancelScope`` even when the timeout is ``None``, which looks up the current task twice)
and anyio's ``SocketStream.receive`` (a resource guard, an ``asyncio.Event`` per wait). On a
machine where ``os.getpid`` is a real syscall (every ``asyncio.current_task()`` and
``get_running_loop()`` in CPython 3.11 makes one) that was about a fifth of a host's CPU per
streamed token. Here the event loop pushes bytes into a ``Protocol`` buffer and a read that
finds the buffer empty awaits one plain future; a finite timeout is one loop timer on that
future (no task cancellation), and none is made for ``timeout=None``.

The contract is httpcore's ``AsyncNetworkBackend``/``AsyncNetworkStream``, with its exception
types (``ConnectError``, ``ConnectTimeout``, ``ReadError``, ``ReadTimeout``, ``WriteError``,
``WriteTimeout``), so every httpx user above it sees what it sees with the default backend;
``get_extra_info`` answers the keys httpcore reads (``ssl_object``, ``client_addr``,
``server_addr``, ``socket``, ``is_readable``).
"""

# ruff: noqa: ASYNC109 -- httpcore's interface takes ``timeout=`` on every call.
from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
from collections.abc import AsyncIterator, Iterable
from typing import Any, cast

import httpcore

_NUMERIC = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV

HIGH_WATER = 256 * 1024
"""Bytes buffered unread before the transport stops reading the socket (resumed below a quarter)."""


class _Receiver(asyncio.Protocol):
    """What the event loop delivers for one connection: bytes, end of file, loss, write pauses."""

    __slots__ = ("buffer", "drained", "eof", "error", "lost", "read_paused", "transport", "waiter", "write_paused")

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.eof = False
        self.lost = False
        self.error: BaseException | None = None
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.read_paused = False
        self.write_paused = False
        self.drained: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = _stream_transport(transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > HIGH_WATER and self.transport is not None and not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close our half too: HTTP/1.1 has nothing to send after the server's EOF

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.error = exc
        self._wake()
        drained, self.drained = self.drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        drained, self.drained = self.drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def _wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _stream_transport(transport: asyncio.BaseTransport) -> asyncio.Transport:
    """A stream connection's transport, typed as what it does: uvloop's transports have every
    method of ``asyncio.Transport`` without subclassing it, so no ``isinstance`` check here."""
    return cast(asyncio.Transport, transport)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


async def _wait(loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None], seconds: float | None) -> None:
    """Await ``waiter``; ``TimeoutError`` after ``seconds`` (one loop timer, only when finite)."""
    if seconds is None:
        await waiter
        return
    timer = loop.call_later(max(seconds, 0.0), _expire, waiter)
    try:
        await waiter
    finally:
        timer.cancel()


def _address(address: Any) -> Any:
    """A socket address as anyio reports it (IPv6: host and port only)."""
    return tuple(address[:2]) if isinstance(address, tuple) else address


def _readable(sock: Any) -> bool:
    """Whether the socket has bytes (or an EOF) waiting that the loop has not read yet."""
    fileno = -1 if sock is None else sock.fileno()
    if fileno < 0:
        return True
    poller = select.poll()
    poller.register(fileno, select.POLLIN)
    return bool(poller.poll(0))


@contextlib.asynccontextmanager
async def _connecting(timeout: float | None, what: str) -> AsyncIterator[None]:
    """Bounds a connect or a TLS handshake by ``timeout`` (``ConnectTimeout``) and reports an
    OS or TLS error as ``ConnectError`` chained to it (``ssl.SSLError`` is an ``OSError``)."""
    try:
        async with asyncio.timeout(timeout):
            yield
    except TimeoutError:
        raise httpcore.ConnectTimeout(f"no {what} within {timeout:g} s") from None
    except OSError as exc:
        raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One TCP (or TLS over TCP) connection driven by asyncio's transport and ``_Receiver``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, transport: asyncio.Transport, receiver: _Receiver) -> None:
        self._loop = loop
        self._transport = transport
        self._receiver = receiver
        self._closed = False

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        receiver = self._receiver
        buffer = receiver.buffer
        if not buffer:
            if self._closed:
                raise httpcore.ReadError("the connection is closed")
            if not (receiver.eof or receiver.lost):
                waiter = receiver.waiter = self._loop.create_future()
                try:
                    await _wait(self._loop, waiter, timeout)
                except TimeoutError:
                    raise httpcore.ReadTimeout("timed out reading") from None
                finally:
                    receiver.waiter = None
            if not buffer:
                if receiver.error is not None:
                    raise httpcore.ReadError(str(receiver.error) or type(receiver.error).__name__) from receiver.error
                return b""
        if len(buffer) <= max_bytes:
            data = bytes(buffer)
            buffer.clear()
        else:
            data = bytes(buffer[:max_bytes])
            del buffer[:max_bytes]
        if receiver.read_paused and len(buffer) < HIGH_WATER // 4 and not receiver.lost:
            receiver.read_paused = False
            self._transport.resume_reading()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        receiver = self._receiver
        if self._closed or receiver.lost or self._transport.is_closing():
            cause = receiver.error
            raise httpcore.WriteError(str(cause) if cause else "the connection is closed") from cause
        self._transport.write(buffer)
        if receiver.write_paused and not receiver.lost:
            drained = receiver.drained = self._loop.create_future()
            try:
                await _wait(self._loop, drained, timeout)
            except TimeoutError:
                raise httpcore.WriteTimeout("timed out writing") from None
            if receiver.lost and receiver.error is not None:
                raise httpcore.WriteError(str(receiver.error)) from receiver.error

    async def aclose(self) -> None:
        self._closed = True
        self._transport.close()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with _connecting(timeout, "TLS handshake"):
                transport = await self._loop.start_tls(
                    self._transport, self._receiver, ssl_context, server_hostname=server_hostname
                )
                if transport is None:  # the peer went away during the handshake
                    raise ConnectionResetError("the connection closed during the TLS handshake")
        except BaseException:
            self._transport.close()
            raise
        self._receiver.transport = transport = _stream_transport(transport)
        return AsyncioStream(self._loop, transport, self._receiver)

    def get_extra_info(self, info: str) -> Any:
        transport = self._transport
        if info == "ssl_object":
            return transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return _address(transport.get_extra_info("sockname"))
        if info == "server_addr":
            return _address(transport.get_extra_info("peername"))
        if info == "socket":
            return transport.get_extra_info("socket")
        if info == "is_readable":
            receiver = self._receiver
            if receiver.buffer or receiver.eof or receiver.lost or self._closed:
                return True
            return _readable(transport.get_extra_info("socket"))
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Opens ``AsyncioStream``s: ``connect_tcp`` tries each address the host resolves to in
    turn (socket options set before connecting), and fails with ``ConnectError`` chained to
    the last ``OSError`` (``ConnectionRefusedError``, ``socket.gaierror``, ...) or with
    ``ConnectTimeout`` when ``timeout`` passes first."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        async with _connecting(timeout, "connection"):
            sock = await _connected_socket(loop, host, port, local_address, list(socket_options or ()))
            transport, receiver = await loop.create_connection(_Receiver, sock=sock)
        return AsyncioStream(loop, transport, receiver)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        async with _connecting(timeout, "connection"):
            transport, receiver = await loop.create_unix_connection(_Receiver, path)
        sock = transport.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return AsyncioStream(loop, transport, receiver)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def _connected_socket(
    loop: asyncio.AbstractEventLoop,
    host: str,
    port: int,
    local_address: str | None,
    options: list[httpcore.SOCKET_OPTION],
) -> socket.socket:
    """A non-blocking socket connected to the first address of ``host`` that accepts; the last
    address's error when none does (so a refused connect stays a ``ConnectionRefusedError``)."""
    try:  # an address literal (a local gateway, a test server) needs no resolver thread
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=_NUMERIC)
    except socket.gaierror:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    error: OSError | None = None
    for family, kind, proto, _name, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            for option in options:
                sock.setsockopt(*option)
            if local_address is not None:
                sock.bind((local_address, 0))
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    raise error or OSError(f"{host!r} resolves to no address")
