"""Real kills: a child commits in a loop and is SIGKILLed at a seeded random point, several times
over one file. After every reopen the DURABILITY invariants hold: 1 (a prefix of whole commits),
2 (seq strictly rising), 3 (ids written once), 4 (every parent exists) and "nothing that was
reported committed is lost" (SPEC D1)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentcore.harness import SqliteStorageFactory, StoreState

CHILD = Path(__file__).with_name("store_child.py")


def run_and_kill(db: Path, commits_before_kill: int) -> int:
    """Let the child report ``commits_before_kill`` commits, SIGKILL it (it keeps committing
    meanwhile, so the kill lands at an arbitrary instant), return the last seq it reported."""
    child = subprocess.Popen([sys.executable, str(CHILD), "commits", str(db)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().startswith("ready ")
    last = 0
    for _ in range(commits_before_kill):
        last = int(child.stdout.readline())
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    return last


def check_invariants(state: StoreState, reported: int) -> None:
    assert state.last_seq >= reported, "a commit the child saw return was lost"
    seqs = [e.seq for e in state.entries]
    assert seqs == sorted(set(seqs)), "one entry per commit: seqs must rise strictly"
    ids = [e.id for e in state.entries]
    assert len(ids) == len(set(ids))
    known: set[str] = set()
    for e in state.entries:
        assert e.parent_id is None or e.parent_id in known, f"{e.id} has no parent {e.parent_id}"
        known.add(e.id)
    assert [e.id for e in state.entries] == [f"e{n}" for n in range(1, len(state.entries) + 1)]
    assert [u.record_id for u in state.usage] == [f"usage-{e.id}" for e in state.entries]
    assert [u.seq for u in state.usage] == seqs
    if state.entries:  # the register names the last entry: entry and register both or neither
        head = state.registers["head"]
        assert head.value["entry"] == state.entries[-1].id and head.seq == state.entries[-1].seq == state.last_seq
    else:
        assert "head" not in state.registers


@pytest.mark.crash
def test_sigkill_at_random_points_never_leaves_a_partial_commit(tmp_path: Path) -> None:
    db = tmp_path / "crash.sqlite"
    rng = random.Random(20261130)
    total_reported = 0
    for round_no in range(6):
        kill_after = 0 if round_no == 0 else rng.randint(1, 300)  # round 0: kill during the first commits
        reported = run_and_kill(db, kill_after)
        storage, release = SqliteStorageFactory(db).open()
        state = storage.load()
        check_invariants(state, reported)
        assert state.fence == 2 * (round_no + 1)  # every child open and every check open bumped it
        total_reported = max(total_reported, reported)
        storage.close()
        release()
    assert total_reported > 0
