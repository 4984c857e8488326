"""Studio on PostgreSQL with session-host failover: how long a takeover takes, and what a second
worker buys under load (issue 18). Not a timed test: run it by hand and put the numbers in
docs/benchmarks.md.

Starts a private PostgreSQL server (``tests/pg.py``, durable settings), redis-server, daphne and
``runworker studio-host`` workers, all configured with one ``STUDIO_DATABASE_URL``, and a
scripted provider in this process (``tests/e2e/failover_model.py``: small text chunks paced
at 50 ms). It listens to the sessions' channel-layer groups directly, so it sees every push with
its host ``epoch`` and lease ``term``.

1. **Failover time** (``--kills``, default 20): a session streams a long answer; SIGKILL the
   worker holding it; measure from the kill to the first push of the *new* holder (a higher
   lease term; its full render of the store) — what a watching page sees — and to its first push
   with text it streamed itself (the resumed answer). The killed
   worker is restarted before the next round, so two workers are always up. Expected: the
   lease's remaining time (⅔–1 lease, since it is renewed every third) plus up to one sweep
   interval (⅓ lease) plus opening the store.
2. **Load** (``--sessions``, default 200): that many new sessions get a prompt at once, with one
   worker and then with two (a fresh cluster each); time to first token = prompt POST → the
   first push carrying answer text (the session's store is created and opened on the way).

Usage: ``python bench/studio_failover.py [--lease 10] [--kills 20] [--sessions 200] [--workers 1,2]``;
``--quick`` for a smoke run (3 kills, 20 sessions). Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e.cluster import StudioCluster, User, make_cluster, stop  # noqa: E402
from tests.pg import PostgresCluster  # noqa: E402


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _summary(values: list[float]) -> str:
    return (
        f"n={len(values)} p50 {statistics.median(values):.2f}s  p95 {_pct(values, 0.95):.2f}s  "
        f"max {max(values):.2f}s  min {min(values):.2f}s"
    )


def _more_connections(pg: PostgresCluster, count: int) -> None:
    """Every open store holds a connection: restart the private server with room for the load
    run (the test cluster allows 200); same address, socket directory and port."""
    pg_ctl = [*pg._as_postgres, str(pg.bindir / "pg_ctl")]
    data = str(pg.root / "data")
    options = f"-c listen_addresses=127.0.0.1 -k {pg.root} -c max_connections={count} -p {pg.port}"
    for args in (
        ["stop", "-w", "-m", "fast", "-D", data],
        ["start", "-w", "-D", data, "-l", str(pg.root / "server.log"), "-o", options],
    ):
        subprocess.run([*pg_ctl, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=True)


class Bench:
    def __init__(self, pg: PostgresCluster, provider_url: str, lease: float) -> None:
        self.pg = pg
        self.provider_url = provider_url
        self.lease = lease

    def cluster(self, workers: int, *, webs: int = 1) -> tuple[StudioCluster, str]:
        db = self.pg.create_database(f"bench_{uuid.uuid4().hex[:8]}")
        base = Path(tempfile.mkdtemp(prefix="studio-failover-bench-"))
        cluster = make_cluster(
            base,
            {
                "STUDIO_DATABASE_URL": db,
                "STUDIO_LEASE_SECONDS": str(self.lease),
                "STUDIO_HOST_TIMEOUT": "120",
                "STUDIO_RUNTIME_FACTORY": "tests.e2e.failover_model.open_runtime",
                "STUDIO_FAKE_PROVIDER_URL": self.provider_url,
            },
        )
        try:
            for n in range(webs):
                cluster.start_web(f"web-{n}")
            for n in range(workers):
                cluster.start_worker(f"worker-{n}")
            for n in range(workers):
                cluster.wait_registered(f"worker-{n}")
        except BaseException:
            cluster.close()
            raise
        return cluster, db


async def _layer(cluster: StudioCluster) -> Any:
    from channels_redis.core import RedisChannelLayer

    from studio.redis_host import redis_host

    return RedisChannelLayer(hosts=[redis_host(cluster.env["STUDIO_REDIS_URL"])], capacity=5000, expiry=120)


async def _listen(layer: Any, session_id: str) -> str:
    channel = await layer.new_channel()
    await layer.group_add(f"session-{session_id}", channel)
    return channel


def _holder(db: str, session_id: str) -> tuple[int, int] | None:
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        row = conn.execute(
            "SELECT w.pid, l.term FROM studio_sessionlease l JOIN studio_hostworker w ON w.id = l.worker_id "
            "WHERE l.session_id = %s AND l.expires_at > now()",
            (uuid.UUID(session_id),),
        ).fetchone()
    return (int(row[0]), int(row[1])) if row else None


async def failover_times(bench: Bench, kills: int) -> tuple[list[float], list[float]]:
    from tests.e2e.failover_model import SENTENCES  # needs Django set up (main does it)

    cluster, db = bench.cluster(2)
    layer = await _layer(cluster)
    first_push: list[float] = []
    first_text: list[float] = []
    try:
        user = await User.login(cluster.base_url)
        for round_ in range(kills):
            token = uuid.uuid4().hex[:8]
            session_id = await user.new_session()
            channel = await _listen(layer, session_id)
            await user.prompt(session_id, f"Write the ESSAY:{token}")
            seen = 0
            while True:  # text is streaming from the holder
                push = await asyncio.wait_for(layer.receive(channel), 60)
                seen = max([seen, *[int(n) for n in _sentences(push["html"], token)]])
                if seen >= 3:
                    term = int(push.get("term") or 0)
                    break
            holder = _holder(db, session_id)
            assert holder is not None
            name = next(n for n, p in cluster.workers.items() if p.pid == holder[0])
            killed = time.monotonic()
            stop(cluster.workers[name], signal.SIGKILL)
            took_push = None
            while True:
                push = await asyncio.wait_for(layer.receive(channel), 120)
                numbers = [int(n) for n in _sentences(push["html"], token)]
                if int(push.get("term") or 0) <= term:
                    seen = max([seen, *numbers])  # still in flight from the dead holder
                    continue
                if took_push is None:  # the new holder's first push: a full render of the store
                    took_push = time.monotonic() - killed
                    seen = max([seen, *numbers])
                    continue
                if any(n > seen for n in numbers):  # text the new holder streamed itself
                    first_text.append(time.monotonic() - killed)
                    break
            first_push.append(took_push)
            last = f"[{token} {SENTENCES - 1:02d}]"
            while last not in push["html"]:  # let the answer finish: every round starts from calm
                push = await asyncio.wait_for(layer.receive(channel), 120)
            print(f"  kill {round_ + 1}/{kills}: new holder's first push {took_push:.2f}s, "
                  f"new text {first_text[-1]:.2f}s", flush=True)  # fmt: skip
            await layer.group_discard(f"session-{session_id}", channel)
            cluster.start_worker(name)
            cluster.wait_registered(name)
        await user.close()
    finally:
        await layer.close_pools()
        cluster.close()
    return first_push, first_text


def _sentences(html: str, token: str) -> list[str]:
    import re

    return re.findall(rf"\[{token} (\d\d)\]", html)


async def load_ttft(bench: Bench, workers: int, sessions: int) -> tuple[list[float], float]:
    """TTFT of ``sessions`` prompts sent at once; returns the TTFTs and the wall time for all."""
    import httpx

    cluster, _db = bench.cluster(workers, webs=2)
    layer = await _layer(cluster)
    try:
        users = [await User.login(url) for url in cluster.web_urls]
        for user in users:  # a prompt's answer waits for its store to open: long under this load
            user.http.timeout = httpx.Timeout(300)
        ids = [await users[n % len(users)].new_session() for n in range(sessions)]
        channels = [await _listen(layer, sid) for sid in ids]
        ttft: list[float] = []

        async def one(n: int) -> None:
            token = uuid.uuid4().hex[:8]
            sent = time.monotonic()
            await users[n % len(users)].prompt(ids[n], f"BRIEF:{token}")
            while True:
                push = await asyncio.wait_for(layer.receive(channels[n]), 300)
                if f"[{token} 00]" in push["html"]:
                    ttft.append(time.monotonic() - sent)
                    return

        started = time.monotonic()
        await asyncio.gather(*(one(n) for n in range(sessions)))
        wall = time.monotonic() - started
        for user in users:
            await user.close()
    finally:
        await layer.close_pools()
        cluster.close()
    return ttft, wall


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lease", type=float, default=1.5, help="STUDIO_LEASE_SECONDS (default 1.5, as Studio's)")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="3 kills, 20 sessions")
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument("--skip-failover", action="store_true")
    parser.add_argument("--workers", default="1,2", help="worker counts of the load runs (default 1,2)")
    args = parser.parse_args()
    if args.quick:
        args.kills, args.sessions = 3, 20
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
    scratch = tempfile.TemporaryDirectory(prefix="studio-failover-bench-self-")
    os.environ.setdefault("STUDIO_DATA_DIR", scratch.name)
    import django

    django.setup()  # the provider's responder lives next to the workers' runtime factory
    from agentcore.testing.fake_server import FakeProviderServer
    from tests.e2e.failover_model import responder

    pg = PostgresCluster.start(durable=True)
    provider = FakeProviderServer(responder=responder).start_in_thread()
    try:
        _more_connections(pg, max(200, 2 * args.sessions + 100))
        bench = Bench(pg, provider.base_url, args.lease)
        print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; lease {args.lease:g}s", flush=True)
        if not args.skip_failover:
            pushes, texts = await failover_times(bench, args.kills)
            print(f"failover, SIGKILL → new holder's first push: {_summary(pushes)}")
            print(f"failover, SIGKILL → first new text:         {_summary(texts)}")
        if not args.skip_load:
            for workers in [int(n) for n in args.workers.split(",")]:
                ttft, wall = await load_ttft(bench, workers, args.sessions)
                print(
                    f"{args.sessions} sessions at once, {workers} worker(s): TTFT {_summary(ttft)}; "
                    f"all first tokens within {wall:.2f}s",
                    flush=True,
                )
    finally:
        provider.stop_in_thread()
        pg.stop()
        scratch.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
