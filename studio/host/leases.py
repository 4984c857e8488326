"""Session leases (worker mode): which live worker holds which main session, kept in the database.

A worker registers itself (``HostWorker``: its own request channel, a heartbeat) and holds each
session it serves with a ``SessionLease`` row that it renews every quarter of
``STUDIO_LEASE_SECONDS`` (on a thread of its own). All times are the **database's** clock (``Now()``), so workers on
machines whose clocks disagree still agree on who holds what.

- **Claim** is one conditional ``UPDATE``: the row is taken only if it is free or expired (or
  renewed if it is already ours). Two workers racing for the same expired lease both run it;
  the row lock makes the second re-check the condition against the first one's write, so
  exactly one wins. Every claim raises ``term``.
- **Renewal** is one ``UPDATE`` of every lease the worker holds (recording which have work that
  must go on, ``active``); a lease that is no longer ours is *lost*: the host drops the session.
- **Takeover**: each worker sweeps for active leases whose holder is gone (expired, or
  released by a clean shutdown) and claims its share; the new holder opens the store and the
  runtime resumes the open operation by its request id.
- **Fencing**: a worker that froze past its lease (SIGSTOP, a long GC pause) may still hold a
  PostgreSQL store's owner lease (an advisory lock on its connection). The new holder
  terminates that server session — only if the store is held by a registered worker other than
  itself — so the store's own fence makes the stale worker's next commit fail.

``LeaseKeeper`` is the worker's side (the ``SessionLeases`` the host consults); the module's
functions are the plain ORM operations, also used by the web processes to route requests.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import math
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.db import close_old_connections, connection
from django.db.models import Case, Count, DateTimeField, ExpressionWrapper, F, Max, Q, Value, When
from django.db.models.functions import Now

from studio import event_loop
from studio.host.contract import HostError
from studio.models import HostWorker, SessionLease

log = logging.getLogger("studio.leases")

T = TypeVar("T")

#: A worker whose heartbeat is older than this many lease lengths is forgotten (its row deleted;
#: its leases become free). Long, so a frozen worker that wakes up still finds its own row.
REAP_AFTER_LEASES = 30
#: A renewal asked for by a change waits this long for the changes that come with it (a crash
#: sooner than this after a turn starts leaves the session for the next request to move).
COALESCE_S = 0.25


def _in(seconds: float) -> ExpressionWrapper:
    """The database's ``now() + seconds``."""
    return ExpressionWrapper(Now() + timedelta(seconds=seconds), output_field=DateTimeField())


def _live() -> Q:
    return Q(expires_at__gt=Now())


# --- the plain operations (sync ORM; any process) ------------------------------------------------


def register_worker(worker_id: str, channel: str, ttl: float) -> None:
    HostWorker.objects.update_or_create(
        id=worker_id,
        defaults={
            "channel": channel,
            "pid": os.getpid(),
            "hostname": socket.gethostname()[:255],
            "heartbeat_at": Now(),
            "expires_at": _in(ttl),
            "stopping": False,
        },
    )


def heartbeat(worker_id: str, ttl: float) -> bool:
    """Renew the worker's own row; False when it is gone (reaped after a very long freeze)."""
    return bool(HostWorker.objects.filter(id=worker_id).update(heartbeat_at=Now(), expires_at=_in(ttl)))


def claim(root_id: str, worker_id: str, ttl: float) -> int | None:
    """Hold ``root_id`` for ``worker_id``: renew it if ours, else take it if free or expired.
    Returns the lease term, or None when another live worker holds it."""
    if SessionLease.objects.filter(session_id=root_id, worker_id=worker_id).update(expires_at=_in(ttl)):
        return _term(root_id)
    SessionLease.objects.get_or_create(session_id=root_id)
    # A holder whose own heartbeat lapsed is dead even if its last renewal of this lease has a
    # moment left: end the lease now (it changes no holder), then claim as usual. The UPDATE names
    # that holder, so it re-checks against a racer's write: a lease another worker has just
    # claimed is never cut short.
    dead = (
        SessionLease.objects.filter(session_id=root_id, worker__expires_at__lte=Now())
        .values_list("worker_id", flat=True)
        .first()
    )
    if dead is not None:
        SessionLease.objects.filter(session_id=root_id, worker_id=dead).update(expires_at=Now())
    taken = (
        SessionLease.objects.filter(session_id=root_id)
        .filter(Q(worker__isnull=True) | Q(expires_at__isnull=True) | Q(expires_at__lte=Now()))
        .update(worker_id=worker_id, expires_at=_in(ttl), term=F("term") + 1, claimed_at=Now())
    )
    return _term(root_id) if taken else None


