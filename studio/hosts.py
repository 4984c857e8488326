"""The session host: the only place in Studio that opens and drives agent runtimes.

Why a host and not the consumer: work outlives any one browser tab (closing it must never
stop the agent), a long ``await`` in a consumer would block that socket's other messages, and
daphne cancels a consumer's tasks shortly after a disconnect. So runtimes live here and
browsers only *watch* them through channel-layer groups ``session-<view id>``.

**Session protocol.** Every runtime is opened with ``session={...}`` (the registry built from
``STUDIO_EXTENSIONS``, subagents on) and held by a *lease*: ``runtime.serve(host)`` for as long
as the store is open. Everything a person does is a session command — a prompt is ``submit``
(queued as a follow-up while the agent is busy, never refused), Stop is ``cancel``, a plan
decision or answers are ``resume``, and fork, reset, configure, withdraw, promote and task
cancels are commands too. The one exception is a *plan-mode* prompt: session commands carry no
agent mode, so an idle session runs it as ``runtime.run(AgentInput(agent="plan"))`` — the lease
for that moment — and goes back to ``serve()`` when it returns. The Trace renders the ``session``
events' snapshots, never Studio's own guesses.

**Views.** One store holds several conversations (the runtime's ``target_id``): the main one,
forks and subagents. Each is shown as its own page (a ``StudioSession`` row whose ``root`` is
the main session), and each page watches its own group with its own sequence numbers.

Contract with the watchers:

- Every push is ``{"type": "session.push", "epoch", "seq", "full", "html"}``. ``seq`` rises by
  one per push of a view within one host ``epoch`` (one process lifetime). ``full`` pushes
  replace every region; the others patch whole blocks (never deltas) and the snapshot-driven
  regions.
- ``state(view_id)`` returns a ``HostState`` whose ``seq`` already includes every change it
  shows: a watcher that renders it skips pushes with ``seq <= state.seq`` and re-renders from a
  fresh state when it sees a gap. So a frame dropped by a full channel costs a re-render, never
  content. A settled turn is always rendered from the store's transcript.

Two deployments share this code (see ``HostClient``): ``inprocess`` (default) runs the host
inside the daphne process; ``worker`` runs it in ``manage.py runworker studio-host`` processes
(Redis channel layer) reached by request/reply messages, sessions sharded over
``STUDIO_HOST_SHARDS`` channels by their *main* session id, so every view of a store lands on the
worker that owns it.
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
from collections.abc import AsyncIterator, Awaitable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from channels.consumer import AsyncConsumer
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from studio import runtime_options, selectors, services
from studio.ledger import read_usage_ledger
from studio.live import ContextLive, LiveBlock
from studio.trace import view_status

log = logging.getLogger("studio.hosts")

HOST_CHANNEL = "studio-host"
#: Events that open a live turn (a turn's first visible work). ``context_usage`` and ``usage``
#: also arrive between turns, so they never open one.
OPENING_EVENTS = ("text_delta", "thinking_delta", "tool", "retry", "compaction", "web_search", "sources")
RUNNING_STATUSES = ("running", "queued")


class HostError(Exception):
    """A command the host refused; ``code`` is stable (busy, not_waiting, version_conflict, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(slots=True)
class SessionConfig:
    """What the host needs to open a store and show one of its views.

    ``session_id`` is the view asked for; ``root_id`` the main session that owns the store.
    ``model_options`` include the API key: never render them. ``session`` is filled in by the
    host (the registry is a live object) just before the runtime factory is called.
    """

    session_id: str
    store_path: str
    workdir: str
    permission_policy: str
    effort: str
    mode: str
    model_options: dict[str, Any] = field(repr=False)
    root_id: str = ""
    target_id: int = 0
    kind: str = "main"
    models: dict[str, Any] = field(default_factory=dict, repr=False)  # model id → attributes (configure)
    session: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.root_id = self.root_id or self.session_id

    def __repr__(self) -> str:
        return f"SessionConfig({self.session_id!r}, store={self.store_path!r}, target={self.target_id})"


@dataclass(slots=True)
class HostState:
    """A consistent picture of one view: the store's transcript, the live turn, the snapshot."""

    session_id: str
    epoch: str
    seq: int
    running: bool
    transcript: list[dict[str, Any]]
    base_len: int | None = None  # while a turn is live: transcript messages that precede it
    live: dict[str, Any] | None = None
    context_usage: dict[str, int] | None = None
    snapshot: dict[str, Any] | None = None
    target_id: int = 0

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

    def context(self) -> dict[str, Any] | None:
        """This view's context in the snapshot (status, queue, config, plan)."""
        for context in (self.snapshot or {}).get("contexts", []):
            if context.get("target_id") == self.target_id:
                return dict(context)
        return None


class RuntimeFactory(Protocol):
    def __call__(self, config: SessionConfig) -> Awaitable[Any]: ...


async def agentcore_runtime_factory(config: SessionConfig, **extra: Any) -> Any:
    """Open the real agentcore runtime for a store, with the session protocol on.

    ``extra`` goes to ``create_agent`` as well (a test's factory adds a tool this way)."""
    from agentcore import create_agent

    options: dict[str, Any] = {**runtime_options.runtime_options(), **config.model_options, **extra}
    if config.models:
        options["models"] = dict(config.models)
    return await create_agent(
        database_path=config.store_path,
        workdir=config.workdir,
        permission_policy=config.permission_policy,
        effort=config.effort or None,
        mode="build",
        session=dict(config.session),
        **options,
    )


def _configured_factory() -> RuntimeFactory:
    dotted = getattr(settings, "STUDIO_RUNTIME_FACTORY", "") or ""
    if not dotted:
        return agentcore_runtime_factory
    module, _, name = dotted.replace(":", ".").rpartition(".")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _plan_review_pause(payload: dict[str, Any]) -> None:
    """``approve_plan`` hook: every plan waits for a person in the browser."""
    from agentcore.errors import UserInputRequired

    raise UserInputRequired("plan review", payload={"kind": "plan", **payload})


def _agent_host() -> Any:
    from agentcore.host import AgentHost

    return AgentHost(approve_plan=_plan_review_pause)


def _event_dict(event: Any) -> dict[str, Any]:
    return event if isinstance(event, dict) else event.model_dump()


def _request_of(record_id: str) -> str:
    """The request a usage record belongs to: ``<request_id>:<step>:<attempt>``."""
    parts = record_id.rsplit(":", 2)
    return parts[0] if len(parts) == 3 else record_id


@dataclass(slots=True)
class View:
    """One page's live channel: a conversation of the store, its group and sequence numbers."""

    view_id: str
    target_id: int
    kind: str = "main"
    seq: int = 0
    full: bool = False
    controls: bool = False
    trace: bool = False
    status: str = ""

    @property
    def group(self) -> str:
        return f"session-{self.view_id}"


@dataclass(slots=True)
class _RunJob:
    """A plan-mode prompt waiting for the lease to run it with ``runtime.run``."""

    agent_input: Any
    started: asyncio.Future[None]


@dataclass(slots=True)
class HostedSession:
    """One open store: its runtime, the lease that drives it, its views."""

    config: SessionConfig
    runtime: Any = None
    lease: asyncio.Task[None] | None = None
    flusher: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # a lease is active: commands work
    dirty: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    snapshot: dict[str, Any] | None = None
    contexts: dict[int, ContextLive] = field(default_factory=dict)
    views: dict[int, View] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)  # request id → prompt text (turn starts)
    withdrawn: set[str] = field(default_factory=set)
    queued_steers: dict[int, dict[str, str]] = field(default_factory=dict)  # target → input id → prompt
    run_job: _RunJob | None = None
    in_run: bool = False
    folding: bool = False  # the lease is in the middle of folding one event
    closing: bool = False
    last_used: float = field(default_factory=time.monotonic)
    waiters: set[asyncio.Future[None]] = field(default_factory=set)  # wait_idle / wait_quiet
    ledger_pos: int = 0  # the store's usage ledger is reconciled up to here

    @property
    def root_id(self) -> str:
        return self.config.root_id

    def context(self, target_id: int) -> ContextLive:
        ctx = self.contexts.get(target_id)
        if ctx is None:
            ctx = self.contexts[target_id] = ContextLive(target_id)
        return ctx

    def snapshot_context(self, target_id: int) -> dict[str, Any] | None:
        for context in (self.snapshot or {}).get("contexts", []):
            if context.get("target_id") == target_id:
                return dict(context)
        return None

    def settled(self, target_id: int) -> bool:
        """Nothing runs in this conversation *and* every event of its turns has been folded.

        The snapshot can be ahead of the events (it is built when the lease reads the bus, the
        events of a fast turn may still be queued behind it): a turn the snapshot calls finished
        counts only once its ``end`` event was seen here.
        """
        ctx = self.contexts.get(target_id)
        if self.folding or (ctx is not None and ctx.live is not None):
            return False
        context = self.snapshot_context(target_id) or {}
        if context.get("status") not in ("idle", "paused"):
            return False
        ended = ctx.ended if ctx is not None else set()
        for turn in (self.snapshot or {}).get("turns", []):
            if int(turn.get("target_id") or 0) != target_id:
                continue
            if turn.get("status") in ("completed", "failed", "aborted", "paused") and turn["request_id"] not in ended:
                return False
        return True

    def busy(self, target_id: int) -> bool:
        """Work is in progress in this conversation (a live turn, an open request, a queue)."""
        ctx = self.contexts.get(target_id)
        if ctx is not None and ctx.live is not None:
            return True
        context = self.snapshot_context(target_id) or {}
        return context.get("status") in ("running", "queued", "paused")

    def writing(self) -> bool:
        """A turn of some conversation is running or about to (a pause, a sleeping timer and
        other durable state survive closing the runtime; a turn in flight should not be cut)."""
        if self.in_run or any(ctx.live is not None for ctx in self.contexts.values()):
            return True
        return any(c.get("status") in RUNNING_STATUSES for c in (self.snapshot or {}).get("contexts", []))

    def quiet(self) -> bool:
        """Nothing at all is happening in the store (safe to close the runtime)."""
        if any(ctx.live is not None for ctx in self.contexts.values()):
            return False
        snapshot = self.snapshot or {}
        if snapshot.get("tasks"):
            return False
        return all(c.get("status") == "idle" for c in snapshot.get("contexts", []))


