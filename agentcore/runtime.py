"""``create_agent`` and ``AgentRuntime``: a thin facade over the store, the engine and tools.

The runtime owns one store (exclusively), one conversation projection and a provider per
wire protocol. ``run()`` turns an ``AgentInput`` into an operation keyed by ``request_id``:
a finished one is answered from its receipt without calling the model or tools, an
unfinished one resumes from its durable program counter, a new one starts.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Any

from agentcore.context.estimate import ContextTracker
from agentcore.demo import DemoServer, demo_model_options
from agentcore.engine.compaction import CompactionSettings, is_manual_command
from agentcore.engine.log import ConversationLog, new_id
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
from agentcore.events import AgentEvent, RunEndEvent
from agentcore.harness.memory_store import MemoryStorageFactory
from agentcore.harness.storage import AgentStorage, Commit, Receipt, RegisterWrite, StorageFactory
from agentcore.harness.storage_option import open_from_factory, resolve_storage_factory
from agentcore.host import AgentHost
from agentcore.inputs import AgentInput, AgentOptions, validate_model
from agentcore.messages import AssistantMessage, ImageContent, Message, message_from_dict, message_to_dict, user_text
from agentcore.models import resolve_effort, resolve_model
from agentcore.models.attributes import ModelAttributes, ResolvedModel, parse_model_attributes
from agentcore.prompts import load_prompt
from agentcore.providers.base import Provider
from agentcore.providers.registry import ProviderRegistry
from agentcore.tools.ask_user import ASK_USER, ask_user_tool
from agentcore.tools.base import AgentTool, ToolContext, ToolDefinition
from agentcore.tools.guard import PathGuard
from agentcore.tools.images import load_image_files
from agentcore.tools.selection import select_tools

COMMUNICATION_SKILL = "i-have-adhd.md"
STYLE_OFF_PHRASES = ("stop adhd mode", "normal mode")
STYLE_ON_PHRASES = ("start adhd mode", "adhd mode on", "use adhd mode", "turn on adhd mode")
RUN_SETTINGS = (
    "model_attributes",
    "web_search",
    "workdir",
    "allowed_directories",
    "system_prompt",
    "provider",
    "model",
    "base_url",
    "effort",
    "permission_policy",
    "context_window",
    "max_tokens",
)


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
    ) -> None:
        self._options = options
        self._sleep: Sleep = sleep or asyncio.sleep
        self._storage_factory = storage_factory
        self._extra_tools = extra_tools
        self._tool_definitions = {d.name: d for d in tool_definitions}
        self._resolved_model = resolved_model
        self._model_table = models or {}
        self._storage: AgentStorage | None = None
        self._release: Any = None
        self._log: ConversationLog | None = None
        self._providers = ProviderRegistry(timeouts=options.stream_timeouts.settings())
        self._demo: DemoServer | None = None
        self._run_lock = asyncio.Lock()
        self._active = False
        self._closed = False
        self._tracker = ContextTracker()
        self._calibrated_on: Message | None = None
        self._streaming_tokens = 0
        self._last_window: int | None = None
        self._scratch = Path(tempfile.mkdtemp(prefix="agentcore-"))
        self._current_abort = asyncio.Event()
        self._compaction = CompactionSettings.parse((options.session or {}).get("compaction"))
        self._seen_generation = 0
        self._config_cache: dict[tuple[str, Any, bool], TurnConfig] = {}
        self._static_for: TurnConfig | None = None
        self.session_id = options.session_id or "main"

    # --- lifecycle ---------------------------------------------------------------------

    async def _open(self) -> None:
        storage, release = open_from_factory(self._storage_factory)
        try:
            state = storage.load()
        except BaseException:
            storage.close()
            release()
            raise
        self._storage, self._release = storage, release
        self._log = ConversationLog.load(storage, state, self.session_id)
        self.owner_id = state.owner_id

    async def close(self) -> None:
        """Release the owner lock. Writes nothing: unfinished work resumes on the next run."""
        if self._closed:
            return
        self._closed = True
        await self._providers.aclose()
        if self._demo is not None:
            await asyncio.to_thread(self._demo.stop)
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
        if self._log is None or self._closed:
            raise AgentError(AGENT_NOT_READY, "the runtime is closed")
        return self._log

    # --- public members (R2) -----------------------------------------------------------

    def get_context_usage(self) -> dict[str, int] | None:
        """``{used, total}`` of the current context, including a reply still streaming (C1, C2)."""
        window = self._last_window or self._window_guess()
        if window is None:
            return None
        messages = self.log.messages
        if self.log.compaction_generation != self._seen_generation:  # C2: old responses stop calibrating
            self._seen_generation = self.log.compaction_generation
            self._tracker.after_compaction(messages)
            self._calibrated_on = None
            for message in messages:  # the retained responses may not calibrate again
                if isinstance(message, AssistantMessage):
                    self._calibrated_on = message
        for index in range(len(messages) - 1, max(-1, len(messages) - 4), -1):
            message = messages[index]
            if isinstance(message, AssistantMessage) and message.usage is not None:
                if message is not self._calibrated_on:  # a newer response recalibrates (C2)
                    self._calibrated_on = message
                    self._tracker.record_usage(index, message.usage, message)
                break
        used = self._tracker.current(messages) + self._streaming_tokens
        return {"used": used, "total": window}

    def update_context_usage(self, *, used: float, total: float) -> None:
        """Adopt an external measurement; later estimates grow from it (C2)."""
        self._tracker.set_measurement(used, total, message_count=len(self.log.messages))
        self._last_window = int(total)

    def read_transcript(self) -> list[dict[str, Any]]:
        """The model-visible context as message dicts (the store keeps the full history).

        Messages the runtime wrote itself (continuation prompts, plan decisions, compaction
        summaries) carry ``"synthetic": true`` so a UI can show them as notices, not user turns.
        """
        log = self.log
        out = []
        for message, synthetic in zip(log.messages, log.message_synthetic, strict=True):
            data = message_to_dict(message)
            if synthetic:
                data["synthetic"] = True
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
        self._tracker.reset()

    def control(self, command: dict[str, Any]) -> dict[str, Any]:
        if not self._options.session:
            raise AgentError(SESSION_NOT_ENABLED, "the session protocol is not enabled: pass session={...}")
        if not self._active:
            raise AgentError(AGENT_NOT_READY, "no run is active")
        raise AgentError(SESSION_NOT_ENABLED, "session commands are not available in this version")

    @property
    def pending_request_id(self) -> str | None:
        """The request id of an unfinished (crashed, closed or paused) operation, if any."""
        op = self.log.op
        return str(op["request_id"]) if op else None

    # --- run ---------------------------------------------------------------------------

    async def run(
        self, input: AgentInput | dict[str, Any] | str, host: AgentHost | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Run one input to its end, yielding events; see ``RunEndEvent`` for the outcome."""
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
            self._config_cache.clear()  # workdirs, files and registrations may have changed since
            try:
                async for event in self._run(parsed, host):
                    yield event
            finally:
                self._active = False
                self._streaming_tokens = 0

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
        self._current_abort = abort
        images = await self._images(input)
        candidate = self._new_op(request_id, input)
        self._configure(candidate)
        storage, release = MemoryStorageFactory(label="host_input").open()
        try:
            log = ConversationLog.load(storage, storage.load(), "host_input")
            if seeded:
                log.commit(Commit(entries=[log.entry("transcript", {"messages": seeded})]))
            self._start(request_id, input, _input_hash(input), images, candidate, log)
            engine = TurnEngine(log, request_id, self._configure, host, abort, sleep=self._sleep)
            async for event in engine.drive():
                yield event
        finally:
            storage.close()
            release()

    async def _run(self, input: AgentInput, host: AgentHost | None) -> AsyncIterator[AgentEvent]:
        if input.host_input is not None:
            async for event in self._run_hosted(input, host):
                yield event
            return
        log = self.log
        request_id = input.request_id or new_id()
        abort = (host.abort_signal if host else None) or asyncio.Event()
        self._current_abort = abort
        receipt = log.receipts.get(request_id)
        input_hash = _input_hash(input)
        if (
            receipt is not None
            and receipt.payload.get("input_hash") not in (None, input_hash)
            and not _is_resume(input)
        ):
            raise InputValidationError(
                f"request_id {request_id!r} was already used for a different input", field="request_id"
            )
        if receipt is not None and receipt.payload.get("status") in ("completed", "failed", "aborted"):
            final = dict(receipt.payload["final"], replayed=True)
            yield RunEndEvent.model_validate(final)
            return
        op = log.op
        recovering = False
        if receipt is not None and op is not None and op["request_id"] == request_id:
            recovering = op["phase"] == "model"
        else:
            # Validate everything before writing anything: bad input leaves the store unchanged.
            images = await self._images(input)
            candidate = self._new_op(request_id, input)
            self._configure(candidate)
            if candidate["phase"] != "compact" and not input.prompt and not images:
                raise InputValidationError("prompt is empty and no images are attached", field="prompt")
            if op is not None:
                self._supersede(op)
            self._start(request_id, input, input_hash, images, candidate)
        engine = TurnEngine(log, request_id, self._configure, host, abort, sleep=self._sleep, context_meter=self._meter)
        paused = log.op
        if paused is not None and paused.get("phase") == "paused":
            if abort.is_set():  # cancelling a pending question or approval
                yield engine.finish_aborted(paused, "cancelled while waiting for user input")
                return
            resumed = self._apply_resume(engine, paused, input)
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
            self._record_failure(request_id, exc)
            raise AgentError(RUN_FAILED, f"the run failed: {exc}") from exc

    def _apply_resume(
        self, engine: TurnEngine, op: dict[str, Any], input: AgentInput
    ) -> AsyncIterator[AgentEvent] | None:
        pending = op.get("pending") or {}
        kind = pending.get("kind")
        if kind == "plan" and input.plan_resume is not None:
            decision = input.plan_resume
            if decision.approval_id != pending["approval_id"]:
                raise InputValidationError(
                    f"plan_resume.approval_id {decision.approval_id!r} does not match the pending plan "
                    f"{pending['approval_id']!r}",
                    field="plan_resume.approval_id",
                )
            plan_text = decision.plan or pending.get("plan", "")
            self._mark_running(engine.request_id)
            return engine.apply_plan_decision(decision.approval_id, decision.approved, plan_text, decision.notes)
        if kind == "ask_user" and input.ask_resume is not None:
            return _one(engine.apply_answers(input.ask_resume.answers))
        if kind == "tool_approval" and input.tool_resume is not None:
            if input.tool_resume.approval_id != pending["approval_id"]:
                raise InputValidationError("tool_resume.approval_id does not match", field="tool_resume.approval_id")
            engine.apply_tool_decision(input.tool_resume.approved, input.tool_resume.message)
            return _empty()
        return None

    def _mark_running(self, request_id: str) -> None:
        receipt = self.log.receipts[request_id]
        self.log.commit(
            Commit(receipts=[self.log.receipt(request_id, dict(receipt.payload, status="running", pending=None))])
        )

    def _new_op(self, request_id: str, input: AgentInput) -> dict[str, Any]:
        settings = {name: _dump(getattr(input, name)) for name in RUN_SETTINGS if getattr(input, name) is not None}
        mode = input.agent or self._options.mode
        return {
            "request_id": request_id,
            "phase": "compact" if _is_compaction(input) else "model",
            "mode": mode,
            "step": 0,
            "attempt": 0,
            "budgets": {"connection": 0, "length": 0},
            "settings": settings,
        }

    def _start(
        self,
        request_id: str,
        input: AgentInput,
        input_hash: str,
        images: list[ImageContent],
        op: dict[str, Any],
        log: ConversationLog | None = None,
    ) -> None:
        log = log or self.log
        commit = Commit()
        style = self._style_change(input.prompt)
        if style is not None:
            commit.registers.append(RegisterWrite(f"style:{log.conversation_id}", {"adhd": style}))
        if op["phase"] != "compact":  # a compaction run adds no user message (C3)
            commit.entries.append(log.message_entry(user_text(input.prompt, images), request_id))
        commit.receipts.append(
            Receipt(request_id, log.conversation_id, {"status": "running", "input_hash": input_hash})
        )
        commit.registers.append(log.set_op(op))
        log.commit(commit)

    def _supersede(self, op: dict[str, Any]) -> None:
        """A new input while an older operation is unfinished: end the old one as aborted."""
        engine = TurnEngine(self.log, op["request_id"], self._configure, None, asyncio.Event())
        engine.finish_aborted(op, "superseded by a newer request")

    def _record_failure(self, request_id: str, exc: Exception) -> None:
        log = self.log
        if log.faulted is not None:
            return
        op = log.op
        if op is None or op["request_id"] != request_id:
            return
        engine = TurnEngine(log, request_id, self._configure, None, asyncio.Event())
        engine.finish_failed(op, RUN_FAILED, f"{type(exc).__name__}: {exc}")

    async def _images(self, input: AgentInput) -> list[ImageContent]:
        images = [ImageContent(i.data, i.mime_type) for i in input.images]
        if input.image_files:
            workdir = Path(input.workdir or self._options.workdir or os.getcwd())
            images.extend(await asyncio.to_thread(load_image_files, input.image_files, workdir))
        return images

    # --- configuration -------------------------------------------------------------------

    def _style_change(self, prompt: str) -> bool | None:
        lowered = prompt.lower()
        if any(phrase in lowered for phrase in STYLE_OFF_PHRASES):
            return False
        if any(phrase in lowered for phrase in STYLE_ON_PHRASES):
            return True
        return None

    def _style_on(self) -> bool:
        register = self.log.registers.get(f"style:{self.log.conversation_id}")
        return True if register is None else bool(register.value.get("adhd", True))

    def _model(self, settings: dict[str, Any]) -> ResolvedModel:
        opts = self._options
        if self._resolved_model is not None and not any(k in settings for k in ("provider", "model", "base_url")):
            return self._resolved_model
        provider = settings.get("provider", opts.provider)
        run_attrs = (
            ModelAttributes.model_validate(settings["model_attributes"]) if "model_attributes" in settings else None
        )
        if provider == "demo":
            # A host running many runtimes passes one shared demo server's ``base_url``;
            # otherwise this runtime starts (and later stops) its own.
            url = settings.get("base_url", opts.base_url)
            if url is None:
                if self._demo is None:
                    self._demo = DemoServer()
                url = self._demo.base_url
            base = demo_model_options(url)
            return resolve_model(
                provider="demo",
                model="demo",
                base_url=base["base_url"],
                api_key="demo",
                api_kind="openai-responses",
                runtime_attributes=base["model_attributes"],
                run_attributes=run_attrs,
                context_window=settings.get("context_window", opts.context_window),
                max_tokens=settings.get("max_tokens", opts.max_tokens),
            )
        model_id = settings.get("model", opts.model)
        return resolve_model(
            provider=provider,
            model=model_id,
            base_url=settings.get("base_url", opts.base_url),
            api_key=opts.api_key,
            api_kind=opts.api_kind,
            runtime_attributes=self._model_table.get(model_id or "", opts.model_attributes),
            run_attributes=run_attrs,
            context_window=settings.get("context_window", opts.context_window),
            max_tokens=settings.get("max_tokens", opts.max_tokens),
        )

    def _configure(self, op: dict[str, Any]) -> TurnConfig:
        """The turn configuration for ``op``, built once per (settings, mode, style) and reused:
        rebuilding tools, guards and prompts for every request would dominate a fast loop."""
        key = (json.dumps(op.get("settings", {}), sort_keys=True), op.get("mode"), self._style_on())
        cached = self._config_cache.get(key)
        if cached is None:
            cached = self._build_config(op)
            self._config_cache[key] = cached
        if self._static_for is not cached:  # the static context (prompt, tools) changed
            self._static_for = cached
            self._tracker.set_static_context(system_prompt=cached.system_prompt, tools=cached.tools)
        return cached

    def _build_config(self, op: dict[str, Any]) -> TurnConfig:
        settings = op.get("settings", {})
        opts = self._options
        model = self._model(settings)
        mode = op.get("mode", opts.mode)
        web_search = _web_search(settings.get("web_search", opts.web_search), model)
        workdir = Path(settings.get("workdir") or opts.workdir or os.getcwd())
        if not workdir.is_dir():
            raise InputValidationError(f"workdir {str(workdir)!r} is not a directory", field="workdir")
        policy = settings.get("permission_policy", opts.permission_policy)
        allowed = settings.get("allowed_directories", opts.allowed_directories)
        guard = PathGuard(workdir, policy, allowed)
        tools = select_tools(
            policy=policy,
            mode=mode,
            tools=opts.tools,
            extra_tools=self._extra_tools,
            tool_definitions=list(self._tool_definitions.values()),
            also_known={ASK_USER},
        )
        if mode == "plan" and (opts.tools is None or ASK_USER in opts.tools):
            tools = [*tools, ask_user_tool()]
        system = settings.get("system_prompt") or opts.system_prompt or load_prompt("system.md")
        if mode == "plan":
            system = f"{system}\n\n{load_prompt('plan.md')}"
        if self._style_on():
            system = f"{system}\n\n{load_prompt(COMMUNICATION_SKILL)}"
        effort = resolve_effort(settings.get("effort"), opts.effort, model)
        provider: Provider = self._providers.get(model.api_kind)
        self._last_window = settings.get("context_window") or model.context_window
        scratch = self._scratch

        def tool_context(call_id: str) -> ToolContext:
            return ToolContext(
                workdir=workdir,
                guard=guard,
                abort=self._current_abort,
                tool_call_id=call_id,
                accepts_images=model.accepts_images,
                scratch_dir=scratch,
            )

        return TurnConfig(
            model=model,
            provider=provider,
            system_prompt=system,
            tools=tools,
            effort=effort,
            max_tokens=settings.get("max_tokens") or opts.max_tokens or model.max_tokens,
            web_search=web_search,
            mode=mode,
            tool_context=tool_context,
            tool_definitions=self._tool_definitions,
            context_window=self._last_window,
            compaction=self._compaction,
        )

    def _window_guess(self) -> int | None:
        try:
            return self._model({}).context_window
        except AgentError:
            return None

    def _meter(self, messages: list[Message], streaming_chars: int) -> tuple[int, int] | None:
        self._streaming_tokens = streaming_chars // 4  # rough: ~4 characters per token while streaming
        usage = self.get_context_usage()
        return (usage["used"], usage["total"]) if usage else None


