"""The session driver: runs every context of a session and answers control commands (SPEC S1–S6).

Without ``session=`` a runtime runs one input at a time in the caller's task. With it, work
outlives the input that started it: queued follow-ups, steers, background subagents and
compactions. The driver runs each piece as an *activity* (an asyncio task) that writes its
events to one bus; ``run()`` reads the bus until everything is settled (S6: the foreground
answer, queued inputs and background work), ``serve()`` until the host stops it.

Every state change is a store transaction first (commands included), so what the driver
holds in memory is only the set of running activities and their abort signals; a reopened
runtime finds the rest — open operations, queues, children, receipts — in the store and
carries on. A ``session`` event with the full snapshot follows every committed change.

The driver is the one owner of the session's parts and the only module that knows them all:
it gets the runtime's ``RuntimeParts`` (never the runtime), admits ``run()`` inputs through
``admission`` like a plain run, and hands each part itself through that part's port —
``ControlHost`` (``control``), ``ChildrenHost`` (``children``), ``SnapshotSource``
(``snapshots``), ``CompactionHost`` (``agentcore.compaction.background``), ``ExtensionHost``
(``extension``) — which it satisfies structurally; none of them imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, assert_never

from agentcore.admission import Fresh, Paused, Replayed, Unfinished, admit, prepare_start
from agentcore.compaction.background import BackgroundCompactions
from agentcore.config import ToolScope
from agentcore.context.meter import ContextMeter
from agentcore.engine.base import EngineBase, TurnConfig
from agentcore.engine.operations import (
    apply_resume,
    is_compaction,
    new_op,
    record_failure,
    run_settings,
    start_op,
    style_on,
)
from agentcore.engine.turn import TurnEngine
from agentcore.errors import AGENT_NOT_READY, RUN_FAILED, AgentError
from agentcore.events import AgentEvent, RunEndEvent, SessionEvent
from agentcore.harness.op_state import OpState
from agentcore.harness.projection import ConversationLog, StoreView, cancel_key
from agentcore.harness.storage import Commit, RegisterWrite
from agentcore.host import AgentHost
from agentcore.inputs import AgentInput
from agentcore.messages import ImageContent, message_to_dict, user_text
from agentcore.runtime_parts import RuntimeParts
from agentcore.session import queue as input_queue
from agentcore.session.children import Children
from agentcore.session.commands import TaskCommand
from agentcore.session.contexts import Context, Contexts
from agentcore.session.control import ControlHandlers
from agentcore.session.extension import SessionExtension, build_extensions, extension_records
from agentcore.session.ledger import UsageLedgerIndex
from agentcore.session.options import SessionOptions
from agentcore.session.snapshot import SessionSnapshot
from agentcore.session.snapshots import SnapshotBuilder
from agentcore.session.tools import update_plan_tool

_WAKE = object()  # bus item: re-check whether the session is idle


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


@dataclass(slots=True)
class _Running:
    """One conversation's running turn: its abort signal (set by ``cancel``)."""

    abort: asyncio.Event
    request_id: str


