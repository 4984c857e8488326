"""One HTTP client for many runtimes whose cost per request does not grow with its connections.

A host that runs many runtimes (Studio: one per session) gives them one client
(``create_agent(http_client=...)``), so a session's first request reuses a connection another
session opened instead of connecting anew. httpx's own pool cannot be that client at scale:
httpcore re-examines every connection it holds whenever a request starts or a response
closes (closed? expired? readable? idle? — and for each idle one it counts all connections
again), so with N streams open each request costs O(N) Python calls, O(N²) once many are
idle. Measured with 50 concurrent 60-token turns in one process: one shared httpx pool cost
4-7 ms more agentcore CPU per turn than a client per runtime (767,750 ``is_idle`` calls in one
round of 50 turns); these lanes cost what private clients cost.

``LaneTransport`` lends connections one request at a time from a free list per origin: a
*lane* is one ``httpcore.AsyncHTTPConnection`` (httpcore's own HTTP/1.1 connection, with its
h11 state machine, keep-alive expiry and TLS set-up), with no pool around it. A request takes
the lane returned last (LIFO, so the warm connections are reused and the cold ones age out)
unless it has closed or expired (keep-alive expiry passed, or the server closed it: the
socket is readable while idle), or opens a new lane, and gives it back when its response is
closed; a response closed before its end closes its connection, and a closed lane is dropped,
so the lane given back is always safe to reuse. Every operation looks at one connection: O(1)
per request.

The lanes talk to the network through ``asyncio_network.AsyncioBackend`` (plain asyncio, no
anyio per read: that module says why). Errors are httpx's, mapped from httpcore's as httpx's
own transport maps them (``ConnectError``, ``ConnectTimeout``, ``ReadError``, ``ReadTimeout``,
``WriteError``, ``RemoteProtocolError``, ...), also while the body streams, so a caller's
retry classification cannot tell the two transports apart.
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from ssl import SSLContext
from typing import Protocol, cast

import httpcore
import httpx

from agentcore.providers.asyncio_network import AsyncioBackend
from agentcore.providers.shared import DEFAULT_TIMEOUT, default_ssl_context

HOST_KEEPALIVE_CONNECTIONS = 256
"""Idle connections kept per origin by default: enough for every stream of a busy host to find
one when its next turn starts (each is closed after ``keepalive_expiry`` seconds unused, at
its next use at the latest)."""

Origin = tuple[bytes, bytes, int | None]

_HTTPCORE_TO_HTTPX: dict[type[Exception], type[httpx.HTTPError]] = {
    httpcore.TimeoutException: httpx.TimeoutException,
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.NetworkError: httpx.NetworkError,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.ProxyError: httpx.ProxyError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
    httpcore.ProtocolError: httpx.ProtocolError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
}
"""httpcore's exceptions and the httpx ones httpx's transport raises for them (every public
class on both sides; an exception maps by its most specific class)."""


@contextmanager
def httpx_errors() -> Iterator[None]:
    """httpcore's exceptions raised as httpx's (chained, with the same message)."""
    try:
        yield
    except Exception as exc:
        for cls in type(exc).__mro__:
            mapped = _HTTPCORE_TO_HTTPX.get(cls)
            if mapped is not None:
                raise mapped(str(exc)) from exc
        raise


class LaneTransport(httpx.AsyncBaseTransport):
    """Lends single connections (lanes), one request at a time, and keeps up to ``keepalive``
    idle ones per origin (more are closed when given back)."""

    def __init__(self, *, verify: SSLContext, keepalive: int, keepalive_expiry: float) -> None:
        self._verify = verify
        self._keepalive = keepalive
        self._keepalive_expiry = keepalive_expiry
        self._backend = AsyncioBackend()
        self._idle: dict[Origin, list[httpcore.AsyncHTTPConnection]] = {}
        self._lanes: set[httpcore.AsyncHTTPConnection] = set()  # every lane open, lent or idle
        self._closed = False

    @property
    def lanes(self) -> int:
        """Lanes open (each holds at most one connection)."""
        return len(self._lanes)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise RuntimeError("the lane transport is closed")
        assert isinstance(request.stream, httpx.AsyncByteStream)  # what an async client sends
        url = request.url
        if url.scheme not in ("http", "https"):  # as httpcore's pool refuses it
            raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{url.scheme}://'.")
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        origin = (url.raw_scheme, url.raw_host, url.port)
        lane = await self._lend(origin, core_request.url.origin)
        try:
            with httpx_errors():
                response = await lane.handle_async_request(core_request)
        except BaseException:
            await self._give_back(origin, lane)
            raise
        body = cast(_Body, response.stream)  # an HTTP/1.1 connection's response body (async, closable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_LentStream(body, self, origin, lane),
            extensions=response.extensions,
        )

    async def _lend(self, origin: Origin, core_origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        idle = self._idle.get(origin)
        while idle:
            lane = idle.pop()
            if not (lane.is_closed() or lane.has_expired()):
                return lane
            await self._drop(lane)
        expiry, backend = self._keepalive_expiry, self._backend
        lane = httpcore.AsyncHTTPConnection(
            core_origin, ssl_context=self._verify, keepalive_expiry=expiry, network_backend=backend
        )
        self._lanes.add(lane)
        return lane

    async def _drop(self, lane: httpcore.AsyncHTTPConnection) -> None:
        self._lanes.discard(lane)
        await lane.aclose()

    async def _give_back(self, origin: Origin, lane: httpcore.AsyncHTTPConnection) -> None:
        idle = self._idle.setdefault(origin, [])
        if self._closed or len(idle) >= self._keepalive or lane.is_closed():
            await self._drop(lane)
        else:
            idle.append(lane)

    async def aclose(self) -> None:
        self._closed = True
        lanes, self._lanes = list(self._lanes), set()
        self._idle.clear()
        for lane in lanes:
            await lane.aclose()


class _Body(Protocol):
    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class _LentStream(httpx.AsyncByteStream):
    """A response body that raises httpx's errors and gives its lane back when closed."""

    def __init__(self, stream: _Body, owner: LaneTransport, origin: Origin, lane: httpcore.AsyncHTTPConnection) -> None:
        self._stream = stream
        self._owner: LaneTransport | None = owner
        self._origin = origin
        self._lane = lane

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        owner, self._owner = self._owner, None
        try:
            with httpx_errors():
                await self._stream.aclose()
        finally:
            if owner is not None:
                await owner._give_back(self._origin, self._lane)