class SessionHost:
    """Owns the runtimes of this process and drives them; publishes their views' partials."""

    def __init__(
        self,
        *,
        runtime_factory: RuntimeFactory | None = None,
        channel_layer: Any = None,
        flush_interval: float | None = None,
        idle_seconds: float | None = None,
        extensions: list[str] | None = None,
    ) -> None:
        self.epoch = uuid.uuid4().hex[:12]
        self._factory = runtime_factory or _configured_factory()
        self._layer = channel_layer
        self._interval = settings.STUDIO_FLUSH_INTERVAL if flush_interval is None else flush_interval
        self._idle = settings.STUDIO_RUNTIME_IDLE_SECONDS if idle_seconds is None else idle_seconds
        self._extension_paths = list(settings.STUDIO_EXTENSIONS if extensions is None else extensions)
        self._registry: Any = None
        self._sessions: dict[str, HostedSession] = {}  # by main session id
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
    def registry(self) -> Any:
        """One registry for every session of this host, built from ``STUDIO_EXTENSIONS``."""
        if self._registry is None:
            from studio.extensions import build_registry

            self._registry = build_registry(self._extension_paths)
        return self._registry

    @property
    def layer(self) -> Any:
        if self._layer is None:
            self._layer = get_channel_layer()
        return self._layer

    def session_options(self) -> dict[str, Any]:
        return runtime_options.session_options(self.registry)

    # -- public commands ------------------------------------------------------------------

    async def state(self, view_id: str) -> HostState:
        hs, view = await self._view(view_id)
        return self._state(hs, view)

    async def prompt(
        self, view_id: str, *, prompt: str, agent: str = "build", mode: str = "follow_up"
    ) -> dict[str, str]:
        """Send a prompt: a new turn when idle, a queued follow-up (or a steer) when busy.

        Returns ``{"request_id", "status"}`` with status ``accepted`` (a turn starts now) or
        ``queued``. A plan-mode prompt needs the conversation idle (commands carry no agent
        mode): busy, it is refused with ``busy`` and a message saying so.
        """
        hs, view = await self._writable_view(view_id)
        request_id = uuid.uuid4().hex
        async with hs.lock:
            pending = await database_sync_to_async(selectors.pending_run)(view.view_id)
            if pending is not None:
                raise HostError("waiting", "Answer the pending review or question first.")
            hs.prompts[request_id] = prompt
            if agent == "plan":
                if view.target_id != 0:
                    raise HostError("plan_main_only", "Plan mode works in the main conversation; send in Build mode.")
                if hs.busy(view.target_id) or hs.in_run:
                    raise HostError(
                        "busy",
                        "Plan mode starts a new turn, so it needs the agent idle. Wait until it finishes, "
                        "or send in Build mode to queue your message.",
                    )
                await database_sync_to_async(services.run_submitted)(
                    view.view_id, request_id=request_id, prompt=prompt, agent="plan", status="running"
                )
                await self._run_plan(hs, request_id, prompt)
                return {"request_id": request_id, "status": "accepted"}
            receipt = await self._control(
                hs, {"type": "submit", "prompt": prompt, "mode": mode}, view, request_id=request_id
            )
            status = "running" if receipt.get("status") == "accepted" else "queued"
            if mode == "steer" and status == "queued":
                hs.queued_steers.setdefault(view.target_id, {})[request_id] = prompt
            await database_sync_to_async(services.run_submitted)(
                view.view_id, request_id=request_id, prompt=prompt, agent="build", status=status, mode=mode
            )
            self._touch(hs, view, controls=True)
            return {"request_id": request_id, "status": str(receipt.get("status"))}

    async def withdraw(self, view_id: str, *, input_id: str) -> str:
        """Take a queued follow-up back; its receipt status (``withdrawn``, ``already_placed``, …)."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await self._control(hs, {"type": "withdraw", "input_id": input_id}, view)
            status = str(receipt.get("status"))
            if status == "withdrawn":
                hs.withdrawn.add(input_id)
                hs.queued_steers.get(view.target_id, {}).pop(input_id, None)
                await database_sync_to_async(services.run_status)(view.view_id, input_id, "withdrawn")
            self._touch(hs, view, controls=True)
            return status

    async def promote(self, view_id: str, *, input_id: str) -> str:
        """Turn a queued follow-up into a steer (it joins the running turn at its next tool boundary)."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await self._control(hs, {"type": "promote", "input_id": input_id}, view)
            status = str(receipt.get("status"))
            if status == "promoted":
                hs.queued_steers.setdefault(view.target_id, {})[input_id] = hs.prompts.get(input_id, "")
                await database_sync_to_async(services.run_mode)(view.view_id, input_id, "steer")
            self._touch(hs, view, controls=True)
            return status

    async def stop(self, view_id: str) -> bool:
        """Cancel the running (or paused) turn of this view; queued follow-ups then run."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await self._control(hs, {"type": "cancel", "scope": "foreground"}, view)
            return receipt.get("status") == "cancelled"

    async def cancel_task(self, view_id: str, *, task_id: str) -> list[str]:
        """Cancel one task of this view's subtree (a durable task, a subagent, a compaction)."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await self._control(hs, {"type": "cancel", "scope": "task", "task_id": task_id}, view)
            self._touch(hs, view, controls=True, trace=True)
            return list(receipt.get("cancelled") or [])

    async def resume_plan(self, view_id: str, *, approved: bool, notes: str = "") -> str:
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            run = await self._paused_run(hs, view, "plan")
            pending = run["pending"]
            await database_sync_to_async(services.plan_decided)(
                view.view_id, run["request_id"], pending.get("approval_id", ""), approved, notes
            )
            decision = {
                "approval_id": pending.get("approval_id", ""),
                "approved": approved,
                "plan": pending.get("plan") or "",
                "notes": notes,
            }
            await self._resume(hs, view, run, {"plan_resume": decision})
            return str(run["request_id"])

    async def answer(self, view_id: str, *, answers: dict[str, str | list[str]]) -> str:
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            run = await self._paused_run(hs, view, "ask_user")
            await database_sync_to_async(services.run_resumed)(view.view_id, run["request_id"])
            await self._resume(hs, view, run, {"ask_resume": {"answers": answers}})
            return str(run["request_id"])

    async def fork(self, view_id: str, *, entry_id: str) -> str:
        """Fork this view's conversation from a committed entry; returns the new view's id."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await self._control(hs, {"type": "fork", "entry_id": entry_id}, view)
            target_id = int(receipt["target_id"])
            new_id = await database_sync_to_async(services.fork_create)(view.view_id, target_id=target_id)
            hs.views[target_id] = View(new_id, target_id, kind="fork")
            self._touch(hs, view, trace=True)
            return new_id

    async def reset(self, view_id: str, *, handoff: str) -> str:
        """A new context generation starting from ``handoff`` (``applied`` now, ``queued`` if busy)."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await self._control(hs, {"type": "reset", "handoff": handoff or None}, view)
            self._touch(hs, view, full=True)
            return str(receipt.get("status"))

    async def configure(
        self,
        view_id: str,
        *,
        expected_version: int,
        provider: str | None = None,
        model_id: str | None = None,
        effort: str | None = None,
    ) -> int:
        """Model and/or effort for the next request (compare-and-swap on the config version)."""
        hs, view = await self._writable_view(view_id)
        command: dict[str, Any] = {"type": "configure", "expected_version": expected_version}
        if provider and model_id:
            command["model"] = {"provider": provider, "model_id": model_id}
        if effort:
            command["effort"] = effort
        async with hs.lock:
            receipt = await self._control(hs, command, view)
            self._touch(hs, view, controls=True, trace=True)
            return int(receipt.get("version") or 0)

    async def start_task(self, view_id: str, *, name: str, task_input: Any = None) -> str:
        """Start a registered durable task by name (commands never carry code)."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await self._control(
                hs, {"type": "task", "name": name, "input": task_input, "background": True}, view
            )
            self._touch(hs, view, trace=True)
            return str(receipt.get("task_id"))

    async def wait_idle(self, view_id: str) -> None:
        """Wait until this view's conversation has nothing running and its pushes are out.

        For tests and admin actions; waits on the host's own signal (each processed snapshot
        and event wakes it), never on time.
        """
        hs, view = await self._view(view_id)
        while True:
            if hs.settled(view.target_id) and not hs.in_run:
                if not view.full and not view.trace and not view.controls:
                    return
            await self._changed(hs)

    async def wait_live(self, view_id: str) -> None:
        """Wait until this view shows a live turn (its first event was folded)."""
        hs, view = await self._view(view_id)
        while (ctx := hs.contexts.get(view.target_id)) is None or ctx.live is None:
            await self._changed(hs)

    async def wait_quiet(self, view_id: str) -> None:
        """Wait until nothing at all runs in the store (turns, queues, background tasks)."""
        hs, _view = await self._view(view_id)
        while not (hs.quiet() and not hs.in_run):
            await self._changed(hs)

    async def release(self, view_id: str) -> bool:
        """Close an idle store's runtime so its owner lock is free for offline work (admin
        cancel/import). Refused while work runs; True if a runtime was open."""
        root_id = await database_sync_to_async(selectors.root_of)(str(view_id))
        hs = self._sessions.get(root_id)
        if hs is None:
            return False
        async with hs.lock:
            if hs.writing():
                raise HostError("busy", "A turn is in progress in this session; stop it first.")
            was_open = hs.runtime is not None
            await self._close(hs)
            self._sessions.pop(root_id, None)
            return was_open

    async def export(self, view_id: str, *, destination: str) -> str:
        """Export a consistent copy of the session's store to ``destination`` (new file).

        The owner lock is held by this host while the runtime is open, so an export from outside
        would fail with ``store_locked``. The owner does it instead: under the session's lock it
        closes the runtime (durable state — a pause, a sleeping timer — stays in the store and
        resumes on the next use), copies, and lets the next use reopen it. Refused only while a
        turn is writing (``busy``).
        """
        from agentcore import export_agent_database

        root_id = await database_sync_to_async(selectors.root_of)(str(view_id))
        hs = self._sessions.get(root_id)
        if hs is None:
            config = await database_sync_to_async(selectors.session_config)(root_id)
            store_path = config.store_path
            lock: contextlib.AbstractAsyncContextManager[Any] = contextlib.nullcontext()
        else:
            store_path = hs.config.store_path
            lock = hs.lock
        async with lock:
            if hs is not None:
                if hs.writing():
                    raise HostError("busy", "A turn is writing to this store; stop it or let it finish, then export.")
                await self._close(hs)
                self._sessions.pop(root_id, None)
            try:
                await asyncio.to_thread(export_agent_database, database_path=store_path, destination=destination)
            except Exception as exc:
                code = str(getattr(exc, "code", "") or exc.__class__.__name__)
                raise HostError(code, str(getattr(exc, "message", None) or exc)) from exc
        return destination

    async def close(self) -> None:
        """Close every runtime; unfinished work stays in the stores and resumes on reopen."""
        for hs in list(self._sessions.values()):
            await self._close(hs)
        self._sessions.clear()
        demo, self._demo = self._demo, None
        if demo is not None:
            with contextlib.suppress(Exception):
                demo.stop()
        await asyncio.to_thread(runtime_options.close_tracing)  # flush the spans of the runtimes just closed

    # -- opening and closing ------------------------------------------------------------------

    async def _view(self, view_id: str) -> tuple[HostedSession, View]:
        config = await database_sync_to_async(selectors.session_config)(str(view_id))
        hs = await self._session(config)
        view = hs.views.get(config.target_id)
        if view is None or view.view_id != config.session_id:
            view = hs.views[config.target_id] = View(config.session_id, config.target_id, kind=config.kind)
        hs.last_used = time.monotonic()
        return hs, view

    async def _writable_view(self, view_id: str) -> tuple[HostedSession, View]:
        hs, view = await self._view(view_id)
        if view.kind == "subagent":
            raise HostError("read_only", "A subagent's conversation is read-only: its parent agent talks to it.")
        return hs, view

    async def _session(self, config: SessionConfig) -> HostedSession:
        root_id = config.root_id
        hs = self._sessions.get(root_id)
        if hs is None:
            async with self._open_lock:
                hs = self._sessions.get(root_id)
                if hs is None:
                    root = config if config.root_id == config.session_id else None
                    if root is None:
                        root = await database_sync_to_async(selectors.session_config)(root_id)
                    options = root.model_options
                    if options.get("provider") == "demo" and not options.get("base_url"):
                        options["base_url"] = self.demo_base_url()
                    root.session = self.session_options()
                    hs = HostedSession(config=root)
                    for view_id, target_id, kind in await database_sync_to_async(selectors.views_of)(root_id):
                        hs.views[target_id] = View(view_id, target_id, kind=kind)
                    self._sessions[root_id] = hs
                    await self._close_idle(keep=root_id)
        if hs.runtime is None:
            async with hs.lock:
                if hs.runtime is None:
                    await self._open_runtime(hs)
        await hs.ready.wait()
        return hs

    async def _open_runtime(self, hs: HostedSession) -> None:
        try:
            hs.runtime = await self._factory(hs.config)
        except Exception as exc:
            code = getattr(exc, "code", "unavailable")
            log.warning("could not open the store of session %s: %s", hs.root_id, code)
            self._sessions.pop(hs.root_id, None)
            raise HostError(str(code), f"The session store could not be opened ({code}).") from exc
        hs.closing = False
        hs.ready = asyncio.Event()
        hs.snapshot = hs.runtime.snapshot()
        for turn in hs.snapshot.get("turns", []):  # turns that ended before this host opened the store
            if turn.get("status") not in ("running", "queued"):
                hs.context(int(turn.get("target_id") or 0)).ended.add(str(turn["request_id"]))
        views = {target: view.view_id for target, view in hs.views.items()}
        await database_sync_to_async(services.runs_reconcile)(views, hs.snapshot.get("turns", []))
        hs.ledger_pos = await database_sync_to_async(services.ledger_position)(hs.root_id)
        await self._sync_usage(hs)
        # Unfinished work the previous process left (an interrupted turn, queued inputs,
        # sleeping timers) resumes inside the lease: the driver finds it in the store.
        # Each task in a context of its own: not the request's (the lease outlives it), and not a
        # shared one (asgiref's single-thread executor refuses concurrent calls from one context).
        hs.lease = asyncio.create_task(
            self._lease(hs), name=f"studio-lease-{hs.root_id}", context=contextvars.Context()
        )
        hs.flusher = asyncio.create_task(
            self._flush_loop(hs), name=f"studio-flush-{hs.root_id}", context=contextvars.Context()
        )

    async def _close(self, hs: HostedSession) -> None:
        hs.closing = True
        runtime = hs.runtime
        if runtime is not None:
            with contextlib.suppress(Exception):
                runtime.stop_serving()
        for task in (hs.lease, hs.flusher):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        hs.lease = hs.flusher = None
        hs.runtime = None
        if runtime is not None:
            with contextlib.suppress(Exception):
                await runtime.close()

    async def _close_idle(self, *, keep: str) -> None:
        """Release stores (and their owner locks) that nobody used for a while and where
        nothing runs — a sleeping timer keeps its store open, so it fires on time."""
        now = time.monotonic()
        for root_id, hs in list(self._sessions.items()):
            if root_id != keep and hs.quiet() and not hs.in_run and now - hs.last_used > self._idle:
                await self._close(hs)
                self._sessions.pop(root_id, None)

    # -- the lease: driving the runtime and folding its events -----------------------------------

    async def _lease(self, hs: HostedSession) -> None:
        """Hold the runtime: ``serve()`` normally, ``run()`` for a plan-mode prompt."""
        host = _agent_host()
        while not hs.closing:
            job, hs.run_job = hs.run_job, None
            stream: AsyncIterator[Any]
            if job is not None:
                hs.in_run = True
                stream = hs.runtime.run(job.agent_input, host)
            else:
                stream = hs.runtime.serve(host)
            started = time.monotonic()
            try:
                async with contextlib.aclosing(stream):  # type: ignore[type-var]
                    async for raw in stream:
                        hs.ready.set()
                        if job is not None and not job.started.done():
                            job.started.set_result(None)
                        hs.folding = True
                        try:
                            await self._on_event(hs, _event_dict(raw))
                        except Exception:  # Studio's bookkeeping failed; the store is still right
                            log.exception("session %s: could not fold an event", hs.root_id)
                        finally:
                            hs.folding = False
                            self._wake(hs)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if job is not None and not job.started.done():
                    job.started.set_exception(exc)
                else:
                    # A turn that fails ends in the store (its end event was folded above) and the
                    # session stays usable: hold it again.
                    log.warning("session %s: the lease ended with %s: %s", hs.root_id, type(exc).__name__, exc)
                    if time.monotonic() - started < 1.0:
                        await asyncio.sleep(1.0)  # a failure at once again: do not spin
            finally:
                hs.ready.clear()
                hs.in_run = False
                self._wake(hs)

    async def _run_plan(self, hs: HostedSession, request_id: str, prompt: str) -> None:
        """Run a plan-mode prompt through ``runtime.run`` (the lease switches for it)."""
        from agentcore.inputs import AgentInput

        job = _RunJob(
            AgentInput(prompt=prompt, request_id=request_id, agent="plan"), asyncio.get_running_loop().create_future()
        )
        hs.run_job = job
        hs.runtime.stop_serving()
        try:
            await job.started
        except Exception as exc:
            await database_sync_to_async(services.run_end)(
                self._view_id(hs, 0),
                request_id,
                status="failed",
                error_code=str(getattr(exc, "code", "run_failed")),
                error=str(getattr(exc, "message", None) or exc),
            )
            raise _host_error(exc) from exc

    async def _on_event(self, hs: HostedSession, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "session":
            await self._on_snapshot(hs, event["snapshot"])
            return
        target = int(event.get("target_id") or 0)
        ctx = hs.context(target)
        view = hs.views.get(target)
        view_id = view.view_id if view is not None else None
        if kind == "end":
            request_id = str(event.get("request_id") or "")
            if view_id is not None:
                await database_sync_to_async(services.run_end)(
                    view_id,
                    request_id,
                    status=event["status"],
                    error_code=event.get("error_code") or "",
                    error=event.get("error") or "",
                    pending=event.get("pending") if event["status"] == "paused" else None,
                    prompt=hs.prompts.get(request_id, ""),
                )
            ctx.end(request_id)
            hs.prompts.pop(request_id, None)
            if len(ctx.ended) > 1000:  # only turns the snapshot still lists can matter
                listed = {str(t["request_id"]) for t in (hs.snapshot or {}).get("turns", [])}
                ctx.ended &= listed | {request_id}
            ctx.context_usage = _context_usage(hs.runtime, target) or ctx.context_usage
            await self._sync_usage(hs)
            await self._refresh_statuses(hs)
            self._touch(hs, view, full=True, trace=True)
            return
        if kind == "context_usage":
            ctx.context_usage = {"used": int(event["used"]), "total": int(event["total"])}
            if ctx.live is not None:
                ctx.live.apply(event)
            self._touch(hs, view)
            return
        if ctx.live is None and kind in OPENING_EVENTS:
            self._begin_live(hs, ctx)
            self._touch(hs, view, full=True)
        if ctx.live is not None:
            ctx.live.apply(event)
        if kind in ("tool", "usage", "plan", "approval", "retry"):
            request_id = ctx.live.request_id if ctx.live is not None else ""
            if kind == "usage":
                request_id = _request_of(str(event.get("record_id") or ""))
            await database_sync_to_async(services.record_event)(
                hs.root_id, view_id, request_id, dict(event, target_id=target)
            )
            if kind in ("usage", "plan", "approval"):
                self._touch(hs, view, trace=True)
        self._touch(hs, view)

    def _begin_live(self, hs: HostedSession, ctx: ContextLive) -> None:
        transcript = hs.runtime.read_transcript(ctx.target_id or None, entry_ids=True)
        request_id = self._expected_request(hs, ctx)
        ctx.begin(transcript, request_id=request_id, expected_prompt=hs.prompts.get(request_id))

    def _expected_request(self, hs: HostedSession, ctx: ContextLive) -> str:
        """The request whose turn is going live: the oldest started, not yet ended turn."""
        for turn in (hs.snapshot or {}).get("turns", []):
            if int(turn.get("target_id") or 0) != ctx.target_id:
                continue
            request_id = str(turn["request_id"])
            if request_id in ctx.ended or turn.get("status") in ("queued", "withdrawn", "cancelled", "rejected"):
                continue
            return request_id
        context = hs.snapshot_context(ctx.target_id) or {}
        return str(context.get("request_id") or "")

    async def _on_snapshot(self, hs: HostedSession, snapshot: dict[str, Any]) -> None:
        previous = hs.snapshot
        if previous is not None and int(snapshot.get("revision") or 0) < int(previous.get("revision") or 0):
            return  # an older picture than the one shown (a command's fresh snapshot came first)
        hs.snapshot = snapshot
        for context in snapshot.get("contexts", []):
            target = int(context["target_id"])
            for item in context.get("queue") or []:
                hs.prompts.setdefault(str(item["input_id"]), str(item.get("prompt") or ""))
            view = hs.views.get(target)
            for input_id in self._note_placed_steers(hs, target, context, snapshot):
                if view is not None:
                    await database_sync_to_async(services.run_status)(view.view_id, input_id, "placed")
        for view in hs.views.values():
            view.controls = True
            view.trace = True
        await self._refresh_statuses(hs)
        if previous is None or _config_versions(previous) != _config_versions(snapshot):
            for view in hs.views.values():
                view.full = True
        self._wake(hs)

    async def _refresh_statuses(self, hs: HostedSession) -> None:
        """Write each view's status for the sessions list when it changed (snapshot or turn end)."""
        if hs.snapshot is None:
            return
        statuses: dict[str, str] = {}
        for view in hs.views.values():
            ctx = hs.contexts.get(view.target_id)
            status = view_status(hs.snapshot, view.target_id, live=ctx is not None and ctx.live is not None)
            if status != view.status:
                view.status = status
                statuses[view.view_id] = status
        if statuses:
            await database_sync_to_async(services.view_statuses)(statuses)

    def _note_placed_steers(
        self, hs: HostedSession, target: int, context: dict[str, Any], snapshot: dict[str, Any]
    ) -> list[str]:
        """A queued steer that left the queue without becoming a turn joined the live turn;
        returns the input ids placed."""
        waiting = hs.queued_steers.get(target)
        if not waiting:
            return []
        placed: list[str] = []
        queued = {str(item["input_id"]) for item in context.get("queue") or []}
        turns = {str(turn["request_id"]) for turn in snapshot.get("turns", [])}
        ctx = hs.context(target)
        for input_id in [i for i in waiting if i not in queued]:
            prompt = waiting.pop(input_id)
            if input_id in turns or input_id in hs.withdrawn or ctx.live is None:
                continue  # it became a turn of its own (or was taken back)
            transcript = hs.runtime.read_transcript(target or None, entry_ids=True)
            ctx.note_steer(transcript, prompt)
            placed.append(input_id)
        return placed

    # -- resuming ------------------------------------------------------------------------

    async def _paused_run(self, hs: HostedSession, view: View, kind: str) -> dict[str, Any]:
        run = await database_sync_to_async(selectors.pending_run)(view.view_id)
        if run is None or (run["pending"] or {}).get("kind") != kind:
            raise HostError("not_waiting", "Nothing in this session is waiting for that answer.")
        return run

    async def _resume(self, hs: HostedSession, view: View, run: dict[str, Any], decision: dict[str, Any]) -> None:
        """Answer a paused request with the ``resume`` command; the turn goes live at once."""
        ctx = hs.context(view.target_id)
        transcript = hs.runtime.read_transcript(view.target_id or None, entry_ids=True)
        ctx.begin_after(transcript, request_id=str(run["request_id"]), agent=run["agent"])
        try:
            await self._control(hs, {"type": "resume", "input_id": run["request_id"], **decision}, view)
        except HostError:
            ctx.end(None)
            raise
        self._touch(hs, view, full=True)

    # -- commands --------------------------------------------------------------------------

    async def _control(
        self, hs: HostedSession, command: dict[str, Any], view: View, *, request_id: str | None = None
    ) -> dict[str, Any]:
        """One session command for ``view``'s conversation; refusals become ``HostError``."""
        from agentcore.errors import AGENT_NOT_READY, AgentError

        body = {**command, "request_id": request_id or uuid.uuid4().hex}
        if view.target_id:
            body["target_id"] = view.target_id
        for _attempt in range(3):
            await hs.ready.wait()
            try:
                receipt: dict[str, Any] = await hs.runtime.control(body)
            except AgentError as exc:
                if exc.code == AGENT_NOT_READY and not hs.closing:
                    continue  # the lease is switching between run() and serve()
                raise _host_error(exc) from exc
            # What the command changed is visible at once (the chip, the config version), not
            # only when the lease reads the next snapshot off the bus.
            await self._on_snapshot(hs, hs.runtime.snapshot())
            return receipt
        raise HostError("unavailable", "The session is not ready; try again.")

    # -- publishing ------------------------------------------------------------------------

    def _touch(
        self,
        hs: HostedSession,
        view: View | None,
        *,
        full: bool = False,
        controls: bool = False,
        trace: bool = False,
    ) -> None:
        if view is not None:
            view.full = view.full or full
            view.controls = view.controls or controls
            view.trace = view.trace or trace
        self._wake(hs)

    def _wake(self, hs: HostedSession) -> None:
        hs.dirty.set()
        for waiter in list(hs.waiters):
            if not waiter.done():
                waiter.set_result(None)

    async def _changed(self, hs: HostedSession) -> None:
        """Wait for the next processed event, snapshot or flush of ``hs``."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        hs.waiters.add(waiter)
        try:
            await waiter
        finally:
            hs.waiters.discard(waiter)

    def _view_id(self, hs: HostedSession, target_id: int) -> str:
        view = hs.views.get(target_id)
        return view.view_id if view is not None else hs.root_id

    def _state(self, hs: HostedSession, view: View, *, transcript: bool = True) -> HostState:
        """The view's state; ``transcript=False`` for a live patch, which renders no settled turn
        (reading a long transcript on every push would cost what the page saves by windowing)."""
        ctx = hs.contexts.get(view.target_id)
        messages = (
            list(hs.runtime.read_transcript(view.target_id or None, entry_ids=True))
            if hs.runtime is not None and transcript
            else []
        )
        live = ctx.live if ctx is not None else None
        context = hs.snapshot_context(view.target_id) or {}
        return HostState(
            session_id=view.view_id,
            epoch=self.epoch,
            seq=view.seq,
            running=live is not None
            or context.get("status") in RUNNING_STATUSES
            or (hs.in_run and view.target_id == 0),
            transcript=messages,
            base_len=ctx.settled_len(messages) if ctx is not None and live is not None and transcript else None,
            live=live.to_dict() if live is not None else None,
            context_usage=(ctx.context_usage if ctx is not None else None)
            or _context_usage(hs.runtime, view.target_id),
            snapshot=hs.snapshot,
            target_id=view.target_id,
        )

    async def _flush_loop(self, hs: HostedSession) -> None:
        """Batch changes: at most one push per view and flush interval, never deltas."""
        while not hs.closing:
            await hs.dirty.wait()
            await asyncio.sleep(self._interval)
            hs.dirty.clear()
            for view in list(hs.views.values()):
                try:
                    await self._flush(hs, view)
                except Exception:
                    log.exception("flush failed for session %s", view.view_id)
            self._wake(hs)

    async def _flush(self, hs: HostedSession, view: View) -> None:
        ctx = hs.contexts.get(view.target_id)
        live = ctx.live if ctx is not None else None
        if view.full:
            view.full = view.controls = view.trace = False
            if live is not None:
                live.take_changes()
            view.seq += 1
            state = self._state(hs, view)
            html = await database_sync_to_async(selectors.render_full_regions)(view.view_id, state)
            await self._send(view, state.seq, full=True, html=html)
            return
        added: list[LiveBlock] = []
        changed: list[LiveBlock] = []
        ring = False
        if live is not None and live.dirty:
            added, changed, ring, trace_changed = live.take_changes()
            view.trace = view.trace or trace_changed
        if not (added or changed or ring or view.controls or view.trace):
            return
        controls, trace = view.controls, view.trace
        view.controls = view.trace = False
        view.seq += 1
        state = self._state(hs, view, transcript=False)
        html = await database_sync_to_async(selectors.render_patch_regions)(
            view.view_id, state, added=added, changed=changed, ring=ring, controls=controls, trace=trace
        )
        await self._send(view, state.seq, full=False, html=html)

    async def _send(self, view: View, seq: int, *, full: bool, html: str) -> None:
        message = {"type": "session.push", "epoch": self.epoch, "seq": seq, "full": full, "html": html}
        await self.layer.group_send(view.group, message)

    async def _sync_usage(self, hs: HostedSession) -> None:
        """Reconcile Studio's usage with the store's ledger (see ``studio.ledger``)."""
        targets = {
            str(c.get("conversation_id")): int(c.get("target_id") or 0) for c in (hs.snapshot or {}).get("contexts", [])
        }
        try:
            ledger = await asyncio.to_thread(read_usage_ledger, hs.config.store_path, hs.ledger_pos)
            added = await database_sync_to_async(services.usage_sync)(hs.root_id, ledger, targets)
            if ledger:
                hs.ledger_pos = ledger[-1].pos
            await database_sync_to_async(services.view_totals)(hs.root_id, _subtrees(hs.snapshot))
        except Exception:
            log.exception("could not reconcile the usage of session %s with its store", hs.root_id)
            return
        if added:
            log.info("session %s: %d usage record(s) recovered from the store's ledger", hs.root_id, added)


def _host_error(exc: BaseException) -> HostError:
    code = str(getattr(exc, "code", "") or "error")
    message = str(getattr(exc, "message", None) or exc)
    if code == "version_conflict":
        details = getattr(exc, "details", None) or {}
        current = details.get("current_version")
        message = (
            "The model settings were changed elsewhere"
            + (f" (they are now at version {current})" if current is not None else "")
            + ". The form shows the current settings: choose again."
        )
    return HostError(code, message)


def _config_versions(snapshot: dict[str, Any]) -> dict[int, int]:
    return {int(c["target_id"]): int((c.get("config") or {}).get("version") or 0) for c in snapshot.get("contexts", [])}


def _subtrees(snapshot: dict[str, Any] | None) -> dict[int, set[int]]:
    """Per context, the targets whose usage it includes: itself and its subagents (not forks)."""
    contexts = (snapshot or {}).get("contexts", [])
    parents = {int(c["target_id"]): c.get("parent_target_id") for c in contexts if c.get("kind") == "subagent"}
    out: dict[int, set[int]] = {int(c["target_id"]): {int(c["target_id"])} for c in contexts}
    for child in parents:
        parent = parents.get(child)
        while parent is not None:
            out.setdefault(int(parent), {int(parent)}).add(child)
            parent = parents.get(int(parent))
    return out


def live_prefix(request_id: str) -> str:
    """DOM id prefix of a live turn's blocks (stable for the whole turn)."""
    return "lv-" + ("".join(ch for ch in request_id if ch.isalnum())[:16] or "turn")


