"""The one ``stream()`` / ``aclose()`` every wire-protocol adapter shares (SPEC P1, L2, L8).

An adapter is an ``SSEAdapter`` subclass that says only what differs per protocol: its URL,
headers, request body, output limit and SSE event interpreter (``SSEParser``). This module
owns the request: POST, status handling, the SSE read loop, cancellation, the stream bounds
of ``stream_limits`` and the final ``StreamEnd``. It never raises once ``stream()`` started.

Hot path: ``stream()`` is itself the read loop (one async generator between the socket and
the caller, not one per layer); a read costs two attribute stores, since the bounds are
counted by a ticker the adapter's streams share (``read_guard``), not by a timer per read.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from typing import Protocol

import httpx

from agentcore.messages import StopReason
from agentcore.models.attributes import ResolvedModel
from agentcore.providers.base import ProviderFailure, ProviderRequest, StreamEnd, StreamEvent
from agentcore.providers.read_guard import Cause, ReadGuard, Ticker
from agentcore.providers.shared import MessageBuilder, classify_status, new_http_client
from agentcore.providers.sse import ServerSentEvent, SSEDecoder
from agentcore.providers.stream_limits import StreamTimeouts, output_cap_chars

_KEEPALIVE_EVENT = "ping"  # Anthropic's keep-alive event; SSE comments never reach the parser


DONE_MARKER = "[DONE]"
"""``data: [DONE]``: Chat Completions' terminal event; gateways (LiteLLM) end every wire with it."""

EMPTY_FINISH = "the stream reported a normal finish but carried no content (a gateway reports a cut upstream so)"


class SSEParser(Protocol):
    """A protocol's event interpreter. ``feed`` returns the stream events for one SSE event;
    ``done`` is set by the terminal event; ``failure``/``stop_reason`` describe the end and
    ``finish_reason`` is the provider's own word for it (``tool_calls``, ``end_turn``, ...)."""

    done: bool
    failure: ProviderFailure | None
    stop_reason: StopReason
    finish_reason: str | None

    def feed(self, sse: ServerSentEvent) -> Iterable[StreamEvent]: ...

    def end_marker(self) -> None:
        """``data: [DONE]`` arrived: the stream is over, whether or not it was the protocol's
        terminal event (set ``done`` only where it is)."""
        ...

    def on_end(self) -> Iterable[StreamEvent]:
        """Events owed when the stream ends (e.g. tool calls closed by the terminal chunk)."""
        ...


class _Interrupted(Exception):
    def __init__(self, cause: Cause) -> None:
        self.cause = cause


class _NotEventStream(Exception):
    pass


class _Overrun(Exception):
    pass


