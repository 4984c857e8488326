"""Compaction inside an operation: automatic (SPEC C4) before a model request, manual (C3) as
the operation's own ``compact`` phase.

A part of the turn engine (``TurnEngine`` is ``ToolRound`` + ``CompactionStep`` over
``EngineBase``): it plans with ``plan``, runs the summary requests with ``summary`` and commits
the outcome with the program counter — the summary entry and the next state in one
transaction, the originals kept in the store. The threshold is checked before every model
request, at most once per step even across a reopen (DURABILITY 14).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from agentcore.compaction.plan import plan_compaction, should_compact, summary_message
from agentcore.compaction.summary import first_kept_entry, summarize, summary_max_tokens
from agentcore.engine.base import EngineBase, TurnConfig
from agentcore.errors import MODEL_ERROR
from agentcore.events import AgentEvent, CompactionEvent
from agentcore.harness.op_state import OpState
from agentcore.harness.storage import Commit
from agentcore.harness.usage import AttemptTiming, usage_payload
from agentcore.messages import AssistantMessage, message_to_dict
from agentcore.providers.base import ProviderFailure


class CompactionStep(EngineBase):
    """Automatic (C4) and manual (C3) compaction inside an operation."""

    def _threshold_reached(self, op: OpState, cfg: TurnConfig) -> bool:
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

    async def compact(self, op: OpState, cfg: TurnConfig, *, auto: bool) -> AsyncIterator[AgentEvent]:
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
        done: OpState = {**op, "compacted_step": op["step"]}
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
        started_ms = self.log.now_ms()
        attempts: list[AgentEvent] = []
        counter = len([k for k in self.log.usage if k.startswith(f"{self.request_id}:compact:")])
        span = self.tracer.compaction(self.op_span, auto=auto) if self.tracer and self.op_span else None
        mark = time.time_ns()

        async def on_attempt(message: AssistantMessage, failure: ProviderFailure | None, timing: AttemptTiming) -> None:
            nonlocal counter, mark
            record_id = f"{self.request_id}:compact:{counter}"
            counter += 1
            payload = usage_payload(message, self.request_id, ok=failure is None, timing=timing)
            payload.update(purpose="compaction", auto=auto, step=op["step"], compaction_started_ms=started_ms)
            if failure is not None:
                payload["error"] = {"kind": failure.kind, "message": failure.message}
            self.log.commit(Commit(usage=[self.log.usage_row(record_id, payload)]))
            if span is not None and self.tracer is not None:  # requests run one after another
                chat = self.tracer.chat(
                    span,
                    provider=cfg.model.provider,
                    model=cfg.model.model_id,
                    max_tokens=max_tokens,
                    step=op["step"],
                    attempt=counter - 1,
                    start_time=mark,
                )
                self._end_chat_span(chat, message, failure, dict(payload, record_id=record_id))
                mark = time.time_ns()
            async for event in self._after_settle(payload, record_id, meter=False):
                attempts.append(event)

        outcome = await summarize(
            plan,
            cfg.provider,
            cfg.model,
            abort=self.abort,
            max_tokens=max_tokens,
            on_attempt=on_attempt,
            clock=self.log.now_ms,
        )
        for event in attempts:
            yield event
        if span is not None:
            failed = outcome.failure.message if outcome.failure is not None else None
            span.end(error=failed, agentcore__compaction__summarized=len(plan.to_summarize))
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
                "op": self.request_id,
                "step": op["step"],
                "started_ms": started_ms,
                "ended_ms": self.log.now_ms(),
            },
        )
        commit = Commit(entries=[entry])
        if auto:
            commit.registers.append(self.log.set_op({**done, "compacted_step": current["step"]}))
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