def _term(root_id: str) -> int:
    return int(SessionLease.objects.values_list("term", flat=True).get(session_id=root_id))


def renew(worker_id: str, activity: dict[str, bool], ttl: float) -> set[str]:
    """Extend every lease in ``activity`` that is still ours (recording ``active``); returns
    the ones that are (the rest were taken over)."""
    if not activity:
        return set()
    roots = list(activity)
    active = [root for root, busy in activity.items() if busy]
    SessionLease.objects.filter(worker_id=worker_id, session_id__in=roots).update(
        expires_at=_in(ttl),
        active=Case(When(session_id__in=active, then=Value(True)), default=Value(False)),
    )
    return {
        str(r)
        for r in SessionLease.objects.filter(worker_id=worker_id, session_id__in=roots).values_list(
            "session_id", flat=True
        )
    }


def release(root_id: str, worker_id: str, *, active: bool) -> None:
    """Give a lease up at once (a no-op unless it is ours); ``active`` asks for a takeover."""
    SessionLease.objects.filter(session_id=root_id, worker_id=worker_id).update(
        worker=None, expires_at=Now(), active=active
    )


def release_all(worker_id: str, activity: dict[str, bool]) -> None:
    """A clean shutdown: every lease of the worker is free now, the active ones for takeover."""
    leases = SessionLease.objects.filter(worker_id=worker_id)
    active = [root for root, busy in activity.items() if busy]
    leases.update(
        worker=None,
        expires_at=Now(),
        active=Case(When(session_id__in=active, then=Value(True)), default=F("active")),
    )


def orphans(limit: int) -> list[str]:
    """Active sessions nobody holds (the holder died, froze or shut down), oldest first."""
    rows = (
        SessionLease.objects.filter(active=True)
        .filter(
            Q(worker__isnull=True)
            | Q(expires_at__isnull=True)
            | Q(expires_at__lte=Now())
            | Q(worker__expires_at__lte=Now())
        )
        .order_by("expires_at")
        .values_list("session_id", flat=True)[:limit]
    )
    return [str(r) for r in rows]


def live_workers() -> list[tuple[str, str]]:
    """``(id, channel)`` of every live worker that takes sessions."""
    return list(HostWorker.objects.filter(_live(), stopping=False).values_list("id", "channel"))


def holder_channel(root_id: str) -> str | None:
    """The request channel of the live worker holding ``root_id``, if any."""
    row = (
        SessionLease.objects.filter(session_id=root_id, worker__isnull=False, expires_at__gt=Now())
        .filter(worker__expires_at__gt=Now())
        .values_list("worker__channel", flat=True)
        .first()
    )
    return str(row) if row else None


def route(root_id: str) -> str | None:
    """Where a request for ``root_id`` goes: its live holder, else one of the least loaded live
    workers (at random among equals, so a burst of new sessions spreads), else None."""
    holder = holder_channel(root_id)
    if holder is not None:
        return holder
    workers = list(
        HostWorker.objects.filter(_live(), stopping=False)
        .annotate(held=Count("leases", filter=Q(leases__expires_at__gt=Now())))
        .values_list("channel", "held")
    )
    if not workers:
        return None
    fewest = min(held for _channel, held in workers)
    return random.choice([channel for channel, held in workers if held == fewest])


def worker_alive(channel: str) -> bool:
    return HostWorker.objects.filter(_live(), channel=channel).exists()


def stopping(worker_id: str) -> None:
    HostWorker.objects.filter(id=worker_id).update(stopping=True)


def held_until(worker_id: str) -> datetime | None:
    """When the last of the worker's leases would expire (None: it holds none)."""
    latest: datetime | None = SessionLease.objects.filter(worker_id=worker_id).aggregate(latest=Max("expires_at"))[
        "latest"
    ]
    return latest


def unregister(worker_id: str) -> None:
    HostWorker.objects.filter(id=worker_id).delete()


def reap(ttl: float) -> int:
    """Forget workers silent for ``REAP_AFTER_LEASES`` leases (their leases become free)."""
    old = ExpressionWrapper(Now() - timedelta(seconds=ttl * REAP_AFTER_LEASES), output_field=DateTimeField())
    deleted, _ = HostWorker.objects.filter(expires_at__lt=old).delete()
    return int(deleted)


