"""The turn engine: drives one operation (one ``request_id``) to its end (SPEC L1–L8, D1–D3).

The engine is a projection of the store's program counter. Each loop iteration reads the
operation register (``phase`` = model | tools | paused), performs one step and commits the
next state together with the step's results, following the effect sandwich: an intent is
durable before its effect starts, the settlement is durable before the event describing it
is yielded. Recovery is therefore just "read the register and continue".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from agentcore.context.compaction import plan_compaction, should_compact, summary_message
from agentcore.engine.compaction import CompactionSettings, first_kept_entry, summarize, summary_max_tokens
from agentcore.engine.fragments import FragmentBuffer, assemble_partial
from agentcore.engine.log import ConversationLog
from agentcore.engine.pump import with_ticks
from agentcore.engine.retry import (
    MAX_CONNECTION_ATTEMPTS,
    MAX_LENGTH_CONTINUATIONS,
    MAX_PAUSE_TURNS,
    Budgets,
    Sleep,
    abortable_sleep,
    backoff_delay,
    continuation_prompt,
    exhausted_message,
    length_prompt,
    lost_call_prompt,
)
from agentcore.engine.usage import run_usage_totals, usage_payload
from agentcore.errors import EXECUTION_ABORTED, MODEL_ERROR, USER_INPUT_REQUIRED, UserInputRequired
from agentcore.events import (
    AgentEvent,
    ApprovalEvent,
    CompactionEvent,
    ContextUsageEvent,
    PlanEvent,
    RetryEvent,
    RunEndEvent,
    SourcesEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolEvent,
    UsageEvent,
    WebSearchEvent,
)
from agentcore.harness.storage import Commit, RegisterWrite
from agentcore.host import AgentHost, call_hook
from agentcore.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    message_to_dict,
    user_text,
)
from agentcore.models.attributes import ResolvedModel
from agentcore.prompts import load_prompt
from agentcore.providers.base import (
    BlockStart,
    Provider,
    ProviderFailure,
    ProviderRequest,
    SourcesFound,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolSpec,
    WebSearchUpdate,
)
from agentcore.providers.shared import RAW_ARGUMENTS_KEY
from agentcore.tools.ask_user import ASK_USER, format_answers, normalize_questions
from agentcore.tools.base import AgentTool, ToolContext, ToolDefinition, ToolResult
from agentcore.tools.executor import execute_call, prepare_call

NO_ONE_TO_ASK = (
    "No one is available to answer questions in this run. Continue with your best assumptions "
    "and state them in your answer."
)
INTERRUPTED_RESULT = (
    "The process running this tool call was interrupted before its result was recorded; "
    "the outcome is unknown. Check the current state before repeating it."
)


@dataclass(slots=True)
class TurnConfig:
    """Everything resolved for one model request; rebuilt when the mode changes mid-operation."""

    model: ResolvedModel
    provider: Provider
    system_prompt: str
    tools: list[AgentTool]
    effort: str | None
    max_tokens: int
    web_search: bool
    mode: str
    tool_context: Callable[[str], ToolContext]
    tool_definitions: dict[str, ToolDefinition] = field(default_factory=dict)
    context_window: int | None = None
    compaction: CompactionSettings = field(default_factory=CompactionSettings)

    def tool_specs(self) -> list[ToolSpec]:
        return [ToolSpec(t.name, t.description, t.parameters) for t in self.tools]

    def find_tool(self, name: str) -> AgentTool | None:
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None


Configure = Callable[[dict[str, Any]], TurnConfig]
ContextMeter = Callable[[list[Message], int], tuple[int, int] | None]


def call_key(request_id: str, step: int, index: int) -> str:
    return f"{request_id}/{step}/{index}"


class TurnEngine:
    """Drives the open operation of ``log`` until it completes, fails, aborts or pauses."""

    def __init__(
        self,
        log: ConversationLog,
        request_id: str,
        configure: Configure,
        host: AgentHost | None,
        abort: asyncio.Event,
        *,
        sleep: Sleep = asyncio.sleep,
        context_meter: ContextMeter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.request_id = request_id
        self.configure = configure
        self.host = host or AgentHost()
        self.has_host = host is not None  # H1: with no host at all, nothing ever pauses
        self.abort = abort
        self.sleep = sleep
        self.context_meter = context_meter
        self.clock = clock
        self.final: RunEndEvent | None = None
        self._last_usage_emit = 0.0

    # --- driver --------------------------------------------------------------------------

    async def drive(self, *, recovering: bool = False) -> AsyncIterator[AgentEvent]:
        usage = self._context_usage()
        if usage:
            yield usage
        if recovering:
            async for event in self._recover():
                yield event
        while self.final is None:
            op = self.log.op
            if op is None or op["request_id"] != self.request_id:
                break
            if self.abort.is_set():
                yield self.finish_aborted(op, "the run was cancelled")
                break
            phase = op["phase"]
            if phase == "model":
                async for event in self._model_step(op):
                    yield event
            elif phase == "tools":
                async for event in self._tool_step(op):
                    yield event
            elif phase == "compact":
                async for event in self.compact(op, self.configure(op), auto=False):
                    yield event
            elif phase == "plan_review":
                async for event in self._plan_review(op):
                    yield event
            elif phase == "paused":
                yield self.paused_event(op)
                break
            else:  # pragma: no cover - a register written by a newer version
                yield self.finish_failed(op, MODEL_ERROR, f"unknown operation phase {phase!r}")

    # --- recovery (D2, D3) -----------------------------------------------------------------

    async def _recover(self) -> AsyncIterator[AgentEvent]:
        """Reopened mid-operation: count a recovery attempt and keep the committed fragments."""
        op = self.log.op
        if op is None or op["phase"] != "model":
            return
        budgets = Budgets(**op["budgets"])
        budgets.connection += 1
        if budgets.connection > MAX_CONNECTION_ATTEMPTS:
            yield self.finish_failed(
                op, MODEL_ERROR, exhausted_message("dropped", MAX_CONNECTION_ATTEMPTS, "process restarted")
            )
            return
        cfg = self.configure(op)
        fragments = self.log.fragments.get(self.request_id, [])
        commit = Commit()
        next_op = dict(op, budgets=_budgets_dict(budgets), attempt=op["attempt"] + 1)
        if fragments:
            partial = assemble_partial(
                fragments, api_kind=cfg.model.api_kind, provider=cfg.model.provider, model=cfg.model.model_id
            )
            prompt = continuation_prompt("the process was restarted", model_sees_partial=True)
            commit.entries.append(self.log.message_entry(partial, self.request_id, settles_fragments=True))
            commit.entries.append(self.log.message_entry(user_text(prompt), self.request_id, synthetic=True))
            next_op.update(step=op["step"] + 1, attempt=0)
        commit.registers.append(self.log.set_op(next_op))
        self.log.commit(commit)
        yield RetryEvent(
            attempt=budgets.connection,
            max_attempts=MAX_CONNECTION_ATTEMPTS,
            reason="resumed after the process stopped mid-request",
            kind="recovery",
        )

    # --- model step ------------------------------------------------------------------------

    async def _model_step(self, op: dict[str, Any]) -> AsyncIterator[AgentEvent]:
        cfg = self.configure(op)
        if self._threshold_reached(op, cfg):  # C4: checked before every model request
            async for compaction_event in self.compact(op, cfg, auto=True):
                yield compaction_event
            return  # the driver re-reads the program counter
        step, attempt = op["step"], op["attempt"]
        request = ProviderRequest(
            model=cfg.model,
            system_prompt=cfg.system_prompt,
            messages=self.log.messages,
            tools=cfg.tool_specs(),
            effort=cfg.effort,
            max_tokens=cfg.max_tokens,
            web_search=cfg.web_search,
            session_id=self.log.conversation_id,
        )
        buffer = FragmentBuffer(step, attempt, clock=self.clock)
        pending: list[AgentEvent] = []
        streamed_chars = 0
        end: StreamEnd | None = None
        stream = with_ticks(cfg.provider.stream(request, self.abort), buffer.deadline, self.clock)
        async for event in stream:
            if event is None:  # the flush window passed while the provider was quiet
                pass
            elif isinstance(event, TextDelta):
                buffer.add(event.index, "text", event.text)
                pending.append(TextDeltaEvent(index=event.index, delta=event.text))
                streamed_chars += len(event.text)
            elif isinstance(event, ThinkingDelta):
                buffer.add(event.index, "thinking", event.text)
                pending.append(ThinkingDeltaEvent(index=event.index, delta=event.text))
                streamed_chars += len(event.text)
            elif isinstance(event, ToolCallDelta):
                streamed_chars += len(event.partial_json)
            elif isinstance(event, WebSearchUpdate):
                pending.append(WebSearchEvent(search=event.search))
            elif isinstance(event, SourcesFound):
                pending.append(SourcesEvent(sources=event.sources))
            elif isinstance(event, StreamEnd):
                end = event
                break
            elif isinstance(event, (BlockStart, ToolCallEnd)):
                continue
            if buffer.due():
                fragments = buffer.drain(self.request_id)
                self.log.commit(Commit(entries=[self.log.entry("fragment", f) for f in fragments]))
                for item in pending:
                    yield item
                pending.clear()
                meter = self._context_usage(streaming_chars=streamed_chars, throttle=True)
                if meter:
                    yield meter
        await stream.aclose()
        if end is None:  # pragma: no cover - adapters always end with StreamEnd
            end = StreamEnd(AssistantMessage([], stop_reason="error"), None)
        message = end.message
        # Everything received is settled below in one transaction with the next state.
        async for settled in self._settle_response(op, cfg, message, end, pending):
            yield settled

    async def _settle_response(
        self,
        op: dict[str, Any],
        cfg: TurnConfig,
        message: AssistantMessage,
        end: StreamEnd,
        pending: list[AgentEvent],
    ) -> AsyncIterator[AgentEvent]:
        """Commit the response, its usage row and the next program-counter state together.

        This is the one place that decides what a finished stream means: next tool round,
        a continuation (length / lost call / dropped after content), a retry, or the end.
        """
        step = op["step"]
        record_id = f"{self.request_id}:{step}:{op['attempt']}"
        budgets = Budgets(**op["budgets"])
        failure = end.failure
        usage_row = self.log.usage_row(record_id, usage_payload(message, self.request_id, ok=failure is None))
        commit = Commit(usage=[usage_row])
        final: RunEndEvent | None = None
        retry: RetryEvent | None = None

        def continue_with(prompt: str | None, *, reset: bool = False) -> None:
            if prompt is not None:
                commit.entries.append(self.log.message_entry(user_text(prompt), self.request_id, synthetic=True))
            commit.registers.append(self._next_model_op(op, budgets, reset=reset))

        if failure is None:
            calls = message.tool_calls
            entry = self.log.message_entry(message, self.request_id, settles_fragments=True)
            commit.entries.append(entry)
            if calls:
                budgets.reset()
                tool_calls = [
                    {"id": c.id, "name": c.name, "arguments": c.arguments, "index": i} for i, c in enumerate(calls)
                ]
                value = dict(op, phase="tools", budgets=_budgets_dict(budgets), tool_calls=tool_calls)
                value.update(assistant_entry=entry.id, pause_turns=0)
                commit.registers.append(self.log.set_op(value))
            elif message.stop_reason == "length":
                budgets.length += 1
                if budgets.length > MAX_LENGTH_CONTINUATIONS:
                    final = self.finish_failed(
                        op, MODEL_ERROR, exhausted_message("length", MAX_LENGTH_CONTINUATIONS, ""), commit=commit
                    )
                else:
                    continue_with(length_prompt())
                    retry = RetryEvent(
                        attempt=budgets.length,
                        max_attempts=MAX_LENGTH_CONTINUATIONS,
                        reason="the reply hit max_tokens",
                        kind="length",
                    )
            elif message.stop_reason == "tool_use":
                budgets.connection += 1
                if budgets.connection > MAX_CONNECTION_ATTEMPTS:
                    cause = "stop reason tool_use without a call"
                    reason = exhausted_message("lost-call", MAX_CONNECTION_ATTEMPTS, cause)
                    final = self.finish_failed(op, MODEL_ERROR, reason, commit=commit)
                else:
                    continue_with(lost_call_prompt())
                    retry = RetryEvent(
                        attempt=budgets.connection,
                        max_attempts=MAX_CONNECTION_ATTEMPTS,
                        reason="the reply said it was calling a tool but no call arrived",
                        kind="lost-call",
                    )
            elif message.stop_reason == "pause_turn":
                pause_turns = int(op.get("pause_turns", 0)) + 1
                if pause_turns > MAX_PAUSE_TURNS:
                    reason = f"the provider paused the turn more than {MAX_PAUSE_TURNS} times"
                    final = self.finish_failed(op, MODEL_ERROR, reason, commit=commit)
                else:
                    value = dict(op, phase="model", step=step + 1, attempt=0, budgets=_budgets_dict(budgets))
                    value["pause_turns"] = pause_turns
                    commit.registers.append(self.log.set_op(value))
            elif cfg.mode == "plan" and message.text.strip():
                budgets.reset()
                plan = {"approval_id": f"{self.request_id}:plan:{step}", "text": message.text}
                value = dict(op, phase="plan_review", budgets=_budgets_dict(budgets), plan=plan)
                commit.registers.append(self.log.set_op(value))
            else:
                final = self.finish_completed(op, commit, message.text)
        else:
            has_content = any(
                (isinstance(b, TextContent) and b.text) or (isinstance(b, ThinkingContent) and b.thinking)
                for b in message.content
            )
            if has_content:  # keep what the user already saw; drop calls without results (L3)
                partial = AssistantMessage(
                    [b for b in message.content if isinstance(b, (TextContent, ThinkingContent))],
                    api_kind=message.api_kind,
                    provider=message.provider,
                    model=message.model,
                    stop_reason="aborted" if failure.kind == "cancelled" else "error",
                    usage=message.usage,
                    error_message=failure.message,
                )
                commit.entries.append(self.log.message_entry(partial, self.request_id, settles_fragments=True))
            if failure.kind == "cancelled":
                final = self.finish_aborted(op, "the run was cancelled", commit=commit)
            elif failure.kind == "overflow" and cfg.compaction.enabled and not op.get("overflow_compacted"):
                # C5: compact once and retry; the flag makes a second overflow an error.
                value = dict(op, attempt=op["attempt"] + 1, overflow_compacted=True, force_compaction=True)
                commit.registers.append(self.log.set_op(value))
            elif not failure.retryable:
                reason = f"{failure.kind}: {failure.message}"
                if failure.kind == "overflow":
                    reason = f"the context is too long for the model even after compaction: {failure.message}"
                    if not cfg.compaction.enabled:
                        reason = f"the context is too long for the model: {failure.message}"
                final = self.finish_failed(op, MODEL_ERROR, reason, commit=commit)
            else:
                budgets.connection += 1
                if budgets.connection > MAX_CONNECTION_ATTEMPTS:
                    reason = exhausted_message("dropped", MAX_CONNECTION_ATTEMPTS, failure.message)
                    final = self.finish_failed(op, MODEL_ERROR, reason, commit=commit)
                else:
                    if has_content:
                        continue_with(continuation_prompt(failure.message, model_sees_partial=True))
                    else:
                        value = dict(op, attempt=op["attempt"] + 1, budgets=_budgets_dict(budgets))
                        commit.registers.append(self.log.set_op(value))
                    retry = RetryEvent(
                        attempt=budgets.connection,
                        max_attempts=MAX_CONNECTION_ATTEMPTS,
                        reason=failure.message,
                        kind="dropped",
                        delay_s=backoff_delay(budgets.connection, failure.retry_after),
                    )

        if final is None:
            self.log.commit(commit)
        for item in pending:
            yield item
        async for event in self._after_settle(usage_row.payload, record_id):
            yield event
        if final is not None:
            yield final
            return
        if retry is not None:
            yield retry
            if retry.delay_s and await abortable_sleep(retry.delay_s, self.abort, self.sleep):
                current = self.log.op
                if current is not None:
                    yield self.finish_aborted(current, "the run was cancelled during a retry backoff")

    def _next_model_op(self, op: dict[str, Any], budgets: Budgets, *, reset: bool = False) -> Any:
        if reset:
            budgets.reset()
        value = dict(op, phase="model", step=op["step"] + 1, attempt=0, budgets=_budgets_dict(budgets))
        value.pop("tool_calls", None)
        return self.log.set_op(value)

    async def _after_settle(
        self, payload: dict[str, Any], record_id: str, *, meter: bool = True
    ) -> AsyncIterator[AgentEvent]:
        yield UsageEvent(record_id=record_id, **{k: payload[k] for k in _USAGE_EVENT_FIELDS})
        if self.host.report_usage is not None:
            await call_hook(self.host.report_usage, {"record_id": record_id, **payload})
        usage = self._context_usage() if meter else None
        if usage:
            yield usage

    # --- compaction (C3–C5) ----------------------------------------------------------------

    def _threshold_reached(self, op: dict[str, Any], cfg: TurnConfig) -> bool:
        if op.get("force_compaction"):
            return True
        window = cfg.context_window
        if not cfg.compaction.enabled or window is None or self.context_meter is None:
            return False
        if op.get("compacted_step") == op["step"]:
            return False  # DURABILITY 14: at most once per trigger, even across reopen
        measured = self.context_meter(self.log.messages, 0)
        if measured is None:
            return False
        return should_compact(measured[0], window, reserve_tokens=cfg.compaction.reserve(window))

    async def compact(self, op: dict[str, Any], cfg: TurnConfig, *, auto: bool) -> AsyncIterator[AgentEvent]:
        """Summarize the older part (auto) or everything (manual); replace the context only on
        a normal finish with a non-empty summary. Originals stay in the store."""
        window = cfg.context_window or cfg.model.context_window
        settings = cfg.compaction
        max_tokens = summary_max_tokens(cfg.model, window)
        plan = plan_compaction(
            self.log.messages,
            window=window,
            reserve_tokens=settings.reserve(window),
            keep_recent_tokens=settings.keep_recent(window) if not op.get("force_compaction") else 0,
            max_summary_tokens=max_tokens,
            force=not auto,
        )
        done = dict(op, compacted_step=op["step"])
        done.pop("force_compaction", None)
        if plan.oversize:
            yield self.finish_failed(op, MODEL_ERROR, plan.oversize_error() or "a message is larger than the window")
            return
        if not plan.to_summarize:
            if not auto:
                yield CompactionEvent(phase="end", auto=False)  # C3: empty context → only the end event
                yield self.finish_completed(op, Commit(), "")
            else:
                self.log.commit(Commit(registers=[self.log.set_op(done)]))
            return
        yield CompactionEvent(phase="start", auto=auto)
        attempts: list[AgentEvent] = []
        counter = len([k for k in self.log.usage if k.startswith(f"{self.request_id}:compact:")])

        async def on_attempt(message: AssistantMessage, failure: ProviderFailure | None) -> None:
            nonlocal counter
            record_id = f"{self.request_id}:compact:{counter}"
            counter += 1
            payload = usage_payload(message, self.request_id, ok=failure is None)
            payload["purpose"] = "compaction"
            self.log.commit(Commit(usage=[self.log.usage_row(record_id, payload)]))
            async for event in self._after_settle(payload, record_id, meter=False):
                attempts.append(event)

        outcome = await summarize(
            plan, cfg.provider, cfg.model, abort=self.abort, max_tokens=max_tokens, on_attempt=on_attempt
        )
        for event in attempts:
            yield event
        current = self.log.op or op
        if self.abort.is_set() or (outcome.failure is not None and outcome.failure.kind == "cancelled"):
            yield self.finish_aborted(current, "the run was cancelled during compaction")  # nothing written
            return
        if outcome.failure is not None:
            reason = f"compaction failed: {outcome.failure.message}"
            yield self.finish_failed(current, MODEL_ERROR, reason)  # the original context is kept
            return
        keep_from = first_kept_entry(self.log.message_entry_ids, self.log.messages, plan.cut_index)
        entry = self.log.entry(
            "compaction",
            {
                "summary_message": message_to_dict(summary_message(outcome.text)),
                "keep_from_entry": keep_from,
                "auto": auto,
                "summarized": len(plan.to_summarize),
            },
        )
        commit = Commit(entries=[entry])
        if auto:
            commit.registers.append(self.log.set_op(dict(done, compacted_step=current["step"])))
            self.log.commit(commit)
            yield CompactionEvent(phase="end", auto=True, summary=outcome.text)
            meter = self._context_usage()
            if meter:
                yield meter
            return
        final = self.finish_completed(current, commit, outcome.text)
        yield CompactionEvent(phase="end", auto=False, summary=outcome.text)
        meter = self._context_usage()
        if meter:
            yield meter
        yield final

    # --- tool step -------------------------------------------------------------------------

    async def _tool_step(self, op: dict[str, Any]) -> AsyncIterator[AgentEvent]:
        cfg = self.configure(op)
        step = op["step"]
        calls = op["tool_calls"]
        results: list[ToolResult | None] = [None] * len(calls)
        index = 0
        while index < len(calls):
            call = calls[index]
            key = call_key(self.request_id, step, call["index"])
            if key in self.log.results:
                index += 1
                continue
            if self.abort.is_set():
                yield self.finish_aborted(self.log.op or op, "the run was cancelled")
                return
            # Batch consecutive independent read-only calls so they run concurrently.
            batch = [call]
            tool = cfg.find_tool(call["name"])
            if tool is not None and tool.read_only and key not in self.log.intents:
                look = index + 1
                while look < len(calls):
                    nxt = calls[look]
                    nxt_tool = cfg.find_tool(nxt["name"])
                    nxt_key = call_key(self.request_id, step, nxt["index"])
                    if (
                        nxt_tool is None
                        or not nxt_tool.read_only
                        or nxt_key in self.log.intents
                        or nxt_key in self.log.results
                    ):
                        break
                    batch.append(nxt)
                    look += 1
            last = index + len(batch) == len(calls)
            async for event in self._run_batch(op, cfg, batch, results, advance=last):
                yield event
            if self.final is not None or (self.log.op or {}).get("phase") in ("paused", "model"):
                return
            if self.abort.is_set():  # L8: the running tool was stopped; end without a new request
                yield self.finish_aborted(self.log.op or op, "the run was cancelled during a tool call")
                return
            index += len(batch)
        current = self.log.op or op
        if _terminates(results):
            yield self.finish_completed(current, Commit(), "")
            return
        self.log.commit(Commit(registers=[self._after_tools(current)]))

    def _after_tools(self, op: dict[str, Any]) -> RegisterWrite:
        """The program counter after a tool round: the next model request."""
        value = dict(op, phase="model", step=op["step"] + 1, attempt=0)
        value.pop("tool_calls", None)
        value.pop("approvals", None)
        return self.log.set_op(value)

    async def _run_batch(
        self,
        op: dict[str, Any],
        cfg: TurnConfig,
        batch: list[dict[str, Any]],
        results: list[ToolResult | None],
        *,
        advance: bool = False,
    ) -> AsyncIterator[AgentEvent]:
        """Run one batch; with ``advance``, the results commit also moves the program counter to
        the next model request (one transaction instead of two on the hot path)."""
        step = op["step"]
        runnable: list[tuple[dict[str, Any], AgentTool, dict[str, Any], str]] = []
        settled: list[tuple[dict[str, Any], ToolResult, str]] = []
        intents = Commit()
        for call in batch:
            key = call_key(self.request_id, step, call["index"])
            display_id = f"{op.get('assistant_entry', '')[:12]}:{call['id']}"
            tool = cfg.find_tool(call["name"])
            intent = self.log.intents.get(key)
            if intent is not None:
                # Started before a crash, never settled (D2).
                if tool is not None and intent.get("replay") == "safe" and tool.replay == "safe":
                    runnable.append((call, tool, intent["arguments"], display_id))
                else:
                    settled.append((call, ToolResult.text(INTERRUPTED_RESULT, is_error=True), display_id))
                continue
            if tool is None:
                settled.append((call, ToolResult.text(f"Unknown tool {call['name']!r}.", is_error=True), display_id))
                continue
            if RAW_ARGUMENTS_KEY in call["arguments"]:
                invalid = "The tool call arguments were not valid JSON; resend the call with a valid JSON object."
                settled.append((call, ToolResult.text(invalid, is_error=True), display_id))
                continue
            prepared = prepare_call(tool, call["arguments"])
            if isinstance(prepared, ToolResult):  # invalid arguments: no intent, no effect (invariant 11)
                settled.append((call, prepared, display_id))
                continue
            if tool.name == ASK_USER and not self.has_host:
                settled.append((call, ToolResult.text(NO_ONE_TO_ASK, is_error=True), display_id))
                continue
            if tool.name == ASK_USER:
                self._pause_for_questions(op, call, prepared, key)
                yield self.paused_event(self.log.op or op)
                return
            decision = await self._approve(op, cfg, tool, call, prepared, key)
            if decision == "pause":
                yield self.paused_event(self.log.op or op)
                return
            if isinstance(decision, str):
                settled.append((call, ToolResult.text(decision, is_error=True), display_id))
                continue
            intents.entries.append(
                self.log.entry(
                    "tool_intent",
                    {
                        "call_key": key,
                        "name": tool.name,
                        "arguments": prepared,
                        "replay": tool.replay,
                        "id": call["id"],
                    },
                )
            )
            runnable.append((call, tool, prepared, display_id))
        if not intents.is_empty():
            self.log.commit(intents)
        starts: dict[str, float] = {}
        for call, _tool, arguments, display_id in runnable:
            starts[display_id] = self.clock()
            yield ToolEvent(
                phase="start", tool_call_id=display_id, name=call["name"], index=call["index"], arguments=arguments
            )
        updates: asyncio.Queue[ToolEvent] = asyncio.Queue()
        work = asyncio.gather(
            *(
                execute_call(tool, arguments, self._tool_context(cfg, call, display_id, updates))
                for call, tool, arguments, display_id in runnable
            )
        )
        async for update in _drain_while(work, updates):
            yield update
        outcomes = work.result()
        by_call = {id(call): outcome for (call, _t, _a, _d), outcome in zip(runnable, outcomes, strict=True)}
        commit = Commit()
        finished: list[ToolEvent] = []
        for call in batch:
            key = call_key(self.request_id, step, call["index"])
            if key in self.log.results:
                continue
            match = next(((r, d) for c, r, d in settled if c is call), None)
            if match is not None:
                result, display_id = match
            else:
                result = by_call[id(call)]
                display_id = next(d for c, _t, _a, d in runnable if c is call)
            results[batch_position(call)] = result
            message = ToolResultMessage(
                tool_call_id=call["id"],
                tool_name=call["name"],
                content=result.content,
                is_error=result.is_error,
                structured_content=result.structured_content,
            )
            commit.entries.append(self.log.message_entry(message, self.request_id, call_key=key))
            started = starts.get(display_id)
            finished.append(
                ToolEvent(
                    phase="end",
                    tool_call_id=display_id,
                    name=call["name"],
                    index=call["index"],
                    arguments=call["arguments"],
                    result=message.text,
                    is_error=result.is_error,
                    duration_ms=(self.clock() - started) * 1000 if started is not None else None,
                )
            )
        if advance and not self.abort.is_set() and not _terminates(results):
            commit.registers.append(self._after_tools(self.log.op or op))
        if not commit.is_empty():
            self.log.commit(commit)
        for event in finished:
            yield event
        meter = self._context_usage()
        if meter:
            yield meter

    def _tool_context(
        self, cfg: TurnConfig, call: dict[str, Any], display_id: str, updates: asyncio.Queue[ToolEvent]
    ) -> ToolContext:
        """The tool's context, with partial output forwarded as ``tool`` update events."""
        ctx = cfg.tool_context(display_id)

        def on_update(partial: str) -> None:
            updates.put_nowait(
                ToolEvent(
                    phase="update", tool_call_id=display_id, name=call["name"], index=call["index"], partial=partial
                )
            )

        ctx.on_update = on_update
        return ctx

    async def _approve(
        self,
        op: dict[str, Any],
        cfg: TurnConfig,
        tool: AgentTool,
        call: dict[str, Any],
        arguments: dict[str, Any],
        key: str,
    ) -> str | bool:
        """True = run it; a string = denied with that message; "pause" = paused durably."""
        if tool.builtin:
            return True  # SPEC T2: built-in tools never ask for approval
        approvals = op.get("approvals") or {}
        if key in approvals:
            verdict = approvals[key]
            return True if verdict.get("approved") else (verdict.get("message") or "The tool call was denied.")
        definition = cfg.tool_definitions.get(tool.name)
        needs_pause = definition is not None and not definition.auto_approve and cfg.mode == "plan"
        payload = {"tool": tool.name, "arguments": arguments, "tool_call_id": call["id"], "approval_id": key}
        if self.host.approve_tool_call is not None:
            try:
                await call_hook(self.host.approve_tool_call, payload)
                return True
            except UserInputRequired:
                needs_pause = True
            except Exception as exc:  # a denial: the message goes to the model
                return str(exc) or "The tool call was denied."
        if needs_pause:
            self._pause(op, {"kind": "tool_approval", "approval_id": key, "tool": tool.name, "arguments": arguments})
            return "pause"
        return True

    # --- pauses ----------------------------------------------------------------------------

    def _pause(self, op: dict[str, Any], pending: dict[str, Any]) -> None:
        value = dict(self.log.op or op, phase="paused", pending=pending)
        receipt = self.log.receipts.get(self.request_id)
        receipt_payload = dict(receipt.payload if receipt else {}, status="paused", pending=pending)
        self.log.commit(
            Commit(registers=[self.log.set_op(value)], receipts=[self.log.receipt(self.request_id, receipt_payload)])
        )

    def _pause_for_questions(
        self, op: dict[str, Any], call: dict[str, Any], arguments: dict[str, Any], key: str
    ) -> None:
        questions = normalize_questions(arguments)
        self._pause(
            op,
            {"kind": "ask_user", "approval_id": key, "questions": questions, "tool_call_id": call["id"]},
        )

    def paused_event(self, op: dict[str, Any]) -> RunEndEvent:
        self.final = RunEndEvent(
            status="paused",
            request_id=self.request_id,
            error_code=USER_INPUT_REQUIRED,
            error="the run is waiting for user input",
            pending=op.get("pending"),
            usage=run_usage_totals(self.log, self.request_id),
        )
        return self.final

    async def _plan_review(self, op: dict[str, Any]) -> AsyncIterator[AgentEvent]:
        plan = op["plan"]
        approval_id, text = plan["approval_id"], plan["text"]
        yield PlanEvent(phase="start", approval_id=approval_id)
        yield PlanEvent(phase="end", approval_id=approval_id, text=text)
        if self.host.approve_plan is None:
            yield self.finish_completed(op, Commit(), text)  # SPEC H1: no host → never pauses
            return
        payload = {"approval_id": approval_id, "plan": text, "request_id": self.request_id}
        try:
            verdict = await call_hook(self.host.approve_plan, payload)
        except UserInputRequired:
            self._pause(op, {"kind": "plan", "approval_id": approval_id, "plan": text})
            yield self.paused_event(self.log.op or op)
            return
        except Exception as exc:
            verdict = {"approved": False, "notes": str(exc)}
        approved, notes = _plan_verdict(verdict)
        async for event in self.apply_plan_decision(approval_id, approved, text, notes):
            yield event

    async def apply_plan_decision(
        self, approval_id: str, approved: bool, plan_text: str, notes: str
    ) -> AsyncIterator[AgentEvent]:
        """Approve → switch to build and execute; reject → revise in plan mode (PL4)."""
        op = self.log.op
        assert op is not None
        history = [*op.get("plan_history", []), {"approval_id": approval_id, "approved": approved, "notes": notes}]
        if approved:
            prompt = load_prompt("plan_approved.md").format(plan=plan_text)
            if notes:
                prompt += f"\n\nReviewer's notes:\n{notes}"
            mode = "build"
        else:
            prompt = load_prompt("plan_rejected.md").format(plan=plan_text, notes=notes or "(no notes)")
            mode = "plan"
        value = dict(op, phase="model", mode=mode, step=op["step"] + 1, attempt=0, plan_history=history)
        for stale in ("pending", "plan", "tool_calls"):
            value.pop(stale, None)
        self.log.commit(
            Commit(
                entries=[self.log.message_entry(user_text(prompt), self.request_id, synthetic=True)],
                registers=[self.log.set_op(value)],
            )
        )
        yield ApprovalEvent(
            approval_id=approval_id, decision="approved" if approved else "rejected", notes=notes or None
        )

    def apply_answers(self, answers: dict[str, list[str] | str]) -> None:
        """Settle a paused ``ask_user`` call with the answers; the same turn continues (PL2)."""
        op = self.log.op
        assert op is not None
        pending = op["pending"]
        key = pending["approval_id"]
        call = next(c for c in op["tool_calls"] if call_key(self.request_id, op["step"], c["index"]) == key)
        text = format_answers(pending["questions"], answers)
        message = ToolResultMessage(tool_call_id=call["id"], tool_name=ASK_USER, content=[TextContent(text)])
        resolved = [
            *op.get("resolved_user_inputs", []),
            {"approval_id": key, "questions": pending["questions"], "answers": answers},
        ]
        value = dict(op, phase="tools", resolved_user_inputs=resolved)
        value.pop("pending", None)
        receipt = self.log.receipts[self.request_id]
        self.log.commit(
            Commit(
                entries=[self.log.message_entry(message, self.request_id, call_key=key)],
                registers=[self.log.set_op(value)],
                receipts=[self.log.receipt(self.request_id, dict(receipt.payload, status="running", pending=None))],
            )
        )

    def apply_tool_decision(self, approved: bool, message: str) -> None:
        op = self.log.op
        assert op is not None
        key = op["pending"]["approval_id"]
        approvals = dict(op.get("approvals") or {})
        approvals[key] = {"approved": approved, "message": message}
        value = dict(op, phase="tools", approvals=approvals)
        value.pop("pending", None)
        receipt = self.log.receipts[self.request_id]
        self.log.commit(
            Commit(
                registers=[self.log.set_op(value)],
                receipts=[self.log.receipt(self.request_id, dict(receipt.payload, status="running", pending=None))],
            )
        )

    # --- endings ---------------------------------------------------------------------------

    def _terminal(self, op: dict[str, Any], commit: Commit, event: RunEndEvent) -> RunEndEvent:
        receipt = self.log.receipts.get(self.request_id)
        payload = dict(receipt.payload if receipt else {}, status=event.status, final=event.model_dump(), pending=None)
        commit.receipts.append(self.log.receipt(self.request_id, payload))
        commit.registers.append(self.log.set_op(None))
        self.log.commit(commit)
        self.final = event
        return event

    def _settle_open_calls(self, op: dict[str, Any], commit: Commit, reason: str) -> None:
        """Give every unsettled call of the current batch a result so the transcript stays valid."""
        if op.get("phase") not in ("tools", "paused") or not op.get("tool_calls"):
            return
        for call in op["tool_calls"]:
            key = call_key(self.request_id, op["step"], call["index"])
            if key in self.log.results:
                continue
            message = ToolResultMessage(call["id"], call["name"], [TextContent(reason)], is_error=True)
            commit.entries.append(self.log.message_entry(message, self.request_id, call_key=key))

    def finish_completed(self, op: dict[str, Any], commit: Commit, text: str) -> RunEndEvent:
        final_text = text or self._last_assistant_text()
        event = RunEndEvent(
            status="completed",
            request_id=self.request_id,
            text=final_text,
            usage=run_usage_totals(self.log, self.request_id, extra=commit.usage),
        )
        return self._terminal(op, commit, event)

    def finish_failed(self, op: dict[str, Any], code: str, reason: str, *, commit: Commit | None = None) -> RunEndEvent:
        commit = commit or Commit()
        self._settle_open_calls(op, commit, f"Not run: the run failed ({reason}).")
        event = RunEndEvent(
            status="failed",
            request_id=self.request_id,
            text=self._last_assistant_text(),
            error_code=code,
            error=reason,
            usage=run_usage_totals(self.log, self.request_id, extra=commit.usage),
        )
        return self._terminal(op, commit, event)

    def finish_aborted(self, op: dict[str, Any], reason: str, *, commit: Commit | None = None) -> RunEndEvent:
        commit = commit or Commit()
        self._settle_open_calls(op, commit, "Not run: the run was cancelled.")
        event = RunEndEvent(
            status="aborted",
            request_id=self.request_id,
            text=self._last_assistant_text(),
            error_code=EXECUTION_ABORTED,
            error=reason,
            usage=run_usage_totals(self.log, self.request_id, extra=commit.usage),
        )
        return self._terminal(op, commit, event)

    def _last_assistant_text(self) -> str:
        for index in range(len(self.log.messages) - 1, -1, -1):
            if self.log.message_ops[index] != self.request_id:
                break
            message = self.log.messages[index]
            if isinstance(message, AssistantMessage) and message.text:
                return message.text
        return ""

    # --- context usage ---------------------------------------------------------------------

    def _context_usage(self, *, streaming_chars: int = 0, throttle: bool = False) -> ContextUsageEvent | None:
        if self.context_meter is None:
            return None
        now = self.clock()
        if throttle and now - self._last_usage_emit < 0.1:
            return None
        measured = self.context_meter(self.log.messages, streaming_chars)
        if measured is None:
            return None
        self._last_usage_emit = now
        return ContextUsageEvent(used=measured[0], total=measured[1])


