"""The turn engine: drives one operation (one ``request_id``) to its end (SPEC L1–L8, D1–D3).

The engine is a projection of the store's program counter. Each loop iteration reads the
operation register (``phase`` = model | tools | paused), performs one step and commits the
next state together with the step's results, following the effect sandwich: an intent is
durable before its effect starts, the settlement is durable before the event describing it
is yielded. Recovery is therefore just "read the register and continue".
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Literal, assert_never

from agentcore.compaction.step import CompactionStep
from agentcore.engine.base import EngineBase, TurnConfig
from agentcore.engine.call_limits import refuse_unfit_calls
from agentcore.engine.endings import answer_text, call_key
from agentcore.engine.fragments import FragmentBuffer, PendingEvents, assemble_partial
from agentcore.engine.interrupted import INTERRUPTED_RESULT
from agentcore.engine.pump import with_ticks
from agentcore.engine.retry import (
    MAX_CONNECT_ATTEMPTS,
    MAX_CONNECTION_ATTEMPTS,
    MAX_LENGTH_CONTINUATIONS,
    MAX_PAUSE_TURNS,
    Budgets,
    abortable_sleep,
    backoff_delay,
    continuation_prompt,
    exhausted_message,
    length_prompt,
    lost_call_prompt,
)
from agentcore.engine.tool_round import ToolRound
from agentcore.errors import MODEL_ERROR
from agentcore.events import (
    AgentEvent,
    RetryEvent,
    RunEndEvent,
    SourcesEvent,
    WebSearchEvent,
)
from agentcore.harness.op_state import PHASES, OpState, PlanReviewState, RetryBudgets, ToolCallState
from agentcore.harness.storage import Commit, RegisterWrite
from agentcore.harness.usage import AttemptTiming, usage_payload
from agentcore.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ThinkingContent,
    UserMessage,
    user_text,
)
from agentcore.providers.base import (
    BlockStart,
    ProviderRequest,
    SourcesFound,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    WebSearchUpdate,
)
from agentcore.tracing import Span, final_output_messages, trace_anchor


class TurnEngine(ToolRound, CompactionStep):
    """Drives the open operation of ``log`` until it completes, fails, aborts or pauses."""

    async def drive(self, *, recovering: bool = False) -> AsyncIterator[AgentEvent]:
        usage = self._context_usage()
        if usage:
            yield usage
        marker = self.log.cancel_marker
        op = self.log.op
        if marker is not None and op is not None and op["request_id"] == self.request_id:
            yield self.finish_aborted(op, str(marker.get("reason") or "the run was cancelled"))
            return
        self._note_resume()
        watcher = asyncio.ensure_future(self.watch_cancel())
        if self.tracer is not None:
            log = self.log
            captured = self._operation_input() if self.tracer.capture_content else []
            self.op_span = self.tracer.operation(
                anchor=trace_anchor(op, log.storage.label, log.conversation_id, self.request_id),
                conversation_id=log.conversation_id,
                request_id=self.request_id,
                mode=op["mode"] if op is not None else "build",
                resumed=recovering,
                input_messages=captured,
            )
        try:
            async for event in self._drive(recovering):
                yield event
        finally:
            watcher.cancel()
            if self.op_span is not None:
                final = self.final
                error = f"{final.error_code}: {final.error}" if final and final.status == "failed" else None
                output = {}
                if final is not None and self.tracer is not None and self.tracer.capture_content:
                    output["gen_ai__output__messages"] = final_output_messages(final.text, final.status)
                self.op_span.end(error=error, agentcore__status=final.status if final else "interrupted", **output)

    def _operation_input(self) -> list[Message]:
        """The user's own messages of this operation (not the runtime's continuation prompts)."""
        log = self.log
        return [
            message
            for message, op, synthetic in zip(log.messages, log.message_ops, log.message_synthetic, strict=False)
            if op == self.request_id and not synthetic and isinstance(message, UserMessage)
        ]

    def _note_resume(self) -> None:
        """Driving an operation another owner wrote last is a resume (a crash, a close, a
        failover): a ``resume`` entry records when, by which owner, and the program counter's
        last write before it (``since_ms``), so the Trace shows the gap. Written once per owner:
        the same commit stamps the program counter with this owner."""
        op = self.log.op
        if op is None or op["request_id"] != self.request_id or op.get("owner") == self.log.owner_id:
            return
        payload = {
            "op": self.request_id,
            "at_ms": self.log.now_ms(),
            "owner_id": self.log.owner_id,
            "previous_owner": op.get("owner"),
            "since_ms": op.get("at_ms"),
            "phase": op.get("phase"),
            "step": op.get("step"),
            "attempt": op.get("attempt"),
        }
        self.log.commit(Commit(entries=[self.log.entry("resume", payload)], registers=[self.log.set_op(op)]))

    async def _drive(self, recovering: bool) -> AsyncIterator[AgentEvent]:
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
            if phase not in PHASES:  # pragma: no cover - a register written by a newer version
                yield self.finish_failed(op, MODEL_ERROR, f"unknown operation phase {phase!r}")
                break
            match phase:
                case "model":
                    async for event in self._model_step(op):
                        yield event
                case "tools":
                    async for event in self._tool_step(op):
                        yield event
                case "compact":
                    async for event in self.compact(op, self.configure(op), auto=False):
                        yield event
                case "plan_review":
                    async for event in self._plan_review(op):
                        yield event
                case "paused":
                    yield self.paused_event(op)
                    break
                case _:
                    assert_never(phase)

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
        next_op: OpState = {**op, "budgets": _budgets_dict(budgets), "attempt": op["attempt"] + 1}
        if fragments:
            partial = assemble_partial(
                fragments, api_kind=cfg.model.api_kind, provider=cfg.model.provider, model=cfg.model.model_id
            )
            prompt = continuation_prompt("the process was restarted", model_sees_partial=True)
            commit.entries.append(self.log.message_entry(partial, self.request_id, settles_fragments=True))
            commit.entries.append(self.log.message_entry(user_text(prompt), self.request_id, synthetic=True))
            next_op["step"], next_op["attempt"] = op["step"] + 1, 0
        commit.registers.append(self.log.set_op(next_op))
        self.log.commit(commit)
        yield RetryEvent(
            attempt=budgets.connection,
            max_attempts=MAX_CONNECTION_ATTEMPTS,
            reason="resumed after the process stopped mid-request",
            kind="recovery",
        )

    async def _model_step(self, op: OpState) -> AsyncIterator[AgentEvent]:
        if self.session is not None:
            self.session.before_request(self, op)
            op = self.log.op or op
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
        span = self._chat_span(cfg, request, step, attempt)
        try:
            async for event in self._stream_response(op, cfg, request, span):
                yield event
        finally:
            if span is not None:
                span.end(error="interrupted")  # a no-op when the settlement ended it

    def _chat_span(self, cfg: TurnConfig, request: ProviderRequest, step: int, attempt: int) -> Span | None:
        if self.tracer is None or self.op_span is None:
            return None
        return self.tracer.chat(
            self.op_span,
            provider=cfg.model.provider,
            model=cfg.model.model_id,
            max_tokens=cfg.max_tokens,
            step=step,
            attempt=attempt,
            system_prompt=request.system_prompt,
            messages=request.messages,
        )

    async def _stream_response(
        self, op: OpState, cfg: TurnConfig, request: ProviderRequest, span: Span | None
    ) -> AsyncIterator[AgentEvent]:
        step, attempt = op["step"], op["attempt"]
        buffer = FragmentBuffer(step, attempt, clock=self.clock, window=cfg.stream_window)
        pending = PendingEvents(self.event_request_id)
        cited: list[dict[str, Any]] = []  # the answer's sources, kept with it (P2)
        streamed_chars = 0
        end: StreamEnd | None = None
        started = self.clock() if span is not None else None
        timing = AttemptTiming(self.log.now_ms())
        stream = with_ticks(cfg.provider.stream(request, self.abort), buffer.deadline, self.clock, hold=_may_wait)
        async for event in stream:
            if timing.first_token_ms is None and isinstance(event, _CHUNKS):
                timing.first_token_ms = self.log.now_ms()
                if span is not None and started is not None:
                    span.set(gen_ai__response__time_to_first_chunk=self.clock() - started)
            match event:  # every kind of stream event, checked exhaustive
                case None:  # the flush window passed while the provider was quiet
                    pass
                case TextDelta():
                    buffer.add(event.index, "text", event.text)
                    pending.delta("text", event.index, event.text)
                    streamed_chars += len(event.text)
                case ThinkingDelta():
                    buffer.add(event.index, "thinking", event.text)
                    pending.delta("thinking", event.index, event.text)
                    streamed_chars += len(event.text)
                case ToolCallDelta():
                    streamed_chars += len(event.partial_json)
                case WebSearchUpdate():
                    pending.add(WebSearchEvent(search=event.search))
                case SourcesFound():
                    pending.add(SourcesEvent(sources=event.sources))
                    cited.extend(event.sources)
                case StreamEnd():
                    end = event
                    break
                case BlockStart() | ToolCallEnd():
                    continue
                case _:
                    assert_never(event)
            # A window is committed when its deadline has passed and the pump has handed over
            # everything that arrived before it (the tick), not at the first token that finds
            # the deadline passed: the tokens queued behind it would wait a whole next window.
            if buffer.full() if event is not None else buffer.due():
                fragments = buffer.drain(self.request_id)
                timing.stamp(fragments, self.log.now_ms())
                self.log.commit(Commit(entries=[self.log.entry("fragment", f) for f in fragments]))
                for item in pending.drain():
                    yield item
                meter = self._context_usage(streaming_chars=streamed_chars, throttle=True)
                if meter:
                    yield meter
        await stream.aclose()
        timing.ended_ms = self.log.now_ms()
        if end is None:  # pragma: no cover - adapters always end with StreamEnd
            end = StreamEnd(AssistantMessage([], stop_reason="error"), None)
        message = end.message
        message.sources = cited
        # Everything received is settled below in one transaction with the next state.
        async for settled in self._settle_response(op, cfg, message, end, pending.drain(), span, timing):
            yield settled

    async def _settle_response(
        self,
        op: OpState,
        cfg: TurnConfig,
        message: AssistantMessage,
        end: StreamEnd,
        pending: list[AgentEvent],
        span: Span | None = None,
        timing: AttemptTiming | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Commit the response, its usage row and the next program-counter state together.

        This is the one place that decides what a finished stream means: next tool round,
        a continuation (length / lost call / dropped after content), a retry, or the end.
        The usage row also records the attempt for the Trace: its timing, step and attempt,
        the context it was sent (the last message entry) and the entry it produced, its failure
        and the retry or continuation it led to.
        """
        step = op["step"]
        record_id = f"{self.request_id}:{step}:{op['attempt']}"
        budgets = Budgets(**op["budgets"])
        failure = end.failure
        payload = usage_payload(message, self.request_id, ok=failure is None, timing=timing)
        payload.update(step=step, attempt=op["attempt"])
        if self.log.message_entry_ids:
            payload["context_entry"] = self.log.message_entry_ids[-1]
        if failure is not None:
            payload["error"] = {"kind": failure.kind, "message": failure.message}
        usage_row = self.log.usage_row(record_id, payload)
        commit = Commit(usage=[usage_row])
        final: RunEndEvent | None = None
        retry: RetryEvent | None = None

        def continue_with(prompt: str | None, *, reset: bool = False) -> None:
            if prompt is not None:
                commit.entries.append(self.log.message_entry(user_text(prompt), self.request_id, synthetic=True))
            commit.registers.append(self._next_model_op(op, budgets, reset=reset))

        if failure is None:
            refusals: dict[str, str] = {}
            if message.tool_calls:
                message, refusals = refuse_unfit_calls(message, self._window(cfg))
            calls = message.tool_calls
            entry = self.log.message_entry(message, self.request_id, settles_fragments=True)
            commit.entries.append(entry)
            payload["response_entry"] = entry.id
            if calls:
                budgets.reset()
                tool_calls: list[ToolCallState] = [
                    {"id": c.id, "name": c.name, "arguments": c.arguments, "index": i} for i, c in enumerate(calls)
                ]
                for call in tool_calls:
                    if call["id"] in refusals:
                        call["refusal"] = refusals[call["id"]]
                value: OpState = {
                    **op,
                    "phase": "tools",
                    "budgets": _budgets_dict(budgets),
                    "tool_calls": tool_calls,
                    "assistant_entry": entry.id,
                    "pause_turns": 0,
                }
                commit.registers.append(self.log.set_op(value))
                commit.entries.extend(self.early_intents(cfg, step, tool_calls))
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
                    value = {**op, "phase": "model", "step": step + 1, "attempt": 0, "budgets": _budgets_dict(budgets)}
                    value["pause_turns"] = pause_turns
                    commit.registers.append(self.log.set_op(value))
            elif cfg.mode == "plan" and (answer := answer_text(self.log, self.request_id, message)).strip():
                budgets.reset()
                plan: PlanReviewState = {"approval_id": f"{self.request_id}:plan:{step}", "text": answer}
                value = {**op, "phase": "plan_review", "budgets": _budgets_dict(budgets), "plan": plan}
                commit.registers.append(self.log.set_op(value))
            else:
                final = self.finish_completed(op, commit, answer_text(self.log, self.request_id, message))
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
                partial_entry = self.log.message_entry(partial, self.request_id, settles_fragments=True)
                commit.entries.append(partial_entry)
                payload["response_entry"] = partial_entry.id
            if failure.kind == "cancelled":
                final = self.finish_aborted(op, "the run was cancelled", commit=commit)
            elif failure.kind == "overflow" and cfg.compaction.enabled and not op.get("overflow_compacted"):
                # C5: compact once and retry; the flag makes a second overflow an error.
                value = {**op, "attempt": op["attempt"] + 1, "overflow_compacted": True, "force_compaction": True}
                commit.registers.append(self.log.set_op(value))
            elif not failure.retryable:
                reason = f"{failure.kind}: {failure.message}"
                if failure.kind == "overflow":
                    reason = f"the context is too long for the model even after compaction: {failure.message}"
                    if not cfg.compaction.enabled:
                        reason = f"the context is too long for the model: {failure.message}"
                final = self.finish_failed(op, MODEL_ERROR, reason, commit=commit)
            else:
                # A request that never reached a server has a shorter budget than a dropped one.
                kind: Literal["connect", "dropped"] = "connect" if failure.kind == "connect" else "dropped"
                limit = MAX_CONNECT_ATTEMPTS if kind == "connect" else MAX_CONNECTION_ATTEMPTS
                budgets.connection += 1
                if budgets.connection > limit:
                    reason = exhausted_message(kind, limit, failure.message, endpoint=failure.endpoint)
                    final = self.finish_failed(op, MODEL_ERROR, reason, commit=commit)
                else:
                    if has_content:
                        continue_with(continuation_prompt(failure.message, model_sees_partial=True))
                    else:
                        value = {**op, "attempt": op["attempt"] + 1, "budgets": _budgets_dict(budgets)}
                        commit.registers.append(self.log.set_op(value))
                    retry = RetryEvent(
                        attempt=budgets.connection,
                        max_attempts=limit,
                        reason=failure.message,
                        kind=kind,
                        delay_s=backoff_delay(budgets.connection, failure.retry_after),
                        endpoint=failure.endpoint,
                    )

        if final is None:
            if retry is not None:
                payload["retry"] = {
                    "kind": retry.kind,
                    "reason": retry.reason,
                    "attempt": retry.attempt,
                    "max_attempts": retry.max_attempts,
                    "delay_s": retry.delay_s,
                }
            self.log.commit(commit)
        if span is not None:
            usage = dict(usage_row.payload, record_id=record_id)
            self._end_chat_span(span, message, failure, usage, end.finish_reason)
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

    def _next_model_op(self, op: OpState, budgets: Budgets, *, reset: bool = False) -> RegisterWrite:
        if reset:
            budgets.reset()
        budget_counts = _budgets_dict(budgets)
        value: OpState = {**op, "phase": "model", "step": op["step"] + 1, "attempt": 0, "budgets": budget_counts}
        value.pop("tool_calls", None)
        return self.log.set_op(value)


_CHUNKS = (TextDelta, ThinkingDelta, ToolCallDelta)


def _may_wait(event: object) -> bool:
    """While fragments wait for their commit, every stream event but the end only adds to what
    that commit releases, so it may wait for the flush deadline (``with_ticks``)."""
    return type(event) is not StreamEnd


def _budgets_dict(budgets: Budgets) -> RetryBudgets:
    return {"connection": budgets.connection, "length": budgets.length}


__all__ = ["INTERRUPTED_RESULT", "EngineBase", "TurnConfig", "TurnEngine", "call_key"]
