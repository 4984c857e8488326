"""Issue #19 (invariant 5): Studio's usage is a projection of the store's usage ledger.

The crash window is reproduced honestly: a real runtime commits usage rows to the session's
real store while Studio sees none of its events (as if the host died between the runtime's
commit and Studio's write). The next host that opens the session must show them, and its
totals must equal the sums of the store's ledger, read here with plain SQL.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from studio import selectors
from studio.host.session_host import SessionHost, set_session_host
from studio.models import Run, StudioSession, UsageRecord

pytestmark = pytest.mark.django_db(transaction=True)

TOKENS = ("input_tokens", "cached_input_tokens", "cache_creation_tokens", "output_tokens", "reasoning_tokens")


def _store_ledger(store_path: str) -> tuple[set[str], dict[str, int]]:
    conn = sqlite3.connect(store_path)
    try:
        ids = {row[0] for row in conn.execute("SELECT record_id FROM usage")}
        sums = conn.execute(
            "SELECT " + ", ".join(f"COALESCE(SUM(json_extract(payload, '$.{f}')), 0)" for f in TOKENS) + " FROM usage"
        ).fetchone()
    finally:
        conn.close()
    return ids, dict(zip(TOKENS, sums, strict=True))


async def _unseen_runs(store_path: str, workdir: str, *prompts: str, request_id: str | None = None) -> None:
    """Runs whose events Studio never saw: the runtime commits, nobody reports."""
    from agentcore import AgentInput, create_agent

    runtime = await create_agent(database_path=store_path, workdir=workdir, provider="demo")
    try:
        for prompt in prompts:
            async for event in runtime.run(AgentInput(prompt=prompt, request_id=request_id)):
                if event.type == "end":
                    assert event.status == "completed", event
    finally:
        await runtime.close()


async def _assert_projection(session: StudioSession) -> None:
    ids, sums = await sync_to_async(_store_ledger)(session.store_path)
    records = {r async for r in UsageRecord.objects.filter(session=session).values_list("record_id", flat=True)}
    assert records == ids and ids
    fresh = await StudioSession.objects.aget(pk=session.pk)
    for field in TOKENS:
        assert getattr(fresh, field) == sums[field], field
    usage = await sync_to_async(selectors.usage_context)(fresh)
    assert usage["usage_totals"]["calls"] == len(ids)
    assert usage["usage_totals"]["input_tokens"] == sums["input_tokens"]


async def _ran_on_a_host_now_gone(sid: str, prompt: str) -> None:
    """A host runs one prompt to its end and closes; the store stays."""
    host = SessionHost(flush_interval=0.01)
    set_session_host(host)
    try:
        await host.prompt(sid, prompt=prompt, agent="build")
        await host.wait_idle(sid)
    finally:
        await host.close()


async def test_rows_committed_while_studio_was_away_appear_when_the_host_reopens(user: Any, make_session: Any) -> None:
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    try:
        await _ran_on_a_host_now_gone(sid, "what files are here?")
        seen = await UsageRecord.objects.filter(session=session).acount()
        assert seen > 0
        await _unseen_runs(session.store_path, session.workdir, "hello again", "and once more")
        ids, _ = await sync_to_async(_store_ledger)(session.store_path)
        assert len(ids) > seen  # the store has rows Studio never heard of
        assert await UsageRecord.objects.filter(session=session).acount() == seen
        second = SessionHost(flush_interval=0.01)
        set_session_host(second)
        try:
            await second.state(sid)  # opening the session reconciles it with its store
            await _assert_projection(session)
            # A later run keeps the projection exact (its live events and the ledger agree).
            await second.prompt(sid, prompt="one more", agent="build")
            await second.wait_idle(sid)
            await _assert_projection(session)
        finally:
            await second.close()
    finally:
        set_session_host(None)


async def test_a_resumed_run_counts_the_usage_its_crashed_host_never_recorded(user: Any, make_session: Any) -> None:
    """Studio recorded the run as running and none of its usage (its host died before the
    events reached Studio); the store holds the whole run. Resuming it on the next host (a
    replay: agentcore re-sends no usage report) yields totals equal to the ledger."""
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    host = SessionHost(flush_interval=0.01)
    set_session_host(host)
    try:
        await _unseen_runs(session.store_path, session.workdir, "what files are here?", request_id="lost-run")
        await Run.objects.acreate(session=session, request_id="lost-run", prompt="what files are here?")
        await host.state(sid)  # opens the store, reconciles usage, resumes the "running" run
        await host.wait_idle(sid)
        await _assert_projection(session)
        assert (await StudioSession.objects.aget(pk=session.pk)).cost == Decimal(0)  # the demo is free
    finally:
        await host.close()
        set_session_host(None)


async def test_a_usage_row_studio_failed_to_write_is_recovered_after_the_run_from_the_runtime(
    user: Any, make_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's end reconciles an open store from what its runtime holds
    (``AgentRuntime.usage_ledger``): a usage row whose write to Studio failed mid-run is there
    once the run is over, and the store file was never opened a second time to find it."""
    from studio import ledger, services

    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    host = SessionHost(flush_interval=0.01)
    set_session_host(host)
    file_reads: list[str] = []
    real_read, real_record = ledger.read_usage_ledger, services.record_usage
    failed: list[str] = []

    def counted(store_path: str, after: int = 0) -> list[Any]:
        file_reads.append(store_path)
        return real_read(store_path, after)

    def fails_once(root_id: str, request_id: str, *args: Any, **kwargs: Any) -> Any:
        if not failed:
            failed.append(request_id)
            raise RuntimeError("Studio's database refused the write")
        return real_record(root_id, request_id, *args, **kwargs)

    monkeypatch.setattr(ledger, "read_usage_ledger", counted)
    monkeypatch.setattr(services, "record_usage", fails_once)
    try:
        await host.prompt(sid, prompt="what files are here?", agent="build")  # two model calls
        await host.wait_idle(sid)
        assert failed and file_reads == []
        await _assert_projection(session)
    finally:
        await host.close()
        set_session_host(None)


def _migrate(target: str | None) -> None:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.migrate([("studio", target)] if target else executor.loader.graph.leaf_nodes())


async def test_after_the_upgrade_an_opening_reads_the_whole_ledger_once_and_counts_nothing_twice(
    user: Any, make_session: Any
) -> None:
    """Migration 0008: the ledger position is a commit seq now, so an older Studio's position
    (the usage table's row ``pos``) starts again from 0, and the next opening of the store
    reconciles the whole ledger without adding a row Studio already has."""
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    await _ran_on_a_host_now_gone(sid, "what files are here?")
    recorded = await UsageRecord.objects.filter(session=session).acount()
    await sync_to_async(_migrate)("0007_operator_list_and_usage_times")
    await StudioSession.objects.filter(pk=session.pk).aupdate(ledger_pos=1)  # a row pos, not a seq
    await sync_to_async(_migrate)(None)
    assert (await StudioSession.objects.aget(pk=session.pk)).ledger_pos == 0
    second = SessionHost(flush_interval=0.01)
    set_session_host(second)
    try:
        await second.state(sid)
        await _assert_projection(session)
        assert await UsageRecord.objects.filter(session=session).acount() == recorded
        with sqlite3.connect(session.store_path) as conn:
            [(last_seq,)] = conn.execute("SELECT MAX(seq) FROM usage").fetchall()
        assert (await StudioSession.objects.aget(pk=session.pk)).ledger_pos == last_seq  # a seq from now on
    finally:
        await second.close()
        set_session_host(None)