class SessionDriver:
    """Owns the activities of one runtime's session; see the module docstring."""

    def __init__(self, parts: RuntimeParts, options: SessionOptions, view: StoreView) -> None:
        self.parts = parts
        self.options = options
        self.view = view
        self.contexts = Contexts(view, parts.session_id)
        self.ledger = UsageLedgerIndex(view)
        self.meters: dict[str, ContextMeter] = {}
        self.host: AgentHost | None = None
        self._bus: asyncio.Queue[object] = asyncio.Queue()
        self._activities: dict[str, asyncio.Task[None]] = {}
        self._running: dict[str, _Running] = {}
        self._leases = 0
        self._serving = False
        self._stop_serving = asyncio.Event()
        self._dirty = True
        self._snapshots = SnapshotBuilder(self)
        self.children = Children(self)
        self.compactions = BackgroundCompactions(self, options.compaction)
        self.control_handlers = ControlHandlers(self, self.compactions)
        view.on_commit(self._on_commit)
        self.extensions: list[SessionExtension] = build_extensions(self, options.extensions)

    # --- leases: run() and serve() ---------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Control commands are accepted while a ``run()`` or ``serve()`` is in progress."""
        return self._leases > 0

    async def run(self, input: AgentInput, host: AgentHost | None) -> AsyncIterator[AgentEvent]:
        """Run ``input`` (and everything it leads to) until the session is idle (S6)."""
        self._enter(host)
        try:
            for event in await self._admit(input):
                yield event
            async for event in self._pump(until_idle=True):
                yield event
        finally:
            self._leave()

    async def serve(self, host: AgentHost | None) -> AsyncIterator[AgentEvent]:
        """Keep the session ready for commands until ``stop_serving()`` (a host lease)."""
        self._enter(host)
        self._serving = True
        self._stop_serving.clear()
        self._dirty = True  # a host that attaches first sees the current state
        try:
            async for event in self._pump(until_idle=False):
                yield event
        finally:
            self._serving = False
            self._leave()

    def stop_serving(self) -> None:
        self._stop_serving.set()
        self._bus.put_nowait(_WAKE)

    def _enter(self, host: AgentHost | None) -> None:
        self._leases += 1
        self.host = host or self.host
        if host is not None and host.abort_signal is not None:
            signal = host.abort_signal
            self._watch(f"abort-watch:{id(signal)}", self._watch_abort(signal), background=True)

    def _leave(self) -> None:
        self._leases -= 1
        if self._leases == 0:
            watchers = [key for key in self._activities if key.startswith("abort-watch:")]
            for key in watchers:
                self._activities.pop(key).cancel()

    async def _watch_abort(self, signal: asyncio.Event) -> None:
        """A host's abort signal cancels everything the session runs (scope ``all``)."""
        await signal.wait()
        self.cancel_all(self.contexts.main, "the run was cancelled")

    # --- admitting a run() input -----------------------------------------------------------

    async def _admit(self, input: AgentInput) -> list[AgentEvent]:
        """Start, queue or resume ``input`` on the main conversation (``admission``); the events
        to yield first. A session never supersedes accepted work: a busy conversation queues."""
        log = self.view.log(self.parts.session_id)
        admission = admit(log, input)
        match admission:
            case Replayed(final):
                return [final]
            case Paused(op):
                return await self._resume_paused(log, op, input)
            case Unfinished():
                return []  # its conversation loop resumes it
            case Fresh(receipt=receipt) if receipt is not None and receipt.payload.get("status") == "queued":
                return []  # already waiting in the queue
            case Fresh():
                start = await prepare_start(
                    input,
                    admission,
                    new_op=lambda request_id, fresh_input: self.new_op(
                        log,
                        request_id,
                        run_settings(fresh_input),
                        mode=fresh_input.agent,
                        compaction=is_compaction(fresh_input),
                    ),
                    configure=lambda op: self.configure(log, op),
                    workdir=self.parts.options.workdir,
                )
                if log.op is None and not input_queue.read_queue(self.view, log.conversation_id):
                    start_op(log, start.op, prompt=start.prompt, images=start.images, receipt=start.receipt)
                else:
                    queued = {"input_hash": admission.digest}
                    self.enqueue(
                        log, admission.request_id, start.prompt, start.images, mode="follow_up", receipt=queued
                    )
                return []
            case _:
                assert_never(admission)

    async def _resume_paused(self, log: ConversationLog, op: OpState, input: AgentInput) -> list[AgentEvent]:
        engine = self.engine(log, op["request_id"], asyncio.Event())
        applied = apply_resume(engine, op, input)
        if applied is None:
            return [engine.paused_event(op)]
        return [event async for event in applied]

    # --- the bus ---------------------------------------------------------------------------

    async def _pump(self, *, until_idle: bool) -> AsyncIterator[AgentEvent]:
        self.ensure_activities()
        while True:
            if until_idle and self._idle() and self._bus.empty():
                self.ensure_activities()  # work an activity left as it finished (a delivery, a queue)
                if self._idle():
                    yield self.session_event()  # the last event: the settled state
                    return
            if not until_idle and self._stop_serving.is_set():
                yield self.session_event()
                return
            if self._dirty:
                yield self.session_event()
            item = await self._bus.get()
            if isinstance(item, _Failed):
                raise item.error
            if item is _WAKE:
                self.ensure_activities()
                continue
            yield item  # type: ignore[misc]

    def emit(self, context: Context, event: AgentEvent, request_id: str | None = None) -> None:
        """Put ``event`` of ``context`` on the bus, stamped with its context (``target_id``, when
        not the main one) and the request it belongs to."""
        stamp: dict[str, Any] = {}
        if not context.is_main:
            stamp["target_id"] = context.target_id
        if request_id is not None and event.request_id is None:
            stamp["request_id"] = request_id
        if stamp:
            event = event.model_copy(update=stamp)
        for extension in self.extensions:
            extension.observe(context, event)
        self._bus.put_nowait(event)

    def _idle(self) -> bool:
        return not any(not key.startswith("abort-watch:") for key in self._activities)

    def _on_commit(self, commit: Commit, seq: int) -> None:
        """A commit the snapshot shows schedules a ``session`` event. Whoever committed it (a
        task phase going to sleep, an extension's register) may emit nothing itself, so the
        first change after a published snapshot wakes the bus; later ones ride on that wake."""
        if self._dirty:
            return
        if (
            commit.registers
            or commit.receipts
            or commit.usage
            or commit.tasks
            or any(entry.kind != "fragment" for entry in commit.entries)
        ):
            self._dirty = True
            self._bus.put_nowait(_WAKE)

    def session_event(self) -> SessionEvent:
        self._dirty = False
        return SessionEvent(snapshot=self.snapshot().model_dump(mode="json"))

    def snapshot(self, *, published: bool = False) -> SessionSnapshot:
        """The current snapshot; ``published``: the caller shows it, so no ``session`` event
        repeats it (``_dirty`` covers only changes after this build)."""
        snapshot = self._snapshots.build()
        if published:
            self._dirty = False
        return snapshot

    # --- activities ------------------------------------------------------------------------

    def ensure_activities(self) -> None:
        """Start a loop for every context with work: an open (not paused) operation or a queue;
        background children and extension work resume too."""
        for context in self.contexts.all():
            if context.kind == "subagent" and not context.background:
                continue  # a foreground child runs inside its parent's tool call
            log = self.view.log(context.conversation_id)
            op = log.op
            queued = input_queue.read_queue(self.view, context.conversation_id)
            if (op is not None and op.get("phase") != "paused") or (op is None and queued):
                self.start_loop(context)
        self.children.deliver_finished()
        self.compactions.resume()
        for source in self.extensions:
            source.ensure_activities()

    def start_loop(self, context: Context) -> None:
        self.spawn(f"loop:{context.conversation_id}", lambda: self.conversation_loop(context))

    def _watch(self, key: str, work: Any, *, background: bool = False) -> None:
        """Run ``work`` as an activity; its failure reaches the reader of the bus."""
        task = asyncio.ensure_future(work)
        self._activities[key] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._activities.get(key) is finished:
                del self._activities[key]
            if not finished.cancelled() and finished.exception() is not None:
                self._bus.put_nowait(_Failed(finished.exception() or RuntimeError("activity failed")))
            else:
                self._bus.put_nowait(_WAKE)

        task.add_done_callback(done)

    def spawn(self, key: str, work: Callable[[], Awaitable[None]]) -> asyncio.Task[None] | None:
        """Run ``work()`` as an activity of the session, unless one runs under ``key`` already
        (then None)."""
        if key in self._activities:
            return None
        self._watch(key, work())
        return self._activities[key]

    def wake(self) -> None:
        self._bus.put_nowait(_WAKE)

    async def conversation_loop(self, context: Context) -> None:
        """Drive ``context``'s operations one after another: the open one, then the queue."""
        log = self.view.log(context.conversation_id)
        while True:
            op = log.op
            if op is None:
                if not self.start_next(context):
                    break
                continue
            if op.get("phase") == "paused":
                break
            await self.drive(context, op)
            self.compactions.apply(context)  # an input boundary
        if context.kind == "subagent":
            self.children.deliver_finished()  # the parent gets the result as its next input
            self.ensure_activities()

    async def drive(self, context: Context, op: OpState) -> RunEndEvent | None:
        """Run ``op`` of ``context`` to its end (or pause); returns its final event."""
        log = self.view.log(context.conversation_id)
        request_id = op["request_id"]
        running = self._running[context.conversation_id] = _Running(asyncio.Event(), request_id)
        if log.cancel_marker is not None:
            running.abort.set()
        # A model request another owner wrote last was in flight when it stopped (a crash, a
        # close): a recovery. One this owner started (a new input, a subagent) is not.
        recovering = op.get("phase") == "model" and op.get("owner") != self.view.owner_id
        engine = self.engine(log, request_id, running.abort, context)
        try:
            async for event in engine.drive(recovering=recovering):
                self.emit(context, event, request_id)
        except AgentError:
            raise
        except Exception as exc:  # D5: record the reason, cancel queued work, never auto-continue
            record_failure(log, request_id, exc, lambda value: self.configure(log, value, context))
            self.cancel_all(context, f"the run failed: {exc}")
            if engine.final is None and (final := log.receipts.get(request_id)) is not None:
                if final.payload.get("final"):
                    self.emit(context, RunEndEvent.model_validate(final.payload["final"]))
            raise AgentError(RUN_FAILED, f"the run failed: {exc}") from exc
        finally:
            if self._running.get(context.conversation_id) is running:
                del self._running[context.conversation_id]
            self.meter(log).stop_streaming()
        return engine.final

    def engine(
        self, log: ConversationLog, request_id: str, abort: asyncio.Event, context: Context | None = None
    ) -> TurnEngine:
        context = context or self.contexts.by_conversation(log.conversation_id)
        host = self.host if context.kind != "subagent" else self.children.host_for(context)
        return TurnEngine(
            log,
            request_id,
            lambda op: self.configure(log, op, context),
            host,
            abort,
            sleep=self.parts.sleep,
            context_meter=self.meter(log).measure,
            session=_Port(self, context),
            tracer=self.parts.tracer,
        )

    # --- operations ------------------------------------------------------------------------

    def new_op(
        self,
        log: ConversationLog,
        request_id: str,
        settings: dict[str, Any],
        *,
        mode: str | None = None,
        compaction: bool = False,
    ) -> OpState:
        """A new operation of ``log``'s conversation, pinned to its configured model."""
        config = self.config_of(log.conversation_id)
        settings = dict(settings)
        if config.get("model"):
            settings.update(provider=config["model"]["provider"], model=config["model"]["model_id"])
        if config.get("effort") is not None:
            settings["effort"] = config["effort"]
        if config.get("web_search") in ("on", "off"):
            settings["web_search"] = config["web_search"] == "on"
        elif config.get("web_search") == "auto":
            settings.pop("web_search", None)
        op = new_op(
            request_id,
            compaction=compaction,
            mode=mode or self.parts.options.mode,
            settings=settings,
            pinned=self.parts.config.pin(settings),
        )
        op["config_version"] = int(config.get("version", 0))
        return op

    def configure(self, log: ConversationLog, op: OpState, context: Context | None = None) -> TurnConfig:
        context = context or self.contexts.by_conversation(log.conversation_id)
        cfg = self.parts.config.configure(op, style_on=style_on(log), scope=self.tool_scope(context, log))
        self.meter(log).set_static(cfg, cfg.system_prompt, cfg.tools, cfg.context_window or cfg.model.context_window)
        return cfg

    def tool_scope(self, context: Context, log: ConversationLog) -> ToolScope:
        plan_tool = update_plan_tool(lambda items: self.write_plan(log, items))
        if context.kind == "subagent":
            only = frozenset(context.tools or ())
            return ToolScope(key=f"child:{context.conversation_id}", extra=(plan_tool,), only=only)
        extra = [plan_tool]
        if self.options.subagents is not None:
            extra.append(self.children.tool(context))
        sections: list[str] = []
        for extension in self.extensions:
            extra.extend(extension.tools(context))
            sections.extend(extension.sections(context))
        names = ",".join(tool.name for tool in extra)  # a catalog may add tools as they are found
        key = f"ctx:{context.conversation_id}:{names}:{hash(tuple(sections))}"
        return ToolScope(key=key, extra=tuple(extra), sections=tuple(sections))

    def meter(self, log: ConversationLog) -> ContextMeter:
        meter = self.meters.get(log.conversation_id)
        if meter is None:
            if log.conversation_id == self.parts.session_id:
                meter = self.parts.meter
            else:
                meter = ContextMeter(log, self.parts.config.window_guess)
            self.meters[log.conversation_id] = meter
        return meter

    def config_of(self, conversation_id: str) -> dict[str, Any]:
        return self.view.register(f"config:{conversation_id}") or {"version": 0}

    def write_plan(self, log: ConversationLog, items: list[dict[str, Any]]) -> int:
        version = int(log.plan.get("version", 0)) + 1
        log.commit(Commit(entries=[log.entry("plan", {"version": version, "items": items})]))
        return version

    # --- the queue ---------------------------------------------------------------------------

    def enqueue(
        self,
        log: ConversationLog,
        input_id: str,
        prompt: str,
        images: list[ImageContent],
        *,
        mode: str,
        receipt: dict[str, Any],
        kind: str = "input",
        commit: Commit | None = None,
        agent: str | None = None,
    ) -> None:
        """Add an input to ``log``'s queue (and its receipt, ``queued``) in one transaction.
        ``agent``: the agent mode of the turn it will start (None: the runtime's option)."""
        items = input_queue.read_queue(self.view, log.conversation_id)
        item: dict[str, Any] = {
            "input_id": input_id,
            "kind": kind,
            "mode": mode,
            "prompt": prompt,
            "images": [{"data": i.data, "mime_type": i.mime_type} for i in images],
        }
        if agent is not None:
            item["agent"] = agent
        items.append(item)
        commit = commit or Commit()
        commit.registers.append(input_queue.write_queue(self.view, log.conversation_id, items))
        commit.receipts.append(log.receipt(input_id, dict(receipt, status="queued", mode=mode, queued_ms=log.now_ms())))
        log.commit(commit)

    def start_next(self, context: Context) -> bool:
        """Take the next queued item of ``context`` and start it (one transaction). False when
        the queue is empty."""
        log = self.view.log(context.conversation_id)
        items = input_queue.read_queue(self.view, context.conversation_id)
        index = input_queue.next_item(items)
        if index is None:
            return False
        item = items.pop(index)
        commit = Commit(registers=[input_queue.write_queue(self.view, context.conversation_id, items)])
        if item["kind"] == "reset":
            self.apply_reset(log, item.get("handoff"), commit)
            receipt = log.receipts.get(item["input_id"])
            if receipt is not None:
                log.commit(Commit(receipts=[log.receipt(item["input_id"], dict(receipt.payload, status="applied"))]))
            return True
        receipt = log.receipts.get(item["input_id"])
        payload = dict(receipt.payload if receipt else {}, status="running")
        if item.get("mode") == "steer" and item["kind"] == "input":
            payload["steer_missed"] = True  # the turn it was for ended before a tool call
        op = self.new_op(log, item["input_id"], {}, mode=item.get("agent"))
        images = [ImageContent(i["data"], i["mime_type"]) for i in item.get("images") or []]
        extra = {"input_id": item["input_id"]}
        if item["kind"] == "delivery":
            extra["synthetic"] = True
        start_op(log, op, prompt=item["prompt"], images=images, receipt=payload, commit=commit, message_extra=extra)
        return True

    def apply_reset(self, log: ConversationLog, handoff: str | None, commit: Commit | None = None) -> None:
        """A new context generation (S2 ``reset``): the model starts from the handoff note; the
        old text stays in the store and the plan is kept."""
        commit = commit or Commit()
        payload: dict[str, Any] = {}
        if handoff:
            payload["handoff"] = message_to_dict(user_text(f"Handoff from the previous context:\n\n{handoff}"))
        commit.entries.append(log.entry("reset", payload))
        log.commit(commit)
        self.meter(log).reset()

    # --- cancellation ------------------------------------------------------------------------

    def cancel_foreground(self, context: Context, reason: str) -> str | None:
        """Cancel ``context``'s running or paused turn durably; returns its request id.
        Foreground (not background) extension work of the context is cancelled too."""
        for extension in self.extensions:
            extension.cancel_foreground(context, reason)
        log = self.view.log(context.conversation_id)
        op = log.op
        if op is None:
            return None
        running = self._running.get(context.conversation_id)
        if op.get("phase") == "paused" and running is None:
            engine = self.engine(log, op["request_id"], asyncio.Event(), context)
            final = engine.finish_aborted(op, reason)
            self.emit(context, final)
            return str(op["request_id"])
        if log.cancel_marker is None:
            marker = {"request_id": op["request_id"], "reason": reason}
            log.commit(Commit(registers=[RegisterWrite(cancel_key(context.conversation_id), marker)]))
        if running is not None:
            running.abort.set()
        return str(op["request_id"])

    def cancel_all(self, context: Context, reason: str) -> list[str]:
        """``cancel`` scope all (and D5 after a failure): the turn, the queue, owned children
        and background work of ``context``; independent forks are left alone."""
        cancelled: list[str] = []
        for each in [context, *self.contexts.children(context.target_id)]:
            request = self.cancel_foreground(each, reason)
            if request is not None:
                cancelled.append(request)
            cancelled.extend(self.drop_queue(each, "cancelled"))
        for source in self.extensions:
            cancelled.extend(source.cancel_all(context, reason))
        return cancelled

    def drop_queue(self, context: Context, status: str) -> list[str]:
        log = self.view.log(context.conversation_id)
        items = input_queue.read_queue(self.view, context.conversation_id)
        if not items:
            return []
        commit = Commit(registers=[input_queue.write_queue(self.view, context.conversation_id, [])])
        for item in items:
            receipt = log.receipts.get(item["input_id"])
            if receipt is not None:
                commit.receipts.append(log.receipt(item["input_id"], dict(receipt.payload, status=status)))
        log.commit(commit)
        return [item["input_id"] for item in items]

    # --- control -----------------------------------------------------------------------------

    async def control(self, raw: Any) -> dict[str, Any]:
        if not self.ready:
            raise AgentError(AGENT_NOT_READY, "no run is active: control commands work during run() or serve()")
        receipt = await self.control_handlers.handle(raw)
        self.ensure_activities()
        self.wake()
        return receipt

    async def aclose(self) -> None:
        """Stop every activity (close pauses: nothing is cancelled in the store); a ``serve()``
        still reading the bus ends."""
        self.stop_serving()
        tasks = list(self._activities.values())
        self._activities.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        for extension in self.extensions:
            await extension.aclose()

    # --- what the snapshot and commands ask of the extensions --------------------------------

    def records(self) -> dict[str, Any]:
        """The snapshot's ``records``: the runtime's, then what each extension reports."""
        return {**self.parts.records(), **extension_records(self.extensions)}

    def tool_details(self, context: Context) -> dict[str, dict[str, Any]]:
        """Extra ``detail`` for ``context``'s tool tasks, from every extension."""
        merged: dict[str, dict[str, Any]] = {}
        for extension in self.extensions:
            merged.update(extension.tool_details(context))
        return merged

    def cancel_extension_task(self, context: Context, task_id: str, owned_targets: set[int]) -> list[str] | None:
        for extension in self.extensions:
            stopped = extension.cancel_task(context, task_id, owned_targets)
            if stopped is not None:
                return list(stopped)
        return None

    def start_extension_task(self, command: TaskCommand, context: Context, digest: str) -> dict[str, Any] | None:
        for extension in self.extensions:
            receipt = extension.start_task(command, context, digest)
            if receipt is not None:
                return dict(receipt)
        return None


