"""The one ``stream()`` / ``aclose()`` every wire-protocol adapter shares (SPEC P1, L2, L8).

An adapter is an ``SSEAdapter`` subclass that says only what differs per protocol: its URL,
headers, request body, output limit and SSE event interpreter (``SSEParser``). This module
owns the request: POST, status handling, the SSE read loop, cancellation, the stream bounds
of ``stream_limits`` and the final ``StreamEnd``. It never raises once ``stream()`` started.

Hot path: ``stream()`` is itself the read loop (one async generator between the socket and
the caller, not one per layer), and a read costs a clock read and a comparison — the guard
keeps one lazily re-armed timer per stream, not one per read or per event.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from typing import Any, Literal, Protocol

import httpx

from agentcore.messages import StopReason
from agentcore.models.attributes import ResolvedModel
from agentcore.providers.base import ProviderFailure, ProviderRequest, StreamEnd, StreamEvent
from agentcore.providers.shared import MessageBuilder, classify_status, new_http_client
from agentcore.providers.sse import ServerSentEvent, SSEDecoder
from agentcore.providers.stream_limits import StreamTimeouts, output_cap_chars

Cause = Literal["abort", "header", "idle"]

TAIL_DRAIN_S = 1.0
"""How long to wait for a complete response's body terminator before giving the connection up."""

_KEEPALIVE_EVENT = "ping"  # Anthropic's keep-alive event; SSE comments never reach the parser


class SSEParser(Protocol):
    """A protocol's event interpreter. ``feed`` returns the stream events for one SSE event;
    ``done`` is set by the terminal event; ``failure``/``stop_reason`` describe the end."""

    done: bool
    failure: ProviderFailure | None
    stop_reason: StopReason

    def feed(self, sse: ServerSentEvent) -> Iterable[StreamEvent]: ...

    def on_end(self) -> Iterable[StreamEvent]:
        """Events owed when the stream ends (e.g. tool calls closed by the terminal chunk)."""
        ...


class ReadGuard:
    """Interrupts an awaited network read when the abort signal is set or a deadline passes.

    While the adapter awaits the network (between ``begin*`` and ``end``), setting ``abort``
    or reaching the deadline cancels the reading task — the mechanism ``asyncio.timeout``
    uses, including ``uncancel``, so an outside cancellation is never swallowed. Outside
    reads nothing is interrupted: the adapter checks ``aborted`` before every read.

    The idle deadline counts only time spent waiting on the network since the last real
    event (``progress``), so a slow consumer never causes an idle timeout. One timer per
    stream: a read that moves the deadline later leaves the timer where it is, and the timer
    re-arms itself when it fires early."""

    __slots__ = (
        "_deadline",
        "_idle_s",
        "_kind",
        "_loop",
        "_read_at",
        "_task",
        "_timer",
        "_waiter",
        "abort",
        "cause",
        "idle_used",
        "reading",
    )

    def __init__(self, abort: asyncio.Event | None, idle_s: float) -> None:
        self.abort = abort
        self.reading = False
        self.cause: Cause | None = None
        self.idle_used = 0.0
        self._idle_s = idle_s
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[Any] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._deadline = 0.0
        self._kind: Cause = "idle"
        self._read_at = 0.0
        self._waiter: asyncio.Future[Any] | None = None
        if abort is not None:
            self._waiter = asyncio.ensure_future(abort.wait())
            self._waiter.add_done_callback(self._on_abort)

    @property
    def aborted(self) -> bool:
        return self.abort is not None and self.abort.is_set()

    def begin(self, kind: Cause, seconds: float) -> None:
        """A read bounded by ``seconds`` from now."""
        now = self._loop.time()
        self._read_at = now
        self._arm(kind, now + seconds)

    def begin_idle(self) -> None:
        """A read bounded by what is left of the idle budget."""
        now = self._loop.time()
        self._read_at = now
        self._arm("idle", now + self._idle_s - self.idle_used)

    def _arm(self, kind: Cause, deadline: float) -> None:
        self._kind = kind
        self._deadline = deadline
        self._task = asyncio.current_task()
        self.reading = True
        timer = self._timer
        if timer is None or timer.when() > deadline:
            if timer is not None:
                timer.cancel()
            self._timer = self._loop.call_at(deadline, self._on_timer)

    def end(self) -> None:
        self.reading = False
        self.idle_used += self._loop.time() - self._read_at

    def progress(self) -> None:
        """A real event arrived: the idle clock starts again."""
        self.idle_used = 0.0

    def _on_timer(self) -> None:
        self._timer = None
        if not self.reading or self.cause is not None or self._task is None:
            return  # the next read re-arms
        if self._loop.time() + 0.001 < self._deadline:
            self._timer = self._loop.call_at(self._deadline, self._on_timer)
            return
        self.cause = self._kind
        self._task.cancel()

    def _on_abort(self, waiter: asyncio.Future[Any]) -> None:
        if waiter.cancelled() or not self.reading or self.cause is not None or self._task is None:
            return
        self.cause = "abort"
        self._task.cancel()

    def absorb(self) -> Cause | None:
        """Inside ``except CancelledError``: the cause when the cancellation was ours alone."""
        self.reading = False
        cause, self.cause = self.cause, None
        if cause is None or self._task is None:
            return None
        return cause if self._task.uncancel() == 0 else None

    def close(self) -> None:
        self.reading = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._waiter is not None and not self._waiter.done():
            self._waiter.cancel()
        if self.cause is not None and self._task is not None:
            self.cause = None  # fired, but the read ended another way: withdraw our cancel
            self._task.uncancel()


