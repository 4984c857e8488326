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
