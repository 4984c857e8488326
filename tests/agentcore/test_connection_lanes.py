"""The host client's lanes: connections lent one request at a time and reused (SPEC P1; issue 25).

Real HTTP to the fake provider server on loopback, which numbers the TCP connections it
accepts, so reuse is counted where it happens. Holding two responses open at once is what
forces a second connection: the server's own ``Hang`` step keeps a response unfinished until
the test releases it.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from agentcore import new_host_http_client
from agentcore.providers.connection_lanes import LaneTransport
from agentcore.providers.shared import default_ssl_context
from agentcore.testing import FakeProviderServer, Hang, Text

BODY = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()


async def _complete(client: httpx.AsyncClient, server: FakeProviderServer) -> bytes:
    async with client.stream("POST", server.base_url + "/chat/completions", content=BODY) as response:
        assert response.status_code == 200
        return await response.aread()


def _lanes(keepalive: int = 8) -> tuple[httpx.AsyncClient, LaneTransport]:
    transport = LaneTransport(verify=default_ssl_context(), keepalive=keepalive, keepalive_expiry=30.0)
    return httpx.AsyncClient(transport=transport), transport


async def test_requests_one_after_another_reuse_one_connection(fake_server: FakeProviderServer) -> None:
    fake_server.enqueue(*([Text("ok")] for _ in range(4)))
    async with new_host_http_client() as client:
        for _ in range(4):
            assert b"[DONE]" in await _complete(client, fake_server)
    assert [r.connection for r in fake_server.requests] == [1, 1, 1, 1]


async def test_concurrent_requests_get_a_lane_each_and_later_ones_reuse_them(fake_server: FakeProviderServer) -> None:
    """Two responses open at once need two connections; the requests after them reuse those
    two (LIFO), whatever their number."""
    fake_server.enqueue([Text("a"), Hang()], [Text("b"), Hang()], *([Text("c")] for _ in range(3)))
    client, transport = _lanes()
    async with client:
        both = asyncio.gather(_complete(client, fake_server), _complete(client, fake_server))
        await fake_server.until_hanging(2)
        assert transport.lanes == 2
        fake_server.release()
        fake_server.release()
        await both
        for _ in range(3):
            await _complete(client, fake_server)
        assert transport.lanes == 2
    assert fake_server.connections_accepted == 2
    assert {r.connection for r in fake_server.requests[2:]} <= {1, 2}


async def test_idle_lanes_beyond_keepalive_are_closed(fake_server: FakeProviderServer) -> None:
    fake_server.enqueue([Text("a"), Hang()], [Text("b"), Hang()])
    client, transport = _lanes(keepalive=1)
    async with client:
        both = asyncio.gather(_complete(client, fake_server), _complete(client, fake_server))
        await fake_server.until_hanging(2)
        fake_server.release()
        fake_server.release()
        await both
        assert transport.lanes == 1


async def test_a_response_closed_before_its_end_does_not_poison_its_lane(fake_server: FakeProviderServer) -> None:
    """A body left unread closes its connection; the lane given back connects anew and works."""
    fake_server.enqueue([Text("x" * 50, chunk_size=1)], [Text("after")])
    client, transport = _lanes()
    async with client:
        async with client.stream("POST", fake_server.base_url + "/chat/completions", content=BODY) as response:
            async for _chunk in response.aiter_raw():
                break
        assert b"after" in await _complete(client, fake_server)
        assert transport.lanes == 1
    assert [r.connection for r in fake_server.requests] == [1, 2]


async def test_closing_the_client_closes_every_lane(fake_server: FakeProviderServer) -> None:
    fake_server.enqueue([Text("a")])
    client, transport = _lanes()
    await _complete(client, fake_server)
    await client.aclose()
    assert transport.lanes == 0


async def test_a_proxy_named_by_the_environment_is_honoured(
    fake_server: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client on a custom transport would ignore ``HTTP_PROXY``: with a proxy named, the host
    client is httpx's own, and the request goes to the proxy (here the fake server, which
    answers the proxied request) for a host that does not even resolve."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", fake_server.url)
    fake_server.enqueue([Text("via the proxy")])
    async with new_host_http_client() as client:
        url = "http://provider.invalid/v1/chat/completions"
        async with client.stream("POST", url, content=BODY) as response:
            assert response.status_code == 200
            assert b"via the proxy" in await response.aread()
