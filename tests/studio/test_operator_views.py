"""W9, W10, W12 in Studio: the sessions list for operators (search, filters, sort, pages, rename,
archive, delete, live pills on one socket per list), and usage over time — whose totals are the
stores' own ledgers."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from studio.asgi import application
from studio.host.session_host import SessionHost
from studio.models import Run, SessionKind, StudioSession

pytestmark = pytest.mark.django_db(transaction=True)


def _titles(html: str) -> list[str]:
    own = r'<a href="/sessions/[0-9a-f-]+/">([^<]*)</a>'
    found = re.findall(own + r'|<span title="Only its owner opens it">([^<]*)<', html)
    return [own or other for own, other in found]


def _bulk(owner: Any, model: Any, count: int, **fields: Any) -> list[StudioSession]:
    rows = [
        StudioSession(owner=owner, registered_model=model, workdir="/w", store_path=f"/s/{n}.sqlite", **fields)
        for n in range(count)
    ]
    return StudioSession.objects.bulk_create(rows)


def test_the_list_searches_titles_and_prompts_filters_by_status_and_model_sorts_and_pages(
    logged_in: Client, user: Any, other_user: Any, demo_model: Any
) -> None:
    """W9: search matches a title or any prompt; status and model filters; sort by tokens and
    cost; 50 a page; someone else's sessions never appear."""
    from studio.models import RegisteredModel

    other_model = RegisteredModel.objects.create(name="Other", provider="custom", model_id="o")
    a = StudioSession.objects.create(
        owner=user, registered_model=demo_model, title="Refactor the parser", workdir="/w", store_path="/s/a",
        status="waiting", cost=Decimal("0.5"), input_tokens=10,
    )  # fmt: skip
    b = StudioSession.objects.create(
        owner=user, registered_model=other_model, title="Quarterly report", workdir="/w", store_path="/s/b",
        status="failed", cost=Decimal("0.1"), input_tokens=9000,
    )  # fmt: skip
    Run.objects.create(session=b, request_id="r1", prompt="summarise the PARSER errors please")
    _bulk(other_user, demo_model, 3, title="Refactor the parser (not yours)")
    page = logged_in.get("/?q=parser").content.decode()
    assert sorted(_titles(page)) == ["Quarterly report", "Refactor the parser"], "title or prompt, case-insensitive"
    assert _titles(logged_in.get("/?status=waiting").content.decode()) == ["Refactor the parser"]
    assert _titles(logged_in.get(f"/?model={other_model.pk}").content.decode()) == ["Quarterly report"]
    assert _titles(logged_in.get("/?sort=tokens").content.decode())[:2] == ["Quarterly report", "Refactor the parser"]
    assert _titles(logged_in.get("/?sort=cost").content.decode())[:2] == ["Refactor the parser", "Quarterly report"]
    assert _titles(logged_in.get("/?status=bogus&sort=bogus&page=x").content.decode()), "bad values fall back"
    assert 'id="pill-' + str(a.pk) + '"' in page
    _bulk(user, demo_model, 55, title="Bulk")
    first = logged_in.get("/").content.decode()
    assert len(_titles(first)) == 50 and "Page 1 of 2 · 57 sessions" in first
    second = logged_in.get("/?page=2").content.decode()
    assert len(_titles(second)) == 7
    assert "(not yours)" not in first + second


def test_staff_may_list_another_persons_sessions_read_only(
    client: Client, user: Any, demo_model: Any, django_user_model: Any
) -> None:
    """W9: staff filter by user (or everyone); those rows open nothing and offer no actions."""
    staff = django_user_model.objects.create_user(username="sam", password="sam-pass-123", is_staff=True)
    StudioSession.objects.create(
        owner=user, registered_model=demo_model, title="Alice report", workdir="/w", store_path="/s/a"
    )
    client.force_login(staff)
    assert _titles(client.get("/").content.decode()) == []
    page = client.get("/?user=alice").content.decode()
    assert (
        _titles(page) == ["Alice report"]
        and "/sessions/" not in page.split("sessions-table", 1)[1].split("</table>")[0]
    )
    assert _titles(client.get("/?user=*").content.decode()) == ["Alice report"]
    client.force_login(user)
    assert _titles(client.get("/?user=sam").content.decode()) == ["Alice report"], "not staff: the filter is ignored"


def test_rename_archive_and_delete_with_its_forks_and_store(
    logged_in: Client, user: Any, other_user: Any, make_session: Any, client: Client
) -> None:
    """W9: rename; archive hides a session and its forks (the Archived filter shows them);
    delete asks first (listing the forks that go with it), then removes the store file and
    every row. Someone else's session answers 404 to each."""
    session = make_session(user)
    fork = StudioSession.objects.create(
        owner=user, root=session, target_id=1, kind=SessionKind.FORK, title="Fork of it",
        registered_model=session.registered_model, workdir=session.workdir, store_path=session.store_path,
    )  # fmt: skip
    store = Path(session.store_path)
    store.write_bytes(b"")  # the store file and its write-ahead log
    Path(f"{store}-wal").write_bytes(b"")
    assert logged_in.post(f"/sessions/{session.pk}/rename/", {"new_title": "Renamed"}).status_code == 302
    assert "Renamed" in _titles(logged_in.get("/").content.decode())
    logged_in.post(f"/sessions/{session.pk}/archive/", {"archived": "1"})
    assert _titles(logged_in.get("/").content.decode()) == []
    assert sorted(_titles(logged_in.get("/?status=archived").content.decode())) == ["Fork of it", "Renamed"]
    logged_in.post(f"/sessions/{session.pk}/archive/", {"archived": "0"})
    assert len(_titles(logged_in.get("/").content.decode())) == 2
    mallory = Client()
    mallory.force_login(other_user)
    for url, data in (
        (f"/sessions/{session.pk}/rename/", {"new_title": "x"}),
        (f"/sessions/{session.pk}/archive/", {"archived": "1"}),
        (f"/sessions/{session.pk}/delete/", {"confirm": str(session.pk)}),
    ):
        assert mallory.post(url, data).status_code == 404, url
    assert mallory.get(f"/sessions/{session.pk}/delete/").status_code == 404
    assert Client().post(f"/sessions/{session.pk}/delete/").status_code == 302  # anonymous: to the login
    confirm = logged_in.get(f"/sessions/{session.pk}/delete/").content.decode()
    assert "Fork of it" in confirm and session.store_path in confirm
    assert logged_in.post(f"/sessions/{session.pk}/delete/", {}).status_code == 400, "no confirmation, no delete"
    assert StudioSession.objects.filter(pk=session.pk).exists()
    assert logged_in.post(f"/sessions/{session.pk}/delete/", {"confirm": str(session.pk)}).status_code == 302
    assert not StudioSession.objects.filter(pk__in=[session.pk, fork.pk]).exists()
    assert not store.exists() and not Path(f"{store}-wal").exists()


