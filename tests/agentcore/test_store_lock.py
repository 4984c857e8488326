"""The owner lock follows the database file, not the name it was opened by (SPEC D4; DURABILITY
invariant 18): a symlink, a hard link or a symlinked directory reaching an open store gets
``store_locked`` naming the holder's pid, and the first owner keeps writing, in one process and
across real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentcore.errors import STORE_FENCED, STORE_INVALID, STORE_LOCKED, StoreError
from agentcore.harness import (
    Commit,
    Entry,
    OwnerLease,
    SqliteStorage,
    SqliteStorageFactory,
    export_agent_database,
    lock_path_for,
)

CHILD = Path(__file__).with_name("store_child.py")


def open_store(path: Path) -> SqliteStorage:
    return SqliteStorageFactory(path).open()[0]


def symlink(db: Path) -> Path:
    alias = db.parent / "elsewhere" / "alias.sqlite"
    alias.parent.mkdir()
    alias.symlink_to(db)
    return alias


def hard_link(db: Path) -> Path:
    alias = db.parent / "elsewhere" / "alias.sqlite"
    alias.parent.mkdir()
    os.link(db, alias)
    return alias


def symlinked_directory(db: Path) -> Path:
    link = db.parent.parent / f"{db.parent.name}-link"
    link.symlink_to(db.parent, target_is_directory=True)
    return link / db.name


ALIASES: dict[str, Callable[[Path], Path]] = {
    "symlink": symlink,
    "hard-link": hard_link,
    "symlinked-directory": symlinked_directory,
}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A store with one committed entry, closed (so a hard link can be made to the file)."""
    path = tmp_path / "stores" / "store.sqlite"
    store = open_store(path)
    store.commit(Commit(entries=[Entry("e0", "main", None, "message", {"n": 0})]))
    store.close()
    return path


def posix_locks(path: Path) -> list[str]:
    """This process's POSIX (fcntl) locks on the file, as the kernel lists them: SQLite's."""
    st = os.stat(path)
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    with open("/proc/locks") as table:
        return sorted(
            " ".join(line.split()[1:])
            for line in table
            if " POSIX " in line and key in line.split() and str(os.getpid()) in line.split()
        )


class Child:
    def __init__(self, mode: str, db: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), mode, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout

    def line(self) -> str:
        return self.stdout.readline().strip()

    def ready(self) -> int:
        line = self.line()
        assert line.startswith("ready "), line
        return int(line.split()[1])

    def seqs(self, count: int) -> list[int]:
        lines = [self.line() for _ in range(count)]
        assert all(line.isdigit() for line in lines), f"the owner stopped committing: {lines}"
        return [int(line) for line in lines]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.stdout.close()
        assert self.proc.stdin is not None
        self.proc.stdin.close()


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.kill()


@pytest.mark.parametrize("make_alias", ALIASES.values(), ids=ALIASES.keys())
def test_an_alias_of_an_open_store_is_refused_and_the_owner_keeps_writing(
    db: Path, make_alias: Callable[[Path], Path]
) -> None:
    owner = open_store(db)
    alias = make_alias(db)
    with pytest.raises(StoreError) as info:
        open_store(alias)
    assert info.value.code == STORE_LOCKED
    assert f"pid {os.getpid()}" in info.value.message and info.value.details["holder_pid"] == os.getpid()
    assert owner.commit(Commit(entries=[Entry("e1", "main", "e0", "message", {"n": 1})])) == 2  # not fenced
    assert [e.id for e in owner.load().entries] == ["e0", "e1"]
    owner.close()
    alias = unless_hard_linked(db, alias)
    again = open_store(alias)  # free again once the owner closed, under any name
    state = again.load()
    assert [e.id for e in state.entries] == ["e0", "e1"]
    assert state.fence == 3  # created, owner, again: the refused opener never bumped the fence
    again.close()


def unless_hard_linked(db: Path, alias: Path) -> Path:
    """The name to open ``db`` by once no owner holds it: ``alias``, unless it is a hard link —
    then opening by either name is refused (naming the links) until the link is gone, and the
    refusal bumped no fence."""
    if alias.stat().st_nlink == 1 or alias.is_symlink():
        return alias
    for name in (alias, db):
        with pytest.raises(StoreError) as info:
            open_store(name)
        assert info.value.code == STORE_INVALID and info.value.details["links"] == 2
        assert "hard links" in info.value.message
    alias.unlink()
    return db


def test_a_store_file_with_two_names_is_refused_until_one_is_removed(db: Path) -> None:
    """D1/D4: SQLite keeps the write-ahead log next to the name a store is opened by, so an owner
    killed before a checkpoint leaves committed transactions in ``<name>-wal`` that an opener by
    a hard link never sees (seen as a store that lost every commit after the first). A store file
    with several names is refused — opening, exporting — until only one is left."""
    store = open_store(db)
    store.commit(Commit(entries=[Entry("e1", "main", "e0", "message", {})]))
    store.close()
    alias = hard_link(db)
    with pytest.raises(StoreError) as info:
        export_agent_database(database_path=alias, destination=db.parent / "copy.sqlite")
    assert info.value.code == STORE_INVALID and info.value.details["links"] == 2
    assert not (db.parent / "copy.sqlite").exists()
    name = unless_hard_linked(db, alias)
    reopened = open_store(name)
    state = reopened.load()
    assert [e.id for e in state.entries] == ["e0", "e1"] and state.fence == 3  # the refusals wrote nothing
    reopened.close()


