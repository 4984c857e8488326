"""``create_agent`` and ``AgentRuntime``: a thin facade over the store, the engine and the session.

The runtime owns one store (exclusively), the projection of its conversations and a provider
per wire protocol. ``run()`` turns an ``AgentInput`` into an operation keyed by ``request_id``:
a finished one is answered from its receipt without calling the model or tools, an
unfinished one resumes from its durable program counter, a new one starts. With
``session={...}`` the session driver (``agentcore.session``) runs it instead, together with
queued inputs, subagents and background work, and ``control()`` / ``serve()`` become available.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, assert_never

import httpx

from agentcore.admission import Fresh, Paused, Replayed, Unfinished, admit, load_images, prepare_start, running_receipt
from agentcore.clock import WallClock, system_clock
from agentcore.compaction.settings import CompactionSettings
from agentcore.config import ConfigResolver
from agentcore.context.meter import ContextMeter
from agentcore.engine.fragments import MAX_WINDOW_S
from agentcore.engine.operations import (
    apply_resume,
    input_hash,
    is_compaction,
    new_op,
    record_failure,
    run_settings,
    start_op,
    style_on,
    supersede,
)
from agentcore.engine.retry import Sleep
from agentcore.engine.turn import TurnConfig, TurnEngine
from agentcore.errors import (
    AGENT_NOT_READY,
    BUSY,
    INPUT_VALIDATION,
    RUN_FAILED,
    SESSION_NOT_ENABLED,
    AgentError,
    InputValidationError,
)
from agentcore.events import AgentEvent
from agentcore.harness.memory_store import MemoryStorageFactory
from agentcore.harness.op_state import OpState
from agentcore.harness.projection import ConversationLog, StoreView, new_id
from agentcore.harness.storage import AgentStorage, Commit, StorageFactory, UsageRow
from agentcore.harness.storage_option import open_from_factory, resolve_storage_factory
from agentcore.host import AgentHost
from agentcore.inputs import AgentInput, AgentOptions, validate_model
from agentcore.messages import message_from_dict, message_to_dict
from agentcore.models.attributes import ModelAttributes, ResolvedModel, parse_model_attributes
from agentcore.providers.registry import ProviderRegistry
from agentcore.runtime_parts import RuntimeParts
from agentcore.tools.base import AgentTool, ToolDefinition
from agentcore.tracing import Tracer, resolve_tracing

if TYPE_CHECKING:  # the session protocol loads only for runtimes that use it
    from agentcore.session.driver import SessionDriver
    from agentcore.session.options import SessionOptions
    from agentcore.session.snapshot import SessionSnapshot


class AgentRuntime:
    """One agent over one exclusively owned store. Use ``async with`` or call ``close()``."""

    def __init__(
        self,
        options: AgentOptions,
        *,
        storage_factory: StorageFactory,
        extra_tools: list[AgentTool],
        tool_definitions: list[ToolDefinition],
        resolved_model: ResolvedModel | None,
        models: dict[str, ModelAttributes] | None = None,
        sleep: Sleep | None = None,
        session: SessionOptions | None = None,
        tracer: Tracer | None = None,
        clock: WallClock | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.options = options
        self.tracer = tracer
        self.sleep: Sleep = sleep or asyncio.sleep
        self.clock: WallClock = clock or system_clock
        self._storage_factory = storage_factory
        self._storage: AgentStorage | None = None
        self._release: Any = None
        self._view: StoreView | None = None
        self._providers = ProviderRegistry(http_client, timeouts=options.stream_timeouts.settings())
        self._session_options = session
        self.config = ConfigResolver(
            options,
            providers=self._providers,
            extra_tools=extra_tools,
            tool_definitions={d.name: d for d in tool_definitions},
            resolved_model=resolved_model,
            models=models or {},
            # Created by the first bash call whose output is cut (most runtimes never need it),
            # removed by close(): one runtime per session must not leave a directory behind.
            scratch=Path(tempfile.gettempdir()) / f"agentcore-{secrets.token_hex(8)}",
            compaction=session.compaction if session is not None else CompactionSettings.parse(None),
        )
        self.session: SessionDriver | None = None
        self._run_lock = asyncio.Lock()
        self._active = False
        self._closed = False
        self.session_id = options.session_id or "main"
        self.owner_id = ""
        self.meter: ContextMeter
        self.parts: RuntimeParts  # what the session and its extensions may use (set at open)

    # --- lifecycle ---------------------------------------------------------------------

    async def _open(self) -> None:
        storage, release = open_from_factory(self._storage_factory)
        try:
            state = storage.load()
            view = StoreView.open(storage, state, [self.session_id], clock=self.clock)
        except BaseException:
            storage.close()
            release()
            raise
        self._storage, self._release, self._view = storage, release, view
        self.owner_id = state.owner_id
        self.meter = ContextMeter(view.log(self.session_id), self.config.window_guess)
        self.parts = RuntimeParts(
            session_id=self.session_id,
            owner_id=self.owner_id,
            options=self.options,
            config=self.config,
            meter=self.meter,
            sleep=self.sleep,
            tracer=self.tracer,
            storage=storage,
        )
        if self._session_options is not None:
            from agentcore.session.driver import SessionDriver

            try:
                self.session = SessionDriver(self.parts, self._session_options, view)
            except BaseException:  # an extension refused (e.g. another environment id): nothing stays open
                storage.close()
                release()
                self._storage = self._view = None
                raise

    async def close(self) -> None:
        """Release the owner lock. Writes nothing: unfinished work resumes on the next run."""
        if self._closed:
            return
        self._closed = True
        if self.session is not None:
            await self.session.aclose()
        await self._providers.aclose()
        await self.config.aclose()
        shutil.rmtree(self.config.scratch, ignore_errors=True)
        if self._storage is not None:
            self._storage.close()
            self._release()

    async def __aenter__(self) -> AgentRuntime:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def log(self) -> ConversationLog:
        """The main conversation's projection."""
        if self._view is None or self._closed:
            raise AgentError(AGENT_NOT_READY, "the runtime is closed")
        return self._view.log(self.session_id)

    # --- public members (R2) -----------------------------------------------------------

    def get_context_usage(self) -> dict[str, int] | None:
        """``{used, total}`` of the current context, including a reply still streaming (C1, C2)."""
        self.log  # noqa: B018 - raises once closed
        return self.meter.usage()

    def update_context_usage(self, *, used: float, total: float) -> None:
        """Adopt an external measurement; later estimates grow from it (C2)."""
        self.log  # noqa: B018 - raises once closed
        self.meter.set_measurement(used, total)

    def update_models(self, models: dict[str, ModelAttributes | dict[str, Any] | str]) -> None:
        """Replace the host's model table (model id → attributes, validated like ``create_agent``'s
        ``models``) for the model requests that start from now on.

        A host whose registry changes while the runtime is open (a model added, a price set)
        calls this, so a request is priced and sized as the model that serves it is registered
        now, not as it was when the runtime opened. A request already in flight keeps the
        configuration it started with. A bad entry is ``input_validation`` and nothing changes."""
        self.log  # noqa: B018 - raises once closed
        self.config.update_models(_model_table(models))

    def set_stream_window(self, seconds: float) -> None:
        """How long streamed text may wait for its commit — and its events with it — from now on
        (default 0.02 s, at most 1 s). A host that runs many streams in one process widens it:
        fewer commits and fewer batches of events per answer, each shown that much later. Events
        are still emitted only after the fragments they carry are committed (D1, D3). Not a
        number in (0, 1] is ``input_validation`` naming ``stream_window``."""
        self.log  # noqa: B018 - raises once closed
        valid = isinstance(seconds, int | float) and not isinstance(seconds, bool) and math.isfinite(seconds)
        if not valid or not 0 < seconds <= MAX_WINDOW_S:
            raise InputValidationError(
                f"stream_window must be a number of seconds in (0, {MAX_WINDOW_S:g}], got {seconds!r}",
                field="stream_window",
            )
        self.config.stream_window.seconds = float(seconds)

    def read_transcript(self, target_id: int | None = None, *, entry_ids: bool = False) -> list[dict[str, Any]]:
        """The model-visible context as message dicts (the store keeps the full history).

        Messages the runtime wrote itself (continuation prompts, plan decisions, compaction
        summaries) carry ``"synthetic": true`` so a UI can show them as notices, not user turns.
        ``entry_ids=True`` adds each message's committed ``entry_id`` (what ``fork`` takes) and
        the ``request_id`` of the operation that wrote it (None for messages no operation wrote:
        restored or handed-off history, a compaction summary's head), which groups a transcript
        into turns; ``target_id`` reads another context of the session (a fork, a subagent).
        """
        log = self.log
        if target_id is not None:
            if self.session is None:
                raise AgentError(SESSION_NOT_ENABLED, "target_id needs the session protocol")
            log = self.log.view.log(self.session.contexts.by_target(target_id).conversation_id)
        out = []
        rows = zip(log.messages, log.message_synthetic, log.message_entry_ids, log.message_ops, strict=True)
        for message, synthetic, entry_id, request_id in rows:
            data = message_to_dict(message)
            if synthetic:
                data["synthetic"] = True
            if entry_ids:
                data["entry_id"] = entry_id
                data["request_id"] = request_id
            out.append(data)
        return out

    def restore_transcript(self, messages: list[dict[str, Any]]) -> None:
        """Seed the context before any history exists (never overwrites stored history)."""
        if self.log.messages or self.log.head is not None:
            raise AgentError(
                INPUT_VALIDATION, "restore_transcript only works before any history exists", field="messages"
            )
        try:
            parsed = [message_to_dict(message_from_dict(m)) for m in messages]
        except (KeyError, TypeError, ValueError) as exc:
            raise InputValidationError(f"messages: {exc}", field="messages") from exc
        self.log.commit(Commit(entries=[self.log.entry("transcript", {"messages": parsed})]))

    def reset(self) -> None:
        """Start a new context generation; fails while a run is active."""
        if self._active or self.log.op is not None:
            raise AgentError(BUSY, "reset is not possible while a run is active or paused")
        self.log.commit(Commit(entries=[self.log.entry("reset", {})]))
        self.meter.reset()

    async def control(self, command: Any) -> dict[str, Any]:
        """Send a session command (SPEC S1–S2); returns its receipt. Session mode, during a run."""
        if self.session is None:
            raise AgentError(SESSION_NOT_ENABLED, "the session protocol is not enabled: pass session={...}")
        if self._closed:
            raise AgentError(AGENT_NOT_READY, "the runtime is closed")
        return await self.session.control(command)

    async def serve(self, host: AgentHost | None = None) -> AsyncIterator[AgentEvent]:
        """Hold the session open for commands (a host lease): yields every event of the session
        until ``stop_serving()``; ``submit`` starts turns. Session mode only."""
        if self.session is None:
            raise AgentError(SESSION_NOT_ENABLED, "the session protocol is not enabled: pass session={...}")
        if self._run_lock.locked():
            raise AgentError(BUSY, "another run is active on this runtime")
        async with self._run_lock:
            self._active = True
            self.config.clear()
            try:
                async for event in self.session.serve(host):
                    yield event
            finally:
                self._active = False

    def stop_serving(self) -> None:
        """End ``serve()`` once the events already queued have been read."""
        if self.session is not None:
            self.session.stop_serving()

    def snapshot(self) -> dict[str, Any]:
        """The current session snapshot (SPEC S3) as JSON-ready data; session mode only."""
        return self.session_snapshot().model_dump(mode="json")

    def session_snapshot(self, *, published: bool = False) -> SessionSnapshot:
        """The current session snapshot as its typed model (no JSON round trip); session mode.

        ``published=True``: the caller shows this snapshot itself (a host right after a
        command), so ``serve()`` does not yield a ``session`` event for the same state again —
        the snapshot is built once per change, not twice. A later change is published as usual."""
        if self.session is None:
            raise AgentError(SESSION_NOT_ENABLED, "the session protocol is not enabled: pass session={...}")
        return self.session.snapshot(published=published)

    @property
    def pending_request_id(self) -> str | None:
        """The request id of an unfinished (crashed, closed or paused) operation, if any."""
        op = self.log.op
        return str(op["request_id"]) if op else None

    def records(self) -> dict[str, Any]:
        """What the snapshot's ``records`` show: the store and the model, never credentials."""
        return self.parts.records()

    def usage_ledger(self, after_seq: int = 0) -> list[UsageRow]:
        """The store's usage ledger rows committed after commit ``after_seq``, in commit order
        (DURABILITY 5): every row the store holds, whoever wrote it, read from what this runtime
        already has in memory. A host that keeps a projection of the ledger (Studio's usage
        tables) reconciles it after each run this way without opening the store a second time.
        A commit's rows share its ``seq`` and are committed together, so "after seq N" never
        splits one."""
        newer: list[UsageRow] = []
        for row in reversed(self.log.usage.values()):  # newest last: stop at the position
            if row.seq <= after_seq:
                break
            newer.append(row)
        newer.reverse()
        return newer

    # --- run ---------------------------------------------------------------------------

    async def run(
        self, input: AgentInput | dict[str, Any] | str, host: AgentHost | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Run one input to its end, yielding events; see ``RunEndEvent`` for the outcome.

        In session mode the run also answers queued inputs and waits for background work
        before it returns (S6); its last event is then a ``session`` event.
        """
        parsed: AgentInput
        if isinstance(input, str):
            parsed = AgentInput(prompt=input)
        elif isinstance(input, dict):
            parsed = validate_model(AgentInput, input, what="input")
        else:
            parsed = input
        if self._run_lock.locked():
            raise AgentError(BUSY, "another run is active on this runtime")
        async with self._run_lock:
            self._active = True
            self.config.clear()  # workdirs, files and registrations may have changed since
            try:
                if parsed.host_input is not None:
                    stream = self._run_hosted(parsed, host)
                elif self.session is not None:
                    stream = self.session.run(parsed, host)
                else:
                    stream = self._run(parsed, host)
                async for event in stream:
                    yield event
            finally:
                self._active = False
                self.meter.stop_streaming()

    async def _run_hosted(self, input: AgentInput, host: AgentHost | None) -> AsyncIterator[AgentEvent]:
        """A gateway-driven run (I2 ``host_input``): the gateway owns the history, so the run
        uses a private in-memory store seeded with the gateway's messages and never reads or
        writes this runtime's transcript."""
        raw = input.host_input.get("messages") if isinstance(input.host_input, dict) else input.host_input
        if not isinstance(raw, list):
            raise InputValidationError("host_input must be a list of messages or {messages: [...]}", field="host_input")
        try:
            seeded = [message_to_dict(message_from_dict(m)) for m in raw]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputValidationError(f"host_input: {exc}", field="host_input") from exc
        request_id = input.request_id or new_id()
        abort = (host.abort_signal if host else None) or asyncio.Event()
        images = await load_images(input, self.options.workdir)
        candidate = self._new_op(request_id, input)
        self._configure(candidate)
        storage, release = MemoryStorageFactory(label="host_input").open()
        try:
            log = ConversationLog.load(storage, storage.load(), "host_input", clock=self.clock)
            if seeded:
                log.commit(Commit(entries=[log.entry("transcript", {"messages": seeded})]))
            start_op(log, candidate, prompt=input.prompt, images=images, receipt=running_receipt(input_hash(input)))
            engine = TurnEngine(log, request_id, self._configure, host, abort, sleep=self.sleep, tracer=self.tracer)
            async for event in engine.drive():
                yield event
        finally:
            storage.close()
            release()

    async def _run(self, input: AgentInput, host: AgentHost | None) -> AsyncIterator[AgentEvent]:
        """A plain run (no session): admitted like a session's input (``admission``); a fresh
        input supersedes an unfinished older operation, and the run drives its operation in the
        caller's task."""
        log = self.log
        abort = (host.abort_signal if host else None) or asyncio.Event()
        admission = admit(log, input)
        match admission:
            case Replayed(final):
                yield final
                return
            case Paused(op):
                request_id, recovering = op["request_id"], False
            case Unfinished(op):
                request_id, recovering = op["request_id"], op["phase"] == "model"
            case Fresh(request_id=request_id):
                start = await prepare_start(
                    input, admission, new_op=self._new_op, configure=self._configure, workdir=self.options.workdir
                )
                if (older := log.op) is not None:
                    supersede(log, older)
                start_op(log, start.op, prompt=start.prompt, images=start.images, receipt=start.receipt)
                recovering = False
            case _:
                assert_never(admission)
        engine = TurnEngine(
            log,
            request_id,
            self._configure,
            host,
            abort,
            sleep=self.sleep,
            context_meter=self.meter.measure,
            tracer=self.tracer,
        )
        paused = log.op
        if paused is not None and paused.get("phase") == "paused":
            if abort.is_set():  # cancelling a pending question or approval
                yield engine.finish_aborted(paused, "cancelled while waiting for user input")
                return
            resumed = apply_resume(engine, paused, input)
            if resumed is None:
                yield engine.paused_event(paused)
                return
            async for event in resumed:
                yield event
        try:
            async for event in engine.drive(recovering=recovering):
                yield event
        except AgentError:
            raise
        except Exception as exc:  # D5: a failed run records its reason and does not auto-continue
            record_failure(log, request_id, exc, self._configure)
            raise AgentError(RUN_FAILED, f"the run failed: {exc}") from exc

    def _new_op(self, request_id: str, input: AgentInput) -> OpState:
        settings = run_settings(input)
        return new_op(
            request_id,
            compaction=is_compaction(input),
            mode=input.agent or self.options.mode,
            settings=settings,
            pinned=self.config.pin(settings),
        )

    def _configure(self, op: OpState) -> TurnConfig:
        """The turn configuration for ``op``; keeps the context meter's static part in step."""
        cfg = self.config.configure(op, style_on=style_on(self.log))
        self.meter.set_static(cfg, cfg.system_prompt, cfg.tools, cfg.context_window or cfg.model.context_window)
        return cfg


def _model_table(models: dict[str, ModelAttributes | dict[str, Any] | str]) -> dict[str, ModelAttributes]:
    """The host's model table, each entry validated (SPEC M3); entries without attributes drop."""
    return {
        model_id: attrs
        for model_id, raw in models.items()
        if (attrs := parse_model_attributes(raw, field_prefix=f"models.{model_id}")) is not None
    }


async def create_agent(
    *,
    storage: StorageFactory | None = None,
    extra_tools: list[AgentTool] | None = None,
    tool_definitions: list[ToolDefinition] | None = None,
    resolved_model: ResolvedModel | None = None,
    models: dict[str, ModelAttributes | dict[str, Any] | str] | None = None,
    sleep: Sleep | None = None,
    tracing: Any = None,
    clock: WallClock | None = None,
    http_client: httpx.AsyncClient | None = None,
    **options: Any,
) -> AgentRuntime:
    """Create and open a runtime (SPEC R1). Invalid options → ``input_validation``, nothing opened.

    ``models`` is the host's own model table (model id → attributes, validated like
    ``model_attributes``): a run that switches ``model`` picks up that model's attributes.
    ``resolved_model`` pins a fully resolved model and bypasses resolution. ``sleep`` replaces
    ``asyncio.sleep`` for retry backoff (tests inject a recorder so they never wait for real).
    ``tracing`` turns OpenTelemetry spans on or off (see ``agentcore.tracing.resolve_tracing``).
    ``clock`` (epoch milliseconds, ``agentcore.clock``) is the wall clock every committed time
    is read from (the Trace's axis); tests pass a fake one. ``http_client`` is a host's pooled
    ``httpx.AsyncClient`` (``agentcore.new_host_http_client``) that every model request of this
    runtime goes through and that ``close()`` leaves open: a host running many runtimes passes
    one, so their connections are reused; without it the runtime makes (and closes) its own.
    """
    if http_client is not None and not isinstance(http_client, httpx.AsyncClient):
        raise InputValidationError(
            f"http_client must be an httpx.AsyncClient, got {type(http_client).__name__}", field="http_client"
        )
    parsed: AgentOptions = validate_model(AgentOptions, options, what="options")
    model_table = _model_table(models or {})
    session = None
    if parsed.session is not None:
        from agentcore.session.options import parse_session_options

        session = parse_session_options(parsed.session)
    factory = resolve_storage_factory(
        database_path=parsed.database_path, database_url=parsed.database_url, storage=storage
    )
    tools = list(extra_tools or [])
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise InputValidationError("extra_tools contains duplicate names", field="extra_tools")
    runtime = AgentRuntime(
        parsed,
        storage_factory=factory,
        extra_tools=tools,
        tool_definitions=list(tool_definitions or []),
        resolved_model=resolved_model,
        models=model_table,
        sleep=sleep,
        session=session,
        tracer=resolve_tracing(tracing),
        clock=clock,
        http_client=http_client,
    )
    if resolved_model is None:
        runtime.config.model({})  # fail fast on a missing or invalid model configuration (R4)
    await runtime._open()
    return runtime