def finish(
    builder: MessageBuilder,
    api_kind: str,
    stop_reason: StopReason,
    failure: ProviderFailure | None,
    finish_reason: str | None = None,
) -> StreamEnd:
    """The ``StreamEnd`` of a stream. A normal finish that brought no content at all is a dropped
    stream (``incomplete``, retried as any drop), never a completed empty answer: a gateway whose
    upstream died reports exactly that (LiteLLM even reports the upstream's first output-token
    count with it, so the usage cannot tell the two apart)."""
    if failure is None and stop_reason == "stop" and builder.is_empty():
        failure = ProviderFailure("incomplete", EMPTY_FINISH)
    if failure is not None:
        stop_reason = "aborted" if failure.kind == "cancelled" else "error"
    message = builder.message(api_kind, stop_reason, failure)
    return StreamEnd(message, failure, message.usage, finish_reason)


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
        # Our guard bounds sending, headers and every read (counting ticks of the event loop),
        # so httpx gets no read or write timeout: a finite one makes anyio schedule (and
        # cancel) a timer around every network read, 13 instead of 8 us per read measured,
        # for a bound the guard already enforces. Connecting and waiting for a pooled
        # connection keep httpx's bound (``connect_s``), so their failure says ``connect``.
        # Passed as the request extension (what httpx builds from a Timeout), so a request
        # builds no Timeout object and the client's own timeouts never apply.
        self._http_timeout = {"connect": t.connect_s, "read": None, "write": None, "pool": t.connect_s}
        self._ticker: Ticker | None = None

    def _ticker_for(self, loop: asyncio.AbstractEventLoop) -> Ticker:
        ticker = self._ticker
        if ticker is None or ticker.loop is not loop:
            ticker = self._ticker = Ticker(loop, self.timeouts)
        return ticker

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
        guard = ReadGuard(abort, self._ticker_for(asyncio.get_running_loop()))
        response: httpx.Response | None = None
        chunks: AsyncIterator[bytes] | None = None
        failure: ProviderFailure | None = None
        url = ""
        try:
            try:
                if guard.aborted:
                    raise _Interrupted("abort")
                url, headers = self.url(request.model), self.headers(request.model)
                http_request = client.build_request(
                    "POST", url, content=body, headers=headers, extensions={"timeout": self._http_timeout}
                )
                guard.start()
                guard.enter()
                try:
                    response = await client.send(http_request, stream=True)
                except asyncio.CancelledError:
                    if (cause := guard.absorb()) is None:
                        raise
                    raise _Interrupted(cause) from None
                guard.reading = False
                guard.switch("idle")
                if response.status_code != 200:
                    guard.enter()
                    try:
                        error_body = await response.aread()
                    except asyncio.CancelledError:
                        if (cause := guard.absorb()) is None:
                            raise
                        raise _Interrupted(cause) from None
                    guard.reading = False
                    failure = classify_status(response.status_code, error_body, response.headers)
                else:
                    content_type = response.headers.get("content-type", "").partition(";")[0]
                    if "text/event-stream" not in content_type:
                        raise _NotEventStream(f"content-type {content_type!r}")
                    # Raw bytes unless compressed: aiter_bytes adds a decoder layer per chunk.
                    chunks = response.aiter_bytes() if "content-encoding" in response.headers else response.aiter_raw()
                    decoder = SSEDecoder()
                    cap = output_cap_chars(self.output_limit(request))
                    ended = False
                    while not parser.done and not ended:
                        if guard.aborted:
                            raise _Interrupted("abort")
                        guard.enter()
                        try:
                            chunk = await anext(chunks)
                        except StopAsyncIteration:
                            break
                        except asyncio.CancelledError:
                            if (cause := guard.absorb()) is None:
                                raise
                            raise _Interrupted(cause) from None
                        guard.reading = False
                        for sse in decoder.feed(chunk):
                            if sse.event != _KEEPALIVE_EVENT:
                                guard.fresh = True
                            if sse.data == DONE_MARKER:
                                parser.end_marker()
                                ended = True
                                break
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
                        # Read the body's end (the chunked terminator) so the connection returns
                        # to the pool: an unread tail forces a new TCP connection per request.
                        # The response is complete: a server slow to end it (one quiet tick)
                        # or dropping it costs the connection, not the response; our abort
                        # still cancels.
                        guard.switch("tail")
                        guard.enter()
                        try:
                            async for _tail in chunks:
                                pass
                        except asyncio.CancelledError:
                            if (cause := guard.absorb()) is None:
                                raise
                            if cause == "abort":
                                raise _Interrupted(cause) from None
                        except httpx.HTTPError:
                            pass
                        guard.reading = False
                    failure = parser.failure
                    if failure is None and not parser.done:
                        failure = ProviderFailure("incomplete", "the stream ended without its terminal event")
            except _Interrupted as exc:
                failure = self._interrupted(exc.cause)
            except _Overrun as exc:
                failure = ProviderFailure("overrun", str(exc))
            except httpx.ConnectTimeout:
                failure = connect_failure(url, f"no answer within {timeouts.connect_s:g} s")
            except httpx.ConnectError as exc:
                failure = connect_failure(url, connect_reason(exc))
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
        yield finish(builder, api_kind, parser.stop_reason, failure, parser.finish_reason)

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


def connect_failure(url: str, reason: str) -> ProviderFailure:
    """A request that never reached a server: ``cannot connect to host:port: reason``."""
    endpoint = endpoint_of(url)
    return ProviderFailure("connect", f"cannot connect to {endpoint}: {reason}", endpoint=endpoint)


def endpoint_of(url: str) -> str:
    """``host:port`` of ``url`` (the scheme's default port when it names none)."""
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    host = parsed.host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def connect_reason(exc: BaseException) -> str:
    """What the OS said about a connect that failed, found down the exception chain (httpx says
    "All connection attempts failed" above the ``ConnectionRefusedError`` or ``gaierror`` that
    explains it). Hosts that probe an endpoint themselves use it too, so they say the same."""
    seen: BaseException | None = exc
    for _ in range(6):
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused (nothing listens on that port)"
        if isinstance(seen, socket.gaierror):
            return f"the host name does not resolve ({seen.strerror or seen})"
        if isinstance(seen, OSError) and seen.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return "the network or host is unreachable"
        seen = seen.__cause__ or seen.__context__
    return str(exc) or type(exc).__name__
