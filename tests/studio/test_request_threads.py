"""The threads that run the sync part of Studio's HTTP requests (Django's middleware chain and
every ``sync_to_async`` of a view): kept and reused across requests, each with its one database
connection, as a WSGI server's threads are — while concurrent requests still run on threads of
their own, and who a request belongs to is still read at every request (SPEC W6)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.db.backends.signals import connection_created
from django.test import Client

from studio.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def _cookie(user: Any) -> str:
    client = Client()
    assert client.login(username=user.username, password=f"{user.username}-pass-123")
    return f"sessionid={client.cookies['sessionid'].value}"


async def _get(path: str, cookie: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        return await http.get(path, headers={"Cookie": cookie})


async def test_page_requests_one_after_another_reuse_one_database_connection(user: Any) -> None:
    """W6: five pages in a row open at most one database connection (the first request's
    thread keeps its connection, as ``CONN_MAX_AGE = None`` says), not one per request; each
    page still reads who is asking — a logged-out cookie gets the login page at once."""
    cookie = await sync_to_async(_cookie)(user)
    await _get("/", cookie)  # a first request may open the kept thread's connection
    opened: list[Any] = []

    def count(sender: Any, connection: Any, **kwargs: Any) -> None:
        opened.append(connection)

    connection_created.connect(count)
    try:
        for _ in range(5):
            page = await _get("/", cookie)
            assert page.status_code == 200
    finally:
        connection_created.disconnect(count)
    assert opened == []
    await sync_to_async(lambda: Client(headers={"Cookie": cookie}).post("/logout/"))()
    refused = await _get("/", cookie)
    assert refused.status_code == 302 and "/login/" in refused.headers["location"]


async def test_concurrent_requests_run_on_threads_of_their_own() -> None:
    """Two requests in flight at once get two threads (one waits for the other inside its sync
    part here, which one thread could never finish); after them, both threads are kept."""
    from studio.request_threads import RequestThreads

    threads = RequestThreads(keep=2)
    both_inside = threading.Barrier(2, timeout=10)
    seen: list[int] = []

    def sync_part() -> None:
        seen.append(threading.get_ident())
        both_inside.wait()  # returns only when the other request's sync part runs too

    async def request() -> None:
        async with threads.context():
            await sync_to_async(sync_part)()

    await asyncio.wait_for(asyncio.gather(request(), request()), timeout=20)
    assert len(set(seen)) == 2
    assert threads.kept == 2
    again: list[int] = []
    async with threads.context():
        again.append(await sync_to_async(threading.get_ident)())
    assert again[0] in seen  # a kept thread, not a new one
    threads.close()
