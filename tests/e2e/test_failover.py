"""Session-host failover for real (issue 18, SPEC D4/W7): PostgreSQL + Redis, two daphne
processes, two ``runworker studio-host`` workers, a scripted provider in the test process.

Studio is configured with one setting, ``STUDIO_DATABASE_URL``: its tables and every session's
agent store live in the test's private PostgreSQL server. Sessions are leased to workers
through the database (``studio.leases``); the tests kill the worker holding a session
(SIGKILL, SIGSTOP, SIGTERM) and check what a person would: the turn completes exactly once on
the other worker, with no duplicate model request and no lost text, and the page watching it
(on the *other* daphne) follows.
"""

from __future__ import annotations

import re
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentcore.testing.fake_server import FakeProviderServer
from tests.e2e.cluster import StudioCluster, User, finished, make_cluster, stop, watchers
from tests.e2e.failover_model import SENTENCES, essay, essay_request, responder
from tests.pg import PostgresCluster

pytestmark = pytest.mark.e2e

LEASE_SECONDS = 3.0


class Failover:
    """The running cluster plus what the tests read: the database and the provider's log."""

    def __init__(self, cluster: StudioCluster, db_url: str, provider: FakeProviderServer) -> None:
        self.cluster = cluster
        self.db_url = db_url
        self.provider = provider

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.db_url, autocommit=True) as conn:
            return list(conn.execute(sql, args).fetchall())

    def holder(self, session_id: str) -> tuple[int, int] | None:
        """``(worker pid, lease term)`` of the live holder of a session."""
        rows = self.query(
            "SELECT w.pid, l.term FROM studio_sessionlease l JOIN studio_hostworker w ON w.id = l.worker_id "
            "WHERE l.session_id = %s AND l.expires_at > now()",
            uuid.UUID(session_id),
        )
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def wait_holder(self, session_id: str, *, other_than: int | None = None, limit: float = 30) -> tuple[int, int]:
        deadline = time.monotonic() + limit
        while True:
            found = self.holder(session_id)
            if found is not None and found[0] != other_than:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"no live holder of {session_id} (other than {other_than})")
            time.sleep(0.05)  # polling the database: the condition is the lease row itself

    def worker_named(self, pid: int) -> str:
        return next(name for name, p in self.cluster.workers.items() if p.pid == pid)

    def essay_requests(self, token: str) -> list[tuple[str, bool]]:
        """``(partial answer sent, is a continuation)`` of every model request for ``token``."""
        out = []
        for request in self.provider.requests:
            found = essay_request(request.json)
            if found is not None and found[0] == token:
                out.append((found[1], found[2]))
        return out

    def transcript_answer(self, session_id: str) -> list[str]:
        """The assistant texts of the store's main conversation (read from the PostgreSQL store)."""
        rows = self.query(
            "SELECT e.payload FROM agentcore.entries e JOIN agentcore.stores s ON s.store_id = e.store_id "
            "WHERE s.name = %s AND e.kind = 'message' ORDER BY e.seq, e.idx",
            session_id,
        )
        import json

        texts = []
        for (payload,) in rows:
            message = json.loads(payload)
            message = message.get("message", message)
            if message.get("role") == "assistant":
                texts.append("".join(b.get("text", "") for b in message.get("content", []) if b.get("type") == "text"))
        return texts

    def ensure_two_workers(self) -> None:
        for name in ("worker-a", "worker-b"):
            process = self.cluster.workers.get(name)
            if process is None or process.poll() is not None:
                self.cluster.start_worker(name)
                self.cluster.wait_registered(name)


@pytest.fixture(scope="module")
def failover(postgres: PostgresCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Failover]:
    db_url = postgres.create_database(f"studio_failover_{uuid.uuid4().hex[:8]}")
    provider = FakeProviderServer(responder=responder).start_in_thread()
    base = Path(tmp_path_factory.mktemp("studio-failover"))
    cluster = make_cluster(
        base,
        {
            "STUDIO_DATABASE_URL": db_url,
            "STUDIO_LEASE_SECONDS": str(LEASE_SECONDS),
            "STUDIO_RUNTIME_FACTORY": "tests.e2e.failover_model.open_runtime",
            "STUDIO_FAKE_PROVIDER_URL": provider.base_url,
            "AGENTCORE_DEMO_DELAY_MS": "5",
        },
    )
    try:
        cluster.start_web("web-1")
        cluster.start_web("web-2")
        for name in ("worker-a", "worker-b"):
            cluster.start_worker(name)
        for name in ("worker-a", "worker-b"):
            cluster.wait_registered(name)
        yield Failover(cluster, db_url, provider)
    finally:
        cluster.close()
        provider.stop_in_thread()


async def test_a_worker_killed_mid_stream_the_turn_completes_once_on_the_other(failover: Failover) -> None:
    """SIGKILL the holder mid-answer: a live worker claims the session within lease + a few
    seconds, resumes the same request by its id, and the watcher on the other daphne sees the
    whole answer once; the provider saw the cut request and exactly one continuation."""
    failover.ensure_two_workers()
    token = uuid.uuid4().hex[:8]
    maria = await User.login(failover.cluster.web_urls[0])
    try:
        session_id = await maria.new_session()
        async with watchers() as watch:
            watcher = await watch(maria, failover.cluster.web_urls[1], session_id)  # the other daphne
            await maria.prompt(session_id, f"Write the ESSAY:{token} please")
            await watcher.until(lambda f: f"[{token} 03]" in f)  # text is streaming
            holder_pid, term = failover.wait_holder(session_id)
            victim = failover.worker_named(holder_pid)
            killed_at = time.monotonic()
            stop(failover.cluster.workers[victim], signal.SIGKILL)
            seen = max(int(n) for n in re.findall(rf"\[{token} (\d\d)\]", "".join(watcher.frames)))
            # The new holder's stream reaches the page: sentences past anything the old one sent.
            await watcher.until(lambda f: f"[{token} {seen + 3:02d}]" in f)
            resumed = time.monotonic() - killed_at
            final = await watcher.until(finished(f"[{token} {SENTENCES - 1:02d}]"), limit=60)
            new_pid, new_term = failover.wait_holder(session_id)
        whole = essay(token)
        assert new_pid != holder_pid and new_term > term
        assert resumed < LEASE_SECONDS + 6, f"the answer went on {resumed:.1f}s after the kill"
        assert final.count(f"[{token} 00]") == 1 and final.count(f"[{token} {SENTENCES - 1:02d}]") == 1
        assert "continued after an interruption" in final
        requests = failover.essay_requests(token)
        assert len(requests) == 2, requests  # the cut request and one continuation, nothing repeated
        (first_partial, first_cont), (partial, continuing) = requests
        assert (first_partial, first_cont) == ("", False)
        assert continuing and whole.startswith(partial) and f"[{token} 03]" in partial
        # The store keeps the committed part, the runtime's continuation prompt, then the rest:
        # together exactly the whole answer (nothing lost, nothing twice).
        assert failover.transcript_answer(session_id) == [partial, whole[len(partial) :]]
        runs = failover.query(
            "SELECT status FROM studio_run WHERE session_id = %s AND prompt LIKE %s", uuid.UUID(session_id), f"%{token}%"
        )
        assert runs == [("completed",)]
    finally:
        await maria.close()
        failover.ensure_two_workers()
