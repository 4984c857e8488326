"""Shared state and endings of the turn engine (SPEC L1, D1, D5).

``EngineBase`` holds what every part of the engine reads — the conversation log, the
operation's request id, the host, the abort signal — and the one way an operation ends: a
single terminal transaction that records the receipt and removes the program counter
(DURABILITY invariant 16). The parts (model step, tool round, decisions, compaction) are
mixins over it, each in its own module.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agentcore.compaction.settings import CompactionSettings
from agentcore.engine.endings import (
    answer_text,
    end_operation,
    end_operation_aborted,
    settle_open_calls,
)
from agentcore.engine.fragments import StreamWindow
from agentcore.engine.retry import (
    Sleep,
)
from agentcore.events import (
    AgentEvent,
    ContextUsageEvent,
    RunEndEvent,
    UsageEvent,
)
from agentcore.harness.op_state import OpState, ToolCallState
from agentcore.harness.projection import ConversationLog, cancel_key
from agentcore.harness.storage import Commit, RegisterWrite
from agentcore.host import AgentHost, call_hook
from agentcore.messages import (
    AssistantMessage,
    Message,
)
from agentcore.models.attributes import ResolvedModel
from agentcore.providers.base import (
    Provider,
    ProviderFailure,
    ToolSpec,
)
from agentcore.tools.base import AgentTool, ToolContext, ToolDefinition
from agentcore.tools.display import clean_text
from agentcore.tracing import Span, Tracer, output_messages, usage_attributes


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
    tool_context: Callable[[str, asyncio.Event], ToolContext]
    tool_definitions: dict[str, ToolDefinition] = field(default_factory=dict)
    context_window: int | None = None
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    stream_window: StreamWindow = field(default_factory=StreamWindow)  # the runtime's, shared

    def tool_specs(self) -> list[ToolSpec]:
        return [ToolSpec(t.name, t.description, t.parameters) for t in self.tools]

    def find_tool(self, name: str) -> AgentTool | None:
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None


Configure = Callable[[OpState], TurnConfig]
ContextMeter = Callable[[list[Message], int], tuple[int, int] | None]


class SessionPort(Protocol):
    """What the session protocol adds to an engine's turn (SPEC S2); absent without ``session=``."""

    def before_request(self, engine: EngineBase, op: OpState) -> None:
        """Called before each model request: may commit a new pin (``configure``) or a finished
        background compaction. The engine re-reads its program counter afterwards."""

    def at_tool_boundary(self, engine: EngineBase, commit: Commit) -> None:
        """Called with the commit that moves a turn past its tool round: steer inputs join it."""


def display_id(op: OpState, call: ToolCallState) -> str:
    """The stable, opaque ``tool_call_id`` of events: bound to the committed assistant entry,
    so a model reusing call ids across turns never makes two calls look alike (S4)."""
    return f"{str(op.get('assistant_entry', ''))[:12]}:{call['id']}"


class EngineBase:
    """Drives the open operation of ``log``; see ``TurnEngine`` for the driver."""

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
        session: SessionPort | None = None,
        tracer: Tracer | None = None,
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
        self.session = session
        self.tracer = tracer
        self.op_span: Span | None = None  # the invoke_agent span of this drive (tracing on)
        self.final: RunEndEvent | None = None
        self._fresh_intents: set[str] = set()  # intents this engine wrote and has not started yet
        self._last_usage_emit = 0.0

    async def _after_settle(
        self, payload: dict[str, Any], record_id: str, *, meter: bool = True
    ) -> AsyncIterator[AgentEvent]:
        # Validated construction: pydantic-core builds these small models faster than
        # ``model_construct`` (3.5 vs 9 us here), which walks the fields in Python.
        yield UsageEvent(record_id=record_id, **{k: payload[k] for k in _USAGE_EVENT_FIELDS})
        if self.host.report_usage is not None:
            await call_hook(self.host.report_usage, {"record_id": record_id, **payload})
        usage = self._context_usage() if meter else None
        if usage:
            yield usage

    def _terminal(
        self,
        commit: Commit,
        status: Literal["completed", "failed", "aborted"],
        text: str,
        *,
        error_code: str | None = None,
        error: str | None = None,
    ) -> RunEndEvent:
        """The one terminal transaction of an operation (``endings.end_operation``)."""
        self.final = end_operation(
            self.log, self.request_id, commit, status, text, error_code=error_code, error=error
        )
        return self.final

    def mark_cancelled(self, reason: str) -> None:
        """Make a cancel durable before anything else happens (DURABILITY 12).

        Committed as soon as the abort signal is seen, so a crash between Stop and the terminal
        transaction (a tool still winding down, a stream being torn down) can never resume the
        request: a reopen finds the marker and ends it ``aborted`` without another effect.
        """
        op = self.log.op
        if op is None or op["request_id"] != self.request_id or self.log.faulted is not None:
            return
        if self.log.cancel_marker is not None or self.final is not None:
            return
        marker = {"request_id": self.request_id, "reason": reason}
        self.log.commit(Commit(registers=[RegisterWrite(cancel_key(self.log.conversation_id), marker)]))

    async def watch_cancel(self) -> None:
        """Commit the cancel marker the moment the abort signal is set (runs beside ``drive``)."""
        await self.abort.wait()
        self.mark_cancelled("the run was cancelled")

    def finish_completed(self, op: OpState, commit: Commit, text: str) -> RunEndEvent:
        return self._terminal(commit, "completed", text or self._answer_text())

    def finish_failed(self, op: OpState, code: str, reason: str, *, commit: Commit | None = None) -> RunEndEvent:
        """End ``op`` failed. ``reason`` may quote any exception (a host hook's included), so it is
        made committable here, where every failure's text enters the store."""
        reason = clean_text(reason)
        commit = commit or Commit()
        not_run = f"Not run: the run failed ({reason})."
        settle_open_calls(self.log, self.request_id, op, commit, not_run, outcome="failed")
        return self._terminal(commit, "failed", self._answer_text(), error_code=code, error=reason)

    def finish_aborted(self, op: OpState, reason: str, *, commit: Commit | None = None) -> RunEndEvent:
        self.final = end_operation_aborted(self.log, op, clean_text(reason), commit)
        return self.final

    def _answer_text(self) -> str:
        return answer_text(self.log, self.request_id)

    def _end_chat_span(
        self,
        span: Span,
        message: AssistantMessage,
        failure: ProviderFailure | None,
        usage: dict[str, Any],
        finish_reason: str | None = None,
    ) -> None:
        """``finish_reason``: the provider's own word (``tool_calls``, ``end_turn``), which the
        conventions ask for; the normalized stop reason when the provider gave none."""
        reason = finish_reason or message.stop_reason
        attributes = usage_attributes(usage)
        if self.tracer is not None and self.tracer.capture_content:
            attributes["gen_ai__output__messages"] = output_messages(message, reason)
        span.end(
            error=f"{failure.kind}: {failure.message}" if failure is not None else None,
            gen_ai__response__model=message.model or None,
            gen_ai__response__finish_reasons=[reason],
            **attributes,
        )

    @staticmethod
    def _window(cfg: TurnConfig) -> int:
        return cfg.context_window or cfg.model.context_window

    @property
    def event_request_id(self) -> str | None:
        """The ``request_id`` the engine's events carry: the turn's in session mode (built in,
        so the session does not copy each event to stamp it), None outside it (SPEC E1)."""
        return self.request_id if self.session is not None else None

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
        return ContextUsageEvent(used=measured[0], total=measured[1], request_id=self.event_request_id)


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
