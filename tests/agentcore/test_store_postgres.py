"""The PostgreSQL store beyond the shared conformance suite (SPEC D1, D4, D6, D7, D8; DURABILITY
invariants 1-3, 15, 18): the ``database_url`` option, refusals that name the option and create
nothing, hostile names and payloads, the owner lease across real processes, fencing of a stale
owner, check-first refusals of foreign or tampered schemas, and export / import with SQLite.

Every test runs against the session's private server (``postgres`` fixture) and isolates itself
with its own store name or schema.
"""

from __future__ import annotations

import dataclasses
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentcore import AgentInput, UserInputRequired, create_agent
from agentcore.errors import (
    INPUT_VALIDATION,
    STORE_EXISTS,
    STORE_FENCED,
    STORE_INVALID,
    STORE_LOCKED,
    STORE_UNAVAILABLE,
    AgentError,
    InputValidationError,
    StoreError,
)
from agentcore.harness import (
    Commit,
    Entry,
    Receipt,
    RegisterWrite,
    SqliteStorageFactory,
    StoreState,
    TaskRow,
    UsageRow,
    export_agent_database,
    import_agent_database,
    resolve_storage_factory,
)
from agentcore.harness.postgres_schema import APPLY_COMMIT_ARGS, SCHEMA_VERSION
from agentcore.harness.postgres_store import PostgresStorage, PostgresStorageFactory, postgres_storage
from agentcore.harness.sqlite_schema import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION
from agentcore.host import AgentHost
from agentcore.inputs import AgentOptions
from agentcore.offline import cancel_agent_conversation
from agentcore.testing.steps import Text
from tests.helpers import collect, final
from tests.pg import PostgresCluster, wait_for_sessions_gone

CHILD = Path(__file__).with_name("store_child.py")


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def store_url(postgres: PostgresCluster) -> str:
    return f"{postgres.dsn}?store={unique('store')}"


@pytest.fixture
def schema_url(postgres: PostgresCluster) -> str:
    """A store in a schema of its own (for tests that inspect or tamper with the schema)."""
    return f"{postgres.dsn}?store=s&schema={unique('t')}"


@pytest.fixture
def admin(postgres: PostgresCluster) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        yield conn


def open_url(url: str) -> PostgresStorage:
    factory = resolve_storage_factory(database_url=url)
    assert isinstance(factory, PostgresStorageFactory)
    return factory.open()[0]


def schema_of(url: str) -> str:
    return url.split("schema=")[1]


def content(state: StoreState) -> StoreState:
    return dataclasses.replace(state, owner_id="", fence=0)