def proxies_configured() -> bool:
    """Whether the environment names a proxy (``HTTPS_PROXY``, ``ALL_PROXY``, ...), which
    httpx's own client honours and a client built on a custom transport does not."""
    return any(scheme != "no" for scheme in urllib.request.getproxies())


def new_host_http_client(
    *, keepalive_connections: int = HOST_KEEPALIVE_CONNECTIONS, keepalive_expiry: float = 30.0
) -> httpx.AsyncClient:
    """The client a host gives every runtime it runs (``create_agent(http_client=...)``), and
    closes itself after them: connections are lent one request at a time (``LaneTransport``),
    with no limit on how many are open at once (a host bounds its streams itself, one per
    live turn) and up to ``keepalive_connections`` idle ones kept per origin.

    When the environment names a proxy, this is httpx's own pooled client instead (which
    honours it); its cost per request grows with the connections it holds (module doc)."""
    if proxies_configured():
        limits = httpx.Limits(
            max_connections=None, max_keepalive_connections=keepalive_connections, keepalive_expiry=keepalive_expiry
        )
        return httpx.AsyncClient(verify=default_ssl_context(), timeout=DEFAULT_TIMEOUT, limits=limits)
    verify = default_ssl_context()
    lanes = LaneTransport(verify=verify, keepalive=keepalive_connections, keepalive_expiry=keepalive_expiry)
    return httpx.AsyncClient(transport=lanes, timeout=DEFAULT_TIMEOUT)
