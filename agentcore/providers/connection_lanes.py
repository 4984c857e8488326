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

``LaneTransport`` keeps httpx's pool but gives each connection a pool of its own (a *lane*:
an ``httpx.AsyncHTTPTransport`` limited to one connection) and lends lanes one request at a
time from a free list per origin: a request takes the lane returned last (LIFO, so the warm
connections are reused and the cold ones age out), or opens a new lane, and gives it back
when its response is closed. Every pool operation then looks at one connection: O(1) per
request. A lane whose connection died or expired reconnects by itself on its next request
(its pool checks that), and a response closed before its end closes its connection, so the
lane given back is always safe to reuse.
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator
from ssl import SSLContext

import httpx

from agentcore.providers.shared import DEFAULT_TIMEOUT, default_ssl_context

HOST_KEEPALIVE_CONNECTIONS = 256
"""Idle connections kept per origin by default: enough for every stream of a busy host to find
one when its next turn starts (each is closed after ``keepalive_expiry`` seconds unused, at
its next use at the latest)."""

Origin = tuple[bytes, bytes, int | None]


class LaneTransport(httpx.AsyncBaseTransport):
    """Lends single-connection pools (lanes), one request at a time, and keeps up to
    ``keepalive`` idle ones per origin (more are closed when given back)."""

    def __init__(self, *, verify: SSLContext, keepalive: int, keepalive_expiry: float) -> None:
        self._verify = verify
        self._keepalive = keepalive
        self._limits = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=keepalive_expiry)
        self._idle: dict[Origin, list[httpx.AsyncHTTPTransport]] = {}
        self._lanes: set[httpx.AsyncHTTPTransport] = set()  # every lane open, lent or idle
        self._closed = False

    @property
    def lanes(self) -> int:
        """Lanes open (each holds at most one connection)."""
        return len(self._lanes)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise RuntimeError("the lane transport is closed")
        origin = (request.url.raw_scheme, request.url.raw_host, request.url.port)
        idle = self._idle.get(origin)
        if idle:
            lane = idle.pop()
        else:
            lane = httpx.AsyncHTTPTransport(verify=self._verify, limits=self._limits, trust_env=False)
            self._lanes.add(lane)
        try:
            response = await lane.handle_async_request(request)
        except BaseException:
            await self._give_back(origin, lane)
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)  # what an async transport returns
        response.stream = _LentStream(response.stream, self, origin, lane)
        return response

    async def _give_back(self, origin: Origin, lane: httpx.AsyncHTTPTransport) -> None:
        idle = self._idle.setdefault(origin, [])
        if self._closed or len(idle) >= self._keepalive:
            self._lanes.discard(lane)
            await lane.aclose()
        else:
            idle.append(lane)

    async def aclose(self) -> None:
        self._closed = True
        lanes, self._lanes = list(self._lanes), set()
        self._idle.clear()
        for lane in lanes:
            await lane.aclose()


class _LentStream(httpx.AsyncByteStream):
    """A response body that gives its lane back when closed. Iterating it is iterating the
    lane's own stream (no extra generator between the socket and the reader)."""

    def __init__(
        self, stream: httpx.AsyncByteStream, owner: LaneTransport, origin: Origin, lane: httpx.AsyncHTTPTransport
    ) -> None:
        self._stream = stream
        self._owner: LaneTransport | None = owner
        self._origin = origin
        self._lane = lane

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._stream.__aiter__()

    async def aclose(self) -> None:
        owner, self._owner = self._owner, None
        try:
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