def fill(store: Any, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        store.commit(
            Commit(
                entries=[Entry(f"e{n}", "main", f"e{n - 1}" if n else None, "message", {"n": n, "body": "é" * 50})],
                registers=[RegisterWrite("head", {"entry": f"e{n}"})],
                usage=[UsageRow(f"u{n}", "main", {"tokens": n})],
                receipts=[Receipt("r1", "main", {"status": "running", "n": n})],
                tasks=[TaskRow(f"t{n % 2}", "main", {"status": "waiting", "n": n})],
            )
        )


def catalog(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    """Every schema and table of the database, and every agentcore store row: what a refusal must not change."""
    relations = conn.execute(
        "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') ORDER BY 1, 2"
    ).fetchall()
    stores: list[tuple[Any, ...]] = []
    for (schema,) in conn.execute(
        "SELECT table_schema FROM information_schema.tables WHERE table_name = 'stores' ORDER BY 1"
    ).fetchall():
        stores += conn.execute(f'SELECT {schema!r}, name, fence, last_seq FROM "{schema}".stores ORDER BY 2').fetchall()
    return [*relations, *stores]


# -- the database_url option ----------------------------------------------------------------------


async def test_a_run_on_database_url_resumes_in_a_new_runtime(make_agent, fake_server, store_url) -> None:
    """D1/D8: ``create_agent(database_url=...)`` commits the run to PostgreSQL; a new runtime
    on the same URL replays the finished request without calling the model again."""
    fake_server.enqueue([Text("stored in postgres")])
    agent = await make_agent(database_url=store_url)
    end = final(await collect(agent, AgentInput(prompt="hi", request_id="r1")))
    assert end.status == "completed" and end.text == "stored in postgres"
    transcript = agent.read_transcript()
    await agent.close()
    again = await make_agent(database_url=store_url)
    assert again.read_transcript() == transcript
    replay = final(await collect(again, AgentInput(request_id="r1")))
    assert replay.replayed and replay.text == "stored in postgres"
    assert len(fake_server.requests) == 1


async def test_records_name_each_backend_by_kind_and_schema_version(make_agent, store_url, tmp_path: Path) -> None:
    """The snapshot's ``records.storage.kind`` comes from the backend itself: a PostgreSQL store
    is ``postgresql`` and a SQLite file is ``sqlite`` whatever its name ends with, each with the
    schema version an open store is at (a memory store has none)."""
    on_postgres = await make_agent(database_url=store_url)
    on_sqlite = await make_agent(database_path=str(tmp_path / "agent.data"))
    in_memory = await make_agent()
    storages = [agent.records()["storage"] for agent in (on_postgres, on_sqlite, in_memory)]
    assert [s["kind"] for s in storages] == ["postgresql", "sqlite", "memory"]
    assert [s["schema_version"] for s in storages] == [SCHEMA_VERSION, SQLITE_SCHEMA_VERSION, None]


@pytest.mark.parametrize(
    "url",
    [
        "mysql://localhost/db",
        "postgresql://localhost/db#session-1",
        "postgresql://localhost/db?store=",
        "postgresql://localhost/db?store=a%00b",
        "postgresql://localhost/db?store=a%0Ab",
        "postgresql://localhost/db?store=" + "x" * 256,
        "postgresql://localhost/db?store=a&store=b",
        "postgresql://localhost/db?schema=Bad-Schema",
        "postgresql://localhost/db?not_a_libpq_option=1",
        "postgresql://localhost/db?store=%ff%fe",
    ],
)
def test_a_malformed_database_url_is_refused_naming_the_option_before_connecting(url: str) -> None:
    with pytest.raises(InputValidationError) as info:
        resolve_storage_factory(database_url=url)
    assert info.value.code == INPUT_VALIDATION
    assert info.value.field in ("database_url", "schema")


def test_database_url_with_another_storage_option_names_both(tmp_path: Path, store_url: str) -> None:
    with pytest.raises(InputValidationError) as info:
        resolve_storage_factory(database_path=tmp_path / "a.sqlite", database_url=store_url)
    assert "database_path" in info.value.message and "database_url" in info.value.message


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens there once the socket is closed


async def test_an_unreachable_server_is_store_unavailable_naming_the_option(make_agent, admin) -> None:
    before = catalog(admin)
    url = f"postgresql://agent:s3cret-pw@127.0.0.1:{closed_port()}/agents?store=x"
    with pytest.raises(StoreError) as info:
        await make_agent(database_url=url)
    assert info.value.code == STORE_UNAVAILABLE and info.value.field == "database_url"
    assert "database_url" in info.value.message and "s3cret-pw" not in info.value.message
    assert catalog(admin) == before


@pytest.mark.parametrize("problem", ["no-such-database", "no-such-user"])
def test_a_server_that_refuses_the_login_is_store_unavailable_and_nothing_is_created(
    postgres: PostgresCluster, admin: psycopg.Connection[Any], problem: str
) -> None:
    before = catalog(admin)
    databases = admin.execute("SELECT datname FROM pg_database ORDER BY 1").fetchall()
    url = (
        postgres.url("no_such_database") + "?store=x"
        if problem == "no-such-database"
        else f"postgresql://nobody@127.0.0.1:{postgres.port}/postgres?store=x"
    )
    with pytest.raises(StoreError) as info:
        open_url(url)
    assert info.value.code == STORE_UNAVAILABLE and info.value.field == "database_url"
    assert catalog(admin) == before
    assert admin.execute("SELECT datname FROM pg_database ORDER BY 1").fetchall() == databases


def test_libpq_options_in_the_url_reach_the_server_beside_ours(postgres: PostgresCluster) -> None:
    """``?options=-c ...`` (e.g. ``synchronous_commit=off``) passes through; our lease settings too."""
    url = f"{postgres.dsn}?store={unique('opts')}&options=-c%20statement_timeout%3D12345&application_name=x"
    store = open_url(url)
    conn = store._conn
    assert conn is not None
    assert conn.execute("SHOW statement_timeout").fetchone() == ("12345ms",)
    assert conn.execute("SHOW tcp_keepalives_count").fetchone() == ("4",)
    store.close()


def test_the_password_never_reaches_labels_or_the_options_repr(postgres: PostgresCluster) -> None:
    url = f"postgresql://postgres:hunter2@127.0.0.1:{postgres.port}/postgres?store=secretive"
    factory = resolve_storage_factory(database_url=url)
    assert "hunter2" not in factory.label and "store=secretive" in factory.label
    assert "hunter2" not in repr(AgentOptions(database_url=url))
    storage, release = factory.open()  # trust auth ignores the password: the connection works
    assert "hunter2" not in storage.label
    storage.close()
    release()


# -- hostile names and payloads -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["a'b\"c; DROP TABLE agentcore.entries; --", "ünïcødé ✓ 🚀", "x" * 255, " spaced ", "back\\slash%25"],
)
def test_odd_store_names_are_distinct_stores(postgres: PostgresCluster, name: str) -> None:
    first, _ = postgres_storage(postgres.dsn, name).open()
    first.commit(Commit(entries=[Entry("a", "main", None, "message", {"name": name})]))
    other, _ = postgres_storage(postgres.dsn, name + "-other" if len(name) < 250 else name[:-1]).open()
    assert other.load().entries == []
    first.close()
    other.close()
    again, _ = postgres_storage(postgres.dsn, name).open()
    assert [e.payload for e in again.load().entries] == [{"name": name}]
    assert urllib.parse.parse_qs(again.label.split("?", 1)[1])["store"] == [name]  # quoted in the label
    again.close()


@pytest.mark.parametrize("name", ["", "a\x00b", "tab\there", "x" * 256, "lone \udc80 surrogate", 42])
def test_bad_store_names_are_refused_naming_the_field_before_connecting(name: Any) -> None:
    with pytest.raises(InputValidationError) as info:
        postgres_storage(f"postgresql://127.0.0.1:{closed_port()}/db", name)
    assert info.value.field == "store"


@pytest.mark.parametrize(
    "bad",
    [
        Commit(entries=[Entry("lone", "main", None, "message", {"text": "half an emoji \ud83d"})]),
        Commit(entries=[Entry("nul\x00id", "main", None, "message", {})]),
        Commit(registers=[RegisterWrite("key\udc80", {"v": 1})]),
        Commit(receipts=[Receipt("r", "conv\x00", {})]),
        Commit(tasks=[TaskRow("t", "main", {"s": "\udfff"})]),
    ],
    ids=["surrogate-payload", "nul-entry-id", "surrogate-key", "nul-conversation", "surrogate-task"],
)
def test_text_postgres_cannot_hold_is_store_invalid_and_changes_nothing(store_url: str, bad: Commit) -> None:
    store = open_url(store_url)
    fill(store, 2)
    before = store.load()
    mixed = Commit(
        entries=[Entry("ok", "main", None, "message", {"fine": True}), *bad.entries],
        registers=[RegisterWrite("ok", {"v": 1}), *bad.registers],
        usage=[UsageRow("u-ok", "main", {})],
        receipts=bad.receipts,
        tasks=bad.tasks,
    )
    with pytest.raises(StoreError) as info:
        store.commit(mixed)
    assert info.value.code == STORE_INVALID
    assert "cannot store" in info.value.message or "not valid UTF-8" in info.value.message
    assert content(store.load()) == content(before)
    assert store.commit(Commit(entries=[Entry("after", "main", None, "message", {})])) == before.last_seq + 1
    store.close()


# -- the owner lease across processes, and fencing -------------------------------------------------


def start_holder(url: str, mode: str = "hold") -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, str(CHILD), mode, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith("ready "), line
    return child


def test_another_process_is_refused_naming_its_pid_until_it_is_killed(postgres: PostgresCluster, store_url) -> None:
    """D4: the lease is the owner's server session; SIGKILL ends it and the next owner opens."""
    child = start_holder(store_url)
    try:
        with pytest.raises(StoreError) as info:
            open_url(store_url)
        assert info.value.code == STORE_LOCKED
        assert info.value.details["holder_pid"] == child.pid and f"pid {child.pid}" in info.value.message
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    wait_for_sessions_gone(postgres.dsn, f"pid {child.pid} ")
    store = open_url(store_url)
    store.commit(Commit(entries=[Entry("mine", "main", None, "message", {})]))
    store.close()


def test_a_killed_writer_leaves_whole_commits_and_the_next_owner_continues(postgres, store_url) -> None:
    """DURABILITY 1-4: a child committing in a loop is SIGKILLed; every commit it saw return is
    there, none is partial, and the next owner continues the chain."""
    child = start_holder(store_url, "commits")
    assert child.stdout is not None
    reported = [int(child.stdout.readline()) for _ in range(40)]
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    wait_for_sessions_gone(postgres.dsn, f"pid {child.pid} ")
    store = open_url(store_url)
    state = store.load()
    assert state.last_seq >= reported[-1]
    assert [e.id for e in state.entries] == [f"e{n}" for n in range(1, len(state.entries) + 1)]
    assert [e.seq for e in state.entries] == list(range(1, state.last_seq + 1))
    assert [u.record_id for u in state.usage] == [f"usage-{e.id}" for e in state.entries]
    assert state.registers["head"].seq == state.last_seq
    store.close()


def test_a_stale_owner_whose_session_the_server_ended_writes_nothing(postgres, store_url, admin) -> None:
    """DURABILITY 18: the server ends the owner's session (as it does after a network partition):
    the lease is free, a new owner opens, the stale owner's next commit fails whole."""
    stale = open_url(store_url)
    fill(stale, 3)
    backend = stale._conn.info.backend_pid  # type: ignore[union-attr]
    admin.execute("SELECT pg_terminate_backend(%s, 5000)", (backend,))
    fresh = open_url(store_url)
    before = fresh.load()
    with pytest.raises(StoreError) as info:
        stale.commit(Commit(entries=[Entry("stale", "main", "e2", "message", {})], usage=[UsageRow("s", "m", {})]))
    assert info.value.code == STORE_UNAVAILABLE
    assert content(fresh.load()) == content(before)
    stale.close()
    fill(fresh, 1, start=3)
    assert fresh.load().last_seq == before.last_seq + 1
    fresh.close()


def test_a_stale_commit_racing_a_new_owner_is_fenced_whole(store_url: str) -> None:
    """DURABILITY 18 with two live owners: the stale one's multi-table commit reaches the server
    after the new owner bumped the fence; nothing of it is applied."""
    stale = open_url(store_url)
    fill(stale, 2)
    stale._lease.release()  # the lease is lost (e.g. unlocked by hand); the session lives on
    fresh = open_url(store_url)
    before = fresh.load()
    with pytest.raises(StoreError) as info:
        stale.commit(
            Commit(
                entries=[Entry("stale", "main", "e1", "message", {})],
                registers=[RegisterWrite("head", {"entry": "stale"})],
                usage=[UsageRow("stale-u", "main", {})],
                receipts=[Receipt("r1", "main", {"status": "stale"})],
                tasks=[TaskRow("t0", "main", {"status": "stale"})],
            )
        )
    assert info.value.code == STORE_FENCED
    assert content(fresh.load()) == content(before)
    fresh.close()
    stale.close()


def test_lock_timeout_waits_for_the_owner_to_close(postgres: PostgresCluster, admin) -> None:
    store = unique("wait")
    holder, _ = postgres_storage(postgres.dsn, store).open()
    with pytest.raises(StoreError) as info:
        postgres_storage(postgres.dsn, store, lock_timeout=1).open()
    assert info.value.code == STORE_LOCKED
    opened: list[PostgresStorage] = []
    waiter = threading.Thread(
        target=lambda: opened.append(postgres_storage(postgres.dsn, store, lock_timeout=60).open()[0])
    )
    waiter.start()
    waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    wait_until(lambda: admin.execute(waiting).fetchone()[0] == 1)
    holder.close()
    waiter.join(60)
    assert len(opened) == 1 and opened[0].load().fence == 2
    opened[0].close()


def wait_until(condition: Any, limit: float = 30) -> None:
    """Poll a condition another process (the server) makes true."""
    deadline = threading.Event()
    timer = threading.Timer(limit, deadline.set)
    timer.start()
    try:
        while not condition():
            if deadline.wait(0.01):
                raise AssertionError("condition not met in time")
    finally:
        timer.cancel()


# -- check first, write after ---------------------------------------------------------------------


def test_an_empty_schema_made_by_an_administrator_is_installed_into(schema_url: str, admin) -> None:
    admin.execute(f"CREATE SCHEMA {schema_of(schema_url)}")
    store = open_url(schema_url)
    assert admin.execute(f"SELECT schema_version FROM {schema_of(schema_url)}.meta").fetchone() == (SCHEMA_VERSION,)
    store.close()


def test_first_openers_racing_to_install_a_schema_both_succeed(postgres: PostgresCluster) -> None:
    schema = unique("race")
    results: list[Any] = []

    def opener(name: str) -> None:
        try:
            results.append(postgres_storage(postgres.dsn, name, schema=schema).open()[0])
        except Exception as exc:  # the assertion below shows it
            results.append(exc)

    threads = [threading.Thread(target=opener, args=(f"s{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert all(isinstance(r, PostgresStorage) for r in results) and len(results) == 4, results
    for storage in results:
        storage.close()


@pytest.mark.parametrize(
    "tamper",
    [
        "CREATE TABLE {s}.meta (id int)",  # a foreign schema of the same name
        "UPDATE {s}.meta SET schema_version = 99",
        "CREATE TABLE {s}.extra (x int)",
        "ALTER TABLE {s}.entries ADD COLUMN note text",
        "CREATE FUNCTION {s}.t() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'; "
        "CREATE TRIGGER sneaky BEFORE INSERT ON {s}.entries FOR EACH ROW EXECUTE FUNCTION {s}.t()",
        "CREATE OR REPLACE FUNCTION {s}.apply_commit(" + APPLY_COMMIT_ARGS + ") RETURNS bigint "
        "LANGUAGE plpgsql AS 'BEGIN RETURN 1; END'",
    ],
    ids=["foreign-meta", "newer-version", "extra-table", "extra-column", "trigger", "replaced-function"],
)
def test_a_foreign_or_tampered_schema_is_refused_and_left_untouched(schema_url: str, admin, tamper: str) -> None:
    schema = schema_of(schema_url)
    if not tamper.startswith("CREATE TABLE {s}.meta"):
        store = open_url(schema_url)
        fill(store, 2)
        store.close()
    else:
        admin.execute(f"CREATE SCHEMA {schema}")
    admin.execute(tamper.format(s=schema))
    before = catalog(admin)
    with pytest.raises(StoreError) as info:
        open_url(schema_url)
    assert info.value.code == STORE_INVALID
    assert schema in info.value.message
    if "99" in tamper:
        assert "newer than this agentcore supports" in info.value.message
    assert catalog(admin) == before  # no fence bump, no store row, no schema change


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE {s}.stores SET last_seq = 1",
        "UPDATE {s}.entries SET payload = 'not json' WHERE id = 'e1'",
        "UPDATE {s}.registers SET value = '[1, 2]'",
    ],
    ids=["rewound-last-seq", "corrupt-payload", "register-not-an-object"],
)
def test_a_store_with_tampered_rows_is_refused_before_the_fence_moves(schema_url: str, admin, tamper: str) -> None:
    store = open_url(schema_url)
    fill(store, 3)
    store.close()
    admin.execute(tamper.format(s=schema_of(schema_url)))
    before = catalog(admin)
    with pytest.raises(StoreError) as info:
        open_url(schema_url)
    assert info.value.code == STORE_INVALID
    assert catalog(admin) == before


# -- export / import with SQLite files ------------------------------------------------------------


def test_postgres_to_sqlite_to_postgres_keeps_every_row_seq_and_order(store_url, postgres, tmp_path) -> None:
    store = open_url(store_url)
    fill(store, 25)
    store.commit(Commit(registers=[RegisterWrite("head", None)]))  # a deleted register stays deleted
    expected = store.load()
    store.close()
    file = tmp_path / "backup" / "session.sqlite"
    assert export_agent_database(database_url=store_url, destination=file) == file
    check = sqlite3.connect(file)
    assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)  # like every store file
    check.close()
    assert sorted(p.name for p in file.parent.iterdir()) == ["session.sqlite"]
    sqlite_store, release = SqliteStorageFactory(file).open()
    assert content(sqlite_store.load()) == content(expected)
    assert list(sqlite_store.load().receipts) == list(expected.receipts)
    sqlite_store.close()
    release()
    restored = f"{postgres.dsn}?store={unique('restored')}"
    label = import_agent_database(source=file, database_url=restored)
    assert label.endswith(restored.split("?")[1])
    again = open_url(restored)
    state = again.load()
    assert content(state) == content(expected)
    assert state.fence == expected.fence + 2  # carried over (the export's copy opened once), then bumped
    again.commit(Commit(entries=[Entry("next", "main", "e24", "message", {})]))
    again.close()


def test_export_refuses_an_open_store_and_a_taken_destination(store_url, tmp_path) -> None:
    store = open_url(store_url)
    fill(store, 2)
    with pytest.raises(StoreError) as info:
        export_agent_database(database_url=store_url, destination=tmp_path / "copy.sqlite")
    assert info.value.code == STORE_LOCKED
    store.close()
    taken = tmp_path / "taken.sqlite"
    taken.write_bytes(b"precious")
    with pytest.raises(StoreError) as info:
        export_agent_database(database_url=store_url, destination=taken)
    assert info.value.code == STORE_EXISTS and taken.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.sqlite"]


def test_exporting_a_missing_store_creates_nothing_anywhere(postgres, admin, tmp_path) -> None:
    before = catalog(admin)
    url = f"{postgres.dsn}?store=never-made&schema={unique('absent')}"
    with pytest.raises(StoreError) as info:
        export_agent_database(database_url=url, destination=tmp_path / "out" / "copy.sqlite")
    assert info.value.code == STORE_INVALID and "no agent store" in info.value.message
    assert catalog(admin) == before and list(tmp_path.iterdir()) == []


def test_import_never_overwrites_an_existing_store(store_url, tmp_path) -> None:
    source = tmp_path / "src.sqlite"
    sqlite_store, release = SqliteStorageFactory(source).open()
    fill(sqlite_store, 2)
    sqlite_store.close()
    release()
    store = open_url(store_url)
    fill(store, 1, start=50)
    expected = store.load()
    store.close()
    with pytest.raises(StoreError) as info:
        import_agent_database(source=source, database_url=store_url)
    assert info.value.code == STORE_EXISTS
    store = open_url(store_url)
    assert content(store.load()) == content(expected)
    store.close()


def test_import_refuses_what_opening_would_refuse_and_creates_no_store(postgres, admin, tmp_path) -> None:
    corrupt = tmp_path / "corrupt.sqlite"
    sqlite_store, release = SqliteStorageFactory(corrupt).open()
    fill(sqlite_store, 2)
    sqlite_store.close()
    release()
    conn = sqlite3.connect(corrupt)
    conn.execute("UPDATE entries SET payload = '[1, 2]' WHERE id = 'e1'")
    conn.commit()
    conn.close()
    nul = tmp_path / "nul.sqlite"
    sqlite_store, release = SqliteStorageFactory(nul).open()
    sqlite_store.commit(Commit(entries=[Entry("nul\x00id", "main", None, "message", {})]))  # SQLite holds NUL
    sqlite_store.close()
    release()
    url = f"{postgres.dsn}?store=imported&schema={unique('imp')}"
    before = catalog(admin)
    for source, reason in ((corrupt, "not a JSON object"), (nul, "NUL"), (tmp_path / "missing.sqlite", "no agent")):
        with pytest.raises(StoreError) as info:
            import_agent_database(source=source, database_url=url)
        assert info.value.code == STORE_INVALID and reason in info.value.message
        assert catalog(admin) == before


# -- offline cancel ---------------------------------------------------------------------------------


async def pause_on_plan(payload: dict[str, Any]) -> None:
    raise UserInputRequired("review", payload)


async def test_offline_cancel_ends_a_paused_run_in_a_postgres_store(make_agent, fake_server, postgres) -> None:
    """D7: the store named by ``database_url`` (or, without ``?store=``, by the conversation id)."""
    session = unique("sess")
    url = f"{postgres.dsn}?store={session}"
    fake_server.enqueue([Text("Plan: 1. do it")])
    agent = await make_agent(database_url=url)
    host = AgentHost(approve_plan=pause_on_plan)
    end = final(await collect(agent, AgentInput(prompt="x", request_id="r1", agent="plan"), host))
    assert end.status == "paused"
    with pytest.raises(AgentError) as info:
        await cancel_agent_conversation(database_url=postgres.dsn, conversation_id=session)
    assert info.value.code == STORE_LOCKED
    await agent.close()
    outcome = await cancel_agent_conversation(database_url=postgres.dsn, conversation_id=session)
    assert outcome["cancelled_requests"] == ["r1"]
    reopened = await make_agent(database_url=url)
    assert reopened.pending_request_id is None
    again = final(await collect(reopened, AgentInput(request_id="r1")))
    assert again.status == "aborted" and again.replayed and len(fake_server.requests) == 1


@pytest.mark.parametrize("schema", ["agentcore", "never_installed"])
async def test_offline_cancel_of_a_missing_store_creates_nothing(postgres, admin, schema: str) -> None:
    """D7: neither the store nor (when absent) the schema is created by a cancel."""
    if schema == "agentcore":
        postgres_storage(postgres.dsn, unique("other")).open()[0].close()  # the schema exists, the store not
    before = catalog(admin)
    with pytest.raises(AgentError) as info:
        url = f"{postgres.dsn}?store=nobody-here&schema={schema}"
        await cancel_agent_conversation(database_url=url, conversation_id="x")
    assert info.value.code == STORE_INVALID and info.value.field == "database_url"
    assert catalog(admin) == before


async def test_create_agent_refuses_a_bad_database_url_before_opening(admin) -> None:
    before = catalog(admin)
    with pytest.raises(InputValidationError) as info:
        await create_agent(provider="fake", model="m", base_url="http://127.0.0.1:9", database_url="sqlite:///x.db")
    assert info.value.field == "database_url"
    assert catalog(admin) == before