def _web_search(requested: bool | None, model: ResolvedModel) -> bool:
    if requested is None:
        return bool(model.web_search) and model.api_kind != "openai-completions"
    if not requested:
        return False
    if model.api_kind == "openai-completions":
        raise InputValidationError(
            "web_search is not available with the openai-completions api_kind", field="web_search"
        )
    if model.web_search is False:
        raise InputValidationError(f"model {model.model_id!r} declares web_search: false", field="web_search")
    return True


def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    return value


def _input_hash(input: AgentInput) -> str:
    data = input.model_dump(exclude={"request_id", "plan_resume", "ask_resume", "tool_resume"}, exclude_none=True)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _is_compaction(input: AgentInput) -> bool:
    return input.compact or is_manual_command(input.prompt)


def _is_resume(input: AgentInput) -> bool:
    """A decision payload, or a bare request id (no prompt, no images): continue that request."""
    if input.plan_resume is not None or input.ask_resume is not None or input.tool_resume is not None:
        return True
    return not input.prompt and not input.images and not input.image_files


async def _one(event: AgentEvent) -> AsyncIterator[AgentEvent]:
    yield event


async def _empty() -> AsyncIterator[AgentEvent]:
    return
    yield  # pragma: no cover


async def create_agent(
    *,
    storage: StorageFactory | None = None,
    extra_tools: list[AgentTool] | None = None,
    tool_definitions: list[ToolDefinition] | None = None,
    resolved_model: ResolvedModel | None = None,
    models: dict[str, ModelAttributes | dict[str, Any] | str] | None = None,
    sleep: Sleep | None = None,
    **options: Any,
) -> AgentRuntime:
    """Create and open a runtime (SPEC R1). Invalid options → ``input_validation``, nothing opened.

    ``models`` is the host's own model table (model id → attributes, validated like
    ``model_attributes``): a run that switches ``model`` picks up that model's attributes.
    ``resolved_model`` pins a fully resolved model and bypasses resolution. ``sleep`` replaces
    ``asyncio.sleep`` for retry backoff (tests inject a recorder so they never wait for real).
    """
    parsed: AgentOptions = validate_model(AgentOptions, options, what="options")
    model_table = {
        model_id: attrs
        for model_id, raw in (models or {}).items()
        if (attrs := parse_model_attributes(raw, field_prefix=f"models.{model_id}")) is not None
    }
    factory = resolve_storage_factory(database_path=parsed.database_path, storage=storage)
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
    )
    if resolved_model is None:
        runtime._model({})  # fail fast on a missing or invalid model configuration (R4)
    await runtime._open()
    return runtime
