"""Session-host failover for real (issue 18, SPEC D4/W7): PostgreSQL + Redis, two daphne
processes, two ``runworker studio-host`` workers, a scripted provider in the test process.

Studio is configured with one setting, ``STUDIO_DATABASE_URL``: its tables and every session's
agent store live in the test's private PostgreSQL server. Sessions are leased to workers
through the database (``studio.host.leases``); the tests kill the worker holding a session
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
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentcore.testing.fake_server import FakeProviderServer
from tests.e2e.cluster import StudioCluster, User, finished, make_cluster, shown, stop, watchers
from tests.e2e.failover_model import SENTENCES, essay, essay_request, responder
from tests.e2e.reports import attach, failed
from tests.pg import PostgresCluster

pytestmark = pytest.mark.e2e

# Long enough that a clean handover beats the lease's expiry by seconds even on a loaded machine
# (at 3 s, a handover under load 6 lost the race by 0.35 s); kills then take ~5 s to move.
LEASE_SECONDS = 5.0


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


@pytest.fixture(autouse=True)
def logs_on_failure(request: pytest.FixtureRequest, failover: Failover) -> Iterator[None]:
    """A failed test carries the cluster's logs in its report: the race behind it may not come
    back on a rerun, and the cluster's folder is removed with the module."""
    yield
    if failed(request.node):
        attach(request.node, "cluster logs", failover.cluster.tails())


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
        visible = shown(final)
        assert visible.count(f"[{token} 00]") == 1 and visible.count(f"[{token} {SENTENCES - 1:02d}]") == 1
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
            "SELECT status FROM studio_run WHERE session_id = %s AND prompt LIKE %s",
            uuid.UUID(session_id),
            f"%{token}%",
        )
        assert runs == [("completed",)]
    finally:
        await maria.close()
        failover.ensure_two_workers()


async def test_a_paused_plan_survives_the_kill_and_is_approved_on_the_other_worker(failover: Failover) -> None:
    """A plan waiting for review is durable: after its worker's SIGKILL the other worker takes
    the session over (a pause is work that must go on), the page re-renders the review from the
    new holder, and approving it there builds."""
    failover.ensure_two_workers()
    maria = await User.login(failover.cluster.web_urls[0])
    try:
        session_id = await maria.new_session(mode="plan")
        async with watchers() as watch:
            watcher = await watch(maria, failover.cluster.web_urls[1], session_id)
            await maria.prompt(session_id, "Plan a todo app with due dates", agent="plan")
            await watcher.until(lambda f: 'id="approve-plan"' in f and "pill-waiting" in f)
            holder_pid, term = failover.wait_holder(session_id)
            stop(failover.cluster.workers[failover.worker_named(holder_pid)], signal.SIGKILL)
            seen = len(watcher.frames)
            new_pid, new_term = failover.wait_holder(session_id, other_than=holder_pid)
            # The new holder renders the whole page again (the review included) without being asked.
            await watcher.until(lambda f: 'id="approve-plan"' in f and 'id="conversation"' in f)
            assert len(watcher.frames) > seen
            user = await User.login(failover.cluster.web_urls[1])
            await user.approve(session_id)  # through the other daphne, to the new holder
            final = await watcher.until(finished("approved plan"))
            await user.close()
        assert new_term > term and "Plan approved" in final
        assert failover.holder(session_id) == (new_pid, new_term)
        page = await maria.http.get(f"/sessions/{session_id}/")
        assert "approved plan" in page.text and 'id="approve-plan"' not in page.text
    finally:
        await maria.close()
        failover.ensure_two_workers()


async def test_a_clean_shutdown_hands_the_session_over_before_its_lease_would_expire(failover: Failover) -> None:
    """SIGTERM releases the worker's leases at once (active ones for takeover) and tells the
    other worker to sweep: the running turn moves before the old lease would have expired, and
    completes exactly once. "Would have expired" is the lease as it stood when the worker's
    renewals stopped (its log says): one read at the signal would race a renewal still running."""
    failover.ensure_two_workers()
    token = uuid.uuid4().hex[:8]
    maria = await User.login(failover.cluster.web_urls[0])
    try:
        session_id = await maria.new_session()
        async with watchers() as watch:
            watcher = await watch(maria, failover.cluster.web_urls[1], session_id)
            await maria.prompt(session_id, f"Write the ESSAY:{token} please")
            await watcher.until(lambda f: f"[{token} 03]" in f)
            holder_pid, _term = failover.wait_holder(session_id)
            victim = failover.cluster.workers[failover.worker_named(holder_pid)]
            victim.send_signal(signal.SIGTERM)
            victim.wait(timeout=30)
            failover.wait_holder(session_id, other_than=holder_pid)
            [(claimed,)] = failover.query(
                "SELECT claimed_at FROM studio_sessionlease WHERE session_id = %s", uuid.UUID(session_id)
            )
            final = await watcher.until(finished(f"[{token} {SENTENCES - 1:02d}]"), limit=60)
        victim_log = failover.cluster.log(failover.worker_named(holder_pid))
        assert victim.returncode == 0, victim_log
        assert "session(s) released" in victim_log
        [held] = re.findall(r"renewals stopped after .* \(leases held until (\S+)\)", victim_log)[-1:]
        expires = datetime.fromisoformat(held)
        assert claimed < expires, f"taken over at {claimed}, the old lease ran until {expires}: {victim_log}"
        assert shown(final).count(f"[{token} 00]") == 1
        requests = failover.essay_requests(token)
        assert len(requests) == 2 and requests[1][1], requests
        assert "".join(failover.transcript_answer(session_id)) == essay(token)
    finally:
        await maria.close()
        failover.ensure_two_workers()


