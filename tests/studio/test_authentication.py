"""W6: who a request or a session socket belongs to — read with plain statements, decided as
Django decides: a logged-out, expired, re-keyed (password changed) or deactivated session opens
no socket and no page."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from studio.asgi import application
from studio.consumers import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED
from tests.studio.statements import statements_on_database_thread

pytestmark = pytest.mark.django_db(transaction=True)


def _logged_in_client(user: Any) -> Client:
    client = Client()
    assert client.login(username=user.username, password=f"{user.username}-pass-123")
    return client


async def _connect(session_id: Any, client: Client) -> tuple[bool, Any]:
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", cookie)]
    communicator = WebsocketCommunicator(application, f"/ws/sessions/{session_id}/", headers=headers)
    connected, code = await communicator.connect(timeout=10)
    await communicator.disconnect()
    return connected, code


async def test_a_session_socket_reads_the_session_data_and_one_joined_row_for_its_person_and_session(
    user: Any, make_session: Any, host: Any
) -> None:
    """W6: authenticating a session's socket reads the session's one decoded column, then the
    owned session with its owner's row in the same statement (the person is the row it names):
    two plain statements, nothing else about who is asking."""
    session = await sync_to_async(make_session)(user)
    client = await sync_to_async(_logged_in_client)(user)
    async with statements_on_database_thread() as log:
        connected, _ = await _connect(session.pk, client)
    assert connected
    session_read, ownership = log.statements[:2]
    selected = session_read.split(" FROM ", 1)[0]
    assert "django_session" in session_read and "session_data" in selected
    assert "session_key" not in selected and "expire_date" not in selected  # only the column it decodes
    assert "studio_studiosession" in ownership and "owner_id" in ownership and '"auth_user"' in ownership
    later = log.statements[2:]  # the page's state: no second read of who is asking
    assert not [s for s in later if "django_session" in s or ' FROM "auth_user" ' in s]


async def test_someone_elses_session_socket_reads_the_person_alone_and_is_refused_as_forbidden(
    user: Any, other_user: Any, make_session: Any, host: Any
) -> None:
    """W6: when the joined read finds no session of theirs, the person is read on their own (so a
    logged-in stranger is told 4403, not 4401) and nothing after it reads the session's state."""
    session = await sync_to_async(make_session)(user)
    client = await sync_to_async(_logged_in_client)(other_user)
    async with statements_on_database_thread() as log:
        assert await _connect(session.pk, client) == (False, CLOSE_FORBIDDEN)
    session_read, joined, person, ownership = log.statements
    assert "django_session" in session_read
    assert "studio_studiosession" in joined and "studio_studiosession" in ownership
    assert ' FROM "auth_user" ' in person


async def test_logging_out_closes_socket_access_at_once(user: Any, make_session: Any, host: Any) -> None:
    """W6: the next socket after a logout is refused (the session row is gone; nothing cached)."""
    session = await sync_to_async(make_session)(user)
    client = await sync_to_async(_logged_in_client)(user)
    assert (await _connect(session.pk, client))[0]
    cookie = client.cookies["sessionid"].value
    response = await sync_to_async(client.post)("/logout/")
    assert response.status_code == 302
    client.cookies["sessionid"] = cookie  # the browser kept the old cookie
    assert await _connect(session.pk, client) == (False, CLOSE_UNAUTHENTICATED)


async def test_a_changed_password_closes_socket_access(user: Any, make_session: Any, host: Any) -> None:
    """W6: a session whose hash no longer matches the user's opens no socket and is flushed."""
    session = await sync_to_async(make_session)(user)
    client = await sync_to_async(_logged_in_client)(user)
    assert (await _connect(session.pk, client))[0]
    user.set_password("a-new-password-456")
    await sync_to_async(user.save)()
    assert await _connect(session.pk, client) == (False, CLOSE_UNAUTHENTICATED)
    key = client.cookies["sessionid"].value
    assert not await sync_to_async(Session.objects.filter(session_key=key).exists)()


async def test_a_deactivated_person_cannot_open_a_socket(user: Any, make_session: Any, host: Any) -> None:
    session = await sync_to_async(make_session)(user)
    client = await sync_to_async(_logged_in_client)(user)
    user.is_active = False
    await sync_to_async(user.save)()
    assert await _connect(session.pk, client) == (False, CLOSE_UNAUTHENTICATED)


async def test_an_expired_session_cannot_open_a_socket(user: Any, make_session: Any, host: Any) -> None:
    session = await sync_to_async(make_session)(user)
    client = await sync_to_async(_logged_in_client)(user)
    key = client.cookies["sessionid"].value
    past = timezone.now() - timedelta(seconds=1)
    await sync_to_async(Session.objects.filter(session_key=key).update)(expire_date=past)
    assert await _connect(session.pk, client) == (False, CLOSE_UNAUTHENTICATED)


def test_a_page_request_reads_only_the_session_data(user: Any) -> None:
    """W6: the login wall reads the session's one decoded column with one plain statement
    (``studio.django_sessions``), and a logged-out session's next page is the login page."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = _logged_in_client(user)
    with CaptureQueriesContext(connection) as captured:
        assert client.get("/usage/").status_code == 200
    reads = [q["sql"] for q in captured.captured_queries if "django_session" in q["sql"]]
    assert len(reads) == 1, reads
    selected = reads[0].split(" FROM ", 1)[0]
    assert "session_data" in selected and "session_key" not in selected and "expire_date" not in selected
    cookie = client.cookies["sessionid"].value
    assert client.post("/logout/").status_code == 302
    client.cookies["sessionid"] = cookie
    assert client.get("/").status_code == 302  # to the login page


def test_a_changed_password_or_a_deactivated_person_gets_the_login_page(user: Any) -> None:
    """W6: the login wall refuses a session whose hash no longer matches (and flushes it) and a
    person who may no longer log in; a fresh login works again."""
    client = _logged_in_client(user)
    assert client.get("/usage/").status_code == 200
    user.set_password("a-new-password-456")
    user.save()
    assert client.get("/usage/").status_code == 302
    key = client.cookies["sessionid"].value
    assert not Session.objects.filter(session_key=key).exists()
    assert client.login(username=user.username, password="a-new-password-456")
    assert client.get("/usage/").status_code == 200
    user.is_active = False
    user.save()
    assert client.get("/usage/").status_code == 302
