"""Issue 25: every runtime of a session host sends its model requests through ONE pooled HTTP
client that the host owns: a session opened after another one's turn reuses that turn's TCP
connection (counted by the fake provider server), and the host closes the client when it
shuts down, after its runtimes (SPEC R1; Studio W2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentcore.testing.fake_server import FakeProviderServer
from studio.host.session_host import SessionHost, set_session_host
from tests.studio.fakes import responder, scripted_model, scripted_session

pytestmark = pytest.mark.django_db(transaction=True)


async def _turn(host: SessionHost, server: FakeProviderServer, user: Any, model: Any, workdir: str) -> set[int]:
    """A new session's first turn; the connections its requests came on."""
    before = len(server.requests)
    session, _client = await scripted_session(user, server, workdir=workdir, model=model)
    sent = await host.prompt(str(session.pk), prompt="say hello", agent="build")
    assert sent["status"] == "accepted"
    await host.wait_idle(str(session.pk))
    requests = server.requests[before:]
    assert requests and all(r.completed for r in requests)
    return {r.connection for r in requests}


async def test_a_hosts_sessions_share_one_pool_and_the_host_closes_it(user: Any, tmp_path: Path) -> None:
    server = FakeProviderServer(responder=responder).start_in_thread()
    host = SessionHost(flush_interval=0.01)
    set_session_host(host)
    try:
        model = await scripted_model(server)
        first = await _turn(host, server, user, model, str(tmp_path))
        second = await _turn(host, server, user, model, str(tmp_path))
        assert second <= first, "the second session's first turn opened a connection of its own"
        assert server.connections_accepted == len(first)
        client = host.http_client
        assert client is not None and not client.is_closed, "closing nothing yet; the pool stays open"
    finally:
        await host.close()
        set_session_host(None)
        server.stop_in_thread()
    assert client.is_closed and host.http_client is None
