"""Session leases (issue 18, W7): claims, renewals, takeover sweeps and request routing through
Studio's database, and the session host's side of them (``LeaseKeeper``).

The operations run against the test database exactly as workers run them; the multi-process
race and real worker deaths are in ``tests/e2e/test_failover.py``.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db.models import DateTimeField, ExpressionWrapper
from django.db.models.functions import Now

from studio.host import leases
from studio.host.contract import HostError
from studio.host.session_host import SessionHost
from studio.models import HostWorker, SessionLease

pytestmark = pytest.mark.django_db(transaction=True)


def _expire(root_id: str) -> None:
    past = ExpressionWrapper(Now() - timedelta(seconds=1), output_field=DateTimeField())
    SessionLease.objects.filter(session_id=root_id).update(expires_at=past)


def _expire_worker(worker_id: str) -> None:
    past = ExpressionWrapper(Now() - timedelta(seconds=1), output_field=DateTimeField())
    HostWorker.objects.filter(id=worker_id).update(expires_at=past)


def _sessions(make_session: Any, user: Any, count: int) -> list[str]:
    return [str(make_session(user).pk) for _ in range(count)]


def test_a_claim_is_exclusive_until_the_lease_expires_and_each_claim_raises_the_term(
    user: Any, make_session: Any
) -> None:
    [root] = _sessions(make_session, user, 1)
    for worker in ("a", "b"):
        leases.register_worker(worker, f"chan-{worker}", 30)
    assert leases.claim(root, "a", 30) == 1
    assert leases.claim(root, "b", 30) is None  # a live holder keeps it
    assert leases.claim(root, "a", 30) == 1  # renewing our own lease is not a new term
    assert leases.holder_channel(root) == "chan-a"
    _expire(root)
    assert leases.holder_channel(root) is None
    assert leases.claim(root, "b", 30) == 2
    assert leases.renew("a", {root: True}, 30) == set()  # a lost it: its host must drop it
    assert leases.renew("b", {root: True}, 30) == {root}
    assert leases.holder_channel(root) == "chan-b"
    _expire_worker("b")  # b's heartbeat lapsed: its lease is over, whatever its own expiry says
    assert leases.holder_channel(root) is None
    assert leases.claim(root, "a", 30) == 3


def test_only_active_sessions_without_a_live_holder_are_taken_over(user: Any, make_session: Any) -> None:
    """A dead holder's busy sessions are orphans (claimed without waiting for a request); its
    idle ones are claimed by whoever next asks. A release names whether work must go on."""
    busy, idle, handed_over, closed = _sessions(make_session, user, 4)
    leases.register_worker("a", "chan-a", 30)
    for root in (busy, idle, handed_over, closed):
        assert leases.claim(root, "a", 30) == 1
    assert leases.renew("a", {busy: True, idle: False, handed_over: True, closed: False}, 30) == {
        busy,
        idle,
        handed_over,
        closed,
    }
    assert leases.orphans(10) == []  # a live holder has them all
    leases.release(handed_over, "a", active=True)
    leases.release(closed, "a", active=False)
    assert leases.orphans(10) == [handed_over]
    for root in (busy, idle):
        _expire(root)
    assert sorted(leases.orphans(10)) == sorted([busy, handed_over])
    leases.register_worker("b", "chan-b", 30)
    assert leases.claim(busy, "b", 30) == 2
    assert leases.orphans(10) == [handed_over]


def test_requests_go_to_the_holder_else_to_a_least_loaded_live_worker(user: Any, make_session: Any) -> None:
    held, other, fresh = _sessions(make_session, user, 3)
    for worker in ("a", "b", "stopping", "dead"):
        leases.register_worker(worker, f"chan-{worker}", 30)
    leases.stopping("stopping")
    _expire_worker("dead")
    assert {leases.route(fresh) for _ in range(60)} == {"chan-a", "chan-b"}  # equals share a burst
    leases.claim(held, "a", 30)
    leases.claim(other, "a", 30)
    assert leases.route(held) == "chan-a"
    assert {leases.route(fresh) for _ in range(20)} == {"chan-b"}  # the least loaded
    leases.stopping("b")
    assert leases.route(fresh) == "chan-a"
    leases.stopping("a")
    assert leases.route(fresh) is None
    assert leases.live_workers() == []


async def test_a_host_drops_a_session_taken_over_and_then_points_requests_to_the_holder(
    user: Any, make_session: Any, caplog: Any
) -> None:
    host: SessionHost
    keeper = leases.LeaseKeeper("w1", "chan-w1", 30, lambda: host)
    host = SessionHost(flush_interval=0.01, leases=keeper)
    try:
        await keeper.register()
        session = await sync_to_async(make_session)(user)
        root = str(session.pk)
        state = await host.state(root)  # opening the session claims its lease
        assert state.term == 1 and keeper.holds(root)

        def taken_over() -> None:
            leases.register_worker("w2", "chan-w2", 30)
            _expire(root)
            assert leases.claim(root, "w2", 30) == 2

        await sync_to_async(taken_over)()
        with caplog.at_level(logging.WARNING, logger="studio.hosts"):
            await keeper.tick()  # the renewal finds the lease gone
        assert root not in host._sessions and not keeper.holds(root)
        assert [r.getMessage() for r in caplog.records].count(
            f"session {root}: dropped (its lease was taken over by another worker); its new holder resumes it"
        ) == 1
        with pytest.raises(HostError) as err:
            await host.state(root)
        assert (err.value.code, err.value.message) == ("moved", "chan-w2")
    finally:
        await host.close()


async def test_a_sweep_takes_over_a_dead_workers_busy_session_without_a_request(user: Any, make_session: Any) -> None:
    """The sweep claims an orphaned active session (here: a plan waiting for review) and opens
    it under a new term, so its pages follow the new holder before anyone asks."""
    dead_host: SessionHost
    dead = leases.LeaseKeeper("dead", "chan-dead", 30, lambda: dead_host)
    dead_host = SessionHost(flush_interval=0.01, leases=dead)
    host: SessionHost
    keeper = leases.LeaseKeeper("alive", "chan-alive", 30, lambda: host)
    host = SessionHost(flush_interval=0.01, leases=keeper)
    try:
        await dead.register()
        session = await sync_to_async(make_session)(user)
        root = str(session.pk)
        await dead_host.prompt(root, prompt="add a todo list", agent="plan")
        await dead_host.wait_idle(root)
        await dead.tick()  # its renewal records the waiting plan as work that must go on
        for hs in list(dead_host._sessions.values()):  # the process dies: no release
            await dead_host._close(hs)
        await sync_to_async(_expire)(root)
        await sync_to_async(_expire_worker)("dead")
        assert await sync_to_async(leases.orphans)(10) == [root]

        await keeper.register()
        await keeper.tick()
        await asyncio.gather(*keeper._tasks)  # the adoption it started
        assert host._sessions[root].term == 2
        state = await host.state(root)
        assert state.term == 2 and (state.context() or {}).get("status") == "paused"
        assert await sync_to_async(leases.holder_channel)(root) == "chan-alive"
        assert await sync_to_async(leases.orphans)(10) == []
    finally:
        await host.close()
        dead_host._sessions.clear()
        await dead_host.close()