class _Port:
    """The engine's view of the session (``SessionPort``) for one context."""

    def __init__(self, driver: SessionDriver, context: Context) -> None:
        self.driver = driver
        self.context = context

    def before_request(self, engine: EngineBase, op: OpState) -> None:
        driver = self.driver
        config = driver.config_of(self.context.conversation_id)
        version = int(config.get("version", 0))
        if version != int(op.get("config_version", 0)):  # configure: effective from the next request
            fresh = driver.new_op(engine.log, op["request_id"], dict(op.get("settings") or {}), mode=op.get("mode"))
            value: OpState = {**op, "settings": fresh["settings"], "pinned": fresh["pinned"], "config_version": version}
            engine.log.commit(Commit(registers=[engine.log.set_op(value)]))
        driver.compactions.apply(self.context)
        driver.compactions.maybe_start(self.context)

    def at_tool_boundary(self, engine: EngineBase, commit: Commit) -> None:
        driver = self.driver
        log = engine.log
        items = input_queue.read_queue(driver.view, log.conversation_id)
        taken, kept = input_queue.steers(items)
        if not taken:
            return
        commit.registers.append(input_queue.write_queue(driver.view, log.conversation_id, kept))
        for item in taken:
            images = [ImageContent(i["data"], i["mime_type"]) for i in item.get("images") or []]
            commit.entries.append(
                log.message_entry(user_text(item["prompt"], images), engine.request_id, input_id=item["input_id"])
            )
            receipt = log.receipts.get(item["input_id"])
            payload = dict(receipt.payload if receipt else {}, status="placed", placed_in=engine.request_id)
            commit.receipts.append(log.receipt(item["input_id"], payload))