def test_two_workers_racing_for_one_expired_lease_exactly_one_wins(failover: Failover) -> None:
    """Two processes claim the same expired lease at the same instant (both wait on the row's
    lock the test holds, then go together): exactly one gets it, the other gets nothing."""
    import json
    import subprocess
    import sys

    from tests.e2e.conftest import ROOT

    session_id = _plain_session(failover)
    for round_ in range(3):
        dead = f"dead-{uuid.uuid4().hex[:8]}"
        with psycopg.connect(failover.db_url) as conn:  # one transaction: holds the row lock
            conn.execute(
                "INSERT INTO studio_hostworker (id, channel, pid, hostname, started_at, heartbeat_at, expires_at, "
                "stopping) VALUES (%s, 'gone', 1, 'nowhere', now(), now() - interval '1 hour', "
                "now() - interval '1 hour', false)",
                (dead,),
            )
            conn.execute(
                "INSERT INTO studio_sessionlease (session_id, worker_id, expires_at, term, active, claimed_at) "
                "VALUES (%s, %s, now() - interval '1 minute', 7, false, now()) ON CONFLICT (session_id) DO UPDATE "
                "SET worker_id = excluded.worker_id, expires_at = excluded.expires_at, term = 7, active = false",
                (uuid.UUID(session_id), dead),
            )
            conn.commit()
            conn.execute("SELECT 1 FROM studio_sessionlease WHERE session_id = %s FOR UPDATE", (uuid.UUID(session_id),))
            racers = [
                subprocess.Popen(
                    [sys.executable, "-m", "tests.e2e.lease_race_child", session_id, f"racer-{round_}-{n}"],
                    cwd=ROOT, env=failover.cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                )
                for n in range(2)
            ]  # fmt: skip
            deadline = time.monotonic() + 60
            while _waiting_on_locks(failover) < 2:  # both claims are blocked on our row lock
                assert time.monotonic() < deadline and all(r.poll() is None for r in racers), [
                    r.communicate() for r in racers if r.poll() is not None
                ]
                time.sleep(0.02)  # polling pg_stat_activity: the condition is the server's own state
            conn.commit()  # release both at once
        results = [json.loads(r.communicate(timeout=60)[0]) for r in racers]
        winners = [r for r in results if r["term"] is not None]
        assert len(winners) == 1, results
        assert winners[0]["term"] == 8
        [(holder, term)] = failover.query(
            "SELECT worker_id, term FROM studio_sessionlease WHERE session_id = %s", uuid.UUID(session_id)
        )
        assert (holder, term) == (winners[0]["worker"], 8)
    failover.query("DELETE FROM studio_sessionlease WHERE session_id = %s RETURNING 1", uuid.UUID(session_id))
    failover.query("DELETE FROM studio_hostworker WHERE id LIKE 'racer-%%' OR id LIKE 'dead-%%' RETURNING 1")


def _waiting_on_locks(failover: Failover) -> int:
    rows = failover.query(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE %%studio_sessionlease%%'"
    )
    return int(rows[0][0])


def _plain_session(failover: Failover) -> str:
    """A session row nobody uses (created through the ORM-free way a page would: a new-session POST)."""
    import asyncio

    async def create() -> str:
        maria = await User.login(failover.cluster.web_urls[0])
        try:
            return await maria.new_session()
        finally:
            await maria.close()

    return asyncio.run(create())


