"""The host client's network path: lanes on the plain-asyncio httpcore backend (SPEC P1; issue 25).

Every test runs on asyncio's own loop and on uvloop's, which Studio's servers run on
(``tests/conftest.py BOTH_LOOPS``).

Everything goes through the real ``LaneTransport`` to the real fake provider server on
loopback, directly or behind a real relay (``network_relay``) that can terminate TLS with a
self-signed certificate made for the run, count connections, and close or reset them from
the server's side. What is checked is what httpx users rely on: TLS with verification and
SNI, the ``get_extra_info`` keys httpcore reads, a keep-alive connection the server closed
being dropped (``is_readable``), connect timeouts, socket options, a clean close, and httpx's
own exception types for every failure (agentcore's retry classification depends on them).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import select
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import httpcore
import httpx
import pytest

from agentcore.providers.asyncio_network import AsyncioBackend, AsyncioStream
from agentcore.providers.connection_lanes import LaneTransport
from agentcore.providers.shared import default_ssl_context
from agentcore.providers.streaming import connect_reason
from agentcore.testing import Disconnect, FakeProviderServer, Hang, Text
from tests.agentcore.network_relay import Certificate, Relay, self_signed

BODY = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()


def _client(verify: ssl.SSLContext | None = None, timeout: httpx.Timeout | None = None) -> httpx.AsyncClient:
    transport = LaneTransport(verify=verify or default_ssl_context(), keepalive=8, keepalive_expiry=30.0)
    return httpx.AsyncClient(transport=transport, timeout=timeout or httpx.Timeout(10.0))


def _in_chain(exc: BaseException | None, kind: type[BaseException]) -> bool:
    """Whether ``kind`` is down ``exc``'s chain (causes, contexts, or the wrapped argument)."""
    for _ in range(8):
        if exc is None:
            return False
        if isinstance(exc, kind) or any(isinstance(arg, kind) for arg in exc.args):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


async def _complete(client: httpx.AsyncClient, url: str) -> httpx.Response:
    async with client.stream("POST", url + "/chat/completions", content=BODY) as response:
        await response.aread()
        return response


@pytest.fixture
def certificate(tmp_path: Path) -> Certificate:
    return self_signed(tmp_path)


@pytest.fixture
async def relay(fake_server: FakeProviderServer) -> AsyncIterator[Relay]:
    relay = await Relay(fake_server.port).start()
    try:
        yield relay
    finally:
        await relay.stop()


@pytest.fixture
async def tls_relay(fake_server: FakeProviderServer, certificate: Certificate) -> AsyncIterator[Relay]:
    relay = await Relay(fake_server.port, tls=certificate.server_context()).start()
    try:
        yield relay
    finally:
        await relay.stop()


async def test_a_lane_reads_through_the_asyncio_stream_and_reports_its_addresses(
    fake_server: FakeProviderServer,
) -> None:
    fake_server.enqueue([Text("plain")])
    async with _client() as client:
        response = await _complete(client, fake_server.base_url)
        stream = response.extensions["network_stream"]
        assert isinstance(stream, AsyncioStream)
        assert b"plain" in response.content
        assert stream.get_extra_info("server_addr") == ("127.0.0.1", fake_server.port)
        host, port = stream.get_extra_info("client_addr")
        assert host == "127.0.0.1" and port > 0
        sock = stream.get_extra_info("socket")
        assert sock.getsockname() == (host, port)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1  # no Nagle stalls on small writes
        assert stream.get_extra_info("ssl_object") is None
        assert stream.get_extra_info("is_readable") is False  # idle, nothing from the server
        assert stream.get_extra_info("no such key") is None


async def test_https_verifies_the_certificate_sends_sni_and_reuses_the_tls_connection(
    fake_server: FakeProviderServer, tls_relay: Relay, certificate: Certificate
) -> None:
    fake_server.enqueue([Text("secret")], [Text("again")])
    base = f"https://localhost:{tls_relay.port}/v1"
    async with _client(verify=certificate.client_context()) as client:
        first = await _complete(client, base)
        second = await _complete(client, base)
        ssl_object = first.extensions["network_stream"].get_extra_info("ssl_object")
        assert isinstance(ssl_object, ssl.SSLObject)
        assert ssl_object.server_hostname == "localhost"
        assert ssl_object.version() is not None
    assert b"secret" in first.content and b"again" in second.content
    assert tls_relay.accepted == 1
    assert [r.connection for r in fake_server.requests] == [1, 1]