def test_a_store_opened_through_a_symlink_blocks_its_original_name(db: Path) -> None:
    alias = symlink(db)
    owner = open_store(alias)
    with pytest.raises(StoreError) as info:
        open_store(db)
    assert info.value.code == STORE_LOCKED and f"pid {os.getpid()}" in info.value.message
    owner.commit(Commit(entries=[Entry("e1", "main", "e0", "message", {})]))
    owner.close()


def test_a_refused_alias_opener_leaves_the_owners_sqlite_locks_in_place(db: Path) -> None:
    """Closing any descriptor of a file drops the process's POSIX locks on it, SQLite's too: a
    refused opener in the owner's process must not close one while the owner lives."""
    owner = open_store(db)
    held = posix_locks(db)
    assert held, "SQLite holds a shared lock on a WAL database while it is open"
    alias = hard_link(db)
    for attempt in (
        lambda: open_store(alias),
        lambda: open_store(db),
        lambda: export_agent_database(database_path=alias, destination=db.parent / "copy.sqlite"),
    ):
        with pytest.raises(StoreError) as info:
            attempt()
        assert info.value.code == STORE_LOCKED
        assert posix_locks(db) == held
    owner.commit(Commit(entries=[Entry("e1", "main", "e0", "message", {})]))
    owner.close()


def test_refused_openers_in_the_owners_process_hold_no_descriptors(db: Path) -> None:
    """Refused attempts (a host retrying, say) neither leak descriptors nor keep any open."""
    owner = open_store(db)
    alias = hard_link(db)
    with pytest.raises(StoreError):
        open_store(alias)  # the first attempt creates the alias's path lock file
    descriptors = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        with pytest.raises(StoreError):
            open_store(alias)
    assert len(os.listdir("/proc/self/fd")) == descriptors
    owner.close()


@pytest.mark.crash
@pytest.mark.parametrize("make_alias", [symlink, hard_link], ids=["symlink", "hard-link"])
def test_an_alias_in_another_process_is_refused_while_the_owner_keeps_committing(
    db: Path, make_alias: Callable[[Path], Path], children: list[Child]
) -> None:
    owner = Child("commits", db)
    children.append(owner)
    owner_pid = owner.ready()
    first = owner.seqs(3)
    alias = make_alias(db)
    intruder = Child("hold", alias)
    children.append(intruder)
    line = intruder.line()
    assert line.startswith(f"error {STORE_LOCKED} ") and f"pid {owner_pid}" in line, line
    assert intruder.proc.wait() == 3
    with pytest.raises(StoreError) as info:  # and from this process, naming the other one
        open_store(alias)
    assert info.value.code == STORE_LOCKED and info.value.details["holder_pid"] == owner_pid
    later = owner.seqs(5)  # the first owner was neither fenced nor stopped
    assert later == list(range(first[-1] + 1, first[-1] + 6))
    owner.kill()
    store = open_store(unless_hard_linked(db, alias))
    state = store.load()
    assert state.fence == 3  # created, the child owner, this open: no intruder ever bumped it
    assert state.last_seq >= later[-1]
    store.close()


@pytest.mark.crash
def test_a_stale_owners_close_keeps_the_new_owners_lock_under_every_name(db: Path, children: list[Child]) -> None:
    """DURABILITY invariant 18 with the identity lock: the stale owner is fenced, and its close
    releases nothing of the new owner's, whatever name the next opener uses."""
    stale = open_store(db)
    stale._lease.release()  # the lock was lost (deleted lock file, NFS): the stale owner keeps running
    fresh = open_store(db)
    with pytest.raises(StoreError) as info:
        stale.commit(Commit(entries=[Entry("stale", "main", "e0", "message", {})]))
    assert info.value.code == STORE_FENCED
    stale.close()
    names = [db, symlink(db), db.parent / "hard.sqlite"]
    os.link(db, names[2])
    for name in names:
        with pytest.raises(StoreError) as info:
            open_store(name)
        assert info.value.code == STORE_LOCKED, name
        child = Child("hold", name)
        children.append(child)
        assert child.line().startswith(f"error {STORE_LOCKED} ")
    assert fresh.commit(Commit(entries=[Entry("e1", "main", "e0", "message", {})])) == 2
    fresh.close()


def test_holding_the_path_lock_alone_keeps_owners_out_under_the_symlinked_name(db: Path) -> None:
    """What Studio's tests and tools do to stand in for another owner: ``lock_path_for`` names
    one lock per file path, whichever symlink it is given."""
    alias = symlink(db)
    assert lock_path_for(alias) == lock_path_for(db)
    lease = OwnerLease.acquire(lock_path_for(alias))
    try:
        for name in (db, alias):
            with pytest.raises(StoreError) as info:
                open_store(name)
            assert info.value.code == STORE_LOCKED and f"pid {os.getpid()}" in info.value.message
    finally:
        lease.release()
    open_store(alias).close()
