"""A server that never reads the request is bounded too (SPEC L2; issue 25).

The adapters give httpx no read or write timeout of its own (a finite one costs a timer per
network read): every send and read is bounded by the stream guard instead. This is the case
that leaves only the guard: a server that accepts the connection and never reads, so sending
a request larger than the socket buffers blocks in the write itself. A real loopback server
(``asyncio.start_server``) that holds its connections unread until the test ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from agentcore.messages import user_text
from agentcore.providers import StreamTimeouts
from agentcore.providers.registry import create_provider
from tests.agentcore.provider_fixtures import collect, make_model, make_request
from tests.conftest import API_KINDS

GUARD_S = 10.0
BIG_PROMPT = "x" * (16 * 1024 * 1024)  # far beyond loopback's socket buffers


@pytest.fixture
async def deaf_server() -> AsyncIterator[tuple[str, asyncio.Event]]:
    """``http://127.0.0.1:PORT/v1`` of a server that never reads; the event is set on connect."""
    connected = asyncio.Event()
    release = asyncio.Event()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        await release.wait()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", connected
    finally:
        release.set()
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_a_request_the_server_never_reads_ends_at_the_header_bound(deaf_server, api_kind) -> None:
    """L2: the write blocks (the server reads nothing); the header bound still ends the stream
    with a retryable ``timeout`` naming ``header_s``."""
    base_url, connected = deaf_server
    provider = create_provider(api_kind, timeouts=StreamTimeouts(connect_s=5.0, header_s=0.1, idle_s=0.2))
    try:
        request = make_request(make_model(api_kind, base_url), [user_text(BIG_PROMPT)])
        async with asyncio.timeout(GUARD_S):
            out = await collect(provider, request)
    finally:
        await provider.aclose()
    assert connected.is_set()
    failure = out.end.failure
    assert failure is not None and failure.kind == "timeout" and failure.retryable
    assert "no response headers within 0.1 s" in failure.message and "header_s" in failure.message