def terminate_stale_owner(error: BaseException, worker_id: str) -> bool:
    """A PostgreSQL store's owner lease is held by a server session (``error`` is agentcore's
    ``store_locked``, which names it): terminate it if it belongs to a registered worker other
    than ``worker_id`` — one that lost this session's lease. An exporter, an offline cancel or
    anything else is never touched. True when the session is gone (retry the open)."""
    backend = (getattr(error, "details", None) or {}).get("backend_pid")
    if not backend or connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT application_name FROM pg_catalog.pg_stat_activity WHERE pid = %s", [int(backend)])
        row = cursor.fetchone()
    if row is None:
        return True  # already gone
    owners = {
        _application_name(pid, hostname): wid
        for wid, pid, hostname in HostWorker.objects.values_list("id", "pid", "hostname")
    }
    if owners.get(str(row[0])) in (None, worker_id):
        return False  # not a worker's, or our own runtime still closing: never terminate it
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_catalog.pg_terminate_backend(pid, 5000) FROM pg_catalog.pg_stat_activity "
            "WHERE pid = %s AND application_name = %s",
            [int(backend), str(row[0])],
        )
        done = cursor.fetchone()
    return bool(done is None or done[0])


def _application_name(pid: int, hostname: str) -> str:
    """How agentcore names an owner's server session (``postgres_target.connect``)."""
    return f"agentcore pid {pid} on {hostname}"[:63]


# --- the worker's side ------------------------------------------------------------------------------


