"""The session host: the only place in Studio that opens and drives agent runtimes.

Why a host and not the consumer: work outlives any one browser tab (closing it must never
stop the agent), a long ``await`` in a consumer would block that socket's other messages, and
daphne cancels a consumer's tasks shortly after a disconnect. So runtimes live here and
browsers only *watch* them through channel-layer groups ``session-<view id>``.

**Session protocol.** Every runtime is opened with ``session={...}`` (the registry built from
``STUDIO_EXTENSIONS``, subagents on) and held by a *lease task* (``studio.host.serving``):
``runtime.serve(host)`` for as long as the store is open. Everything a person does is a session
command — a prompt is ``submit`` (queued as a follow-up while the agent is busy, never refused),
Stop is ``cancel``, a plan decision or answers are ``resume``, and fork, reset, configure,
withdraw, promote and task cancels are commands too; a plan-mode prompt is a ``submit`` with ``agent: "plan"`` (queued
like any follow-up while the agent works). The Trace renders the ``session`` events'
snapshots, never Studio's own guesses.

**Views.** One store holds several conversations (the runtime's ``target_id``): the main one,
forks and subagents. Each is shown as its own page (a ``StudioSession`` row whose ``root`` is
the main session), and each page watches its own group with its own sequence numbers
(``studio.host.publisher`` states the push contract; ``studio.host.fold`` folds the events).

Two deployments share this code (``studio.host.routing``): the host inside daphne, or in worker
processes that lease sessions through the database (``studio.host.leases``). Here that is the
optional ``SessionLeases``: the host acquires a session's lease before opening its store, fences
a stale owner that still holds it, and drops a session the moment it learns it lost it — once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from studio import event_loop, runtime_options, selectors, services
from studio.host import commands, effects, serving, timeline_feed
from studio.host.contract import HostError, HostState, SessionConfig, SessionLeases
from studio.host.factory import RuntimeFactory, close_shared, configured_factory, host_http_client
from studio.host.fold import RunSubmitted, open_turn
from studio.host.publisher import Publisher
from studio.host.state import (
    HostedSession,
    View,
    touch,
    until_idle,
    until_live,
    until_pushed,
    until_quiet,
    wake,
)
from studio.host.stream_windows import StreamWindows, stream_window
from studio.workspaces import ProtectedPaths

if TYPE_CHECKING:
    import httpx

    from agentcore.extensions.tasks.registry import AgentRegistry

log = logging.getLogger("studio.hosts")


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
        leases: SessionLeases | None = None,
        window_policy: Callable[[int], float] | None = None,
    ) -> None:
        """``window_policy``: the stream window for a number of live turns (default:
        ``stream_window`` up to ``STUDIO_STREAM_WINDOW_MAX``)."""
        self.epoch = uuid.uuid4().hex[:12]
        widest = float(settings.STUDIO_STREAM_WINDOW_MAX)
        self.windows = StreamWindows(window_policy or (lambda live: stream_window(live, widest=widest)))
        self._factory = runtime_factory or configured_factory()
        self._layer = channel_layer
        interval = settings.STUDIO_FLUSH_INTERVAL if flush_interval is None else flush_interval
        self.models = selectors.ModelCatalog()  # the registered models' options, per version
        self.protected = ProtectedPaths()  # Studio's own paths, read once per settings
        self.publisher = Publisher(self.epoch, lambda: self.layer, interval, self.models)
        self.leases = leases
        self._idle = settings.STUDIO_RUNTIME_IDLE_SECONDS if idle_seconds is None else idle_seconds
        self._extension_paths = list(settings.STUDIO_EXTENSIONS if extensions is None else extensions)
        self._registry: AgentRegistry | None = None
        self._sessions: dict[str, HostedSession] = {}  # by main session id
        self._view_roots: dict[str, str] = {}  # view id → its main session's id
        self._open_lock = asyncio.Lock()
        self._demo: Any = None  # one offline demo server shared by every demo session of this host
        self.http_client: httpx.AsyncClient | None = None  # one pool for every runtime (factory.host_http_client)

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
    def registry(self) -> AgentRegistry:
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

    # -- public commands ------------------------------------------------------------------

    async def state(self, view_id: str) -> HostState:
        hs, view = await self._view(view_id)
        return self.publisher.state(hs, view)

    async def position(self, view_id: str) -> tuple[str, int, int]:
        """Which state a page of this view shows when it is current: (epoch, seq, term)."""
        hs, view = await self._view(view_id)
        return self.epoch, view.seq, hs.term

    async def prompt(
        self,
        view_id: str,
        *,
        prompt: str,
        agent: str = "build",
        mode: str = "follow_up",
        images: list[dict[str, str]] | None = None,
    ) -> dict[str, str]:
        """Send a prompt: a new turn when idle, a queued follow-up (or a steer) when busy.

        Returns ``{"request_id", "status"}`` with status ``accepted`` (a turn starts now) or
        ``queued``. A plan-mode prompt is a ``submit`` with ``agent: "plan"``: it starts a turn of
        its own, so while the agent works it is queued as a follow-up (it cannot steer).
        """
        hs, view = await self._writable_view(view_id)
        request_id = uuid.uuid4().hex
        async with hs.lock:
            if hs.context_status(view.target_id) == "paused":
                raise HostError("waiting", "Answer the pending review or question first.")
            command: dict[str, Any] = {"type": "submit", "prompt": prompt, "mode": mode}
            if images:
                command["images"] = images  # {data: base64, mime_type} (SPEC I1)
            if agent == "plan":
                if view.target_id != 0:
                    raise HostError("plan_main_only", "Plan mode works in the main conversation; send in Build mode.")
                if mode == "steer":
                    raise HostError(
                        "plan_steer",
                        "A plan-mode message starts a turn of its own, so it cannot join the running one: "
                        "queue it, or send it in Build mode to steer.",
                    )
                command["agent"] = "plan"
            hs.prompts[request_id] = prompt
            receipt, changes = await commands.control_effects(hs, command, view, request_id=request_id)
            status = "running" if receipt.get("status") == "accepted" else "queued"
            if status == "running":
                open_turn(hs, view.target_id, request_id, agent=agent)
                self.retune(hs)
            if mode == "steer" and status == "queued":
                hs.queued_steers.setdefault(view.target_id, {})[request_id] = prompt
            # What the command changed and Studio's row for the turn: one hop, one transaction.
            submitted = RunSubmitted(view.view_id, request_id, prompt=prompt, agent=agent, status=status, mode=mode)
            await effects.apply(hs, [*changes, submitted])
            named = view.cache.get("session")
            if named is not None and not named.title and prompt.strip():
                named.title = services.title_from(prompt)  # what run_submitted wrote: the first prompt names it
                touch(hs, view, controls=True)  # the controls may have gone out during the write, untitled
            return {"request_id": request_id, "status": str(receipt.get("status"))}

    async def withdraw(self, view_id: str, *, input_id: str) -> str:
        """Take a queued follow-up back; its receipt status (``withdrawn``, ``already_placed``, …)."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await commands.control(hs, {"type": "withdraw", "input_id": input_id}, view)
            status = str(receipt.get("status"))
            if status == "withdrawn":
                hs.withdrawn.add(input_id)
                hs.queued_steers.get(view.target_id, {}).pop(input_id, None)
                await database_sync_to_async(services.run_status)(view.view_id, input_id, "withdrawn")
            touch(hs, view, controls=True)
            return status

    async def promote(self, view_id: str, *, input_id: str) -> str:
        """Turn a queued follow-up into a steer (it joins the running turn at its next tool boundary)."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await commands.control(hs, {"type": "promote", "input_id": input_id}, view)
            status = str(receipt.get("status"))
            if status == "promoted":
                hs.queued_steers.setdefault(view.target_id, {})[input_id] = hs.prompts.get(input_id, "")
                await database_sync_to_async(services.run_mode)(view.view_id, input_id, "steer")
            touch(hs, view, controls=True)
            return status

    async def stop(self, view_id: str) -> bool:
        """Cancel the running (or paused) turn of this view; queued follow-ups then run."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await commands.control(hs, {"type": "cancel", "scope": "foreground"}, view)
            return receipt.get("status") == "cancelled"

    async def cancel_task(self, view_id: str, *, task_id: str) -> list[str]:
        """Cancel one task of this view's subtree (a durable task, a subagent, a compaction)."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await commands.control(hs, {"type": "cancel", "scope": "task", "task_id": task_id}, view)
            touch(hs, view, controls=True, tasks=True)
            return list(receipt.get("cancelled") or [])

    async def resume_plan(self, view_id: str, *, approved: bool, notes: str = "") -> str:
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            run = await commands.paused_run(view, "plan")
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
            run = await commands.paused_run(view, "ask_user")
            await database_sync_to_async(services.run_resumed)(view.view_id, run["request_id"])
            await self._resume(hs, view, run, {"ask_resume": {"answers": answers}})
            return str(run["request_id"])

    async def fork(self, view_id: str, *, entry_id: str) -> str:
        """Fork this view's conversation from a committed entry; returns the new view's id."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await commands.control(hs, {"type": "fork", "entry_id": entry_id}, view)
            target_id = int(receipt["target_id"])
            new_id = await database_sync_to_async(services.fork_create)(view.view_id, target_id=target_id)
            hs.views[target_id] = View(new_id, target_id, kind="fork")
            touch(hs, view, tasks=True, controls=True)
            return new_id

    async def reset(self, view_id: str, *, handoff: str) -> str:
        """A new context generation starting from ``handoff`` (``applied`` now, ``queued`` if busy)."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await commands.control(hs, {"type": "reset", "handoff": handoff or None}, view)
            touch(hs, view, full=True)
            return str(receipt.get("status"))

    async def configure(
        self,
        view_id: str,
        *,
        expected_version: int,
        provider: str | None = None,
        model_id: str | None = None,
        effort: str | None = None,
        web_search: str | None = None,
    ) -> int:
        """Model, effort and/or web search (auto / on / off) for the next request
        (compare-and-swap on the config version)."""
        hs, view = await self._writable_view(view_id)
        command: dict[str, Any] = {"type": "configure", "expected_version": expected_version}
        if provider and model_id:
            command["model"] = {"provider": provider, "model_id": model_id}
        if effort:
            command["effort"] = effort
        if web_search:
            command["web_search"] = web_search
        async with hs.lock:
            receipt = await commands.control(hs, command, view)
            touch(hs, view, controls=True, config=True, records=True)
            return int(receipt.get("version") or 0)

    async def compact(self, view_id: str, *, instructions: str = "") -> str:
        """Summarize this conversation's whole context now (SPEC C3, the ``compact`` command with
        ``keep_recent: false``: a background task; the summary replaces the context at the next
        input boundary — at once when idle)."""
        hs, view = await self._writable_view(view_id)
        command = {"type": "compact", "instructions": instructions or None, "keep_recent": False}
        async with hs.lock:
            receipt = await commands.control(hs, command, view)
            touch(hs, view, tasks=True, conversation=True)
            return str(receipt.get("task_id"))

    async def resend(
        self, view_id: str, *, entry_id: str, provider: str | None = None, model_id: str | None = None
    ) -> dict[str, str]:
        """Send a prompt of this conversation again as a new request (Retry a failed turn,
        Regenerate the last answer): its text and images as the store has them; on another
        model first when one is named (``configure`` at the settings version shown now)."""
        hs, view = await self._writable_view(view_id)
        message = commands.user_message(hs, view, entry_id)
        if provider and model_id:
            context = hs.snapshot_context(view.target_id)
            configured = (context.config.model or {}) if context is not None else {}
            if configured.get("model_id") != model_id:
                version = context.config.version if context is not None else 0
                await self.configure(view_id, expected_version=version, provider=provider, model_id=model_id)
        return await self.prompt(view_id, prompt=message["prompt"], images=message["images"] or None)

    async def edit(self, view_id: str, *, entry_id: str, prompt: str, into: str | None = None) -> str:
        """Edit and resend a past prompt: a fork from the entry before it gets the new text
        (and the original's images) as its next turn; returns the view that runs it. ``into``:
        a new session for the conversation's first message, which has nothing to fork from."""
        hs, view = await self._writable_view(view_id)
        message = commands.user_message(hs, view, entry_id)
        if into is None:
            into = await self.fork(view_id, entry_id=commands.entry_before(hs, view, entry_id))
        await self.prompt(into, prompt=prompt, images=message["images"] or None)
        return into

    async def image(self, view_id: str, *, entry_id: str, index: int) -> dict[str, str]:
        """One image of a person's message, from the store (``{data: base64, mime_type}``):
        the thumbnails a page shows, also after a reload."""
        hs, view = await self._view(view_id)
        images = commands.user_message(hs, view, entry_id)["images"]
        if not 0 <= index < len(images):
            raise HostError("no_image", "No such image.")
        return dict(images[index])

    async def start_task(self, view_id: str, *, name: str, task_input: Any = None) -> str:
        """Start a registered durable task by name (commands never carry code)."""
        hs, view = await self._writable_view(view_id)
        async with hs.lock:
            receipt = await commands.control(
                hs, {"type": "task", "name": name, "input": task_input, "background": True}, view
            )
            touch(hs, view, tasks=True)
            return str(receipt.get("task_id"))

    async def timeline(self, view_id: str, *, turn: str | None = None) -> str:
        """The view's Timeline region (or one turn of it), from the store's trace; from now on
        the store's Timeline is kept live (``studio.host.timeline_feed``)."""
        hs, view = await self._view(view_id)
        return await timeline_feed.page(hs, view, request_id=turn or None)

    async def timeline_span(self, view_id: str, *, span_id: str) -> str | None:
        """A span's details panel, read from the store (None: not a span of this view)."""
        hs, view = await self._view(view_id)
        return await timeline_feed.span_page(hs, view, span_id)

    async def wait_idle(self, view_id: str) -> None:
        """Until this view's conversation runs nothing and its pushes are out (``until_idle``)."""
        await until_idle(*await self._view(view_id))

    async def wait_pushed(self, view_id: str) -> None:
        """Until everything folded so far was pushed to this view's page (``until_pushed``)."""
        await until_pushed(*await self._view(view_id))

    async def wait_live(self, view_id: str) -> None:
        """Until this view shows a live turn (``until_live``)."""
        await until_live(*await self._view(view_id))

    async def wait_quiet(self, view_id: str) -> None:
        """Until nothing at all runs in the store (``until_quiet``)."""
        hs, _view = await self._view(view_id)
        await until_quiet(hs)

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
            await self._forget(hs, active=False)
            return was_open

    async def export(self, view_id: str, *, destination: str) -> str:
        """Export a consistent copy of the session's store to ``destination`` (new file).

        The owner lock is held by this host while the runtime is open, so an export from outside
        would fail with ``store_locked``. The owner does it instead: under the session's lock it
        closes the runtime (durable state — a pause, a sleeping timer — stays in the store and
        resumes on the next use), copies, and lets the next use reopen it. Refused only while a
        turn is writing (``busy``).
        """
        root_id = await database_sync_to_async(selectors.root_of)(str(view_id))
        hs = self._sessions.get(root_id)
        if hs is None:
            config = await self._read_config(root_id)
            store = config.store
            lock: contextlib.AbstractAsyncContextManager[Any] = contextlib.nullcontext()
        else:
            store = hs.config.store
            lock = hs.lock
        async with lock:
            active = False
            if hs is not None:
                if hs.writing():
                    raise HostError("busy", "A turn is writing to this store; stop it or let it finish, then export.")
                active = not hs.quiet()
                await self._close(hs)
                self._sessions.pop(root_id, None)
                self.retune(hs)
            try:
                await asyncio.to_thread(store.export, destination)
            except Exception as exc:
                code = str(getattr(exc, "code", "") or exc.__class__.__name__)
                raise HostError(code, str(getattr(exc, "message", None) or exc)) from exc
            finally:
                # Only now may another worker open the store (the copy took its owner lease).
                if hs is not None and self.leases is not None:
                    await self.leases.release(root_id, active=active)
        return destination

    async def close(self) -> dict[str, bool]:
        """Close every runtime; unfinished work stays in the stores and resumes on reopen.

        Returns each session that was open and whether it had work to go on (``activity()``
        just before closing): a worker shutting down releases their leases with it."""
        activity = self.activity()
        for hs in list(self._sessions.values()):
            await self._close(hs)
        self._sessions.clear()
        self.windows.live = 0
        demo, client, self._demo, self.http_client = self._demo, self.http_client, None, None
        await close_shared(demo, client)
        await asyncio.to_thread(runtime_options.close_tracing)  # flush the spans of the runtimes just closed
        return activity

    # -- leases (worker mode) -------------------------------------------------------------------

    def activity(self) -> dict[str, bool]:
        """Every open session and whether it has work that must go on (a turn, a queue, a
        pause, a task or timer): what a lease renewal records, so a dead holder's active
        sessions are taken over at once and its idle ones only when someone asks."""
        # list(): the lease keeper's renewal thread calls this while the loop may open a session
        return {root_id: not hs.quiet() for root_id, hs in list(self._sessions.items()) if not hs.lost}

    async def adopt(self, root_id: str) -> None:
        """Open a session this worker just claimed (its holder died or shut down): the lease task
        resumes the store's unfinished work, and every view gets a full render of the new
        holder's state (a new epoch and term, so watchers switch over)."""
        config = await self._read_config(root_id)
        hs = await self._session(config)
        for view in hs.views.values():
            view.dirty.everything()
        wake(hs)

    async def drop(self, root_id: str, reason: str) -> None:
        """Another holder has (or is about to have) the session: stop publishing and recording
        at once, close the runtime without writing, forget the session. Idempotent."""
        hs = self._sessions.get(root_id)
        if hs is None or hs.lost:
            return
        hs.lost = True
        log.warning("session %s: dropped (%s); its new holder resumes it", root_id, reason)
        await self._forget(hs, active=True)  # the release is a no-op unless the lease is still ours

    # -- opening and closing ------------------------------------------------------------------

    async def _view(self, view_id: str) -> tuple[HostedSession, View]:
        """The open session and view of ``view_id``: from memory once its store is open and
        ready (a command reads no row to find its view), else from the database."""
        known = self._view_roots.get(str(view_id))
        hs = self._sessions.get(known) if known is not None else None
        if hs is not None and hs.runtime is not None and hs.ready.is_set() and not hs.lost:
            if self.leases is None or self.leases.holds(hs.root_id):
                view = next((v for v in hs.views.values() if v.view_id == str(view_id)), None)
                if view is not None:
                    hs.last_used = time.monotonic()
                    return hs, view
        config = await self._read_config(str(view_id))
        hs = await self._session(config)
        view = hs.views.get(config.target_id)
        if view is None or view.view_id != config.session_id:
            view = hs.views[config.target_id] = View(config.session_id, config.target_id, kind=config.kind)
        self._view_roots[config.session_id] = config.root_id
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
        if hs is not None and self.leases is not None and not self.leases.holds(root_id):
            # Our lease lapsed by the local clock (a frozen process, a slow database): renew it,
            # or learn that it is gone and drop the session before touching it again.
            try:
                hs.term = await self.leases.acquire(root_id)
            except HostError:
                await self.drop(root_id, "its lease was taken over")
                raise
        if hs is None:
            async with self._open_lock:
                hs = self._sessions.get(root_id)
                if hs is None:
                    term = await self.leases.acquire(root_id) if self.leases is not None else 0
                    root = config if config.root_id == config.session_id else None
                    if root is None:
                        root = await self._read_config(root_id)
                    options = root.model_options
                    if options.get("provider") == "demo" and not options.get("base_url"):
                        options["base_url"] = self.demo_base_url()
                    root.session = runtime_options.session_options(
                        self.registry, root.confinement, demo=options.get("provider") == "demo"
                    )
                    root.http_client = self.http_client = self.http_client or host_http_client()
                    hs = HostedSession(config=root, term=term)
                    for view_id, target_id, kind, status in await database_sync_to_async(selectors.views_of)(root_id):
                        hs.views[target_id] = View(view_id, target_id, kind=kind, status=status)  # as the row says
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
            try:
                hs.runtime = await self._factory(hs.config)
            except Exception as exc:
                # A stale owner (a frozen worker whose lease we now hold) still has the store
                # open: fence it, then open (its next commit fails; it drops the session).
                if getattr(exc, "code", "") != "store_locked" or self.leases is None:
                    raise
                if not await self.leases.unlock_store(hs.root_id, exc):
                    raise
                hs.runtime = await self._factory(hs.config)
        except Exception as exc:
            code = getattr(exc, "code", "unavailable")
            log.warning("could not open the store of session %s: %s", hs.root_id, code)
            self._sessions.pop(hs.root_id, None)
            if self.leases is not None:
                await self.leases.release(hs.root_id, active=True)  # let a sweep try again later
            raise HostError(str(code), f"The session store could not be opened ({code}).") from exc
        hs.closing = False
        hs.ready = asyncio.Event()
        hs.caught_up = False  # the lease's first event is the store's state as opened (catch_up)
        hs.runtime.set_stream_window(self.windows.window)
        # Unfinished work the previous process left (an interrupted turn, queued inputs,
        # sleeping timers) resumes inside the lease: the driver finds it in the store.
        # Each task in a context of its own: not the request's (the lease outlives it), and not a
        # shared one (asgiref's single-thread executor refuses concurrent calls from one context).
        hs.lease = asyncio.create_task(
            serving.hold(self, hs), name=f"studio-lease-{hs.root_id}", context=contextvars.Context()
        )
        hs.flusher = asyncio.create_task(
            self.publisher.flush_loop(hs), name=f"studio-flush-{hs.root_id}", context=contextvars.Context()
        )

    async def _close(self, hs: HostedSession) -> None:
        hs.closing = True
        runtime = hs.runtime
        if runtime is not None:
            with contextlib.suppress(Exception):
                runtime.stop_serving()
        for task in (hs.lease, hs.flusher):
            if task is not None and not task.done() and task is not asyncio.current_task():
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
            if root_id != keep and now - hs.last_used > self._idle and hs.quiet():
                await self._forget(hs, active=False)

    async def _forget(self, hs: HostedSession, *, active: bool) -> None:
        """Close a session's runtime and give its lease up (``active``: work must go on).

        Its turns stop streaming here, so the other runtimes' window is set again: a session
        dropped or closed mid-turn must not keep theirs wide."""
        await self._close(hs)
        if self._sessions.get(hs.root_id) is hs:
            del self._sessions[hs.root_id]
        if self.leases is not None:
            await self.leases.release(hs.root_id, active=active)
        self.retune(hs)

    async def _read_config(self, session_id: str) -> SessionConfig:
        """``selectors.session_config`` with this host's model catalog and protected paths."""
        return await database_sync_to_async(selectors.session_config)(session_id, self.models, self.protected)

    def retune(self, hs: HostedSession) -> None:
        """Count ``hs``'s live turns again (none once it left the host) and give every runtime
        the window that sets (``StreamWindows``). Called when a turn opens or ends and when a
        session leaves: rare next to the tokens."""
        live = hs.live_turns() if self._sessions.get(hs.root_id) is hs else 0
        window = self.windows.recount(hs.counted_live, live)
        hs.counted_live = live
        if window is not None:
            for other in self._sessions.values():
                if other.runtime is not None:
                    other.runtime.set_stream_window(window)

    async def _resume(self, hs: HostedSession, view: View, run: dict[str, Any], decision: dict[str, Any]) -> None:
        """Answer a paused request with the ``resume`` command; the turn goes live at once."""
        ctx = hs.context(view.target_id)
        transcript = commands.runtime_of(hs).read_transcript(view.target_id or None, entry_ids=True)
        ctx.begin_after(transcript, request_id=str(run["request_id"]), agent=run["agent"])
        self.retune(hs)
        try:
            await commands.control(hs, {"type": "resume", "input_id": run["request_id"], **decision}, view)
        except HostError:
            ctx.end(None)
            self.retune(hs)  # the turn never went live: the host's total forgets it at once
            raise
        touch(hs, view, conversation=True, pending=True, controls=True)


_host: SessionHost | None = None


def get_session_host() -> SessionHost:
    """This process's session host (created on first use, inside the running event loop)."""
    global _host
    if _host is None:
        _host = SessionHost()
        log.info("session host started in pid %d on the %s event loop", os.getpid(), event_loop.running())
    return _host


def set_session_host(host: SessionHost | None) -> None:
    """Replace the process's host (tests inject one with their own runtime factory)."""
    global _host
    _host = host
