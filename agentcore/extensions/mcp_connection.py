"""Connections to MCP servers (stdio and streamable HTTP), owned by one task each (SPEC T4).

``connect_mcp_server`` spawns a stdio MCP server with the official ``mcp`` SDK and keeps the
session alive; ``connect_mcp_http`` does the same for a streamable HTTP server. What the
server's tools become is ``agentcore.extensions.mcp``'s job.

Why the connection lives in its own task: the SDK's ``stdio_client`` and ``ClientSession`` are
anyio task groups / cancel scopes, and anyio requires a scope to be exited by the task that
entered it. Entering them in a caller's task and closing them later from another task (a
runtime's ``close()``, a test teardown) fails with "exited a cancel scope that isn't the
current task's". So one dedicated task owns an ``AsyncExitStack`` for the whole life of the
connection; every other task only sends requests through the session, and ``aclose()`` just
asks that task to unwind.

Failure behaviour: a server that exits (crash, kill, ``os._exit``) is noticed when its stdout
closes (stdio) or when a request's response stream breaks (HTTP). Calls in flight and every
later call then fail with a ``ToolError`` naming the server (and quoting the tail of its stderr
for stdio); the host may reconnect with a new ``connect_mcp_server`` / ``connect_mcp_http``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import urllib.parse
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Final, Protocol, TextIO

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types as mcp_types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from agentcore.errors import AgentError, InputValidationError, ToolError

logger = logging.getLogger(__name__)

MCP_CONNECTION_FAILED: Final = "mcp_connection_failed"

_CONNECTION_CLOSED: Final = -32000  # JSON-RPC code the SDK uses for "transport closed"
_SERVER_ID_RE: Final = re.compile(r"^[a-zA-Z0-9_-]{1,32}$")
_STDERR_TAIL_BYTES: Final = 4096
_STDERR_SETTLE_SECONDS: Final = 0.5  # how long a crash report waits for the last stderr bytes
_CLOSE_SECONDS: Final = 5.0  # bound on a polite close before the owner task is cancelled


class McpConnectionError(AgentError):
    """The MCP server could not be started or initialized.

    ``retryable`` is True for failures that may pass on a second try (the server exited or
    timed out during start-up) and False when retrying cannot help (the command is missing).
    """

    def __init__(self, message: str, *, server_id: str, retryable: bool) -> None:
        super().__init__(MCP_CONNECTION_FAILED, message, details={"server_id": server_id, "retryable": retryable})
        self.server_id = server_id
        self.retryable = retryable


class _StderrTail(asyncio.Protocol):
    """Keeps the last few KiB of the server's stderr for error messages, and logs it.

    A pipe read by the event loop (not a file) keeps memory bounded however chatty the
    server is, and lets a crash report include what the server printed before dying.
    """

    def __init__(self, server_id: str) -> None:
        self._server_id = server_id
        self._buffer = bytearray()
        self.eof = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        del self._buffer[:-_STDERR_TAIL_BYTES]
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("MCP server %r stderr: %s", self._server_id, data.decode("utf-8", "replace").rstrip())

    def eof_received(self) -> bool:
        self.eof.set()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof.set()

    def tail(self) -> str:
        return self._buffer.decode("utf-8", "replace").strip()


class _EofWatchingStream:
    """Wraps the transport's read stream to notice the moment the server's stdout closes.

    The SDK turns that EOF into ``CONNECTION_CLOSED`` for requests in flight but exposes no
    hook for it; we need one so the connection is marked dead at once, not at the next call.
    """

    def __init__(self, inner: Any, on_eof: Callable[[], None]) -> None:
        self._inner = inner
        self._on_eof = on_eof

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except anyio.EndOfStream:
            self._on_eof()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _EofWatchingStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except StopAsyncIteration:
            self._on_eof()
            raise

    async def __aenter__(self) -> _EofWatchingStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc_val, exc_tb)
        return result


class _Transport(Protocol):
    """How a connection reaches its server: opens the SDK's read/write streams inside the
    owner task's exit stack (so they are closed by the task that opened them)."""

    kind: str  # "stdio" | "http", for messages
    target: str  # what error messages name: the command, or the URL without credentials

    async def open(self, stack: AsyncExitStack, connection: McpConnection) -> tuple[Any, Any]: ...


