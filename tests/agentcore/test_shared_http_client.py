"""A host's runtimes share one pooled HTTP client it gives them (SPEC R1, P1).

A host running many runtimes (Studio: one per session) passes ``create_agent(http_client=...)``:
every runtime sends its requests through that pool, so a session opened after another one
finished reuses its TCP connection, and closing a runtime never closes the host's client.
Counted on the server side: the fake provider server numbers the connections it accepts.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from agentcore import create_agent, new_host_http_client
from agentcore.errors import InputValidationError
from agentcore.testing import FakeProviderServer, Text
from tests.helpers import collect, final, text_of


def _options(server: FakeProviderServer, workspace: Path) -> dict[str, object]:
    return {
        "provider": "fake",
        "model": "fake-model",
        "api_kind": "openai-completions",
        "base_url": server.base_url,
        "api_key": "test-key",
        "workdir": str(workspace),
    }


async def _answer_once(server: FakeProviderServer, workspace: Path, **extra: object) -> str:
    server.enqueue([Text("pong")])
    async with await create_agent(**_options(server, workspace), **extra) as agent:
        events = await collect(agent, "ping")
    assert final(events).status == "completed"
    return text_of(events)


async def test_runtimes_given_one_client_reuse_its_connection_and_leave_it_open(
    fake_server: FakeProviderServer, workspace: Path
) -> None:
    """R1: three runtimes opened one after another on one ``http_client`` send their requests
    over ONE TCP connection, and the client is still open (and usable) after all closed."""
    client = new_host_http_client()
    try:
        for _ in range(3):
            assert await _answer_once(fake_server, workspace, http_client=client) == "pong"
        assert [r.connection for r in fake_server.requests] == [1, 1, 1]
        assert fake_server.connections_accepted == 1
        assert not client.is_closed
        assert await _answer_once(fake_server, workspace, http_client=client) == "pong"
        assert fake_server.connections_accepted == 1
    finally:
        await client.aclose()


async def test_runtimes_without_a_client_each_open_their_own_connection(
    fake_server: FakeProviderServer, workspace: Path
) -> None:
    """The contrast that makes the count above mean something: each runtime's private pool
    opens (and closes) its own connection."""
    for _ in range(3):
        await _answer_once(fake_server, workspace)
    assert [r.connection for r in fake_server.requests] == [1, 2, 3]


async def test_any_httpx_async_client_is_accepted_and_not_closed(
    fake_server: FakeProviderServer, workspace: Path
) -> None:
    """The host may bring its own configured ``httpx.AsyncClient`` (proxies, certificates):
    the runtime's requests set their own timeouts, so the client's are not in the way."""
    async with httpx.AsyncClient(timeout=0.001) as client:
        assert await _answer_once(fake_server, workspace, http_client=client) == "pong"
        assert not client.is_closed


@pytest.mark.parametrize("value", ["http://x", object(), httpx.Client()])
async def test_http_client_that_is_not_an_async_httpx_client_is_input_validation(
    fake_server: FakeProviderServer, workspace: Path, value: object
) -> None:
    """R1: a wrong ``http_client`` is ``input_validation`` naming the field; nothing opens."""
    with pytest.raises(InputValidationError) as caught:
        await create_agent(**_options(fake_server, workspace), http_client=value)
    assert caught.value.field == "http_client"
    assert not fake_server.requests
