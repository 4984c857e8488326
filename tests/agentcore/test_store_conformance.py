"""One conformance suite every storage backend passes (SPEC D8; DURABILITY invariants 1-3, 15, 18).

Backends: memory, SQLite, PostgreSQL (a fresh store in the session's private cluster, reached
through ``database_url``), and a user-style ``storage=`` factory that wraps SQLite in a
recording decorator (what a third party would write: no inheritance, just the protocol).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcore.errors import (
    INPUT_VALIDATION,
    STORE_FENCED,
    STORE_INVALID,
    STORE_LOCKED,
    InputValidationError,
    StoreError,
)
from agentcore.harness import (
    AgentStorage,
    Commit,
    Entry,
    MemoryStorageFactory,
    Receipt,
    RegisterWrite,
    SqliteStorage,
    SqliteStorageFactory,
    StorageFactory,
    StoreState,
    TaskRow,
    UsageRow,
    open_from_factory,
    open_storage,
    resolve_storage_factory,
)


class RecordingStorage:
    """A user's storage: delegates to SQLite and records every successful commit."""

    def __init__(self, inner: SqliteStorage) -> None:
        self.inner = inner
        self.label = f"recording:{inner.label}"
        self.commits: list[tuple[int, Commit]] = []

    def load(self) -> StoreState:
        return self.inner.load()

    def commit(self, commit: Commit) -> int:
        seq = self.inner.commit(commit)
        self.commits.append((seq, commit))
        return seq

    def close(self) -> None:
        self.inner.close()


class RecordingFactory:
    def __init__(self, path: Path) -> None:
        self.label = f"recording:{path}"
        self._sqlite = SqliteStorageFactory(path)

    def open(self) -> tuple[RecordingStorage, Callable[[], None]]:
        inner, release = self._sqlite.open()
        return RecordingStorage(inner), release


@dataclasses.dataclass
class Backend:
    factory: StorageFactory
    opened: list[tuple[AgentStorage, Callable[[], None]]] = dataclasses.field(default_factory=list)

    def open(self) -> AgentStorage:
        storage, release = open_storage(storage=self.factory)
        self.opened.append((storage, release))
        return storage

    def reopen(self, storage: AgentStorage) -> AgentStorage:
        storage.close()
        return self.open()

    @staticmethod
    def break_lease(storage: Any) -> None:
        """Simulate a lost OS lock (NFS, a deleted lock file): the owner keeps running."""
        inner = getattr(storage, "inner", storage)
        inner._lease.release()