class _StdioTransport:
    kind = "stdio"

    def __init__(self, params: StdioServerParameters) -> None:
        self.params = params
        self.target = params.command

    async def open(self, stack: AsyncExitStack, connection: McpConnection) -> tuple[Any, Any]:
        loop = asyncio.get_running_loop()
        read_fd, write_fd = os.pipe()
        errlog: TextIO = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        try:
            tail = connection._stderr = _StderrTail(connection.server_id)
            stderr_transport, _ = await loop.connect_read_pipe(lambda: tail, os.fdopen(read_fd, "rb", buffering=0))
            stack.callback(stderr_transport.close)
            streams: tuple[Any, Any] = await stack.enter_async_context(stdio_client(self.params, errlog=errlog))
        finally:
            errlog.close()  # the child holds its own copy; ours would hide the EOF
        return streams


class _HttpTransport:
    kind = "http"

    def __init__(self, url: str, headers: dict[str, str] | None, timeout: float) -> None:
        self.url = url
        self.headers = headers
        self.timeout = timeout
        self.target = _public_url(url)

    async def open(self, stack: AsyncExitStack, connection: McpConnection) -> tuple[Any, Any]:
        import httpx2  # the SDK's HTTP client (a dependency of ``mcp``)
        from mcp.client.streamable_http import streamable_http_client

        # The SDK's defaults (30 s, 300 s to read a held response stream) with our connect bound;
        # redirects stay off: the SDK follows same-origin redirects itself.
        timeout = httpx2.Timeout(30.0, read=300.0, connect=self.timeout)
        client = await stack.enter_async_context(httpx2.AsyncClient(headers=self.headers, timeout=timeout))
        read, write, *_ = await stack.enter_async_context(streamable_http_client(self.url, http_client=client))
        return read, write