class _Interrupted(Exception):
    def __init__(self, cause: Cause) -> None:
        self.cause = cause


class _NotEventStream(Exception):
    pass


class _Overrun(Exception):
    pass


async def _drain_tail(guard: ReadGuard, chunks: AsyncIterator[bytes], seconds: float) -> None:
    """Read the body's end (the chunked terminator) so the connection returns to the pool:
    an unread tail forces a new TCP connection per request. The response is complete, so a
    server slow to end it costs the connection, not the response; our abort still ends the
    stream ``cancelled``."""
    guard.begin("idle", seconds)
    try:
        async for _tail in chunks:
            pass
    except asyncio.CancelledError:
        cause = guard.absorb()
        if cause is None:
            raise
        if cause == "abort":
            raise _Interrupted(cause) from None
        return
    guard.reading = False


def finish(
    builder: MessageBuilder, api_kind: str, stop_reason: StopReason, failure: ProviderFailure | None
) -> StreamEnd:
    if failure is not None:
        stop_reason = "aborted" if failure.kind == "cancelled" else "error"
    message = builder.message(api_kind, stop_reason, failure)
    return StreamEnd(message, failure, message.usage)


class SSEAdapter:
    """Base of the three adapters: the ``Provider`` contract over one HTTP/SSE request.

    Subclasses set ``api_kind`` and implement ``parser``, ``url``, ``headers`` and
    ``encode_body``; ``output_limit`` defaults to the request's ``max_tokens``."""

    api_kind = ""

    def __init__(self, client: httpx.AsyncClient | None = None, timeouts: StreamTimeouts | None = None) -> None:
        """``client``: a shared pool (not closed here); without one, a private pool is made lazily."""
        self._client = client
        self._owns_client = client is None
        self.timeouts = timeouts or StreamTimeouts()
        t = self.timeouts
        # Our guard bounds every read; httpx's read timeout is only a backstop behind it.
        self._http_timeout = httpx.Timeout(
            connect=t.connect_s, read=2 * max(t.header_s, t.idle_s), write=t.header_s, pool=t.connect_s
        )

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = new_http_client()
        return self._client

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    # --- what differs per protocol --------------------------------------------------------

    def parser(self, builder: MessageBuilder) -> SSEParser:
        raise NotImplementedError

    def url(self, model: ResolvedModel) -> str:
        raise NotImplementedError

    def headers(self, model: ResolvedModel) -> dict[str, str]:
        raise NotImplementedError

    def encode_body(self, request: ProviderRequest) -> bytes:
        raise NotImplementedError

    def output_limit(self, request: ProviderRequest) -> int:
        """The output token limit the request asks for (the base of the output cap)."""
        return request.max_tokens or request.model.max_tokens

    # --- the stream -------------------------------------------------------------------------

    async def stream(self, request: ProviderRequest, abort: asyncio.Event | None = None) -> AsyncIterator[StreamEvent]:
        """POST the request, stream SSE through the protocol's parser, always finish with
        exactly one ``StreamEnd``."""
        api_kind = self.api_kind
        builder = MessageBuilder(request.model)
        parser = self.parser(builder)
        try:
            body = self.encode_body(request)
        except (TypeError, ValueError) as exc:
            bad = ProviderFailure("bad_request", f"could not encode the request: {exc}")
            yield finish(builder, api_kind, "error", bad)
            return
        timeouts = self.timeouts
        client = self.client
        guard = ReadGuard(abort, timeouts.idle_s)
        response: httpx.Response | None = None
        chunks: AsyncIterator[bytes] | None = None
        failure: ProviderFailure | None = None
        try:
            try:
                if guard.aborted:
                    raise _Interrupted("abort")
                url, headers = self.url(request.model), self.headers(request.model)
                http_request = client.build_request(
                    "POST", url, content=body, headers=headers, timeout=self._http_timeout
                )
                guard.begin("header", timeouts.header_s)
                try:
                    response = await client.send(http_request, stream=True)
                except asyncio.CancelledError:
                    if (cause := guard.absorb()) is None:
                        raise
                    raise _Interrupted(cause) from None
                guard.end()
                guard.progress()
                if response.status_code != 200:
                    guard.begin_idle()
                    try:
                        error_body = await response.aread()
                    except asyncio.CancelledError:
                        if (cause := guard.absorb()) is None:
                            raise
                        raise _Interrupted(cause) from None
                    guard.end()
                    failure = classify_status(response.status_code, error_body, response.headers)
                else:
                    content_type = response.headers.get("content-type", "").partition(";")[0]
                    if "text/event-stream" not in content_type:
                        raise _NotEventStream(f"content-type {content_type!r}")
                    # Raw bytes unless compressed: aiter_bytes adds a decoder layer per chunk.
                    chunks = response.aiter_bytes() if "content-encoding" in response.headers else response.aiter_raw()
                    decoder = SSEDecoder()
                    cap = output_cap_chars(self.output_limit(request))
                    while not parser.done:
                        if guard.aborted:
                            raise _Interrupted("abort")
                        guard.begin_idle()
                        try:
                            chunk = await anext(chunks)
                        except StopAsyncIteration:
                            break
                        except asyncio.CancelledError:
                            if (cause := guard.absorb()) is None:
                                raise
                            raise _Interrupted(cause) from None
                        guard.end()
                        for sse in decoder.feed(chunk):
                            if sse.event != _KEEPALIVE_EVENT:
                                guard.idle_used = 0.0
                            for event in parser.feed(sse):
                                yield event
                            if parser.done:
                                break
                        if builder.output_chars > cap:
                            raise _Overrun(
                                f"the stream ran past its output limit: {builder.output_chars} characters streamed, "
                                f"more than the {cap} allowed for max_tokens={self.output_limit(request)}"
                            )
                    guard.reading = False
                    for event in parser.on_end():
                        yield event
                    if parser.done and not guard.aborted:
                        await _drain_tail(guard, chunks, min(TAIL_DRAIN_S, timeouts.idle_s))
                    failure = parser.failure
                    if failure is None and not parser.done:
                        failure = ProviderFailure("incomplete", "the stream ended without its terminal event")
            except _Interrupted as exc:
                failure = self._interrupted(exc.cause)
            except _Overrun as exc:
                failure = ProviderFailure("overrun", str(exc))
            except httpx.ConnectTimeout:
                failure = ProviderFailure("connection", f"could not connect within {timeouts.connect_s:g} s")
            except httpx.TimeoutException as exc:
                failure = ProviderFailure("timeout", f"timed out: {type(exc).__name__}")
            except httpx.HTTPError as exc:
                failure = ProviderFailure("connection", f"connection error: {exc or type(exc).__name__}")
            except _NotEventStream as exc:
                failure = ProviderFailure("provider_error", f"not an event stream: {exc}")
            except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
                failure = ProviderFailure("provider_error", f"malformed stream event: {type(exc).__name__}: {exc}")
            finally:
                guard.close()
                if isinstance(chunks, AsyncGenerator):
                    with contextlib.suppress(Exception):
                        await chunks.aclose()
                if response is not None:
                    await response.aclose()
        except Exception as exc:  # closing the response failed; never raise once streaming started
            failure = failure or ProviderFailure("connection", f"connection error: {exc}")
        yield finish(builder, api_kind, parser.stop_reason, failure)

    def _interrupted(self, cause: Cause) -> ProviderFailure:
        if cause == "abort":
            return ProviderFailure("cancelled", "the request was cancelled")
        if cause == "header":
            return ProviderFailure(
                "timeout", f"no response headers within {self.timeouts.header_s:g} s (stream_timeouts.header_s)"
            )
        return ProviderFailure(
            "timeout",
            f"no stream event for {self.timeouts.idle_s:g} s; keep-alive comments do not count "
            "(stream_timeouts.idle_s)",
        )
