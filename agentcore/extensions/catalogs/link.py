"""One catalog's connection inside a session: opened lazily, at most one at a time (SPEC X3).

The link is the only place that calls ``catalog.open()``. It opens on demand (the first real
call, or the first search of an undeclared catalog), shares the connection between calls,
notices a connection that died (``closed``) and opens a fresh one at the next call, and
closes it on drift or when the session closes. Its ``status`` and ``error`` are what the
snapshot's ``records["catalogs"]`` show.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Final, Literal, TypeVar

from agentcore.extensions.catalogs.catalog import AgentToolCatalog, CatalogConnection

logger = logging.getLogger(__name__)

Status = Literal["declared", "connected", "error"]

RETRY_HINT: Final = "This may be temporary: call the tool again to retry."


T = TypeVar("T")


class Cancelled(Exception):
    """``abort`` was set while the catalog was being asked something."""


async def until_abort(awaitable: Awaitable[T], abort: asyncio.Event) -> T:
    """``await awaitable`` unless ``abort`` is set first (then it is cancelled and ``Cancelled``
    is raised): a service that stops answering must not outlive a cancelled call."""
    work = asyncio.ensure_future(awaitable)
    stopped = asyncio.ensure_future(abort.wait())
    try:
        await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not work.done():
            work.cancel()
            with contextlib.suppress(BaseException):
                await work
    if work.cancelled():
        raise Cancelled
    return work.result()


class CatalogUnavailable(Exception):
    """The catalog could not be connected; ``message`` is meant for the model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def describe(exc: BaseException) -> str:
    """An exception as one line for the model: the innermost cause of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = getattr(exc, "message", None) or str(exc)
    return text if text else type(exc).__name__


class CatalogLink:
    def __init__(self, catalog: AgentToolCatalog) -> None:
        self.catalog = catalog
        self.connection: CatalogConnection | None = None
        self.error: str | None = None
        self._lock: asyncio.Lock | None = None
        self._closed = False

    @property
    def status(self) -> Status:
        if self.error is not None:
            return "error"
        return "connected" if self.alive() else "declared"

    def alive(self) -> bool:
        return self.connection is not None and not getattr(self.connection, "closed", False)

    async def connect(self, abort: asyncio.Event) -> CatalogConnection:
        """The live connection, opened now if there is none. Raises ``CatalogUnavailable``
        (the open failed, or ``abort`` was set while it ran — the attempt is then abandoned)."""
        if self._closed:
            raise CatalogUnavailable(f"catalog '{self.catalog.id}' is closed: the session is shutting down.")
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.alive():
                assert self.connection is not None
                return self.connection
            await self._release()
            connection = await self._open(abort)
            self.connection = connection
            return connection

    async def _open(self, abort: asyncio.Event) -> CatalogConnection:
        name = self.catalog.id
        if abort.is_set():
            raise CatalogUnavailable(f"the call was cancelled before catalog '{name}' connected.")
        try:
            connection = await until_abort(self.catalog.open(), abort)
        except Cancelled:
            raise CatalogUnavailable(f"the call was cancelled while catalog '{name}' was connecting.") from None
        except Exception as exc:
            retryable = getattr(exc, "retryable", True)
            hint = RETRY_HINT if retryable else "Retrying will not help until the host fixes the catalog."
            message = self.catalog.clean(f"catalog '{name}' could not connect: {describe(exc)}")
            self.error = message
            raise CatalogUnavailable(f"{message}. {hint}") from exc
        if not isinstance(connection, CatalogConnection):
            self.error = f"catalog '{name}': open() did not return a CatalogConnection (list_tools, aclose)"
            raise CatalogUnavailable(self.error)
        return connection

    async def fail(self, message: str) -> None:
        """Record ``message`` as the catalog's error and close its connection (drift, a lost
        or broken connection). The next call opens a new one."""
        self.error = message
        await self._release()

    def ok(self) -> None:
        self.error = None

    async def _release(self) -> None:
        connection, self.connection = self.connection, None
        if connection is None:
            return
        try:
            await connection.aclose()
        except Exception:  # closing a broken connection must not hide why it broke
            logger.warning("closing catalog %r failed", self.catalog.id, exc_info=True)

    async def aclose(self) -> None:
        """The session closes: release the connection; later calls are refused."""
        self._closed = True
        await self._release()
