"""Opening a session's store in the host: what it reads of Studio's own tables (SPEC W1, S3;
the catch-up of ``effects.follow_store``)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from studio import ledger
from tests.studio.statements import statements_on_database_thread

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_new_sessions_store_is_opened_without_catching_up_on_runs_or_the_ledger(
    user: Any, make_session: Any, host: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store the host's open has just created held nothing: no Studio turn row to close from
    it, no ledger row to copy — so neither Studio's open turns, nor its ledger position, nor
    the store's ledger are read (the page still renders from the new store)."""
    ledger_reads: list[str] = []
    real_read = ledger.read_usage_ledger

    def counted(store_path: str, after: int = 0) -> list[Any]:
        ledger_reads.append(store_path)
        return real_read(store_path, after)

    monkeypatch.setattr(ledger, "read_usage_ledger", counted)
    session = await sync_to_async(make_session)(user)
    async with statements_on_database_thread() as log:
        state = await host.state(str(session.pk))
    assert state is not None
    assert log.touching("studio_run") == []
    assert log.touching('SELECT "ledger_pos"') == []  # services.ledger_position
    assert ledger_reads == []


async def test_opening_a_store_builds_its_snapshot_once(
    user: Any, make_session: Any, host: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S3: the store's state at open is the ``session`` event ``serve()`` starts with; the host
    does not build a snapshot of the same state itself first (and the page shows it)."""
    from agentcore.session.driver import SessionDriver

    builds: list[bool] = []
    real_snapshot = SessionDriver.snapshot

    def counted(self: SessionDriver, *, published: bool = False) -> Any:
        builds.append(published)
        return real_snapshot(self, published=published)

    monkeypatch.setattr(SessionDriver, "snapshot", counted)
    session = await sync_to_async(make_session)(user)
    state = await host.state(str(session.pk))
    assert len(builds) == 1
    assert state.snapshot is not None and state.snapshot["contexts"][0]["status"] == "idle"


async def test_opening_a_store_writes_no_status_the_sessions_row_already_has(
    user: Any, make_session: Any, host: Any
) -> None:
    """W1: the sessions list's status is written when the store's state says otherwise than
    the row — not at every opening of an idle store."""
    session = await sync_to_async(make_session)(user)
    async with statements_on_database_thread() as log:
        await host.state(str(session.pk))
    assert [s for s in log.statements if s.startswith("UPDATE") and '"status"' in s] == []


async def test_opening_a_store_corrects_a_status_its_dead_host_left(user: Any, make_session: Any, host: Any) -> None:
    """W1: a row still saying ``running`` (its host died mid-turn) shows the store's state once
    the store is opened again."""
    from studio.models import StudioSession

    session = await sync_to_async(make_session)(user)
    await sync_to_async(StudioSession.objects.filter(pk=session.pk).update)(status="running")
    await host.state(str(session.pk))
    await host.wait_idle(str(session.pk))
    row = await sync_to_async(StudioSession.objects.get)(pk=session.pk)
    assert row.status == "idle"


async def test_an_open_stores_page_takes_its_schema_version_from_the_runtime(
    user: Any, make_session: Any, host: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25: the Records tab's schema version of a store the host has open is what its
    runtime reports (the snapshot's ``records``; an open store is always at agentcore's
    version), so an opening opens no read-only connection of its own to read it."""
    from django.test import AsyncClient

    from agentcore.harness.sqlite_store import SqliteStorage

    read: list[str] = []
    monkeypatch.setattr(ledger, "read_schema_version", lambda path: read.append(path) or None)
    session = await sync_to_async(make_session)(user)
    await host.state(str(session.pk))
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    page = (await client.get(f"/sessions/{session.pk}/")).content.decode()
    assert f"<dt>Schema version</dt><dd>{SqliteStorage.schema_version}</dd>" in page
    assert read == []
