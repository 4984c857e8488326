"""PostgreSQL store benchmark: PostgresStorage against raw psycopg doing the same work, one run.

    python bench/store_postgres.py [--quick]

Starts a private, durable PostgreSQL server (``tests/pg.py``: fsync and synchronous_commit on,
loopback TCP), so it needs Debian's ``postgresql`` package and the ``postgres`` extra.

- commits/s, twice: with the server's defaults (every commit waits for its WAL flush, so the
  disk's fsync dominates) and with ``synchronous_commit=off`` set through the URL
  (``?options=-c synchronous_commit=off``: what SQLite's ``synchronous=normal`` promises — a
  commit survives the agent process dying at any instant; a *server* crash may lose the last
  few — which shows the per-commit cost of the code itself). Fragment-sized commits (one small
  entry + one register write) and tool-result commits (one ~4 KB entry + one register write).
  Two baselines on the same server, same tables, payloads ``json.dumps``-ed as ours are:
  ``raw SQL``: the hand-written way — one transaction of plain statements (``UPDATE stores ...
  WHERE fence AND last_seq RETURNING``, ``INSERT`` the entry, upsert the register, ``COMMIT``),
  each statement one round trip; ``raw fn``: raw psycopg calling our ``apply_commit`` with the
  same arguments (the floor of this design: what remains is our Python).
- resume (open + load) of 10k and 100k entries. Baseline: raw connect + ``SELECT`` of every
  entry row + ``json.loads`` of each payload.
- export of the 100k-entry store to a SQLite file. Baseline: raw ``SELECT`` of the same rows and
  ``executemany`` into a SQLite table.
- what a synchronous commit costs the event loop: ours inline vs ``asyncio.to_thread(commit)``.

Ratios are baseline time / ours (1.00 = as fast as the baseline; the goal is >= 0.7 against raw
SQL). Rounds are interleaved and medians reported, since the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg

from agentcore.harness import Commit, Entry, RegisterWrite, SqliteStorageFactory, export_agent_database
from agentcore.harness.postgres_store import PostgresStorage, postgres_storage
from tests.pg import PostgresCluster

FRAGMENT = {"type": "text_delta", "text": "a few streamed tokens "}
TOOL_RESULT = {"type": "tool_result", "call_id": "call-1", "content": "x" * 4000}
SYNC_OFF = "?options=-c%20synchronous_commit%3Doff"


def new_store(dsn: str) -> PostgresStorage:
    return postgres_storage(dsn, f"bench-{uuid.uuid4().hex}").open()[0]


def ours(dsn: str, payload: dict[str, object], count: int) -> float:
    store = new_store(dsn)
    start = time.perf_counter()
    parent = None
    for n in range(count):
        entry_id = f"e{n}"
        store.commit(
            Commit(
                entries=[Entry(entry_id, "main", parent, "fragment", payload)],
                registers=[RegisterWrite("op/main", {"state": "streaming", "entry": entry_id})],
            )
        )
        parent = entry_id
    elapsed = time.perf_counter() - start
    store.close()
    return elapsed


def raw_sql(dsn: str, payload: dict[str, object], count: int) -> float:
    store = new_store(dsn)  # the same schema and a store row of its own, then plain psycopg
    store_id, fence = store.store_id, store._fence
    store.close()
    conn = psycopg.connect(dsn, autocommit=True)
    cur = conn.cursor()
    start = time.perf_counter()
    parent = None
    for n in range(count):
        entry_id = f"e{n}"
        with conn.transaction():
            cur.execute(
                "UPDATE agentcore.stores SET last_seq = last_seq + 1 WHERE store_id = %s AND fence = %s "
                "AND last_seq = %s RETURNING last_seq",
                (store_id, fence, n),
            )
            row = cur.fetchone()
            assert row is not None
            seq = row[0]
            cur.execute(
                "INSERT INTO agentcore.entries (store_id, seq, idx, id, conversation_id, parent_id, kind, payload) "
                "VALUES (%s, %s, 1, %s, %s, %s, %s, %s)",
                (store_id, seq, entry_id, "main", parent, "fragment", json.dumps(payload)),
            )
            cur.execute(
                "INSERT INTO agentcore.registers (store_id, key, value, seq, idx) VALUES (%s, %s, %s, %s, 1) "
                "ON CONFLICT (store_id, key) DO UPDATE SET value = excluded.value, seq = excluded.seq",
                (store_id, "op/main", json.dumps({"state": "streaming", "entry": entry_id}), seq),
            )
        parent = entry_id
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def raw_fn(dsn: str, payload: dict[str, object], count: int) -> float:
    store = new_store(dsn)
    store_id, fence, query = store.store_id, store._fence, store._q.apply
    store.close()
    conn = psycopg.connect(dsn, autocommit=True)
    cur = conn.cursor()
    start = time.perf_counter()
    parent, last = None, 0
    for n in range(count):
        entry_id = f"e{n}"
        cur.execute(
            query,
            (store_id, fence, last, [entry_id], ["main"], [parent], ["fragment"], [json.dumps(payload)],
             ["op/main"], [json.dumps({"state": "streaming", "entry": entry_id})], [None],
             [], [], [], [], [], [], [], [], []),
        )  # fmt: skip
        row = cur.fetchone()
        assert row is not None
        last = row[0]
        parent = entry_id
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def build(dsn: str, name: str, entries: int, payload: dict[str, object], batch: int = 1000) -> None:
    store = postgres_storage(dsn, name).open()[0]
    parent = None
    for first in range(0, entries, batch):
        rows = []
        for n in range(first, min(first + batch, entries)):
            rows.append(Entry(f"e{n}", "main", parent, "fragment", payload))
            parent = f"e{n}"
        store.commit(Commit(entries=rows, registers=[RegisterWrite("op/main", {"entry": parent})]))
    store.close()


def resume_ours(dsn: str, name: str) -> float:
    start = time.perf_counter()
    store = postgres_storage(dsn, name).open()[0]
    state = store.load()
    elapsed = time.perf_counter() - start
    assert state.entries
    store.close()
    return elapsed


def resume_raw(dsn: str, name: str) -> float:
    start = time.perf_counter()
    conn = psycopg.connect(dsn, autocommit=True)
    loads = json.loads
    rows = [
        (i, c, p, k, loads(v), s)
        for i, c, p, k, v, s in conn.execute(
            "SELECT e.id, e.conversation_id, e.parent_id, e.kind, e.payload, e.seq FROM agentcore.entries e "
            "JOIN agentcore.stores s USING (store_id) WHERE s.name = %s ORDER BY e.seq, e.idx",
            (name,),
        )
    ]
    elapsed = time.perf_counter() - start
    assert rows
    conn.close()
    return elapsed


def export_raw(dsn: str, name: str, destination: Path) -> float:
    start = time.perf_counter()
    conn = psycopg.connect(dsn, autocommit=True)
    rows = conn.execute(
        "SELECT e.id, e.conversation_id, e.parent_id, e.kind, e.payload, e.seq FROM agentcore.entries e "
        "JOIN agentcore.stores s USING (store_id) WHERE s.name = %s ORDER BY e.seq, e.idx",
        (name,),
    ).fetchall()
    conn.close()
    out = sqlite3.connect(destination, isolation_level=None)
    out.execute(
        "CREATE TABLE entries (id TEXT, conversation_id TEXT, parent_id TEXT, kind TEXT, payload TEXT, seq INT)"
    )
    out.execute("BEGIN")
    out.executemany("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?)", rows)
    out.execute("COMMIT")
    out.close()
    return time.perf_counter() - start


def loop_cost(dsn: str, count: int) -> tuple[float, float]:
    """Per-commit wall time inline on the event loop vs through ``asyncio.to_thread``."""
    store = new_store(dsn)

    def commit(n: int) -> None:
        store.commit(Commit(entries=[Entry(f"e{n}", "main", None, "fragment", FRAGMENT)]))

    async def run() -> tuple[float, float]:
        start = time.perf_counter()
        for n in range(count):
            commit(n)
        inline = time.perf_counter() - start
        start = time.perf_counter()
        for n in range(count, 2 * count):
            await asyncio.to_thread(commit, n)
        return inline, time.perf_counter() - start

    try:
        return asyncio.run(run())
    finally:
        store.close()


def median_of(fn: Callable[[], float], repeat: int) -> float:
    return statistics.median(fn() for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    args = parser.parse_args()
    commits = 300 if args.quick else 1000
    rounds = 3 if args.quick else 7
    resume_sizes = [10_000] if args.quick else [10_000, 100_000]
    cluster = PostgresCluster.start(durable=True)
    try:
        dsn = cluster.dsn
        version = psycopg.connect(dsn).info.server_version
        print(f"PostgreSQL {version // 10000}.{version % 10000}, psycopg {psycopg.__version__} "
              f"({psycopg.pq.__impl__}), loopback TCP, fsync on, {'quick' if args.quick else 'full'} run")  # fmt: skip
        new_store(dsn).close()  # install the schema once
        with tempfile.TemporaryDirectory(prefix="agentcore-bench-") as tmp:
            root = Path(tmp)
            for mode, url in (("server defaults", dsn), ("synchronous_commit=off", dsn + SYNC_OFF)):
                header = f"{'commits: ' + mode:<34}{'ours/s':>9}{'rawSQL/s':>10}{'rawfn/s':>9}"
                print(f"\n{header}{'vs SQL':>8}{'vs fn':>7}{'sqlite/s':>10}")
                for name, payload in (
                    ("fragment (small entry + register)", FRAGMENT),
                    ("tool result (~4 KB + register)", TOOL_RESULT),
                ):
                    runs: dict[str, list[float]] = {"ours": [], "sql": [], "fn": [], "sqlite": []}
                    for i in range(rounds):  # interleaved, so load changes on the machine hit all alike
                        runs["ours"].append(ours(url, payload, commits))
                        runs["sql"].append(raw_sql(url, payload, commits))
                        runs["fn"].append(raw_fn(url, payload, commits))
                        file = root / f"{mode[:4]}{name[:4]}-{i}.db"
                        runs["sqlite"].append(sqlite_commits(file, payload, commits))
                    t = {key: statistics.median(value) for key, value in runs.items()}
                    print(
                        f"{name:<34}{commits / t['ours']:>9.0f}{commits / t['sql']:>10.0f}{commits / t['fn']:>9.0f}"
                        f"{t['sql'] / t['ours']:>8.2f}{t['fn'] / t['ours']:>7.2f}{commits / t['sqlite']:>10.0f}"
                    )

            print(f"\n{'resume (open + load)':<34}{'ours ms':>9}{'raw ms':>10}{'raw/ours':>9}")
            for size in resume_sizes:
                name = f"resume-{size}"
                build(dsn, name, size, FRAGMENT)
                resume_repeat = 3 if size > 10_000 else 5
                ours_t = median_of(lambda n=name: resume_ours(dsn, n), resume_repeat)
                raw_t = median_of(lambda n=name: resume_raw(dsn, n), resume_repeat)
                print(f"{f'{size:,} entries':<34}{ours_t * 1000:>9.0f}{raw_t * 1000:>10.0f}{raw_t / ours_t:>9.2f}")

            name = f"resume-{resume_sizes[-1]}"
            start = time.perf_counter()
            export_agent_database(database_url=f"{dsn}?store={name}", destination=root / "export.sqlite")
            ours_t = time.perf_counter() - start
            raw_t = export_raw(dsn, name, root / "export-raw.sqlite")
            print(f"\n{'export to a SQLite file':<34}{'ours ms':>9}{'raw ms':>10}{'raw/ours':>9}")
            label = f"{resume_sizes[-1]:,} entries"
            print(f"{label:<34}{ours_t * 1000:>9.0f}{raw_t * 1000:>10.0f}{raw_t / ours_t:>9.2f}")

        print(f"\n{'a commit on the event loop':<34}{'inline ms':>9}{'to_thread ms':>14}")
        for mode, url in (("server defaults", dsn), ("synchronous_commit=off", dsn + SYNC_OFF)):
            inline, threaded = loop_cost(url, commits)
            print(f"{mode:<34}{inline / commits * 1000:>9.3f}{threaded / commits * 1000:>14.3f}")
    finally:
        cluster.stop()


def sqlite_commits(path: Path, payload: dict[str, object], count: int) -> float:
    """Context: the same commits through SqliteStorage on a local file."""
    store = SqliteStorageFactory(path).open()[0]
    start = time.perf_counter()
    parent: Any = None
    for n in range(count):
        entry_id = f"e{n}"
        store.commit(
            Commit(
                entries=[Entry(entry_id, "main", parent, "fragment", payload)],
                registers=[RegisterWrite("op/main", {"state": "streaming", "entry": entry_id})],
            )
        )
        parent = entry_id
    elapsed = time.perf_counter() - start
    store.close()
    return elapsed


if __name__ == "__main__":
    main()