async def test_a_certificate_the_client_does_not_trust_is_httpx_connect_error(tls_relay: Relay) -> None:
    async with _client() as client:  # certifi's roots: the self-signed certificate is not among them
        with pytest.raises(httpx.ConnectError) as caught:
            await _complete(client, f"https://localhost:{tls_relay.port}/v1")
    assert _in_chain(caught.value, ssl.SSLCertVerificationError)


async def test_a_tls_handshake_the_server_never_answers_is_httpx_connect_timeout() -> None:
    async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await closed.wait()
        writer.close()

    closed = asyncio.Event()
    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with _client(timeout=httpx.Timeout(10.0, connect=0.2)) as client:
            with pytest.raises(httpx.ConnectTimeout):
                await _complete(client, f"https://localhost:{port}/v1")
    finally:
        closed.set()
        server.close()
        await server.wait_closed()


async def test_a_connect_that_never_completes_is_httpx_connect_timeout() -> None:
    """A listener with a full accept queue (backlog 0, one connection waiting) drops further
    SYNs, so the next connect neither succeeds nor fails: only the connect bound ends it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port))
    try:
        async with _client(timeout=httpx.Timeout(10.0, connect=0.2)) as client:
            with pytest.raises(httpx.ConnectTimeout):
                await _complete(client, f"http://127.0.0.1:{port}/v1")
    finally:
        filler.close()
        listener.close()


async def test_a_refused_connect_is_httpx_connect_error_that_names_the_refusal() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    async with _client() as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await _complete(client, f"http://127.0.0.1:{port}/v1")
    assert _in_chain(caught.value, ConnectionRefusedError)
    assert connect_reason(caught.value) == "connection refused (nothing listens on that port)"


async def test_a_host_that_does_not_resolve_is_httpx_connect_error_that_says_so() -> None:
    async with _client() as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await _complete(client, "http://provider.invalid/v1")
    assert connect_reason(caught.value).startswith("the host name does not resolve")


class _NoThreads(concurrent.futures.ThreadPoolExecutor):
    def submit(self, *args: object, **kwargs: object) -> concurrent.futures.Future[object]:  # type: ignore[override]
        raise AssertionError("the loop's executor was used")


async def test_an_address_literal_connects_without_a_resolver_thread(fake_server: FakeProviderServer) -> None:
    """A provider at an IP address (a local gateway, a fake server) is connected to without
    ``loop.getaddrinfo``, whose thread hop costs more CPU than the connect itself."""
    fake_server.enqueue([Text("direct")])
    loop = asyncio.get_running_loop()
    executor = _NoThreads()
    loop.set_default_executor(executor)
    try:
        async with _client() as client:
            assert b"direct" in (await _complete(client, fake_server.base_url)).content
    finally:
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor())
        executor.shutdown()


async def test_a_keepalive_connection_the_server_closed_is_dropped_not_reused(
    fake_server: FakeProviderServer, relay: Relay
) -> None:
    """httpcore asks ``is_readable`` of an idle connection before reusing it: the server's
    FIN makes it readable, so the next request connects anew instead of failing."""
    fake_server.enqueue([Text("one")], [Text("two")])
    base = f"http://127.0.0.1:{relay.port}/v1"
    async with _client() as client:
        first = await _complete(client, base)
        stream = first.extensions["network_stream"]
        await relay.close_connections()
        if not stream.get_extra_info("is_readable"):  # the FIN is still crossing loopback: wait for it
            poller = select.poll()
            poller.register(stream.get_extra_info("socket").fileno(), select.POLLIN)
            await asyncio.to_thread(poller.poll, 10_000)
        assert stream.get_extra_info("is_readable")
        second = await _complete(client, base)
    assert b"two" in second.content
    assert relay.accepted == 2


async def test_a_lane_past_its_keepalive_expiry_is_closed_and_replaced(
    fake_server: FakeProviderServer, relay: Relay
) -> None:
    """``keepalive_expiry=0``: an idle lane has expired by its next request, which connects
    anew; the expired connection is closed (the relay reads its EOF), not leaked."""
    fake_server.enqueue([Text("one")], [Text("two")])
    transport = LaneTransport(verify=default_ssl_context(), keepalive=8, keepalive_expiry=0.0)
    async with httpx.AsyncClient(transport=transport) as client:
        await _complete(client, f"http://127.0.0.1:{relay.port}/v1")
        second = await _complete(client, f"http://127.0.0.1:{relay.port}/v1")
        await relay.client_closed.wait()
        assert transport.lanes == 1
    assert b"two" in second.content
    assert relay.accepted == 2


async def test_a_reset_mid_body_is_httpx_read_error(fake_server: FakeProviderServer, relay: Relay) -> None:
    fake_server.enqueue([Text("partial"), Hang()])
    async with _client() as client:
        url = f"http://127.0.0.1:{relay.port}/v1/chat/completions"
        async with client.stream("POST", url, content=BODY) as response:
            chunks = response.aiter_raw()
            seen = b""
            while b"partial" not in seen:  # the server is holding the response after this text
                seen += await anext(chunks)
            await relay.close_connections(reset=True)
            with pytest.raises(httpx.ReadError):
                async for _chunk in chunks:
                    pass
        fake_server.release()


async def test_a_body_cut_mid_stream_is_httpx_remote_protocol_error(fake_server: FakeProviderServer) -> None:
    fake_server.enqueue([Text("a b c d", chunk_size=2), Disconnect(after_events=2)])
    async with _client() as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await _complete(client, fake_server.base_url)


async def test_a_read_timeout_is_httpx_read_timeout(fake_server: FakeProviderServer) -> None:
    fake_server.enqueue([Hang(before_headers=True)])
    async with _client(timeout=httpx.Timeout(10.0, read=0.2)) as client:
        with pytest.raises(httpx.ReadTimeout):
            await _complete(client, fake_server.base_url)
    fake_server.release()


async def test_closing_the_client_closes_its_connections_cleanly(fake_server: FakeProviderServer, relay: Relay) -> None:
    fake_server.enqueue([Text("bye")])
    client = _client()
    await _complete(client, f"http://127.0.0.1:{relay.port}/v1")
    assert not relay.client_closed.is_set()
    await client.aclose()
    await relay.client_closed.wait()  # the relay read the client's EOF: a FIN, not a reset


async def test_a_write_to_a_connection_the_server_reset_is_httpcore_write_error(
    fake_server: FakeProviderServer, relay: Relay
) -> None:
    stream = await AsyncioBackend().connect_tcp("127.0.0.1", relay.port, timeout=5.0)
    await relay.close_connections(reset=True)
    with pytest.raises(httpcore.ReadError):
        await stream.read(1024, timeout=5.0)
    with pytest.raises(httpcore.WriteError):
        await stream.write(b"GET / HTTP/1.1\r\n\r\n")
    await stream.aclose()


async def test_socket_options_are_set_on_the_socket(fake_server: FakeProviderServer) -> None:
    fake_server.enqueue([Text("opts")])
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1), (socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)]
    async with httpcore.AsyncConnectionPool(network_backend=AsyncioBackend(), socket_options=options) as pool:
        async with pool.stream("POST", fake_server.base_url + "/chat/completions", content=BODY) as response:
            body = await response.aread()
            sock = response.extensions["network_stream"].get_extra_info("socket")
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    assert b"opts" in body


async def test_a_unix_socket_connection_streams_and_takes_socket_options(
    fake_server: FakeProviderServer, tmp_path: Path
) -> None:
    """httpcore's ``uds=`` goes through ``connect_unix_socket`` (bounded and mapped like TCP)."""
    fake_server.enqueue([Text("over unix")])
    path = str(tmp_path / "provider.sock")
    relay = await Relay(fake_server.port, unix_path=path).start()
    options = [(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)]  # off by default
    try:
        backend = AsyncioBackend()
        async with httpcore.AsyncConnectionPool(uds=path, network_backend=backend, socket_options=options) as pool:
            async with pool.stream("POST", "http://provider/v1/chat/completions", content=BODY) as response:
                body = await response.aread()
                sock = response.extensions["network_stream"].get_extra_info("socket")
                assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED) == 1
        assert response.status == 200 and b"over unix" in body
        with pytest.raises(httpcore.ConnectError):
            await backend.connect_unix_socket(str(tmp_path / "nobody.sock"), timeout=5.0)
    finally:
        await relay.stop()


