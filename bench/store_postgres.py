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
psycopg). Commits run in 31 short rounds of 100, interleaved with the order rotating, and the
medians are reported, since the machine is shared and noisy.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg

from agentcore.harness import Commit, Entry, RegisterWrite, SqliteStorageFactory, export_agent_database
from agentcore.harness.postgres_store import PostgresStorage, StoreQueries, postgres_storage
from tests.pg import PostgresCluster

FRAGMENT = {"type": "text_delta", "text": "a few streamed tokens "}
TOOL_RESULT = {"type": "tool_result", "call_id": "call-1", "content": "x" * 4000}
SYNC_OFF = "?options=-c%20synchronous_commit%3Doff"


def new_store(dsn: str) -> PostgresStorage:
    return postgres_storage(dsn, f"bench-{uuid.uuid4().hex}").open()[0]


class Writer:
    """One way of committing, kept open across rounds so that rounds can be short and interleaved."""

    def __init__(self, payload: dict[str, object]) -> None:
        self.payload = payload
        self.n = 0
        self.parent: str | None = None

    def batch(self, count: int) -> float:
        start = time.perf_counter()
        for _ in range(count):
            entry_id = f"e{self.n}"
            self.write(entry_id)
            self.parent = entry_id
            self.n += 1
        return time.perf_counter() - start

    def write(self, entry_id: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Ours(Writer):
    def __init__(self, dsn: str, payload: dict[str, object]) -> None:
        super().__init__(payload)
        self.store = new_store(dsn)

    def write(self, entry_id: str) -> None:
        self.store.commit(
            Commit(
                entries=[Entry(entry_id, "main", self.parent, "fragment", self.payload)],
                registers=[RegisterWrite("op/main", {"state": "streaming", "entry": entry_id})],
            )
        )

    def close(self) -> None:
        self.store.close()


class RawSql(Writer):
    """The hand-written way: one transaction of plain statements, each one round trip."""

    def __init__(self, dsn: str, payload: dict[str, object]) -> None:
        super().__init__(payload)
        store = new_store(dsn)  # the same schema and a store row of its own, then plain psycopg
        self.store_id, self.fence = store.store_id, store._fence
        store.close()
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.cur = self.conn.cursor()

    def write(self, entry_id: str) -> None:
        with self.conn.transaction():
            self.cur.execute(
                "UPDATE agentcore.stores SET last_seq = last_seq + 1 WHERE store_id = %s AND fence = %s "
                "AND last_seq = %s RETURNING last_seq",
                (self.store_id, self.fence, self.n),
            )
            row = self.cur.fetchone()
            assert row is not None
            seq = row[0]
            self.cur.execute(
                "INSERT INTO agentcore.entries (store_id, seq, idx, id, conversation_id, parent_id, kind, payload) "
                "VALUES (%s, %s, 1, %s, %s, %s, %s, %s)",
                (self.store_id, seq, entry_id, "main", self.parent, "fragment", json.dumps(self.payload)),
            )
            self.cur.execute(
                "INSERT INTO agentcore.registers (store_id, key, value, seq, idx) VALUES (%s, %s, %s, %s, 1) "
                "ON CONFLICT (store_id, key) DO UPDATE SET value = excluded.value, seq = excluded.seq",
                (self.store_id, "op/main", json.dumps({"state": "streaming", "entry": entry_id}), seq),
            )

    def close(self) -> None:
        self.conn.close()


class RawFn(RawSql):
    """Raw psycopg calling our ``apply_commit`` with the same arguments: this design's floor."""

    def __init__(self, dsn: str, payload: dict[str, object]) -> None:
        super().__init__(dsn, payload)
        self.query = StoreQueries("agentcore").apply

    def write(self, entry_id: str) -> None:
        self.cur.execute(
            self.query,
            (self.store_id, self.fence, self.n, [entry_id], ["main"], [self.parent], ["fragment"],
             [json.dumps(self.payload)], ["op/main"], [json.dumps({"state": "streaming", "entry": entry_id})],
             [None], None, None, None, None, None, None, None, None, None),
        )  # fmt: skip
        assert self.cur.fetchone() is not None


class Sqlite(Writer):
    """Context: the same commits through SqliteStorage on a local file."""

    def __init__(self, path: Path, payload: dict[str, object]) -> None:
        super().__init__(payload)
        self.store = SqliteStorageFactory(path).open()[0]

    write = Ours.write
    close = Ours.close


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
    commits = 50 if args.quick else 100  # per round
    rounds = 5 if args.quick else 31
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
                    writers: dict[str, Writer] = {
                        "ours": Ours(url, payload),
                        "sql": RawSql(url, payload),
                        "fn": RawFn(url, payload),
                        "sqlite": Sqlite(root / f"{mode[:4]}-{name[:4]}.db", payload),
                    }
                    runs: dict[str, list[float]] = {key: [] for key in writers}
                    order = list(writers)
                    for i in range(rounds):  # short interleaved rounds, rotating who goes first
                        for key in order[i % 4 :] + order[: i % 4]:
                            runs[key].append(writers[key].batch(commits))
                    for writer in writers.values():
                        writer.close()
                    t = {key: statistics.median(value) for key, value in runs.items()}  # per round
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
            inline, threaded = loop_cost(url, 10 * commits)
            print(f"{mode:<34}{inline / commits * 100:>9.3f}{threaded / commits * 100:>14.3f}")
    finally:
        cluster.stop()



if __name__ == "__main__":
    main()