def _fresh(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn`` on this thread's own database connection, closed again if it went stale."""
    close_old_connections()
    try:
        return fn(*args, **kwargs)
    finally:
        close_old_connections()


@dataclass(frozen=True, slots=True)
class Cycle:
    """What one renewal and sweep found: sessions taken over from us, sessions we claimed."""

    lost: list[str]
    claimed: list[str]


class LeaseKeeper:
    """One worker's leases: registration, heartbeat, renewal, takeover sweeps, clean shutdown.

    Implements ``studio.host.contract.SessionLeases``. The heartbeat, the renewal and the sweep's
    claims run every quarter of the lease on a **thread of their own** (``studio-leases``, with its
    own database connection), not on the event loop: a worker whose loop is busy with many
    sessions still renews on time, and a dead worker's sessions are claimed by a live one within a
    quarter of a lease of expiring, whatever its loop is doing. What the thread finds — sessions
    taken over, sessions claimed — is handed to the loop, which drops or opens them.
    """

    def __init__(self, worker_id: str, channel: str, ttl: float, host: Callable[[], Any]) -> None:
        self.worker_id = worker_id
        self.channel = channel
        self.ttl = ttl
        self._host = host
        self._valid: dict[str, float] = {}  # root → monotonic time until which it is surely ours
        self._recorded: dict[str, bool] = {}  # root → the ``active`` flag last seen by note_activity
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="studio-leases")
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._adopting: set[str] = set()
        self._retry_after: dict[str, float] = {}  # a takeover that failed waits a lease length
        self._tasks: set[asyncio.Task[None]] = set()
        self.stopped = False

    @property
    def interval(self) -> float:
        """A renewal and sweep every quarter of the lease: a live worker's lease never comes
        within three missed renewals of expiring, and a dead one's is claimed within a quarter
        lease of expiring."""
        return self.ttl / 4

    async def _db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, lambda: _fresh(fn, *args, **kwargs))

    async def register(self) -> None:
        await self._db(register_worker, self.worker_id, self.channel, self.ttl)

    async def start(self) -> None:
        """Register, then heartbeat, renew and sweep every quarter of the lease until shutdown."""
        await self.register()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="studio-leases-renewal", daemon=True)
        self._thread.start()
        log.info(
            "worker %s (pid %d) registered on %s (%s event loop)",
            self.worker_id,
            os.getpid(),
            self.channel,
            event_loop.running(),
        )

    # -- SessionLeases ----------------------------------------------------------------------

    async def acquire(self, root_id: str) -> int:
        if self.stopped:
            # No holder to name yet (the sweep that takes the session over has not run): an
            # empty "moved" sends the client to a fresh route. Any text here would be taken for
            # the holder's channel.
            raise HostError("moved", "")
        started = time.monotonic()
        term = await self._db(claim, root_id, self.worker_id, self.ttl)
        if term is None:
            holder = await self._db(holder_channel, root_id)
            raise HostError("moved", holder or "")
        self._valid[root_id] = started + self.ttl * 0.8
        return term

    def holds(self, root_id: str) -> bool:
        return self._valid.get(root_id, 0.0) > time.monotonic()

    async def release(self, root_id: str, *, active: bool) -> None:
        self._valid.pop(root_id, None)
        await self._db(release, root_id, self.worker_id, active=active)

    async def unlock_store(self, root_id: str, error: BaseException) -> bool:
        fenced = await self._db(terminate_stale_owner, error, self.worker_id)
        if fenced:
            log.warning("session %s: terminated the store connection of the worker that lost its lease", root_id)
        return fenced

    def note_activity(self, root_id: str, active: bool) -> None:
        """A session went from idle to having work (or back): renew now, so the lease row says
        so before a crash right after a turn starts could hide it (changes that come together
        are recorded by one renewal)."""
        if self._recorded.get(root_id) != active:
            self._recorded[root_id] = active
            self._wake.set()

    # -- the renewal thread ----------------------------------------------------------------------

    def sweep_soon(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                found = self._cycle()
            except Exception:
                log.exception("lease renewal or sweep failed; retrying")
            else:
                if self._loop is not None and not self._loop.is_closed():
                    self._loop.call_soon_threadsafe(self._spawn_apply, found)
            if self._wake.wait(self.interval):
                # Woken by a change: those that come in a burst (fifty turns starting at once)
                # are recorded by one renewal.
                self._stop.wait(COALESCE_S)
            self._wake.clear()

    def _cycle(self) -> Cycle:
        """Heartbeat, renew what the host holds, claim this worker's share of orphaned active
        sessions (sync: the renewal thread's own database connection)."""
        return _fresh(self._cycle_now)

    def _cycle_now(self) -> Cycle:
        host = self._host()
        started = time.monotonic()
        if not heartbeat(self.worker_id, self.ttl):
            register_worker(self.worker_id, self.channel, self.ttl)
        activity = host.activity()
        kept = renew(self.worker_id, activity, self.ttl)
        lost = []
        for root_id in activity:
            if root_id in kept:
                self._valid[root_id] = started + self.ttl * 0.8
            else:
                self._valid.pop(root_id, None)
                lost.append(root_id)
        claimed = self._claims()
        if random.random() < 0.05:
            reap(self.ttl)
        return Cycle(lost=lost, claimed=claimed)

    def _claims(self) -> list[str]:
        if self.stopped:
            return []
        candidates = orphans(200)
        if not candidates:
            return []
        quota = math.ceil(len(candidates) / max(1, len(live_workers())))
        claimed: list[str] = []
        for root_id in candidates:
            if quota <= 0 or self.stopped:
                break
            if root_id in self._adopting or self._retry_after.get(root_id, 0.0) > time.monotonic():
                continue
            started = time.monotonic()
            term = claim(root_id, self.worker_id, self.ttl)
            if term is None:
                continue  # another worker won it
            quota -= 1
            self._valid[root_id] = started + self.ttl * 0.8
            log.info("session %s: taken over (term %d)", root_id, term)
            claimed.append(root_id)
        return claimed

    def _spawn_apply(self, found: Cycle) -> None:
        self._spawn(self._apply(found))

    async def _apply(self, found: Cycle) -> None:
        host = self._host()
        for root_id in found.lost:
            await host.drop(root_id, "its lease was taken over by another worker")
        for root_id in found.claimed:
            self._adopting.add(root_id)
            self._spawn(self._adopt(host, root_id))

    async def tick(self) -> None:
        """One renewal and sweep now, its drops and openings awaited (tests, a clean start)."""
        found = await self._db(self._cycle_now)
        await self._apply(found)

    async def _adopt(self, host: Any, root_id: str) -> None:
        self._adopting.add(root_id)
        try:
            await host.adopt(root_id)
            self._retry_after.pop(root_id, None)
        except Exception as exc:
            self._retry_after[root_id] = time.monotonic() + self.ttl
            log.warning("session %s: could not take over: %s", root_id, getattr(exc, "message", None) or exc)
        finally:
            self._adopting.discard(root_id)

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work, context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def shutdown(self, peers: Callable[[list[str]], Any]) -> None:
        """Clean shutdown: take no new sessions, close every runtime (their store locks go),
        then free every lease at once — the active ones for takeover — and tell the live
        workers (``peers(channels)``) to sweep now instead of at their next tick.

        The log line says how long each phase took and until when the leases were held once
        renewals stopped: a handover slower than that lease is visible as such."""
        started = time.monotonic()
        self.stopped = True
        await self._db(stopping, self.worker_id)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, self.ttl)
        held = await self._db(held_until, self.worker_id)
        renewals_stopped = time.monotonic() - started
        for task in list(self._tasks):
            task.cancel()
        activity = await self._host().close()
        closed = time.monotonic() - started
        await self._db(release_all, self.worker_id, activity)
        released = time.monotonic() - started
        channels = [channel for worker, channel in await self._db(live_workers) if worker != self.worker_id]
        with contextlib.suppress(Exception):
            await peers(channels)
        await self._db(unregister, self.worker_id)
        self._executor.shutdown(wait=False)
        log.info(
            "worker %s stopped; %d session(s) released: renewals stopped after %.2f s (leases held until %s), "
            "runtimes closed after %.2f s, leases released after %.2f s",
            self.worker_id,
            len(activity),
            renewals_stopped,
            held.isoformat() if held else "-",
            closed,
            released,
        )