@pytest.fixture(params=["memory", "sqlite", "postgres", "custom"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    factory: StorageFactory
    if request.param == "memory":
        factory = MemoryStorageFactory()
    elif request.param == "sqlite":
        factory = SqliteStorageFactory(tmp_path / "store.sqlite")
    elif request.param == "postgres":
        cluster = request.getfixturevalue("postgres")
        factory = resolve_storage_factory(database_url=f"{cluster.dsn}?store=conformance-{uuid.uuid4().hex}")
    else:
        factory = RecordingFactory(tmp_path / "custom.sqlite")
    b = Backend(factory)
    yield b
    for storage, release in b.opened:
        storage.close()
        release()


def entry(entry_id: str, parent: str | None = None, conversation: str = "main", **payload: Any) -> Entry:
    return Entry(entry_id, conversation, parent, "message", payload or {"text": entry_id})


def content(state: StoreState) -> StoreState:
    """The committed content, without the per-open identity (owner_id, fence)."""
    return dataclasses.replace(state, owner_id="", fence=0)


def test_seq_rises_strictly_one_per_commit_and_rows_carry_it(backend: Backend) -> None:
    store = backend.open()
    seqs = [
        store.commit(Commit(entries=[entry("a"), entry("b", "a")])),
        store.commit(Commit(receipts=[Receipt("r1", "main", {"status": "accepted"})])),
        store.commit(Commit(registers=[RegisterWrite("pc", {"state": 1})])),
        store.commit(Commit(entries=[entry("c", "b")], usage=[UsageRow("u1", "main", {"tokens": 3})])),
    ]
    assert seqs == sorted(set(seqs)) and seqs[0] >= 1
    state = store.load()
    assert state.last_seq == seqs[-1]
    assert [(e.id, e.seq) for e in state.entries] == [("a", seqs[0]), ("b", seqs[0]), ("c", seqs[3])]
    assert state.registers["pc"].seq == seqs[2]
    assert state.usage[0].seq == seqs[3]
    assert state.receipts["r1"].seq == seqs[1]


def test_payloads_round_trip_as_json_and_are_isolated_from_callers(backend: Backend) -> None:
    store = backend.open()
    payload: dict[str, Any] = {"text": "héllo ✓", "nested": {"list": [1, 2.5, None, True]}, "tuple": (1, 2)}
    store.commit(Commit(entries=[Entry("a", "main", None, "message", payload)]))
    payload["nested"]["list"].append("mutated after commit")
    loaded = store.load()
    assert loaded.entries[0].payload == {"text": "héllo ✓", "nested": {"list": [1, 2.5, None, True]}, "tuple": [1, 2]}
    loaded.entries[0].payload["text"] = "mutated after load"
    assert store.load().entries[0].payload["text"] == "héllo ✓"


def test_cas_failure_rolls_back_the_whole_commit(backend: Backend) -> None:
    store = backend.open()
    seq = store.commit(Commit(entries=[entry("a")], registers=[RegisterWrite("pc", {"state": 1}, expected_seq=0)]))
    before = store.load()
    bad = Commit(
        entries=[entry("b", "a")],
        registers=[RegisterWrite("other", {"x": 1}), RegisterWrite("pc", {"state": 2}, expected_seq=seq + 99)],
        usage=[UsageRow("u1", "main", {"tokens": 1})],
        receipts=[Receipt("r1", "main", {})],
        tasks=[TaskRow("t1", "main", {})],
    )
    with pytest.raises(StoreError) as info:
        store.commit(bad)
    assert info.value.code == STORE_INVALID
    assert info.value.details == {"key": "pc", "expected_seq": seq + 99, "actual_seq": seq}
    assert content(store.load()) == content(before)
    assert store.commit(Commit(registers=[RegisterWrite("pc", {"state": 2}, expected_seq=seq)])) == seq + 1


def test_cas_zero_means_absent_and_deletes_reset_to_absent(backend: Backend) -> None:
    store = backend.open()
    s1 = store.commit(Commit(registers=[RegisterWrite("pc", {"v": 1}, expected_seq=0)]))
    with pytest.raises(StoreError):
        store.commit(Commit(registers=[RegisterWrite("pc", {"v": 2}, expected_seq=0)]))
    store.commit(Commit(registers=[RegisterWrite("pc", None, expected_seq=s1)]))
    assert "pc" not in store.load().registers
    s3 = store.commit(Commit(registers=[RegisterWrite("pc", {"v": 3}, expected_seq=0)]))
    assert store.load().registers["pc"].value == {"v": 3} and store.load().registers["pc"].seq == s3


def test_register_writes_in_one_commit_apply_in_order(backend: Backend) -> None:
    store = backend.open()
    s1 = store.commit(Commit(registers=[RegisterWrite("pc", {"v": 1})]))
    s2 = store.commit(
        Commit(
            registers=[
                RegisterWrite("pc", {"v": 2}, expected_seq=s1),
                RegisterWrite("pc", {"v": 3}, expected_seq=s1 + 1),  # sees the write just before it
            ]
        )
    )
    assert store.load().registers["pc"].value == {"v": 3} and s2 == s1 + 1
    with pytest.raises(StoreError):  # the second write checks against the first, not the old seq
        store.commit(
            Commit(registers=[RegisterWrite("pc", {"v": 4}, expected_seq=s2), RegisterWrite("pc", {}, expected_seq=s2)])
        )
    assert store.load().registers["pc"].value == {"v": 3}


@pytest.mark.parametrize("existing", [True, False], ids=["already-committed", "twice-in-one-commit"])
def test_duplicate_entry_id_rolls_back_the_whole_commit(backend: Backend, existing: bool) -> None:
    store = backend.open()
    store.commit(Commit(entries=[entry("a")]))
    before = store.load()
    dup = [entry("a", payload="again")] if existing else [entry("x"), entry("x", payload="again")]
    with pytest.raises(StoreError) as info:
        store.commit(
            Commit(entries=[entry("b", "a"), *dup], registers=[RegisterWrite("pc", {})], usage=[UsageRow("u", "m", {})])
        )
    assert info.value.code == STORE_INVALID
    assert info.value.details["entry_id"] == ("a" if existing else "x")
    assert content(store.load()) == content(before)


def test_non_json_payload_is_refused_before_anything_is_written(backend: Backend) -> None:
    store = backend.open()
    before = store.load()
    for bad in ({"x": object()}, {"x": float("nan")}):
        with pytest.raises(StoreError) as info:
            store.commit(Commit(entries=[entry("a")], tasks=[TaskRow("t", "main", bad)]))
        assert info.value.code == STORE_INVALID
    assert content(store.load()) == content(before)


def test_text_that_is_not_utf8_is_refused_alike_by_every_backend(backend: Backend) -> None:
    """A lone surrogate in a payload or an id: ``store_invalid`` naming the row on every backend
    (SQLite's driver used to fail raw mid-transaction, memory kept it), and nothing is written."""
    store = backend.open()
    store.commit(Commit(entries=[entry("a")]))
    before = store.load()
    for commit in (
        Commit(entries=[entry("b"), Entry("c", "main", None, "message", {"text": "half \ud83d emoji"})]),
        Commit(entries=[entry("b\udcff")]),
        Commit(entries=[entry("b", conversation="main\ud800")]),
        Commit(registers=[RegisterWrite("pc\udfff", {"ok": 1})]),
        Commit(registers=[RegisterWrite("pc", {"note\ud83d": 1})]),
        Commit(receipts=[Receipt("r", "main", {"text": "\udc80"})]),
        Commit(usage=[UsageRow("u\ud83d", "main", {"input": 1})]),
        Commit(tasks=[TaskRow("t", "main", {"input": ["\ud83d"]})]),
    ):
        with pytest.raises(StoreError) as info:
            store.commit(commit)
        assert info.value.code == STORE_INVALID and "not valid UTF-8" in info.value.message, info.value.message
    assert content(store.load()) == content(before)
    store = backend.reopen(store)
    assert content(store.load()) == content(before)
    store.commit(Commit(entries=[entry("d", text="emoji \U0001f600 and ÿ are fine")]))
    assert store.load().entries[-1].payload == {"text": "emoji \U0001f600 and ÿ are fine"}


def test_a_payload_that_is_not_a_json_object_is_refused_before_anything_is_written(backend: Backend) -> None:
    """Payloads are objects; SQLite stores holding anything else are refused at open, so a
    commit must never write one (a list or a string would be refused by the next open)."""
    store = backend.open()
    before = store.load()
    bad: list[Any] = [[1, 2], "text", 3, None]
    for value in bad:
        for commit in (
            Commit(entries=[Entry("a", "main", None, "message", value)]),
            Commit(registers=[RegisterWrite("pc", {"ok": 1}), RegisterWrite("other", value or [])]),
            Commit(receipts=[Receipt("r", "main", value)]),
        ):
            with pytest.raises(StoreError) as info:
                store.commit(commit)
            assert info.value.code == STORE_INVALID and "not a JSON object" in info.value.message
    assert content(store.load()) == content(before)
    store = backend.reopen(store)
    assert content(store.load()) == content(before)


def test_usage_row_with_a_known_record_id_is_ignored(backend: Backend) -> None:
    store = backend.open()
    s1 = store.commit(Commit(usage=[UsageRow("u1", "main", {"tokens": 10})]))
    store.commit(
        Commit(usage=[UsageRow("u1", "main", {"tokens": 999}), UsageRow("u2", "main", {"tokens": 5})]),
    )
    s3 = store.commit(Commit(usage=[UsageRow("u3", "c", {"tokens": 1}), UsageRow("u3", "c", {"tokens": 2})]))
    usage = store.load().usage
    assert [(u.record_id, u.payload["tokens"]) for u in usage] == [("u1", 10), ("u2", 5), ("u3", 1)]
    assert usage[0].seq == s1 and usage[2].seq == s3


def test_receipts_and_tasks_are_upserted(backend: Backend) -> None:
    store = backend.open()
    store.commit(Commit(receipts=[Receipt("r1", "main", {"status": "accepted"})], tasks=[TaskRow("t1", "main", {})]))
    s2 = store.commit(
        Commit(
            receipts=[Receipt("r1", "main", {"status": "done"}), Receipt("r2", "main", {"status": "accepted"})],
            tasks=[TaskRow("t1", "main", {"status": "completed"})],
        )
    )
    state = store.load()
    assert state.receipts["r1"] == Receipt("r1", "main", {"status": "done"}, s2)
    assert set(state.receipts) == {"r1", "r2"}
    assert state.tasks == {"t1": TaskRow("t1", "main", {"status": "completed"}, s2)}


def test_load_after_reopen_equals_what_was_committed(backend: Backend) -> None:
    store = backend.open()
    store.commit(Commit(entries=[entry("a")], registers=[RegisterWrite("pc", {"state": "streaming"})]))
    store.commit(
        Commit(
            entries=[entry("b", "a", kind_note="fragment")],
            usage=[UsageRow("u1", "main", {"tokens": 7})],
            receipts=[Receipt("r1", "main", {"status": "running"})],
            tasks=[TaskRow("t1", "main", {"status": "waiting", "checkpoint": {"n": 1}})],
        )
    )
    before = store.load()
    store = backend.reopen(store)
    after = store.load()
    assert content(after) == content(before)
    assert after.fence > before.fence and after.owner_id != before.owner_id
    assert store.commit(Commit(entries=[entry("c", "b")])) == before.last_seq + 1


def test_second_opener_is_refused_until_the_owner_closes(backend: Backend) -> None:
    store = backend.open()
    with pytest.raises(StoreError) as info:
        backend.open()
    assert info.value.code == STORE_LOCKED
    assert "pid" in info.value.message
    store.close()
    backend.open().commit(Commit(entries=[entry("a")]))


def test_stale_owner_is_fenced_and_its_close_keeps_the_new_lease(backend: Backend) -> None:
    stale = backend.open()
    stale.commit(Commit(entries=[entry("a")]))
    backend.break_lease(stale)
    fresh = backend.open()
    with pytest.raises(StoreError) as info:
        stale.commit(Commit(entries=[entry("from-stale", "a")]))
    assert info.value.code == STORE_FENCED
    with pytest.raises(StoreError) as info:
        stale.load()
    assert info.value.code == STORE_FENCED
    stale.close()
    with pytest.raises(StoreError) as info:  # the stale close did not release the new owner's lease
        backend.open()
    assert info.value.code == STORE_LOCKED
    fresh.commit(Commit(entries=[entry("b", "a")]))
    assert [e.id for e in fresh.load().entries] == ["a", "b"]


def test_close_writes_nothing_and_a_closed_storage_refuses_commits(backend: Backend) -> None:
    store = backend.open()
    store.commit(Commit(entries=[entry("a")], registers=[RegisterWrite("op", {"state": "tool_running"})]))
    before = store.load()
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError) as info:
        store.commit(Commit(entries=[entry("b")]))
    assert info.value.code == STORE_INVALID
    assert content(backend.open().load()) == content(before)


def test_custom_factory_sees_every_commit_in_order(tmp_path: Path) -> None:
    factory = RecordingFactory(tmp_path / "r.sqlite")
    storage, release = open_storage(storage=factory)
    assert isinstance(storage, RecordingStorage)
    storage.commit(Commit(entries=[entry("a")]))
    storage.commit(Commit(entries=[entry("b", "a")]))
    assert [seq for seq, _ in storage.commits] == [1, 2]
    storage.close()
    release()
    release()  # idempotent


# -- D8: resolving database_path= / storage= ------------------------------------------------


def test_database_path_and_storage_together_name_both(tmp_path: Path) -> None:
    with pytest.raises(InputValidationError) as info:
        open_storage(database_path=tmp_path / "a.sqlite", storage=MemoryStorageFactory())
    assert info.value.code == INPUT_VALIDATION
    assert "database_path" in info.value.message and "storage" in info.value.message


def test_no_option_means_memory_and_a_path_means_sqlite(tmp_path: Path) -> None:
    assert isinstance(resolve_storage_factory(), MemoryStorageFactory)
    factory = resolve_storage_factory(database_path=tmp_path / "deep" / "er" / "a.sqlite")
    assert isinstance(factory, SqliteStorageFactory)
    storage, release = open_storage(database_path=tmp_path / "deep" / "er" / "a.sqlite")
    assert storage.label == str(tmp_path / "deep" / "er" / "a.sqlite")
    storage.close()
    release()


@pytest.mark.parametrize("bad", ["", ":memory:", "file:x?mode=memory"])
def test_database_path_must_be_a_file_path(bad: str) -> None:
    with pytest.raises(InputValidationError) as info:
        resolve_storage_factory(database_path=bad)
    assert info.value.field == "database_path"


def test_malformed_custom_factories_are_refused_clearly() -> None:
    class NoOpen:
        label = "x"

    class BadResult:
        label = "bad"

        def open(self) -> object:
            return object()

    with pytest.raises(InputValidationError):
        resolve_storage_factory(storage=NoOpen())  # type: ignore[arg-type]
    with pytest.raises(InputValidationError) as info:
        open_from_factory(BadResult())
    assert info.value.field == "storage"