@pytest.mark.parametrize("url", ["htps://127.0.0.1:9/v1", "ftp://127.0.0.1/v1"])
async def test_a_url_with_an_unsupported_scheme_is_httpx_unsupported_protocol(url: str) -> None:
    """A mistyped base URL fails as on httpx's own transport, before any connect."""
    async with _client() as client:
        with pytest.raises(httpx.UnsupportedProtocol, match="unsupported protocol"):
            await _complete(client, url)


def test_the_exception_map_is_httpx_own() -> None:
    """The lanes map httpcore's errors to httpx's as httpx's transport does; this pins the table
    to httpx's private one, so a new or renamed exception in httpx fails here, loudly."""
    from httpx._transports import default as httpx_default

    from agentcore.providers.connection_lanes import _HTTPCORE_TO_HTTPX

    assert _HTTPCORE_TO_HTTPX == httpx_default._load_httpcore_exceptions()


class _Flood(asyncio.Protocol):
    """A server that writes ``payload`` at once on connect; ``blocked`` once its transport's
    write buffer went over the high-water mark (the kernel took no more)."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload
        self.blocked = asyncio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        stream = cast(asyncio.Transport, transport)  # uvloop's does not subclass asyncio.Transport
        stream.write(self.payload)
        stream.write_eof()

    def pause_writing(self) -> None:
        self.blocked.set()


class _PauseWatch:
    """A transport as the receiver sees it, with ``paused`` set once the receiver stops reading
    (a wrapper: uvloop's transport methods cannot be replaced on the object)."""

    def __init__(self, inner: asyncio.Transport) -> None:
        self._inner = inner
        self.paused = asyncio.Event()

    def pause_reading(self) -> None:
        self._inner.pause_reading()
        self.paused.set()

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


async def test_a_server_that_floods_is_buffered_to_a_bound_and_read_whole() -> None:
    """An endless-looking stream (16 MiB written at once while nobody reads) fills at most the
    stream's high-water mark plus one socket read in the client: its transport stops reading
    the socket, so the server's writes wait in the kernel instead of the client's memory. Then
    every byte arrives, in order, and the end is b""."""
    from agentcore.providers.asyncio_network import HIGH_WATER

    loop = asyncio.get_running_loop()
    payload = bytes(range(256)) * (16 * 1024 * 1024 // 256)
    flood = _Flood(payload)
    server = await loop.create_server(lambda: flood, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5.0)
        assert isinstance(stream, AsyncioStream)
        receiver = stream._receiver
        transport = receiver.transport
        assert transport is not None
        watch = _PauseWatch(transport)
        receiver.transport = cast(asyncio.Transport, watch)
        await asyncio.wait_for(watch.paused.wait(), 10)  # the client stopped reading the socket
        assert receiver.read_paused and flood.blocked.is_set()
        assert len(receiver.buffer) <= HIGH_WATER + 256 * 1024  # one socket read past the mark
        received = bytearray()
        async with asyncio.timeout(30):  # a reader that never resumes fails here, not hangs
            while chunk := await stream.read(64 * 1024):
                received += chunk
                assert len(receiver.buffer) <= HIGH_WATER + 256 * 1024
        assert received == payload
        await stream.aclose()
    finally:
        server.close()
        await server.wait_closed()