_USAGE_EVENT_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cache_creation_tokens",
    "reasoning_tokens",
    "cost",
    "cost_detail",
    "model",
)


async def _drain_while(work: asyncio.Future[Any], updates: asyncio.Queue[ToolEvent]) -> AsyncIterator[ToolEvent]:
    """Yield queued updates until ``work`` is done, then whatever is left."""
    while not work.done():
        getter = asyncio.ensure_future(updates.get())
        done, _ = await asyncio.wait({work, getter}, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            yield getter.result()
        else:
            getter.cancel()
    while not updates.empty():
        yield updates.get_nowait()


def _terminates(results: list[ToolResult | None]) -> bool:
    """T3: a tool round ends the turn only when every result asks to terminate."""
    return bool(results) and all(r is not None and r.terminate for r in results)


def _budgets_dict(budgets: Budgets) -> dict[str, int]:
    return {"connection": budgets.connection, "length": budgets.length}


def _plan_verdict(verdict: Any) -> tuple[bool, str]:
    if verdict is None or verdict is True:
        return True, ""
    if verdict is False:
        return False, ""
    if isinstance(verdict, dict):
        return bool(verdict.get("approved", False)), str(verdict.get("notes", "") or "")
    return bool(verdict), ""


def batch_position(call: dict[str, Any]) -> int:
    return int(call["index"])


__all__ = ["INTERRUPTED_RESULT", "ToolCall", "TurnConfig", "TurnEngine", "call_key"]
