"""W7 on one machine without PostgreSQL: Redis channel layer, one daphne and two ``runworker
studio-host`` workers, Studio's SQLite database and SQLite session stores.

Sessions are leased to workers through Studio's database (``studio.host.leases``): a new session
goes to the least loaded live worker, which holds its store's owner lock (agentcore's
``<store>.lock`` records the holder's pid). The tests drive sessions the way a browser does —
HTTP commands and the session WebSocket — and kill workers to see their sessions move.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import StudioCluster, User, finished, make_cluster, stop, watchers

pytestmark = pytest.mark.e2e

LEASE_SECONDS = 3.0


def store(cluster: StudioCluster, session_id: str) -> Path:
    return cluster.data_dir / "sessions" / f"{session_id}.sqlite"


def lock_holder(cluster: StudioCluster, session_id: str) -> int | None:
    text = Path(str(store(cluster, session_id)) + ".lock").read_text().strip()
    return int(text) if text else None


def lease_holder(cluster: StudioCluster, session_id: str) -> int | None:
    """The pid of the live worker holding the session's lease (Studio's SQLite database)."""
    with sqlite3.connect(cluster.data_dir / "studio.sqlite3") as conn:
        row = conn.execute(
            "SELECT w.pid FROM studio_sessionlease l JOIN studio_hostworker w ON w.id = l.worker_id "
            "WHERE l.session_id = ? AND l.expires_at > strftime('%Y-%m-%d %H:%M:%f', 'now')",
            (uuid.UUID(session_id).hex,),
        ).fetchone()
    return int(row[0]) if row else None


def wait_lease_holder(cluster: StudioCluster, session_id: str, other_than: int | None = None) -> int:
    deadline = time.monotonic() + 30
    while (pid := lease_holder(cluster, session_id)) is None or pid == other_than:
        assert time.monotonic() < deadline, f"no live holder of {session_id}"
        time.sleep(0.05)  # polling the database: the condition is the lease row itself
    return pid


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StudioCluster]:
    base = Path(tmp_path_factory.mktemp("studio-scale"))
    env = {"STUDIO_LEASE_SECONDS": str(LEASE_SECONDS), "AGENTCORE_DEMO_DELAY_MS": "25", "AGENTCORE_DEMO_CHUNK": "6"}
    cluster = make_cluster(base, env)
    try:
        cluster.start_web("web")
        for name in ("worker-0", "worker-1"):
            cluster.start_worker(name)
        for name in ("worker-0", "worker-1"):
            cluster.wait_registered(name)
        yield cluster
    finally:
        cluster.close()


def ensure_two_workers(cluster: StudioCluster) -> None:
    for name in ("worker-0", "worker-1"):
        if cluster.workers[name].poll() is not None:
            cluster.start_worker(name)
            cluster.wait_registered(name)


async def test_two_sessions_stream_from_two_worker_processes(cluster: StudioCluster) -> None:
    """New sessions spread over the live workers; each store is held by exactly one of them,
    the one holding its lease, and a second prompt goes back to that same worker."""
    from agentcore.errors import StoreError
    from agentcore.harness.lease import OwnerLease, lock_path_for

    ensure_two_workers(cluster)
    maria = await User.login(cluster.base_url)
    async with watchers() as watch:
        sessions, views = [], []
        for _ in range(2):  # one after the other: the second sees the first one's lease
            sid = await maria.new_session()
            views.append(await watch(maria, cluster.base_url, sid))
            sessions.append(sid)
        prompts = [f"Tell me about session {n} of the " + "patient redis cluster " * 3 for n in range(2)]
        for sid, text in zip(sessions, prompts, strict=True):
            await maria.prompt(sid, text)
        finals = await asyncio.gather(*(w.until(finished("patient redis cluster")) for w in views))
        for watcher, final in zip(views, finals, strict=True):
            assert "offline demo model" in final
            marks = ('class="block md"', '-open" hx-swap', "-tail")  # a text block, or what it gained
            streamed = [f for f in watcher.frames if any(mark in f for mark in marks)]
            assert len(streamed) >= 3, "not streamed"  # the answer came in several pushes
        holders = [lease_holder(cluster, sid) for sid in sessions]
        assert sorted(h for h in holders if h) == sorted(p.pid for p in cluster.workers.values())
        assert [lock_holder(cluster, sid) for sid in sessions] == holders  # the lease holder owns the store
        for sid in sessions:  # and nobody else can open it while that worker has it
            with pytest.raises(StoreError) as err:
                OwnerLease.acquire(lock_path_for(store(cluster, sid)))
            assert err.value.code == "store_locked"
        await maria.prompt(sessions[0], "One more answer, please")
        await views[0].until(finished("One more answer, please"))
        assert lease_holder(cluster, sessions[0]) == lock_holder(cluster, sessions[0]) == holders[0]
    await maria.close()


async def test_a_paused_plan_moves_to_the_other_worker_and_builds(cluster: StudioCluster) -> None:
    """A run paused for plan review survives its worker's SIGKILL: the other worker takes the
    session over and approving the plan builds there."""
    ensure_two_workers(cluster)
    maria = await User.login(cluster.base_url)
    async with watchers() as watch:
        session_id = await maria.new_session(mode="plan")
        watcher = await watch(maria, cluster.base_url, session_id)
        await maria.prompt(session_id, "Plan a todo app with due dates", agent="plan")
        await watcher.until(lambda f: 'id="approve-plan"' in f and "pill-waiting" in f)
        old = wait_lease_holder(cluster, session_id)
        victim = next(name for name, p in cluster.workers.items() if p.pid == old)
        stop(cluster.workers[victim], signal.SIGKILL)  # a crash: the lock goes with the process
        new = wait_lease_holder(cluster, session_id, other_than=old)
        await maria.approve(session_id)
        final = await watcher.until(finished("approved plan"))
        assert "Plan approved" in final
        assert lock_holder(cluster, session_id) == new
    page = await maria.http.get(f"/sessions/{session_id}/")
    assert "approved plan" in page.text and 'id="approve-plan"' not in page.text
    await maria.close()


async def test_a_run_killed_mid_stream_is_resumed_by_the_other_worker(cluster: StudioCluster) -> None:
    """A worker dies mid-answer; the other worker resumes the same run and the open page follows."""
    ensure_two_workers(cluster)
    maria = await User.login(cluster.base_url)
    async with watchers() as watch:
        session_id = await maria.new_session()
        watcher = await watch(maria, cluster.base_url, session_id)
        await maria.prompt(session_id, "Write a long note about " + "resilient session hosts " * 12)
        await watcher.until(lambda f: 'class="block md"' in f)  # text is streaming
        old = wait_lease_holder(cluster, session_id)
        stop(next(p for p in cluster.workers.values() if p.pid == old), signal.SIGKILL)
        final = await watcher.until(finished("offline demo model"))
        assert "continued after an interruption" in final
        assert final.count('class="bubble') == 1  # still one prompt: the run resumed, not restarted
        assert lock_holder(cluster, session_id) == wait_lease_holder(cluster, session_id) != old
    await maria.close()
    ensure_two_workers(cluster)
