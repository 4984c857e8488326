"""What one turn costs Studio's database: a bounded number of statements, no new connection.

Issue 25: Studio's CPU per turn was mostly Django building and running queries — a new SQLite
connection (and its pragmas) per database hop, the model table read and every key decrypted on
each prompt, the turn's rows written one statement and one transaction at a time, the review
card and the notices read back on every turn's end. The budget below is what a plain turn (a
prompt through the page's POST, a streamed answer, its end and every push the page gets) may
cost, counted over every thread.
"""

from __future__ import annotations

import asyncio
import re
import traceback
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.test import AsyncClient
from django.urls import reverse

from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import Step, Stop, Text, ToolCall, Usage
from studio.host.session_host import SessionHost
from tests.studio.fakes import gated_host, scripted_session

pytestmark = pytest.mark.django_db(transaction=True)

#: Statements a plain turn may run, all threads together (``BEGIN`` included; the usage insert
#: skips a replayed report with ``ON CONFLICT DO NOTHING``, no savepoint): the session and its user,
#: the owned session, the model table's check, the turn's row and the session's (one
#: transaction), the Usage tab's two reads, the usage record with the turn's end and the
#: session's row and totals (one transaction), the notices of the settled turns. Before issue 25's
#: second round: 26; third: 18; seventh: 16 (the usage record had a transaction of its own).
TURN_STATEMENTS = 13


class Statements:
    """Every SQL statement Django runs in any thread."""

    def __init__(self) -> None:
        self.sql: list[str] = []

    def count(self) -> int:
        return len(self.sql)


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[Statements]:
    seen = Statements()
    execute, executemany = CursorWrapper._execute, CursorWrapper._executemany

    def counted(self: Any, sql: str, *args: Any, **kwargs: Any) -> Any:
        seen.sql.append(re.sub(r"\s+", " ", sql)[:120])
        return execute(self, sql, *args, **kwargs)

    def counted_many(self: Any, sql: str, *args: Any, **kwargs: Any) -> Any:
        seen.sql.append(re.sub(r"\s+", " ", sql)[:120])
        return executemany(self, sql, *args, **kwargs)

    monkeypatch.setattr(CursorWrapper, "_execute", counted)
    monkeypatch.setattr(CursorWrapper, "_executemany", counted_many)
    yield seen


def _answer(request: RecordedRequest) -> list[Step]:
    return [Text("", chunks=["One", " two", " three."]), Usage(input=20, output=3), Stop("stop")]


@pytest.fixture
async def server() -> AsyncIterator[FakeProviderServer]:
    fake = FakeProviderServer(responder=_answer).start_in_thread()
    yield fake
    fake.stop_in_thread()


async def test_a_plain_turn_runs_a_bounded_number_of_statements_on_kept_connections(
    user: Any, host: SessionHost, server: FakeProviderServer, statements: Statements
) -> None:
    """W1/W2: after a first turn (caches warm), a second turn — POST, stream, end, pushes — runs
    at most ``TURN_STATEMENTS``, and the database thread's connection is kept for the next hop
    (never scheduled to close: ``CONN_MAX_AGE=None``; the test database lives in memory, where
    Django never closes one, so the schedule is what can be seen here)."""
    session, client = await scripted_session(user, server)
    sid = str(session.pk)
    assert (await client.get(reverse("studio:session_detail", args=[sid]))).status_code == 200
    prompt = reverse("studio:session_prompt", args=[sid])
    for turn in ("first", "second"):
        before = statements.count()
        response = await client.post(
            prompt, {"prompt": f"the {turn} turn", "agent": "build"}, headers={"HX-Request": "true"}
        )
        assert response.status_code == 200
        await host.wait_idle(sid)
    assert await database_sync_to_async(lambda: connection.close_at)() is None
    ran = statements.sql[before:]
    assert len(ran) <= TURN_STATEMENTS, "\n".join(ran)


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The Studio function (``file:function``) behind every statement Django's ORM compiled, in
    any thread: what is left of a turn's CPU in Studio is mostly building such statements."""
    from django.db.models.sql import compiler

    seen: list[str] = []

    def wrap(cls: Any) -> None:
        original = cls.as_sql

        def as_sql(self: Any, *args: Any, **kwargs: Any) -> Any:
            stack = traceback.extract_stack(limit=40)
            callers = [f for f in stack if "/studio/" in f.filename and "/tests/" not in f.filename]
            seen.append(f"{Path(callers[-1].filename).name}:{callers[-1].name}" if callers else "?")
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "as_sql", as_sql)

    for cls in (compiler.SQLCompiler, compiler.SQLInsertCompiler, compiler.SQLUpdateCompiler):
        wrap(cls)
    yield seen