def _public_url(url: str) -> str:
    """``url`` without user info, query or fragment: what may appear in messages and records
    (tokens are often passed in a query string)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class McpConnection:
    """A live session with one MCP server over stdio or streamable HTTP (SPEC T4).

    Created by ``connect_mcp_server`` / ``connect_mcp_http``. ``closed`` turns True after
    ``aclose()`` or when the server exits; ``error`` then says why (None after a normal
    ``aclose()``). A dead connection never comes back: connect again to get a fresh one.
    ``command`` is what messages name: the stdio command, or the HTTP URL without credentials.
    """

    def __init__(self, server_id: str, command: str, args: list[str], *, transport: str = "stdio") -> None:
        self.server_id = server_id
        self.command = command
        self.args = args
        self.transport = transport
        self.server_info: mcp_types.Implementation | None = None
        self.error: str | None = None
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._closing = False
        self._closed = False
        self._stderr: _StderrTail | None = None

    # -- state -------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed or self.error is not None

    def stderr_tail(self) -> str:
        """The last few KiB the server wrote to stderr (empty if none, and always for HTTP)."""
        return self._stderr.tail() if self._stderr is not None else ""

    def _unavailable_message(self) -> str:
        if self.error is not None:
            return f"{self.error}. Reconnect to use its tools again."
        return f"the connection to MCP server '{self.server_id}' is closed"

    def _on_transport_eof(self) -> None:
        if self._closing or self.error is not None:
            return
        lost = "exited" if self.transport == "stdio" else "closed the connection"
        self.error = f"MCP server '{self.server_id}' {lost}"
        if self._session is not None:  # during start-up the connect error reports it instead
            logger.warning("MCP server %r %s unexpectedly", self.server_id, lost)
        self._stop.set()  # let the owner task reap the process and release the pipes

    # -- lifecycle ---------------------------------------------------------------------

    async def _run(self, transport: _Transport, connect_timeout: float, ready: asyncio.Future[None]) -> None:
        """Own the SDK's context managers from start to finish, in this one task."""
        try:
            async with AsyncExitStack() as stack:
                read, write = await transport.open(stack, self)
                session = await stack.enter_async_context(
                    ClientSession(_EofWatchingStream(read, self._on_transport_eof), write)
                )
                with anyio.fail_after(connect_timeout):
                    init = await session.initialize()
                self.server_info = init.server_info
                self._session = session
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:  # the owner task records failures; nobody awaits its exception
            if not ready.done():
                ready.set_exception(await self._connect_error(exc, connect_timeout))
            elif not self._closing and self.error is None:
                self.error = f"the connection to MCP server '{self.server_id}' failed: {_describe(exc)}"
                logger.warning("MCP connection %r failed", self.server_id, exc_info=exc)
        finally:
            self._session = None
            self._closed = True
            if not ready.done():  # pragma: no cover - every path above settles it
                ready.set_exception(McpConnectionError("connection ended", server_id=self.server_id, retryable=True))

    async def _connect_error(self, exc: BaseException, connect_timeout: float) -> McpConnectionError:
        exc = _leaf(exc)  # the SDK's task groups wrap what happened in exception groups
        if isinstance(exc, FileNotFoundError | PermissionError):
            return McpConnectionError(
                f"cannot start MCP server '{self.server_id}' ({self.command}): {exc}",
                server_id=self.server_id,
                retryable=False,
            )
        if isinstance(exc, TimeoutError):
            reason = f"did not finish initializing within {connect_timeout:g} s"
        elif isinstance(exc, asyncio.CancelledError):
            reason = "was cancelled while connecting"
        else:
            reason = f"failed to initialize: {_describe(exc)}"
        tail = await self._settled_stderr_tail()
        message = f"MCP server '{self.server_id}' ({self.command}) {reason}"
        if tail:
            message += f"; its stderr ends with:\n{tail}"
        return McpConnectionError(message, server_id=self.server_id, retryable=True)

    async def _settled_stderr_tail(self) -> str:
        """The stderr tail once the pipe is at EOF (bounded wait: a dead server's last words
        may still be in flight when its stdout EOF arrives)."""
        if self._stderr is None:
            return ""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stderr.eof.wait(), _STDERR_SETTLE_SECONDS)
        return self._stderr.tail()

    async def aclose(self) -> None:
        """Close the session and stop the server process (idempotent).

        stdio: the SDK closes the server's stdin, waits briefly for it to exit, then terminates
        and finally kills its whole process group, so no server outlives this call. HTTP: the
        SDK ends the session with a DELETE. A server that does not answer cannot hold this up
        for more than ``_CLOSE_SECONDS``: the owner task is then cancelled (the SDK's stdio
        shutdown runs shielded from that cancel, so the process is still stopped).
        """
        self._closing = True
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=_CLOSE_SECONDS)  # never cancels the owner task
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        self._closed = True

    async def __aenter__(self) -> McpConnection:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- requests ----------------------------------------------------------------------

    def _live_session(self) -> ClientSession:
        session = self._session
        if session is None or self.closed:
            raise ToolError(self._unavailable_message())
        return session

    async def list_tools(self) -> list[mcp_types.Tool]:
        """All tools the server offers (follows pagination)."""
        session = self._live_session()
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            try:
                page = await session.list_tools(params=params)
            except MCPError as exc:
                raise await self._request_error(exc, "listing tools") from exc
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        on_progress: Callable[[str], None] | None = None,
    ) -> mcp_types.CallToolResult:
        """One ``tools/call``. Transport and protocol failures become ``ToolError`` naming the
        server; a tool's own failure is a result with ``is_error`` (not an exception).
        ``on_progress`` receives the server's progress notifications as short text."""
        session = self._live_session()
        progress_callback = None
        if on_progress is not None:
            report = on_progress

            async def progress_callback(progress: float, total: float | None, message: str | None) -> None:
                done = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
                try:
                    report(f"{done} {message}" if message else done)
                except Exception:  # a broken observer must not break the session's receive loop
                    logger.exception("on_progress callback for MCP tool %r failed", name)

        try:
            return await session.call_tool(name, arguments, progress_callback=progress_callback)
        except MCPError as exc:
            raise await self._request_error(exc, f"the call to '{name}'") from exc
        except (RuntimeError, ValidationError) as exc:
            # The SDK validates structured content against the tool's output schema and
            # rejects malformed results; either way the server, not the model, is at fault.
            raise ToolError(f"MCP server '{self.server_id}' returned an invalid result for '{name}': {exc}") from exc

    async def _request_error(self, exc: MCPError, what: str) -> ToolError:
        if exc.code != _CONNECTION_CLOSED:
            return ToolError(f"MCP server '{self.server_id}' rejected {what}: {exc.message}")
        if self._closing and self.error is None:
            return ToolError(f"the connection to MCP server '{self.server_id}' was closed during {what}")
        if self.error is None:  # EOF raced ahead of our watcher; record it now
            self._on_transport_eof()
        lost = "exited" if self.transport == "stdio" else "closed the connection"
        message = f"MCP server '{self.server_id}' {lost} during {what}; its tools are unavailable until it reconnects."
        tail = await self._settled_stderr_tail()
        if tail:
            message += f" Its stderr ends with:\n{tail}"
        return ToolError(message)


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    exc = _leaf(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def connect_mcp_server(
    command: str,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    *,
    server_id: str = "mcp",
    connect_timeout: float = 30,
) -> McpConnection:
    """Spawn a stdio MCP server, initialize the session and return the live connection (SPEC T4).

    Environment: the child does **not** inherit this process's environment. It gets the SDK's
    short list of safe variables (``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``,
    ``USER`` on POSIX) plus exactly the ``env`` you pass — so API keys in the host's
    environment never leak to a third-party server by accident; pass the credentials a server
    needs explicitly.

    ``server_id`` (1–32 of ``[a-zA-Z0-9_-]``) names the server in tool names and error
    messages. Raises ``InputValidationError`` for bad arguments and ``McpConnectionError``
    when the process cannot start or does not initialize within ``connect_timeout`` seconds
    (the process is stopped in that case). Close with ``aclose()`` or ``async with``.
    """
    if not isinstance(command, str) or not command:
        raise InputValidationError("command must be a non-empty string", field="command")
    if isinstance(args, str):
        raise InputValidationError("args must be a list of strings, not a string", field="args")
    _check_common(server_id, connect_timeout)
    if env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise InputValidationError("env must map strings to strings", field="env")

    arg_list = [str(a) for a in args]
    params = StdioServerParameters(command=command, args=arg_list, env=dict(env) if env else None, cwd=cwd)
    connection = McpConnection(server_id, command, arg_list)
    return await _start(connection, _StdioTransport(params), connect_timeout)


async def connect_mcp_http(
    url: str,
    headers: dict[str, str] | None = None,
    *,
    server_id: str = "mcp",
    connect_timeout: float = 30,
) -> McpConnection:
    """Connect to a streamable HTTP MCP server and initialize the session (SPEC T4, X3).

    ``url`` is the server's MCP endpoint (``http://127.0.0.1:8000/mcp``); ``headers`` (e.g.
    ``Authorization``) go with every request and are never shown in messages, which name the
    URL without user info or query string. Redirects are followed only within the endpoint's
    origin (the SDK's rule). Errors as for ``connect_mcp_server``: a refused or timed-out
    connection is a retryable ``McpConnectionError``.
    """
    if not isinstance(url, str) or urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise InputValidationError("url must be an http:// or https:// URL", field="url")
    _check_common(server_id, connect_timeout)
    if headers is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise InputValidationError("headers must map strings to strings", field="headers")
    transport = _HttpTransport(url, dict(headers) if headers else None, connect_timeout)
    connection = McpConnection(server_id, transport.target, [], transport="http")
    return await _start(connection, transport, connect_timeout)


def _check_common(server_id: str, connect_timeout: float) -> None:
    if not isinstance(server_id, str) or not _SERVER_ID_RE.match(server_id):
        raise InputValidationError(
            f"server_id must be 1-32 characters of [a-zA-Z0-9_-], got {server_id!r}", field="server_id"
        )
    if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, int | float) or not connect_timeout > 0:
        raise InputValidationError("connect_timeout must be a positive number of seconds", field="connect_timeout")


async def _start(connection: McpConnection, transport: _Transport, connect_timeout: float) -> McpConnection:
    ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    connection._task = asyncio.create_task(
        connection._run(transport, connect_timeout, ready), name=f"mcp-connection:{connection.server_id}"
    )
    try:
        await asyncio.shield(ready)
    except BaseException:
        # Cancelled while connecting, or the start failed: make sure the owner task has
        # unwound (and stopped the process) before the caller sees the outcome.
        connection._closing = True
        connection._stop.set()
        if not connection._task.done():
            connection._task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.shield(connection._task)
        raise
    return connection
