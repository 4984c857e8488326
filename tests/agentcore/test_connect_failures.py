"""A request that never reaches a server is told apart from one that dropped (SPEC L2, W14).

"Connection dropped — retrying" was said of an endpoint that refused every connection, and it
took the drop budget (10 attempts, ~56 s of backoff) to fail. A refused (or unreachable, or
unresolvable) endpoint is a ``connect`` failure: its retry events name the host and port and
it has a budget of its own (``MAX_CONNECT_ATTEMPTS``), while a dropped stream keeps ten.
"""

from __future__ import annotations

import socket

import pytest

from agentcore.engine.retry import MAX_CONNECT_ATTEMPTS, MAX_CONNECTION_ATTEMPTS
from agentcore.testing.steps import Disconnect, Text
from tests.conftest import API_KINDS
from tests.helpers import collect, final


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_refused_connection_is_a_connect_retry_naming_host_and_port(make_agent, sleeps, api_kind: str) -> None:
    """L2/W14: every attempt against a closed port is a ``connect`` retry with the endpoint, the
    attempt of the shorter connect budget and its delay; exhaustion says it could not connect."""
    port = closed_port()
    agent = await make_agent(api_kind, base_url=f"http://127.0.0.1:{port}/v1")
    events = await collect(agent, "hi")
    retries = [e for e in events if e.type == "retry"]
    assert [(r.kind, r.attempt, r.max_attempts) for r in retries] == [
        ("connect", n, MAX_CONNECT_ATTEMPTS) for n in range(1, MAX_CONNECT_ATTEMPTS + 1)
    ]
    assert {r.endpoint for r in retries} == {f"127.0.0.1:{port}"}
    assert retries[0].reason.startswith(f"cannot connect to 127.0.0.1:{port}: ")
    assert "refused" in retries[0].reason.lower()
    assert [r.delay_s for r in retries] == sleeps.delays == [0.5, 1, 2, 4, 8][:MAX_CONNECT_ATTEMPTS]
    end = final(events)
    assert end.status == "failed" and end.error_code == "model_error"
    assert f"could not connect to 127.0.0.1:{port}" in (end.error or "")
    assert f"{MAX_CONNECT_ATTEMPTS} times in a row" in (end.error or "")


async def test_connect_budget_is_shorter_than_the_drop_budget() -> None:
    """The decision, stated: a refused endpoint fails after ~15 s of backoff, a drop after ~56 s."""
    from agentcore.engine.retry import backoff_delay

    connect = sum(backoff_delay(n) for n in range(1, MAX_CONNECT_ATTEMPTS + 1))
    dropped = sum(backoff_delay(n) for n in range(1, MAX_CONNECTION_ATTEMPTS + 1))
    assert MAX_CONNECT_ATTEMPTS < MAX_CONNECTION_ATTEMPTS == 10
    assert connect == 15.5 and dropped == 55.5


async def test_a_drop_after_connecting_is_still_dropped(make_agent, fake_server) -> None:
    """L2: a server that was reached and cut the stream keeps the ``dropped`` kind and the budget of 10."""
    fake_server.enqueue([Disconnect(after_events=0)], [Text("second try")])
    agent = await make_agent()
    events = await collect(agent, "hi")
    retries = [e for e in events if e.type == "retry"]
    assert [(r.kind, r.max_attempts) for r in retries] == [("dropped", MAX_CONNECTION_ATTEMPTS)]
    assert retries[0].endpoint is None
    assert final(events).text == "second try"