async def test_a_turns_writes_and_model_reads_compile_no_orm_statement(
    user: Any, host: SessionHost, server: FakeProviderServer, compiled: list[str]
) -> None:
    """W1/W2 (issue 25): the rows a turn writes — its run row at the prompt, its usage record,
    its end, the session row's status, activity, title and totals — are prepared plain
    statements (``studio.sql``): the host's effects build no ORM query, which cost more CPU
    than the rest of the turn's bookkeeping together; so are the enabled models the prompt
    checks, the model choices the controls show and the view's row the POST and the pushes
    read (with its model, owner and main session)."""
    session, client = await scripted_session(user, server)
    sid = str(session.pk)
    assert (await client.get(reverse("studio:session_detail", args=[sid]))).status_code == 200
    prompt = reverse("studio:session_prompt", args=[sid])
    before = len(compiled)
    response = await client.post(prompt, {"prompt": "the turn", "agent": "build"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    await host.wait_idle(sid)
    writes = [c for c in compiled[before:] if c.split(":")[0] in ("effects.py", "services.py")]
    assert writes == []
    # Nothing is left: the login's session and user are plain reads too (``studio.django_sessions``,
    # ``studio.authentication``).
    assert compiled[before:] == []
    run = await sync_to_async(lambda: session.runs.get())()
    assert (run.status, run.prompt) == ("completed", "the turn")
    await sync_to_async(session.refresh_from_db)()
    assert (session.title, session.status, session.input_tokens, session.output_tokens) == ("the turn", "idle", 20, 3)
    assert await sync_to_async(lambda: session.usage_records.count())() == 1


async def test_a_page_and_its_host_opening_compile_no_orm_statement_of_studios(
    user: Any, host: SessionHost, server: FakeProviderServer, compiled: list[str]
) -> None:
    """W1 (issue 25): the page's GET reads the view's row (with its model, owner and main
    session) once, after the host opened the session — so it shows the status and totals the
    opening reconciled — in one plain statement: the page's contexts compile no ORM query (they
    re-read the row with ``refresh_from_db`` and then its model and owner one query each)."""
    session, client = await scripted_session(user, server)
    before = len(compiled)
    page = await client.get(reverse("studio:session_detail", args=[str(session.pk)]))
    assert page.status_code == 200 and session.registered_model.name in page.content.decode()
    # Nothing is left: the login's session and user are plain reads too.
    assert compiled[before:] == []


async def test_a_session_page_checks_ownership_without_a_row_and_reads_the_view_row_once(
    user: Any, host: SessionHost, server: FakeProviderServer, statements: Statements
) -> None:
    """W6/W1 (issue 25): the page's GET proves the session is its person's with a ``SELECT 1``
    (before the host opens it) and reads the session's row, joined with what the page shows,
    once: after the opening, as the opening left it. Someone else's session is still a 404."""
    session, client = await scripted_session(user, server)
    url = reverse("studio:session_detail", args=[str(session.pk)])
    assert (await client.get(url)).status_code == 200  # the host holds it now
    before = statements.count()
    page = await client.get(url)
    assert page.status_code == 200 and session.registered_model.name in page.content.decode()
    session_rows = [s for s in statements.sql[before:] if s.startswith('SELECT t0."id", t0."owner_id", t0."root_id"')]
    ownership = [s for s in statements.sql[before:] if s.startswith('SELECT 1 FROM "studio_studiosession"')]
    assert (len(session_rows), len(ownership)) == (1, 1), "\n".join(statements.sql[before:])
    stranger = await sync_to_async(get_user_model().objects.create_user)("stranger", password="stranger-pass-123")
    other = AsyncClient()
    await sync_to_async(other.force_login)(stranger)
    assert (await other.get(url)).status_code == 404


def _transactions(sql: list[str]) -> int:
    return sum(1 for statement in sql if statement.startswith("BEGIN"))


async def test_a_turns_usage_record_is_written_in_its_ends_transaction(
    user: Any, host: SessionHost, server: FakeProviderServer, statements: Statements
) -> None:
    """W1/W2 (issue 25): a turn writes two transactions on Django's database thread — its run's
    row at the prompt, and its end with the model call's usage record and the session's totals
    (the usage had one of its own, a third hop per turn) — and the record is there after it."""
    session, _client = await scripted_session(user, server)
    sid = str(session.pk)
    for turn in ("first", "second"):
        before = statements.count()
        request_id = (await host.prompt(sid, prompt=f"the {turn} turn", agent="build"))["request_id"]
        await host.wait_idle(sid)
        assert _transactions(statements.sql[before:]) == 2, "\n".join(statements.sql[before:])
        records = session.usage_records.filter(request_id=request_id).values_list("input_tokens", "output_tokens")
        assert [row async for row in records] == [(20, 3)]
    await sync_to_async(session.refresh_from_db)()
    assert (session.input_tokens, session.output_tokens) == (40, 6)


def _gated(request: RecordedRequest) -> list[Step]:
    """A tool call to the ``gate`` (held until the test opens it), then an answer."""
    if not any(i.get("type") == "function_call_output" for i in request.json.get("input") or []):
        return [ToolCall("gate", {}, id="call_gate"), Usage(input=30, output=4), Stop("tool_use")]
    return [Text("Through the gate."), Usage(input=50, output=5), Stop("stop")]


async def test_a_model_calls_usage_is_recorded_with_the_tool_call_it_asked_for(user: Any) -> None:
    """W2 (issue 25): a live turn's usage record waits for the next row its turn writes — here
    the tool call the model asked for, not the turn's end: while the tool still runs, the first
    call's usage is in Studio's table and on the session's totals."""
    async with gated_host(_gated) as (host, gate, server):
        session, _client = await scripted_session(user, server)
        sid = str(session.pk)
        await host.prompt(sid, prompt="open the gate", agent="build")
        await asyncio.wait_for(gate.entered.wait(), 10)
        await host.wait_pushed(sid)
        records = await sync_to_async(lambda: list(session.usage_records.values_list("input_tokens", flat=True)))()
        assert records == [30]
        await sync_to_async(session.refresh_from_db)()
        assert (session.input_tokens, session.output_tokens) == (30, 4)
        gate.release()
        await host.wait_idle(sid)
        records = await sync_to_async(lambda: sorted(session.usage_records.values_list("input_tokens", flat=True)))()
        assert records == [30, 50]


async def test_a_turn_renders_its_controls_once_as_it_starts_and_once_as_it_ends(
    user: Any, host: SessionHost, server: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """W1/W2 (issue 25: pushes render only what changed): a second turn's controls (status pill,
    run buttons) are rendered at most twice — "running" as it starts, "idle" with its end.
    Before, the prompt marked them again after writing the turn's row, for the title a first
    prompt gives the session, and the controls of every turn went out twice at its start (the
    rows pusher had rendered them while the row was being written)."""
    from studio import pages
    from studio.host.contract import Regions

    rendered: list[Regions] = []
    render_regions = pages.render_regions

    def counted(session_id: str, state: Any, regions: Regions, **kwargs: Any) -> str:
        rendered.append(regions)
        return render_regions(session_id, state, regions, **kwargs)

    monkeypatch.setattr(pages, "render_regions", counted)
    session, client = await scripted_session(user, server)
    sid = str(session.pk)
    assert (await client.get(reverse("studio:session_detail", args=[sid]))).status_code == 200
    for turn in ("first", "second"):
        before = len(rendered)
        await host.prompt(sid, prompt=f"the {turn} turn", agent="build")
        await host.wait_idle(sid)
    controls = [regions for regions in rendered[before:] if regions.controls or regions.full]
    assert 1 <= len(controls) <= 2, controls
    await sync_to_async(session.refresh_from_db)()
    assert session.title == "the first turn"  # the first prompt still names it (and the page shows it)
