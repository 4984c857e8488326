"""The session host over PostgreSQL stores (issue 18, D4): a host that loses its store's
connection — what the new holder's fencing does to a frozen worker — drops the session once
instead of serving it again in a loop, and the store it leaves behind resumes elsewhere.

Studio's own tables stay in the test's SQLite database here; the agent stores live in the
private PostgreSQL server of the ``postgres`` fixture (``STUDIO_DATABASE_URL`` sessions).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from asgiref.sync import sync_to_async

from agentcore.testing.fake_server import FakeProviderServer
from studio.host.session_host import SessionHost
from studio.models import Run, StoreBackend
from studio.models import StudioSession as StudioSessionModel
from tests.pg import PostgresCluster
from tests.studio.fakes import Gate, gated_factory, responder

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def store_db(postgres: PostgresCluster, settings: Any) -> str:
    url = postgres.create_database(f"stores_{uuid.uuid4().hex[:8]}")
    settings.STUDIO_DATABASE_URL = url  # new sessions get PostgreSQL stores
    return url


def _terminate_our_store_connections(url: str) -> int:
    """End this process's agentcore owner sessions on the server (what fencing a frozen worker
    does to it): the owner lease goes with them."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name LIKE %s",
            (f"agentcore pid {os.getpid()} on %",),
        ).fetchall()
    return len(rows)


async def test_sessions_get_postgresql_stores_with_one_setting(user: Any, make_session: Any, store_db: str) -> None:
    from studio.stores import location_of

    session = await sync_to_async(make_session)(user)
    assert session.store_backend == StoreBackend.POSTGRESQL
    location = await sync_to_async(location_of)(session)
    assert (location.name, location.is_postgres) == (str(session.pk), True)
    assert location.label == f"{store_db}?store={session.pk}" == session.store_path
    from django.test import Client

    from studio.host.session_host import set_session_host

    host = SessionHost(flush_interval=0.01)
    set_session_host(host)
    try:
        await host.prompt(str(session.pk), prompt="what files are here?", agent="build")
        await host.wait_idle(str(session.pk))
        transcript = (await host.state(str(session.pk))).transcript
        assert transcript[-1]["role"] == "assistant" and "README" in str(transcript[-1]["content"])
        owner = Client()
        await sync_to_async(owner.force_login)(user)
        page = (await sync_to_async(owner.get)(f"/sessions/{session.pk}/")).content.decode()
        store = page[page.index('id="records-store"') :][:1500]
        assert f"?store={session.pk}" in store and "<dd>postgresql</dd>" in store and "not created" not in store
        assert "<dt>Schema version</dt><dd>1</dd>" in store
    finally:
        await host.close()
        set_session_host(None)
    with psycopg.connect(store_db, autocommit=True) as conn:
        [(last_seq,)] = conn.execute("SELECT last_seq FROM agentcore.stores WHERE name = %s", (str(session.pk),))
    assert last_seq > 0
    assert await sync_to_async(location.exists)() and (await sync_to_async(location.size)() or 0) > 0


async def test_a_host_that_loses_its_store_connection_drops_the_session_once(
    user: Any, make_session: Any, store_db: str, caplog: Any
) -> None:
    server = FakeProviderServer(responder=responder).start_in_thread()
    gate = Gate()
    factory: Callable[[Any], Any] = gated_factory(server, gate)
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    host = SessionHost(runtime_factory=factory, flush_interval=0.01)
    fresh = SessionHost(runtime_factory=factory, flush_interval=0.01)
    try:
        sent = await host.prompt(sid, prompt="HOLD then answer", agent="build")
        await gate.entered.wait()
        hs = host._sessions[sid]
        assert await sync_to_async(_terminate_our_store_connections)(store_db) == 1
        with caplog.at_level(logging.WARNING, logger="studio.hosts"):
            gate.release()  # the tool's result cannot be committed: the connection is gone
            lease = hs.lease
            assert lease is not None
            await lease  # the lease task drops the session and ends (it never serves the lost store again)
        messages = [r.getMessage() for r in caplog.records]
        assert messages.count(f"session {sid}: dropped (the store refused this owner: store_unavailable); "
                              "its new holder resumes it") == 1, messages  # fmt: skip
        assert not any("the lease ended with" in m for m in messages), messages
        assert hs.lost and hs.runtime is None

        # Whoever opens the store next resumes the same request by its id and finishes it.
        await fresh.state(sid)
        await gate.entered.wait()  # the gate is replay-safe: its unsettled call runs again
        gate.release()
        await fresh.wait_idle(sid)
        transcript = (await fresh.state(sid)).transcript
        answers = [m for m in transcript if m["role"] == "assistant" and "Released: HOLD then answer" in str(m)]
        assert len(answers) == 1
        assert (await Run.objects.aget(request_id=sent["request_id"])).status == "completed"
    finally:
        await host.close()
        await fresh.close()
        server.stop_in_thread()