async def test_a_frozen_worker_that_lost_its_lease_stops_writing_and_drops_the_session(failover: Failover) -> None:
    """SIGSTOP the holder mid-answer (it still holds the store's owner lease on its open
    connection): the other worker claims the expired lease, fences the frozen worker's store
    connection and finishes the turn. When the frozen worker wakes up, its next commit fails and
    its renewal finds the lease gone: it drops the session once, writes nothing, keeps serving."""
    failover.ensure_two_workers()
    token = uuid.uuid4().hex[:8]
    maria = await User.login(failover.cluster.web_urls[0])
    frozen = None
    try:
        session_id = await maria.new_session()
        async with watchers() as watch:
            watcher = await watch(maria, failover.cluster.web_urls[1], session_id)
            await maria.prompt(session_id, f"Write the ESSAY:{token} please")
            await watcher.until(lambda f: f"[{token} 03]" in f)
            holder_pid, term = failover.wait_holder(session_id)
            name = failover.worker_named(holder_pid)
            frozen = failover.cluster.workers[name]
            frozen.send_signal(signal.SIGSTOP)
            new_pid, new_term = failover.wait_holder(session_id, other_than=holder_pid)
            await watcher.until(finished(f"[{token} {SENTENCES - 1:02d}]"), limit=60)
        written = _store_last_seq(failover, session_id)
        woke_at = failover.query("SELECT now()")[0][0]
        frozen.send_signal(signal.SIGCONT)
        dropped = f"session {session_id}: dropped"
        _wait_for(lambda: dropped in failover.cluster.log(name), f"{name} to drop the session")
        # Two heartbeats after waking: had it gone on serving the session, it would have by now.
        _wait_for(lambda: _heartbeats_since(failover, holder_pid, woke_at) >= 2, f"{name} to go on beating")
        log = failover.cluster.log(name)
        assert frozen.poll() is None, log  # alive: it did not crash
        assert log.count(dropped) == 1 and "the lease ended with" not in log, log
        assert _store_last_seq(failover, session_id) == written  # the stale worker wrote nothing
        assert "terminated the store connection" in failover.cluster.log(failover.worker_named(new_pid))
        assert failover.holder(session_id) == (new_pid, new_term) and new_term > term
        requests = failover.essay_requests(token)
        assert len(requests) == 2 and requests[1][1], requests
        assert "".join(failover.transcript_answer(session_id)) == essay(token)
    finally:
        if frozen is not None and frozen.poll() is None:
            frozen.send_signal(signal.SIGCONT)
        await maria.close()
        failover.ensure_two_workers()


def _store_last_seq(failover: Failover, session_id: str) -> int:
    return int(failover.query("SELECT last_seq FROM agentcore.stores WHERE name = %s", session_id)[0][0])


def _heartbeats_since(failover: Failover, pid: int, since: Any) -> int:
    """Whole renewal intervals the worker ``pid`` has beaten through since ``since`` (database time)."""
    rows = failover.query("SELECT heartbeat_at FROM studio_hostworker WHERE pid = %s", pid)
    if not rows or rows[0][0] is None:
        return 0
    return int((rows[0][0] - since).total_seconds() // (LEASE_SECONDS / 4))  # workers beat every quarter lease


def _wait_for(condition: Any, what: str, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)  # polling a log file or a row: the condition itself is what we wait on


async def test_a_browser_watching_the_session_follows_the_new_holder_and_goes_on(
    failover: Failover, browser: Any
) -> None:
    """Chromium keeps the session page open (on the second daphne) while the worker streaming
    its answer is killed: without a reload the page shows the whole answer from the new holder,
    and a follow-up typed into the same page is answered there."""
    from tests.e2e.conftest import Studio, new_page, wait_settled
    from tests.e2e.test_studio_e2e import send

    failover.ensure_two_workers()
    token = uuid.uuid4().hex[:8]
    web = failover.cluster.web_urls[1]
    studio = Studio(web, failover.cluster.data_dir, failover.cluster.base, {"maria": "maria-pass-123"}, Path())
    maria = await User.login(failover.cluster.web_urls[0])
    try:
        session_id = await maria.new_session()
        page: Any = await new_page(browser, studio, "maria")
        await page.goto(studio.url(f"/sessions/{session_id}/"))
        await page.wait_for_selector("#conn-state.on")
        await send(page, f"Write the ESSAY:{token} please")
        await page.wait_for_function(
            "(t) => document.querySelector('#live-blocks')?.textContent.includes(t)", arg=f"[{token} 03]"
        )
        holder_pid, _term = failover.wait_holder(session_id)
        stop(failover.cluster.workers[failover.worker_named(holder_pid)], signal.SIGKILL)
        last = f"[{token} {SENTENCES - 1:02d}]"
        await page.wait_for_function(
            "(t) => !document.querySelector('#live-turn')"
            " && document.querySelector('#conversation').textContent.includes(t)",
            arg=last,
            timeout=60_000,
        )
        text = await page.inner_text("#conversation")
        assert text.count(f"[{token} 00]") == 1 and text.count(last) == 1
        await send(page, "and one more thing")  # typed into the same page: the new holder answers
        await page.wait_for_function(
            "() => document.querySelector('#conversation').textContent.includes('You said: “and one more thing”')",
            timeout=30_000,
        )
        await wait_settled(page)
        assert failover.wait_holder(session_id)[0] != holder_pid
    finally:
        await maria.close()
        failover.ensure_two_workers()
