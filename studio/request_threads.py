"""The threads that run the sync part of Studio's HTTP requests, kept across requests.

Django's ASGI handler runs each request in a ``ThreadSensitiveContext`` of its own, so the sync
part of every request — the middleware chain (sync on purpose: ``studio.middleware``) and each
``sync_to_async`` of a view — ran on a thread made for that request and dropped after it. With
``CONN_MAX_AGE = None`` a database connection lives as long as its thread, so every page and
htmx request also opened a new SQLite connection (the file, its WAL index, Django's pragmas and
functions, the schema read again at its first statement: ~0.5 ms of CPU on this project's
machines, at every opening of a session) and two threads started and stopped around it.

Here a request borrows one of the threads kept from earlier requests (asgiref's
``ThreadSensitiveContext(executor=...)``: the caller owns the executor), so a thread and its
connection serve request after request, as a WSGI server's threads do; Django's
``close_old_connections`` at each request's start and end still drops a connection that broke.
Requests in flight at once never share a thread: one that finds no idle thread gets a new one,
exactly as before, and at most ``keep`` idle threads are kept for later requests (the others stop).
Nothing of a request stays on its thread: who it belongs to is read at every request
(``studio.authentication``), its locals live in its own context.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler

#: Idle request threads kept for later requests, each with its database connection (an SQLite
#: page cache fills only with the pages it reads): a request holds one for its whole length
#: (a page opening, while the host opens its runtime), so a burst of this many openings at once
#: reuses them; requests beyond it get threads of their own that stop after them.
KEPT_REQUEST_THREADS = 32


class RequestThreads:
    """Idle single-thread executors, lent to one request at a time (the event loop's only)."""

    def __init__(self, keep: int = KEPT_REQUEST_THREADS) -> None:
        self.keep = keep
        self._idle: list[ThreadPoolExecutor] = []

    @property
    def kept(self) -> int:
        return len(self._idle)

    @contextlib.asynccontextmanager
    async def context(self) -> AsyncIterator[None]:
        """The request's thread-sensitive context, on a kept thread when one is idle."""
        executor = self._idle.pop() if self._idle else ThreadPoolExecutor(1, thread_name_prefix="studio-request")
        try:
            async with ThreadSensitiveContext(executor=executor):
                yield
        finally:
            if len(self._idle) < self.keep:
                self._idle.append(executor)
            else:
                executor.shutdown(wait=False)

    def close(self) -> None:
        """Stop the idle threads (their connections close with them)."""
        idle, self._idle = self._idle, []
        for executor in idle:
            executor.shutdown(wait=False)


class StudioASGIHandler(ASGIHandler):
    """Django's ASGI handler, each request on a kept thread (``RequestThreads``)."""

    def __init__(self) -> None:
        super().__init__()
        self.threads = RequestThreads()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # as Django's: only HTTP reaches it
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        async with self.threads.context():
            await self.handle(scope, receive, send)