def test_store_locations_and_settings_never_show_the_password() -> None:
    from studio.database_url import DatabaseUrlError, django_database
    from studio.stores import StoreLocation

    url = "postgresql://studio:s3cret%21@db.internal:5433/studio?sslmode=require"
    location = StoreLocation(StoreBackend.POSTGRESQL, name="1a2b", database_url=url)
    assert location.label == "postgresql://studio@db.internal:5433/studio?store=1a2b"
    assert "s3cret" not in repr(location)
    assert location.store_url == url + "&store=1a2b"  # for agentcore only
    database = django_database(url)
    assert (database["NAME"], database["USER"], database["PASSWORD"], database["HOST"], database["PORT"]) == (
        "studio", "studio", "s3cret!", "db.internal", "5433"
    )  # fmt: skip
    assert database["OPTIONS"] == {"sslmode": "require"}
    for bad, says in (
        ("mysql://db/studio", "postgresql://"),
        ("postgresql://db", "names no database"),
        ("postgresql://db/studio?store=x", "?store="),
        ("postgresql://db:port/studio", "not a valid URL"),
    ):
        with pytest.raises(DatabaseUrlError) as err:
            django_database(bad)
        assert says in str(err.value) and "STUDIO_DATABASE_URL" in str(err.value)


async def test_store_admin_lists_exports_imports_and_cancels_postgresql_stores(
    admin_client: Any, user: Any, demo_model: Any, make_session: Any, store_db: str, studio_data_dir: Any
) -> None:
    """W5 for PostgreSQL sessions: the stores page names the store (not a file), export goes
    through the host that owns it into a SQLite copy, that copy imports as a new PostgreSQL
    store (never over an existing one), and offline cancel ends a paused run."""
    from django.urls import reverse

    from agentcore import create_agent
    from studio.host.session_host import set_session_host

    host = SessionHost(flush_interval=0.01)
    set_session_host(host)
    try:
        session = await sync_to_async(make_session)(user, mode="plan")
        sid = str(session.pk)
        await host.prompt(sid, prompt="Plan a reading list app", agent="plan")
        await host.wait_idle(sid)
        changelist = reverse("admin:studio_sessionstore_changelist")
        listing = (await sync_to_async(admin_client.get)(changelist)).content.decode()
        assert f"PostgreSQL store {sid}" in listing and "not created" not in listing

        def act(action: str) -> str:
            response = admin_client.post(changelist, {"action": action, "_selected_action": [sid]}, follow=True)
            return str(response.content.decode())

        page = await sync_to_async(act)("export_store")
        assert "exported to" in page, page
        [copy] = list((studio_data_dir / "exports").glob(f"{sid}-*.sqlite"))
        exported = await create_agent(database_path=str(copy), workdir=session.workdir, provider="demo")
        try:
            assert "Plan a reading list app" in str(exported.read_transcript())
            assert exported.pending_request_id is not None  # the pause travelled with the copy
        finally:
            await exported.close()

        def import_(**data: Any) -> str:
            response = admin_client.post(reverse("admin:studio_sessionstore_import"), data, follow=True)
            return str(response.content.decode())

        page = await sync_to_async(import_)(
            source_path=str(copy), owner=user.pk, registered_model=demo_model.pk, title="Restored"
        )
        assert "Imported the store into “Restored”" in page
        restored = await StudioSessionModel.objects.aget(title="Restored")
        assert restored.store_backend == StoreBackend.POSTGRESQL
        assert "Plan a reading list app" in str((await host.state(str(restored.pk))).transcript)
        page = await sync_to_async(import_)(source_path=str(copy), session=sid)
        assert "already has a store" in page  # never over an existing store

        page = await sync_to_async(act)("cancel_offline")
        assert "cancelled 1 unfinished run." in page, page
        run = await Run.objects.aget(session_id=sid)
        assert (run.status, run.error_code) == ("aborted", "cancelled_offline")
        await host.prompt(sid, prompt="Plan something smaller", agent="plan")  # the store works on
        await host.wait_idle(sid)
        assert await Run.objects.filter(session_id=sid, status="paused").acount() == 1
    finally:
        await host.close()
        set_session_host(None)
