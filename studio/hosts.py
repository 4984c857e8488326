"""The session host: the only place in Studio that opens and runs agent runtimes.

Why a host and not the consumer: a run outlives any one browser tab (closing it must never
stop the agent), a long ``await`` in a consumer would block that socket's other messages, and
daphne cancels a consumer's tasks shortly after a disconnect. So runs live here, as asyncio
tasks, and browsers only *watch* them through the channel layer group ``session-<id>``.

Contract with the watchers:

- Every push is ``{"type": "session.push", "epoch", "seq", "full", "html"}``. ``seq`` rises by
  one per push of a session within one host ``epoch`` (one process lifetime). ``full`` pushes
  replace every live region; the others patch whole blocks (never deltas).
- ``state(session_id)`` returns a ``HostState`` whose ``seq`` already includes every change it
  shows: a watcher that renders it skips pushes with ``seq <= state.seq`` and re-renders from a
  fresh state when it sees a gap. So a frame dropped by a full channel costs a re-render, never
  content. The final message of every run is rendered from the store's transcript.

Two deployments share this code (see ``HostClient``): ``inprocess`` (default) runs the host
inside the daphne process and calls it directly; ``worker`` runs it in ``manage.py runworker
studio-host`` processes (Redis channel layer) reached by request/reply messages, sessions
sharded over ``STUDIO_HOST_SHARDS`` channels so one session always lands on the same worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import logging
import os
import time
import uuid
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from channels.consumer import AsyncConsumer
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from studio import rendering, selectors, services
from studio.ledger import read_usage_ledger
from studio.live import LiveBlock, LiveTurn

log = logging.getLogger("studio.hosts")

HOST_CHANNEL = "studio-host"


class HostError(Exception):
    """A command the host refused; ``code`` is stable (busy, not_waiting, unavailable, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(slots=True)
class SessionConfig:
    """What the host needs to open a session's runtime (includes the API key: never render)."""

    session_id: str
    store_path: str
    workdir: str
    permission_policy: str
    effort: str
    mode: str
    model_options: dict[str, Any] = field(repr=False)

    def __repr__(self) -> str:
        return f"SessionConfig({self.session_id!r}, store={self.store_path!r})"


@dataclass(slots=True)
class HostState:
    """A consistent picture of one session: the store's transcript plus the live turn."""

    session_id: str
    epoch: str
    seq: int
    running: bool
    transcript: list[dict[str, Any]]
    base_len: int | None = None  # while running: transcript messages that precede the live turn
    live: dict[str, Any] | None = None
    context_usage: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostState:
        return cls(**data)

    @property
    def settled_transcript(self) -> list[dict[str, Any]]:
        return self.transcript if self.base_len is None else self.transcript[: self.base_len]

    def live_turn(self) -> dict[str, Any] | None:
        if not self.live:
            return None
        return {**self.live, "blocks": [LiveBlock(**b) for b in self.live["blocks"]]}


class RuntimeFactory(Protocol):
    def __call__(self, config: SessionConfig) -> Awaitable[Any]: ...


async def agentcore_runtime_factory(config: SessionConfig) -> Any:
    """Open the real agentcore runtime for a session (one SQLite store per session)."""
    from agentcore import create_agent

    return await create_agent(
        database_path=config.store_path,
        workdir=config.workdir,
        permission_policy=config.permission_policy,
        effort=config.effort,
        mode=config.mode,
        **config.model_options,
    )


def _configured_factory() -> RuntimeFactory:
    dotted = getattr(settings, "STUDIO_RUNTIME_FACTORY", "") or ""
    if not dotted:
        return agentcore_runtime_factory
    module, _, name = dotted.replace(":", ".").rpartition(".")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _agent_input(**kwargs: Any) -> Any:
    from agentcore.inputs import AgentInput, AskResume, PlanResume

    if kwargs.get("plan_resume") is not None:
        kwargs["plan_resume"] = PlanResume(**kwargs["plan_resume"])
    if kwargs.get("ask_resume") is not None:
        kwargs["ask_resume"] = AskResume(**kwargs["ask_resume"])
    return AgentInput(**{k: v for k, v in kwargs.items() if v is not None})


def _plan_review_pause(payload: dict[str, Any]) -> None:
    """``approve_plan`` hook: every plan waits for a person in the browser."""
    from agentcore.errors import UserInputRequired

    raise UserInputRequired("plan review", payload={"kind": "plan", **payload})


def _agent_host(abort: asyncio.Event) -> Any:
    from agentcore.host import AgentHost

    return AgentHost(approve_plan=_plan_review_pause, abort_signal=abort)


def _event_dict(event: Any) -> dict[str, Any]:
    return event if isinstance(event, dict) else event.model_dump()


@dataclass(slots=True)
class HostedSession:
    config: SessionConfig
    runtime: Any = None
    task: asyncio.Task[None] | None = None
    flusher: asyncio.Task[None] | None = None
    abort: asyncio.Event = field(default_factory=asyncio.Event)
    dirty: asyncio.Event = field(default_factory=asyncio.Event)
    live: LiveTurn | None = None
    base_len: int | None = None
    seq: int = 0
    context_usage: dict[str, int] | None = None
    last_used: float = field(default_factory=time.monotonic)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    finishing: bool = False
    active: bool = False  # a run is in progress (false as soon as it ended, before its task exits)

    @property
    def running(self) -> bool:
        return self.active

    @property
    def group(self) -> str:
        return f"session-{self.config.session_id}"


class SessionHost:
    """Owns the runtimes of this process and runs them; publishes their live partials."""

    def __init__(
        self,
        *,
        runtime_factory: RuntimeFactory | None = None,
        channel_layer: Any = None,
        flush_interval: float | None = None,
        idle_seconds: float | None = None,
    ) -> None:
        self.epoch = uuid.uuid4().hex[:12]
        self._factory = runtime_factory or _configured_factory()
        self._layer = channel_layer
        self._interval = settings.STUDIO_FLUSH_INTERVAL if flush_interval is None else flush_interval
        self._idle = settings.STUDIO_RUNTIME_IDLE_SECONDS if idle_seconds is None else idle_seconds
        self._sessions: dict[str, HostedSession] = {}
        self._open_lock = asyncio.Lock()
        self._demo: Any = None  # one offline demo server shared by every demo session of this host

    def demo_base_url(self) -> str:
        """The base URL of this host's demo model server (started on first use).

        One server per host process instead of one per runtime: with many demo sessions open,
        starting a server (a thread and a socket) per runtime dominated the time to first token.
        """
        if self._demo is None:
            from agentcore.demo import DemoServer

            self._demo = DemoServer()
        return str(self._demo.base_url)

    @property
    def layer(self) -> Any:
        if self._layer is None:
            self._layer = get_channel_layer()
        return self._layer

    # -- public commands ------------------------------------------------------------------

    async def state(self, session_id: str) -> HostState:
        hs = await self._session(session_id)
        return self._snapshot(hs)

    async def prompt(self, session_id: str, *, prompt: str, agent: str, effort: str) -> str:
        """Start a run for a new prompt; returns its request id. Refused while a run is active."""
        hs = await self._session(session_id)
        async with hs.lock:
            if hs.running:
                raise HostError("busy", "A run is already in progress in this session.")
            pending = await database_sync_to_async(selectors.pending_run)(session_id)
            if pending is not None:
                raise HostError("waiting", "Answer the pending review or question first.")
            request_id = uuid.uuid4().hex
            await database_sync_to_async(services.run_begin)(
                session_id, request_id=request_id, prompt=prompt, agent=agent, effort=effort
            )
            agent_input = {"prompt": prompt, "request_id": request_id, "agent": agent, "effort": effort or None}
            await self._start(hs, agent_input, LiveTurn(request_id=request_id, prompt=prompt, agent=agent))
            return request_id

    async def resume_plan(self, session_id: str, *, approved: bool, notes: str = "") -> str:
        hs = await self._session(session_id)
        async with hs.lock:
            run = await self._paused_run(hs, "plan")
            pending = run["pending"]
            await database_sync_to_async(services.plan_decided)(
                session_id, run["request_id"], pending.get("approval_id", ""), approved, notes
            )
            resume = {
                "approval_id": pending.get("approval_id", ""),
                "approved": approved,
                "plan": pending.get("plan") or "",
                "notes": notes,
            }
            live = LiveTurn(request_id=run["request_id"], agent=run["agent"])
            live.apply({"type": "approval", "decision": "approved" if approved else "rejected", "notes": notes})
            live.take_changes()
            await self._start(hs, {"request_id": run["request_id"], "plan_resume": resume}, live)
            return str(run["request_id"])

    async def answer(self, session_id: str, *, answers: dict[str, str | list[str]]) -> str:
        hs = await self._session(session_id)
        async with hs.lock:
            run = await self._paused_run(hs, "ask_user")
            await database_sync_to_async(services.run_resumed)(session_id, run["request_id"])
            live = LiveTurn(request_id=run["request_id"], agent=run["agent"])
            await self._start(hs, {"request_id": run["request_id"], "ask_resume": {"answers": answers}}, live)
            return str(run["request_id"])

    async def stop(self, session_id: str) -> bool:
        """Ask the active run to stop (it ends with status ``aborted``). False if none ran."""
        hs = self._sessions.get(session_id)
        if hs is None or not hs.running:
            return False
        hs.abort.set()
        return True

    async def wait_idle(self, session_id: str) -> None:
        """Wait until the session's current run (if any) has ended and been published."""
        hs = self._sessions.get(session_id)
        if hs is not None and hs.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(hs.task)

    async def release(self, session_id: str) -> bool:
        """Close an idle session's runtime so its store (and owner lock) is free for offline
        work (admin cancel/import). Refused while a run is active; True if a runtime was open."""
        hs = self._sessions.get(str(session_id))
        if hs is None:
            return False
        async with hs.lock:
            if hs.running:
                raise HostError("busy", "A run is in progress in this session; stop it first.")
            was_open = hs.runtime is not None
            await self._close_runtime(hs)
            self._sessions.pop(str(session_id), None)
            return was_open

    async def export(self, session_id: str, *, destination: str) -> str:
        """Export a consistent copy of the session's store to ``destination`` (new file).

        The store's owner lock is held by this host while the runtime is open (idle and
        waiting sessions stay parked here), so an export from outside would fail with
        ``store_locked``. The owner does it instead: under the session's lock it closes the
        runtime (a pause is durable in the store), copies, and lets the next use reopen it.
        Refused only while a run is writing (``busy``).
        """
        from agentcore import export_agent_database

        session_id = str(session_id)
        hs = self._sessions.get(session_id)
        if hs is None:
            config = await database_sync_to_async(selectors.session_config)(session_id)
            store_path = config.store_path
            lock: contextlib.AbstractAsyncContextManager[Any] = contextlib.nullcontext()
        else:
            store_path = hs.config.store_path
            lock = hs.lock
        async with lock:
            if hs is not None:
                if hs.running:
                    raise HostError("busy", "A run is writing to this store; stop it or let it finish, then export.")
                await self._close_runtime(hs)
            try:
                await asyncio.to_thread(export_agent_database, database_path=store_path, destination=destination)
            except Exception as exc:
                code = str(getattr(exc, "code", "") or exc.__class__.__name__)
                raise HostError(code, str(getattr(exc, "message", None) or exc)) from exc
        return destination

    async def close(self) -> None:
        """Close every runtime; unfinished runs stay in their stores and resume on reopen."""
        for hs in list(self._sessions.values()):
            if hs.task is not None and not hs.task.done():
                hs.task.cancel()
                with contextlib.suppress(BaseException):
                    await hs.task
            await self._close_runtime(hs)
        self._sessions.clear()
        demo, self._demo = self._demo, None
        if demo is not None:
            with contextlib.suppress(Exception):
                demo.stop()

    # -- internals ----------------------------------------------------------------------

    async def _session(self, session_id: str) -> HostedSession:
        session_id = str(session_id)
        hs = self._sessions.get(session_id)
        if hs is None:
            async with self._open_lock:
                hs = self._sessions.get(session_id)
                if hs is None:
                    config = await database_sync_to_async(selectors.session_config)(session_id)
                    options = config.model_options
                    if options.get("provider") == "demo" and not options.get("base_url"):
                        options["base_url"] = self.demo_base_url()
                    hs = HostedSession(config=config)
                    self._sessions[session_id] = hs
                    await self._close_idle()
        hs.last_used = time.monotonic()
        if hs.runtime is None:
            async with hs.lock:
                if hs.runtime is None:
                    await self._open_runtime(hs)
        return hs

    async def _open_runtime(self, hs: HostedSession) -> None:
        try:
            hs.runtime = await self._factory(hs.config)
        except Exception as exc:
            code = getattr(exc, "code", "unavailable")
            log.warning("could not open the store of session %s: %s", hs.config.session_id, code)
            raise HostError(str(code), f"The session store could not be opened ({code}).") from exc
        hs.context_usage = _context_usage(hs.runtime)
        await self._sync_usage(hs)
        # A run the previous process left unfinished resumes here: same request id, the
        # store continues from what was committed (agentcore's durability promise).
        interrupted = await database_sync_to_async(selectors.interrupted_run)(hs.config.session_id)
        if interrupted is not None and not hs.running:
            log.info("resuming interrupted run %s of session %s", interrupted["request_id"], hs.config.session_id)
            live = LiveTurn(request_id=interrupted["request_id"], agent=interrupted["agent"])
            await self._start(hs, {"request_id": interrupted["request_id"]}, live)

    async def _sync_usage(self, hs: HostedSession) -> None:
        """Reconcile Studio's usage with the store's ledger (see ``studio.ledger``)."""
        session_id = hs.config.session_id
        try:
            ledger = await asyncio.to_thread(read_usage_ledger, hs.config.store_path)
            added = await database_sync_to_async(services.usage_sync)(session_id, ledger)
        except Exception:
            log.exception("could not reconcile the usage of session %s with its store", session_id)
            return
        if added:
            log.info("session %s: %d usage record(s) recovered from the store's ledger", session_id, added)

    async def _close_runtime(self, hs: HostedSession) -> None:
        runtime, hs.runtime = hs.runtime, None
        if runtime is not None:
            with contextlib.suppress(Exception):
                await runtime.close()

    async def _close_idle(self) -> None:
        """Release stores (and their owner locks) of sessions nobody used for a while."""
        now = time.monotonic()
        for session_id, hs in list(self._sessions.items()):
            if not hs.running and now - hs.last_used > self._idle:
                await self._close_runtime(hs)
                self._sessions.pop(session_id, None)

    async def _paused_run(self, hs: HostedSession, kind: str) -> dict[str, Any]:
        if hs.running:
            raise HostError("busy", "A run is already in progress in this session.")
        run = await database_sync_to_async(selectors.pending_run)(hs.config.session_id)
        if run is None or (run["pending"] or {}).get("kind") != kind:
            raise HostError("not_waiting", "Nothing in this session is waiting for that answer.")
        return run

    def _snapshot(self, hs: HostedSession) -> HostState:
        transcript = list(hs.runtime.read_transcript()) if hs.runtime is not None else []
        return HostState(
            session_id=hs.config.session_id,
            epoch=self.epoch,
            seq=hs.seq,
            running=hs.running,
            transcript=transcript,
            base_len=hs.base_len if hs.live is not None else None,
            live=hs.live.to_dict() if hs.live is not None else None,
            context_usage=hs.context_usage,
        )

    async def _start(self, hs: HostedSession, agent_input: dict[str, Any], live: LiveTurn) -> None:
        hs.abort = asyncio.Event()
        hs.dirty = asyncio.Event()
        hs.finishing = False
        hs.active = True
        hs.base_len = len(hs.runtime.read_transcript())
        hs.live = live
        live.take_changes()
        await self._publish_full(hs)
        # A fresh context: the request that started the run must not lend it its per-request
        # state (asgiref's thread-sensitive executor dies with the request).
        hs.flusher = asyncio.create_task(
            self._flush_loop(hs), name=f"studio-flush-{hs.config.session_id}", context=contextvars.Context()
        )
        hs.task = asyncio.create_task(
            self._run(hs, agent_input), name=f"studio-run-{hs.config.session_id}", context=contextvars.Context()
        )

    async def _run(self, hs: HostedSession, agent_input: dict[str, Any]) -> None:
        session_id = hs.config.session_id
        request_id = agent_input["request_id"]
        live = hs.live
        assert live is not None
        ended = False
        try:
            stream = hs.runtime.run(_agent_input(**agent_input), host=_agent_host(hs.abort))
            async for raw in stream:
                event = _event_dict(raw)
                live.apply(event)
                await self._record(session_id, request_id, event)
                if event["type"] == "context_usage":
                    hs.context_usage = live.context_usage
                if event["type"] == "end":
                    ended = True
                hs.dirty.set()
            if not ended:
                await database_sync_to_async(services.run_end)(
                    session_id,
                    request_id,
                    status="failed",
                    error_code="run_failed",
                    error="The run ended without a result.",
                )
        except asyncio.CancelledError:
            # Host shutdown: the run stays "running" in Studio's records and resumes on reopen.
            raise
        except Exception as exc:
            log.exception("run %s of session %s failed", request_id, session_id)
            await database_sync_to_async(services.run_end)(
                session_id,
                request_id,
                status="failed",
                error_code=str(getattr(exc, "code", "run_failed")),
                error=str(getattr(exc, "message", None) or exc) or exc.__class__.__name__,
            )
        finally:
            await self._finish(hs)

    async def _record(self, session_id: str, request_id: str, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind in ("text_delta", "thinking_delta", "context_usage"):
            return
        if kind == "tool" and event.get("phase") == "update":
            return
        if kind == "end":
            status = event["status"]
            await database_sync_to_async(services.run_end)(
                session_id,
                request_id,
                status=status,
                error_code=event.get("error_code") or "",
                error=event.get("error") or "",
                pending=event.get("pending") if status == "paused" else None,
            )
            return
        await database_sync_to_async(services.record_event)(session_id, request_id, event)

    async def _finish(self, hs: HostedSession) -> None:
        hs.finishing = True
        hs.dirty.set()
        if hs.flusher is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await hs.flusher
            hs.flusher = None
        hs.live = None
        hs.base_len = None
        hs.active = False
        hs.context_usage = _context_usage(hs.runtime) or hs.context_usage
        hs.last_used = time.monotonic()
        await self._sync_usage(hs)
        with contextlib.suppress(Exception):
            await self._publish_full(hs)

    async def _flush_loop(self, hs: HostedSession) -> None:
        """Batch changes: at most one push per flush interval, never deltas."""
        while True:
            await hs.dirty.wait()
            if hs.finishing:
                return
            await asyncio.sleep(self._interval)
            hs.dirty.clear()
            if hs.live is None or hs.finishing:
                return
            try:
                await self._flush(hs)
            except Exception:
                log.exception("flush failed for session %s", hs.config.session_id)

    async def _flush(self, hs: HostedSession) -> None:
        live = hs.live
        if live is None or not live.dirty:
            return
        added, changed, context_changed, trace_changed = live.take_changes()
        hs.seq += 1
        seq = hs.seq
        prefix = live_prefix(live.request_id)
        parts: list[str] = []
        if added:
            parts.append(
                rendering.oob("".join(rendering.render_block(b, prefix) for b in added), "beforeend:#live-blocks")
            )
        parts.extend(rendering.render_block_parts(b, prefix) for b in changed)
        if context_changed:
            parts.append(rendering.render_context_ring(live.context_usage, oob=True))
        if trace_changed:
            parts.append(await database_sync_to_async(selectors.render_trace_regions)(hs.config.session_id))
        await self._send(hs, seq, full=False, html="".join(parts))

    async def _publish_full(self, hs: HostedSession) -> None:
        hs.seq += 1
        state = self._snapshot(hs)
        html = await database_sync_to_async(selectors.render_full_regions)(hs.config.session_id, state)
        await self._send(hs, state.seq, full=True, html=html)

    async def _send(self, hs: HostedSession, seq: int, *, full: bool, html: str) -> None:
        message = {"type": "session.push", "epoch": self.epoch, "seq": seq, "full": full, "html": html}
        await self.layer.group_send(hs.group, message)


def live_prefix(request_id: str) -> str:
    """DOM id prefix of a live turn's blocks (stable for the whole run)."""
    return "lv-" + "".join(ch for ch in request_id if ch.isalnum())[:16]


def _context_usage(runtime: Any) -> dict[str, int] | None:
    if runtime is None:
        return None
    try:
        usage = runtime.get_context_usage()
    except Exception:
        return None
    if not usage:
        return None
    return {"used": int(usage["used"]), "total": int(usage["total"])}


# --- reaching the host --------------------------------------------------------------------


class HostClient(Protocol):
    async def call(self, op: str, session_id: str, **args: Any) -> Any: ...

    async def state(self, session_id: str) -> HostState: ...


async def _dispatch(host: SessionHost, op: str, session_id: str, args: dict[str, Any]) -> Any:
    if op == "ping":  # which process serves this session's shard (health checks, tests)
        return {"pid": os.getpid(), "epoch": host.epoch}
    if op == "state":
        return (await host.state(session_id)).to_dict()
    if op == "prompt":
        return await host.prompt(session_id, **args)
    if op == "resume_plan":
        return await host.resume_plan(session_id, **args)
    if op == "answer":
        return await host.answer(session_id, **args)
    if op == "stop":
        return await host.stop(session_id)
    if op == "release":
        return await host.release(session_id)
    if op == "export":
        return await host.export(session_id, **args)
    raise HostError("unknown_op", f"unknown host operation {op!r}")


class LocalHostClient:
    """In-process mode: the host lives in this event loop; calls are plain awaits."""

    def __init__(self, host: SessionHost) -> None:
        self.host = host

    async def call(self, op: str, session_id: str, **args: Any) -> Any:
        return await _dispatch(self.host, op, str(session_id), args)

    async def state(self, session_id: str) -> HostState:
        return await self.host.state(str(session_id))


class ChannelHostClient:
    """Worker mode: request/reply over the channel layer to the session's shard channel."""

    def __init__(self, channel_layer: Any = None, *, shards: int | None = None, timeout: float = 15.0) -> None:
        self._layer = channel_layer
        self.shards = shards if shards is not None else settings.STUDIO_HOST_SHARDS
        self.timeout = timeout

    @property
    def layer(self) -> Any:
        if self._layer is None:
            self._layer = get_channel_layer()
        return self._layer

    async def call(self, op: str, session_id: str, **args: Any) -> Any:
        reply_to = await self.layer.new_channel()
        await self.layer.send(
            shard_channel(str(session_id), self.shards),
            {"type": "host.request", "op": op, "session_id": str(session_id), "args": args, "reply_to": reply_to},
        )
        try:
            reply = await asyncio.wait_for(self.layer.receive(reply_to), self.timeout)
        except TimeoutError as exc:
            raise HostError(
                "unavailable", "No session host answered; is `manage.py runworker studio-host` running?"
            ) from exc
        if not reply.get("ok"):
            raise HostError(reply.get("code", "error"), reply.get("message", "The session host refused."))
        return reply.get("result")

    async def state(self, session_id: str) -> HostState:
        return HostState.from_dict(await self.call("state", session_id))


def shard_channel(session_id: str, shards: int) -> str:
    """The host channel that owns a session: stable, so one worker holds its store."""
    if shards <= 1:
        return HOST_CHANNEL
    return f"{HOST_CHANNEL}-{uuid.UUID(session_id).int % shards}"


class HostWorkerConsumer(AsyncConsumer):
    """Worker mode: serves host requests arriving on a ``studio-host`` channel.

    Runs under ``manage.py runworker studio-host`` (or ``studio-host-<k>`` per shard). Runs
    themselves are background tasks of the worker's one ``SessionHost``, so a request is
    answered at once and a long run never blocks the channel.
    """

    async def host_request(self, message: dict[str, Any]) -> None:
        host = get_session_host()
        reply: dict[str, Any]
        try:
            result = await _dispatch(host, message["op"], message["session_id"], message.get("args") or {})
            reply = {"type": "host.reply", "ok": True, "result": result}
        except HostError as exc:
            reply = {"type": "host.reply", "ok": False, "code": exc.code, "message": exc.message}
        except Exception as exc:
            log.exception("host request %s failed", message.get("op"))
            reply = {"type": "host.reply", "ok": False, "code": "error", "message": str(exc)}
        await self.channel_layer.send(message["reply_to"], reply)


_host: SessionHost | None = None


def get_session_host() -> SessionHost:
    """This process's session host (created on first use, inside the running event loop)."""
    global _host
    if _host is None:
        _host = SessionHost()
    return _host


def set_session_host(host: SessionHost | None) -> None:
    """Replace the process's host (tests inject one with a fake runtime factory)."""
    global _host
    _host = host


def get_host_client() -> HostClient:
    if settings.STUDIO_HOST_MODE == "worker":
        return ChannelHostClient()
    return LocalHostClient(get_session_host())
