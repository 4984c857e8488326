"""Storage benchmark: SqliteStorage against raw sqlite3 doing the same work, measured in one run.

    python bench/store.py [--quick]

- commits/s for fragment-sized commits (one small entry + one register write) and tool-result
  commits (one ~4 KB entry + one register write). Baseline: raw ``sqlite3`` on an identical
  file (same schema, WAL, synchronous=NORMAL), one ``BEGIN IMMEDIATE`` transaction per commit,
  inserting the same rows including the ``json.dumps`` of the payloads.
- resume (open + load) for stores of 10k and 100k entries. Baseline: raw connect + SELECT of
  every entry row + ``json.loads`` of each payload.
- export of a ~100 MB store. Baseline: a plain byte copy (``shutil.copyfile``) of the same file.

Ratios are ours / baseline time (1.00 = as fast as the raw floor). Runs in well under 2 minutes
(``--quick`` in a few seconds).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentcore.harness import (
    Commit,
    Entry,
    RegisterWrite,
    SqliteStorage,
    SqliteStorageFactory,
    export_agent_database,
)

FRAGMENT = {"type": "text_delta", "text": "a few streamed tokens "}
TOOL_RESULT = {"type": "tool_result", "call_id": "call-1", "content": "x" * 4000}


def new_store(path: Path) -> SqliteStorage:
    return SqliteStorageFactory(path).open()[0]


def ours(path: Path, payload: dict[str, object], count: int) -> float:
    store = new_store(path)
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


def raw(path: Path, payload: dict[str, object], count: int) -> float:
    new_store(path).close()  # the same schema and file format, then plain sqlite3
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    start = time.perf_counter()
    parent = None
    for n in range(count):
        entry_id = f"e{n}"
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO entries (id, conversation_id, parent_id, kind, payload, seq) VALUES (?, ?, ?, ?, ?, ?)",
            (entry_id, "main", parent, "fragment", json.dumps(payload), n + 1),
        )
        conn.execute(
            "INSERT INTO registers (key, value, seq) VALUES (?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value, seq = excluded.seq",
            ("op/main", json.dumps({"state": "streaming", "entry": entry_id}), n + 1),
        )
        conn.execute("COMMIT")
        parent = entry_id
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def build(path: Path, entries: int, payload: dict[str, object], batch: int = 1000) -> None:
    store = new_store(path)
    parent = None
    for first in range(0, entries, batch):
        rows = []
        for n in range(first, min(first + batch, entries)):
            rows.append(Entry(f"e{n}", "main", parent, "fragment", payload))
            parent = f"e{n}"
        store.commit(Commit(entries=rows, registers=[RegisterWrite("op/main", {"entry": parent})]))
    store.close()


def resume_ours(path: Path) -> float:
    start = time.perf_counter()
    store = new_store(path)
    state = store.load()
    elapsed = time.perf_counter() - start
    assert state.entries
    store.close()
    return elapsed


def resume_raw(path: Path) -> float:
    start = time.perf_counter()
    conn = sqlite3.connect(path)
    loads = json.loads
    rows = [
        (i, c, p, k, loads(v), s)
        for i, c, p, k, v, s in conn.execute(
            "SELECT id, conversation_id, parent_id, kind, payload, seq FROM entries ORDER BY pos"
        )
    ]
    elapsed = time.perf_counter() - start
    assert rows
    conn.close()
    return elapsed


def best(fn: Callable[[], float], repeat: int = 3) -> float:
    return min(fn() for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    args = parser.parse_args()
    commits = 1000 if args.quick else 4000
    rounds = 3 if args.quick else 5
    resume_sizes = [10_000] if args.quick else [10_000, 100_000]
    export_mb = 20 if args.quick else 100
    print(f"sqlite {sqlite3.sqlite_version}, python {sys.version.split()[0]}, {'quick' if args.quick else 'full'} run")
    with tempfile.TemporaryDirectory(prefix="agentcore-bench-") as tmp:
        root = Path(tmp)
        print(f"\n{'commits (one per transaction)':<34}{'ours/s':>10}{'raw/s':>10}{'ratio':>8}")
        for name, payload in (
            ("fragment (small entry + register)", FRAGMENT),
            ("tool result (~4 KB + register)", TOOL_RESULT),
        ):
            ours_runs, raw_runs = [], []
            for i in range(rounds):  # interleaved, so load changes on the machine hit both alike
                ours_runs.append(ours(root / f"o-{name[:4]}-{i}.db", payload, commits))
                raw_runs.append(raw(root / f"r-{name[:4]}-{i}.db", payload, commits))
            ours_t, raw_t = statistics.median(ours_runs), statistics.median(raw_runs)
            print(f"{name:<34}{commits / ours_t:>10.0f}{commits / raw_t:>10.0f}{ours_t / raw_t:>8.2f}")

        print(f"\n{'resume (open + load)':<34}{'ours ms':>10}{'raw ms':>10}{'ratio':>8}")
        for size in resume_sizes:
            path = root / f"resume-{size}.db"
            build(path, size, FRAGMENT)
            ours_t, raw_t = best(lambda p=path: resume_ours(p)), best(lambda p=path: resume_raw(p))
            print(f"{f'{size:,} entries':<34}{ours_t * 1000:>10.1f}{raw_t * 1000:>10.1f}{ours_t / raw_t:>8.2f}")

        path = root / "export-src.db"
        build(path, export_mb * 1024 * 1024 // 4100, TOOL_RESULT, batch=200)
        size_mb = path.stat().st_size / 1e6
        start = time.perf_counter()
        export_agent_database(database_path=path, destination=root / "export-dst.db")
        ours_t = time.perf_counter() - start
        start = time.perf_counter()
        shutil.copyfile(path, root / "plain-copy.db")
        raw_t = time.perf_counter() - start
        print(f"\n{'export':<34}{'ours ms':>10}{'copy ms':>10}{'ratio':>8}")
        print(f"{f'{size_mb:.0f} MB store':<34}{ours_t * 1000:>10.1f}{raw_t * 1000:>10.1f}{ours_t / raw_t:>8.2f}")


if __name__ == "__main__":
    main()
