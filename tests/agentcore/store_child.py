"""A child process for the store's real-kill tests (run as a script, never imported by pytest).

    python store_child.py hold <db>     open the store, print "ready <pid>", block until stdin closes
    python store_child.py commits <db>  open, print "ready <pid>", then commit forever, printing
                                        "<seq>" after each commit has returned

``<db>`` may also be a ``postgresql://`` URL naming a PostgreSQL store.

If the store cannot be opened the child prints "error <code> <message>" and exits with status 3.

Each loop commit writes one entry whose parent is the previous head, one usage row for it and
the ``head`` register naming it (compare-and-swap on the register's seq), so a reader can check
"both or neither" after a SIGKILL at any instant.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentcore.errors import StoreError
from agentcore.harness import Commit, Entry, RegisterWrite, SqliteStorageFactory, StorageFactory, UsageRow
from tests.child_guard import die_with_parent


def open_factory(path: str) -> StorageFactory:
    if path.startswith("postgresql://"):
        from agentcore.harness.postgres_store import PostgresStorageFactory

        return PostgresStorageFactory.from_url(path)
    return SqliteStorageFactory(path)


def main(mode: str, path: str) -> None:
    try:
        storage, _release = open_factory(path).open()
    except StoreError as exc:
        print(f"error {exc.code} {exc.message}", flush=True)
        sys.exit(3)
    state = storage.load()
    print(f"ready {os.getpid()}", flush=True)
    if mode == "hold":
        sys.stdin.read()
        return
    head = state.registers.get("head")
    parent = head.value["entry"] if head else None
    expected = head.seq if head else 0
    n = len(state.entries)
    while True:
        n += 1
        entry_id = f"e{n}"
        body = "x" * (4000 if n % 7 == 0 else 40)  # some tool-result-sized commits
        seq = storage.commit(
            Commit(
                entries=[Entry(entry_id, "main", parent, "message", {"n": n, "body": body})],
                registers=[RegisterWrite("head", {"entry": entry_id, "n": n}, expected_seq=expected)],
                usage=[UsageRow(f"usage-{entry_id}", "main", {"tokens": n})],
            )
        )
        print(seq, flush=True)
        parent, expected = entry_id, seq


if __name__ == "__main__":
    die_with_parent()
    main(sys.argv[1], sys.argv[2])
