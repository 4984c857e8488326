"""The stream bounds and the abort through the host client (SPEC L2, L8; issue 25).

Studio gives every runtime ``new_host_http_client()``, whose lanes read through the
plain-asyncio network backend rather than httpx's anyio one; the guard cancels the read it
is awaiting, so every bound and the abort must fire there exactly as on a private client.
This module runs the adapter-level tests of ``test_provider_stream_limits`` again with their
providers built on one host client (the fixtures below override that module's).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from agentcore import new_host_http_client
from agentcore.providers import StreamTimeouts
from agentcore.providers.streaming import SSEAdapter
from tests.agentcore.test_provider_stream_limits import (
    ADAPTERS,
    SHORT,
    api_kind,
    test_a_complete_response_on_a_connection_held_open_still_succeeds,
    test_a_connection_dropped_after_the_terminal_event_keeps_the_response,
    test_a_server_that_never_sends_headers_times_out,
    test_abort_during_an_endless_stream,
    test_abort_while_waiting_for_headers,
    test_an_outside_cancellation_during_a_bounded_read_still_cancels,
    test_endless_keepalives_do_not_reset_the_idle_timer,
    test_endless_text_past_max_tokens_is_an_overrun,
)

__all__ = [
    "api_kind",
    "test_a_complete_response_on_a_connection_held_open_still_succeeds",
    "test_a_connection_dropped_after_the_terminal_event_keeps_the_response",
    "test_a_server_that_never_sends_headers_times_out",
    "test_abort_during_an_endless_stream",
    "test_abort_while_waiting_for_headers",
    "test_an_outside_cancellation_during_a_bounded_read_still_cancels",
    "test_endless_keepalives_do_not_reset_the_idle_timer",
    "test_endless_text_past_max_tokens_is_an_overrun",
]


@pytest.fixture
async def host_client() -> AsyncIterator[httpx.AsyncClient]:
    async with new_host_http_client() as client:
        yield client


def _on_host_client(api_kind: str, client: httpx.AsyncClient, timeouts: StreamTimeouts | None) -> SSEAdapter:
    return ADAPTERS[api_kind](client, timeouts)


@pytest.fixture
def short_provider(api_kind: str, host_client: httpx.AsyncClient) -> SSEAdapter:
    return _on_host_client(api_kind, host_client, SHORT)


@pytest.fixture
def default_provider(api_kind: str, host_client: httpx.AsyncClient) -> SSEAdapter:
    return _on_host_client(api_kind, host_client, None)
