"""A scripted fake LLM provider: a real HTTP/SSE server on 127.0.0.1 (SPEC T5, P3).

It speaks the three wire protocols on their real paths — ``POST /v1/responses`` (OpenAI
Responses), ``POST /v1/messages`` (Anthropic Messages), ``POST /v1/chat/completions`` (Chat
Completions) — so tests and the offline demo go through the real provider adapters, and the
adapters meet the same framing, error bodies and socket behaviour as in production.

Use it from asyncio (``async with FakeProviderServer() as server``) or from a background
thread (``with FakeProviderServer() as server``, or ``start_in_thread()``), e.g. when the
agent under test runs in a child process. Script responses with ``enqueue(*responses)`` (each
a list of steps from ``agentcore.testing.steps``); when the queue is empty the ``responder``
hook (request record → steps) answers. Every request is recorded in ``server.requests``.

A tiny control API lets another process drive a server it did not start:
``POST /_fake/enqueue`` (JSON list of responses of JSON steps), ``POST /_fake/release``,
``GET /_fake/requests``, ``POST /_fake/reset``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeAlias

from agentcore.testing import http11
from agentcore.testing.anthropic_encoder import AnthropicEncoder
from agentcore.testing.completions_encoder import CompletionsEncoder
from agentcore.testing.encoder import Encoder, new_id
from agentcore.testing.player import ConnectionCut, Player, plan_usage, wait_threading_event
from agentcore.testing.responses_encoder import ResponsesEncoder
from agentcore.testing.steps import Hang, HttpError, Step, Text, response_from_json

_ROUTES: dict[str, type[Encoder]] = {
    "/responses": ResponsesEncoder,
    "/messages": AnthropicEncoder,
    "/chat/completions": CompletionsEncoder,
}


@dataclass(slots=True)
class RecordedRequest:
    """One request as the server received it, plus how its response went."""

    index: int
    method: str
    path: str
    api_kind: str
    headers: dict[str, str]
    body: Any
    api_key: str | None
    received_at: float
    status: int | None = None
    completed: bool = False
    client_disconnected: bool = False
    cut: bool = False
    hung: bool = False
    endless_frames: int = 0  # frames written so far by an ``Endless`` step
    connection: int = 0  # which accepted TCP connection it came on (1, 2, ...): pooling is visible
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def json(self) -> dict[str, Any]:
        """The parsed body as a dict (empty when it was not a JSON object)."""
        return self.body if isinstance(self.body, dict) else {}


Responder: TypeAlias = Callable[[RecordedRequest], "list[Step] | Awaitable[list[Step]]"]
Predicate: TypeAlias = Callable[["FakeProviderServer"], bool]


def echo_responder(request: RecordedRequest) -> list[Step]:
    """Answers every request with the text of the last user message (used by the CLI)."""
    body = request.json
    messages = body.get("messages") or body.get("input") or []
    last = messages[-1] if isinstance(messages, list) and messages else {}
    content = last.get("content", "") if isinstance(last, dict) else ""
    if isinstance(content, list):
        content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return [Text(f"echo: {content}")]


def _api_key(headers: dict[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return headers.get("x-api-key")


class FakeProviderServer:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        responder: Responder | None = None,
        api_key: str | None = None,
    ) -> None:
        """``api_key``: when set, requests with another key get the protocol's 401 body."""
        self.host = host
        self.port = port
        self.responder = responder
        self.api_key = api_key
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._queue: deque[list[Step]] = deque()
        self._requests: list[RecordedRequest] = []
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._release_waiters: list[asyncio.Future[None]] = []
        self._release_credits = 0
        self._hanging = 0
        self._hangs_reached = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._accepted = 0
        self._thread: threading.Thread | None = None

    # --- addresses ------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the base URL the adapters append their paths to."""
        return f"{self.url}/v1"

    # --- scripting and inspection ---------------------------------------------------------

    def enqueue(self, *responses: Sequence[Step]) -> None:
        """Queue responses; each answers one request, in order, whatever its protocol."""
        with self._lock:
            self._queue.extend(list(r) for r in responses)

    @property
    def pending(self) -> int:
        """Scripted responses not yet consumed."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def connections_accepted(self) -> int:
        """TCP connections accepted since the server started (a pooled client opens few)."""
        with self._lock:
            return self._accepted

    @property
    def hanging(self) -> int:
        """Responses currently held by a ``Hang`` step."""
        with self._lock:
            return self._hanging

    @property
    def hangs_reached(self) -> int:
        with self._lock:
            return self._hangs_reached

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self._requests.clear()

    def release(self) -> None:
        """Let every response held by a default ``Hang`` continue. If none is held yet, the
        next ``Hang`` reached passes straight through (so a release cannot be lost to a race)."""
        with self._lock:
            waiters, self._release_waiters = self._release_waiters, []
            if not waiters:
                self._release_credits += 1
        loop = self._loop
        if loop is not None:
            for future in waiters:
                loop.call_soon_threadsafe(_resolve, future)

    # --- waiting (no sleeps) ----------------------------------------------------------------

    def wait_until(self, predicate: Predicate, timeout: float = 10.0) -> None:
        """Block this thread until ``predicate(server)`` holds (server in another thread)."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self), timeout):
                raise TimeoutError("fake provider server: condition not reached")

    async def until(self, predicate: Predicate) -> None:
        """Await until ``predicate(server)`` holds; works from any event loop. Bound it with
        ``asyncio.timeout`` if the test needs a tighter limit than pytest's timeout."""
        loop = asyncio.get_running_loop()
        while True:
            future: asyncio.Future[None] = loop.create_future()
            entry = (loop, future)
            with self._lock:
                self._async_waiters.append(entry)
            try:
                if predicate(self):
                    return
                await future
            finally:
                with self._lock, contextlib.suppress(ValueError):
                    self._async_waiters.remove(entry)

    async def until_hanging(self, count: int = 1) -> None:
        await self.until(lambda s: s.hangs_reached >= count)

    def wait_hanging(self, count: int = 1, timeout: float = 10.0) -> None:
        self.wait_until(lambda s: s.hangs_reached >= count, timeout)

    async def until_requests(self, count: int) -> None:
        await self.until(lambda s: len(s.requests) >= count)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()
            waiters = list(self._async_waiters)
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed
                loop.call_soon_threadsafe(_resolve, future)

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> FakeProviderServer:
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    async def __aenter__(self) -> FakeProviderServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def start_in_thread(self) -> FakeProviderServer:
        """Run the server on its own event loop in a daemon thread; returns once listening."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.stop())
                loop.close()

        self._thread = threading.Thread(target=run, name="fake-provider-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def stop_in_thread(self) -> None:
        thread, self._thread = self._thread, None
        loop = self._loop
        if thread is None or loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()

    def __enter__(self) -> FakeProviderServer:
        return self.start_in_thread()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop_in_thread()

    # --- connection handling ------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        with self._lock:
            self._accepted += 1
            number = self._accepted
        http11.set_nodelay(writer)
        conn = http11.Connection(reader, writer)
        try:
            while True:
                raw = await http11.read_request(conn)
                if raw is None:
                    break
                if not await self._serve(raw, conn, number):
                    break
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            # Also when stop() cancels this wait: a handler task that ends cancelled makes
            # Python 3.11's stream callback log a spurious "Exception in callback" error.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()

    async def _serve(self, raw: http11.RawRequest, conn: http11.Connection, connection: int) -> bool:
        """Answer one request; False when the connection must be closed."""
        writer = conn.writer
        path = raw.target.split("?", 1)[0]
        if path.startswith("/_fake/"):
            return await self._control(raw, path, writer)
        encoder_cls = next((cls for suffix, cls in _ROUTES.items() if path.endswith(suffix)), None)
        if raw.method != "POST" or encoder_cls is None:
            body = json.dumps({"error": {"message": f"no route for {raw.method} {path}", "type": "not_found"}}).encode()
            writer.write(http11.full_response(404, body, {}))
            await writer.drain()
            return True
        try:
            payload: Any = json.loads(raw.body) if raw.body else None
        except json.JSONDecodeError:
            payload = None
        record = self._record(raw, path, encoder_cls.api_kind, payload, connection)
        steps = await self._script_for(record)
        usage = plan_usage(steps, len(raw.body))
        model = str(record.json.get("model", "fake-model"))
        encoder = encoder_cls(model, usage, record.json)
        if self.api_key is not None and record.api_key != self.api_key:
            steps = [HttpError(401, "Incorrect API key provided")]
        elif not record.json.get("stream"):
            steps = [HttpError(400, "the fake provider server only implements streaming (stream: true)")]
        player = Player(encoder, writer, steps, self._hang_for(record), new_id("req_"), self._frame_counter(record))
        return await self._play(player, record, conn)

    async def _play(self, player: Player, record: RecordedRequest, conn: http11.Connection) -> bool:
        """Run the player while watching the socket, so a client that hangs up is noticed
        (and recorded) even while the response is held or delayed."""
        play = asyncio.ensure_future(player.play())
        watch = asyncio.ensure_future(conn.fill())
        keep_alive = False
        try:
            done, _ = await asyncio.wait({play, watch}, return_when=asyncio.FIRST_COMPLETED)
            if play not in done and watch.result():
                await asyncio.wait({play})  # early bytes from the client stay buffered for the next request
            if play.done():
                result = play.result()
                record.status, record.completed, keep_alive = result.status, True, result.keep_alive
            else:
                record.client_disconnected = True
        except ConnectionCut:
            record.cut = True
            record.status = 200 if player.started else None
        except ConnectionError:
            record.client_disconnected = True
        finally:
            for task in (play, watch):
                task.cancel()
            await asyncio.gather(play, watch, return_exceptions=True)
            self._notify()
        return keep_alive

    def _record(
        self, raw: http11.RawRequest, path: str, api_kind: str, payload: Any, connection: int = 0
    ) -> RecordedRequest:
        with self._lock:
            record = RecordedRequest(
                index=len(self._requests),
                method=raw.method,
                path=path,
                api_kind=api_kind,
                headers=dict(raw.headers),
                body=payload,
                api_key=_api_key(raw.headers),
                received_at=time.time(),
                connection=connection,
            )
            self._requests.append(record)
        self._notify()
        return record

    async def _script_for(self, record: RecordedRequest) -> list[Step]:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        responder = self.responder
        if responder is None:
            return [HttpError(400, f"fake provider server: no scripted response left for request #{record.index}")]
        result = responder(record)
        if inspect.isawaitable(result):
            result = await result
        return list(result)

    def _frame_counter(self, record: RecordedRequest) -> Callable[[], None]:
        def count() -> None:
            with self._lock:
                record.endless_frames += 1
            self._notify()

        return count

    def _hang_for(self, record: RecordedRequest) -> Callable[[Hang], Awaitable[None]]:
        async def hang(step: Hang) -> None:
            with self._lock:
                self._hanging += 1
                self._hangs_reached += 1
                record.hung = True
            self._notify()
            try:
                if isinstance(step.event, threading.Event):
                    await wait_threading_event(step.event)
                elif step.event is not None:
                    await step.event.wait()
                else:
                    await self._wait_release()
            finally:
                with self._lock:
                    self._hanging -= 1
                self._notify()

        return hang

    async def _wait_release(self) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            if self._release_credits:
                self._release_credits -= 1
                return
            self._release_waiters.append(future)
        try:
            await future
        finally:
            with self._lock:
                with contextlib.suppress(ValueError):
                    self._release_waiters.remove(future)

    async def _control(self, raw: http11.RawRequest, path: str, writer: asyncio.StreamWriter) -> bool:
        status: int = 200
        result: dict[str, Any] = {"ok": True}
        try:
            if path == "/_fake/enqueue":
                self.enqueue(*(response_from_json(r) for r in json.loads(raw.body)))
            elif path == "/_fake/release":
                self.release()
            elif path == "/_fake/reset":
                self.reset()
            elif path == "/_fake/requests":
                result = {"requests": [_record_json(r) for r in self.requests]}
            else:
                status, result = 404, {"ok": False, "error": f"unknown control path {path}"}
        except (ValueError, TypeError) as exc:
            status, result = 400, {"ok": False, "error": str(exc)}
        writer.write(http11.full_response(status, json.dumps(result).encode(), {}))
        await writer.drain()
        return True


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _record_json(record: RecordedRequest) -> dict[str, Any]:
    return {
        "index": record.index,
        "path": record.path,
        "api_kind": record.api_kind,
        "headers": record.headers,
        "body": record.body,
        "status": record.status,
        "completed": record.completed,
        "client_disconnected": record.client_disconnected,
        "cut": record.cut,
        "hung": record.hung,
        "endless_frames": record.endless_frames,
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m agentcore.testing --port 8765 [--script responses.json] [--no-echo]``."""
    parser = argparse.ArgumentParser(description="Scripted fake LLM provider (OpenAI Responses, Anthropic, Chat).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--script", help="JSON file: a list of responses, each a list of steps")
    parser.add_argument("--no-echo", action="store_true", help="answer unscripted requests with HTTP 400")
    args = parser.parse_args(argv)
    server = FakeProviderServer(host=args.host, port=args.port, responder=None if args.no_echo else echo_responder)
    if args.script:
        with open(args.script, encoding="utf-8") as handle:
            server.enqueue(*(response_from_json(r) for r in json.load(handle)))

    async def serve() -> None:
        async with server:
            print(f"fake provider listening on {server.base_url}", flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