def _context_usage(runtime: Any, target_id: int = 0) -> dict[str, int] | None:
    if runtime is None:
        return None
    try:
        if target_id:
            snapshot = runtime.snapshot()
            context = next((c for c in snapshot["contexts"] if c["target_id"] == target_id), None)
            usage = (context or {}).get("context_usage")
        else:
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


_OPS = {
    "prompt",
    "withdraw",
    "promote",
    "stop",
    "cancel_task",
    "resume_plan",
    "answer",
    "fork",
    "reset",
    "configure",
    "start_task",
    "release",
    "export",
}


async def _dispatch(host: SessionHost, op: str, session_id: str, args: dict[str, Any]) -> Any:
    if op == "ping":  # which process serves this session's shard (health checks, tests)
        return {"pid": os.getpid(), "epoch": host.epoch}
    if op == "state":
        return (await host.state(session_id)).to_dict()
    if op in _OPS:
        return await getattr(host, op)(session_id, **args)
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
        # Every view of a store goes to the shard of its main session (the store's owner); a
        # ping names a main session and needs no database.
        root_id = str(session_id) if op == "ping" else await database_sync_to_async(selectors.root_of)(str(session_id))
        reply_to = await self.layer.new_channel()
        await self.layer.send(
            shard_channel(root_id, self.shards),
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
    """The host channel that owns a store (by its main session id): stable, so one worker holds it."""
    if shards <= 1:
        return HOST_CHANNEL
    return f"{HOST_CHANNEL}-{uuid.UUID(session_id).int % shards}"


class HostWorkerConsumer(AsyncConsumer):
    """Worker mode: serves host requests arriving on a ``studio-host`` channel.

    Runs under ``manage.py runworker studio-host`` (or ``studio-host-<k>`` per shard). The work
    itself runs in the worker's one ``SessionHost`` (leases are background tasks), so a request
    is answered at once and a long turn never blocks the channel.
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
    """Replace the process's host (tests inject one with their own runtime factory)."""
    global _host
    _host = host


def get_host_client() -> HostClient:
    if settings.STUDIO_HOST_MODE == "worker":
        return ChannelHostClient()
    return LocalHostClient(get_session_host())