async def test_deleting_a_session_whose_turn_writes_is_refused(user: Any, make_session: Any, gated_host: Any) -> None:
    """W9: the runtime must let the store go first; a turn in progress keeps it (409)."""
    host, gate, _server = gated_host
    session = await sync_to_async(make_session)(user)
    await host.prompt(str(session.pk), prompt="HOLD on", agent="build")
    await gate.entered.wait()
    client = Client()
    await sync_to_async(client.force_login)(user)
    response = await sync_to_async(client.post)(f"/sessions/{session.pk}/delete/", {"confirm": str(session.pk)})
    assert response.status_code == 409 and "in progress" in response.content.decode()
    assert await StudioSession.objects.filter(pk=session.pk).aexists()
    gate.release()
    await host.wait_idle(str(session.pk))


async def test_the_list_socket_brings_each_status_change_to_its_owners_list(
    user: Any, other_user: Any, make_session: Any, host: SessionHost
) -> None:
    """W9/W12: one socket per list page; a plan that waits for review turns that row's pill to
    "Waiting for you" without a reload; another person's list hears nothing of it."""

    async def connect(person: Any) -> WebsocketCommunicator:
        client = Client()
        await sync_to_async(client.force_login)(person)
        cookie = f"sessionid={client.cookies['sessionid'].value}"
        headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", cookie.encode())]
        communicator = WebsocketCommunicator(application, "/ws/sessions/", headers=headers)
        connected, _code = await communicator.connect(timeout=10)
        assert connected
        return communicator

    anonymous = WebsocketCommunicator(application, "/ws/sessions/", headers=[(b"origin", b"http://127.0.0.1")])
    connected, code = await anonymous.connect(timeout=10)
    assert not connected and code == 4401
    session = await sync_to_async(make_session)(user)
    mine, theirs = await connect(user), await connect(other_user)
    await host.prompt(str(session.pk), prompt="plan a todo app", agent="plan")
    pill = f'<span id="pill-{session.pk}" class="list-pill" hx-swap-oob="true">'
    frames = []
    while not any(pill in f and "pill-waiting" in f for f in frames):
        frames.append(await mine.receive_from(timeout=20))
    assert any(pill in f and "pill-running" in f for f in frames), "running first, then waiting"
    assert "Waiting for you" in frames[-1]
    assert await theirs.receive_nothing(timeout=0.3)
    await mine.disconnect()
    await theirs.disconnect()


async def test_usage_over_time_totals_equal_the_stores_ledgers(
    user: Any, make_session: Any, host: SessionHost, django_user_model: Any
) -> None:
    """W10: the page's totals (tokens, cost, calls) are the sums of the sessions' store ledgers;
    today's row per model is there; staff see it per user."""
    from studio.ledger import read_usage_ledger

    sessions = [await sync_to_async(make_session)(user) for _ in range(2)]
    for session in sessions:
        await host.prompt(str(session.pk), prompt="what files are here?", agent="build")
        await host.wait_idle(str(session.pk))
    ledger = [row for s in sessions for row in read_usage_ledger(s.store_path)]
    tokens = sum(
        int(r.payload.get(f) or 0)
        for r in ledger
        for f in ("input_tokens", "cached_input_tokens", "cache_creation_tokens", "output_tokens")
    )
    cost = sum(Decimal(str(r.payload.get("cost") or 0)) for r in ledger)
    assert ledger and tokens > 0
    client = Client()
    await sync_to_async(client.force_login)(user)
    page = (await sync_to_async(client.get)("/usage/")).content.decode()
    assert re.search(r'id="all-tokens" data-tokens="(\d+)"', page).group(1) == str(tokens)  # type: ignore[union-attr]
    shown = Decimal(re.search(r'id="all-cost" data-cost="([\d.]+)"', page).group(1))  # type: ignore[union-attr]
    assert shown == cost.quantize(Decimal("0.000001"))
    assert re.search(r'id="all-calls">(\d+)<', page).group(1) == str(len(ledger))  # type: ignore[union-attr]
    assert '<svg class="chart"' in page and "Tokens per day" in page and "<text" in page
    staff = await sync_to_async(django_user_model.objects.create_user)(username="sam", password="x" * 12, is_staff=True)
    await sync_to_async(client.force_login)(staff)
    everyone = (await sync_to_async(client.get)("/usage/?user=*")).content.decode()
    assert 'id="usage-users"' in everyone and "<td>alice</td>" in everyone
    mine = (await sync_to_async(client.get)("/usage/")).content.decode()
    assert 'data-tokens="0"' in mine, "staff's own usage is their own"
