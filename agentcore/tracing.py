"""OpenTelemetry traces of runs, following the GenAI semantic conventions (``agentcore[otel]``).

Spans: ``invoke_agent`` per operation (one input's run, each time it is driven), ``chat`` per
model request, ``execute_tool`` per tool call, ``compaction`` per summary, with ``gen_ai.*``
attributes (operation, provider, request and response model, token usage with cache reads and
writes and reasoning, finish reasons, tool name and call id). Message and tool contents are
recorded only with ``capture_content=True``.

A request that resumes after a crash or a pause is driven again by another process; every drive
of one request is placed in the same trace, under the same (synthetic) parent derived from the
store, the conversation and the request id, and links to it — so a trace viewer shows the
request's history in one place, and each model response appears once: spans are only made for
requests this process sends, never for responses settled before it started.

Tracing is off unless a tracer provider is configured globally (``opentelemetry.trace.
set_tracer_provider``) or given to ``create_agent(tracing=...)``; without OpenTelemetry
installed it costs nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from agentcore.errors import InputValidationError

INSTRUMENTATION = "agentcore"
PROVIDER_NAMES = {"openai-responses": "openai", "openai-completions": "openai", "anthropic-messages": "anthropic"}


@dataclass(slots=True, frozen=True)
class AgentTracing:
    """``create_agent(tracing=AgentTracing(provider=..., capture_content=True))``."""

    provider: Any = None  # a TracerProvider; None = the global one
    capture_content: bool = False


class Span:
    """A started span; ``end()`` records attributes and ends it (idempotent)."""

    def __init__(self, span: Any) -> None:
        self._span = span
        self._ended = False

    @property
    def context(self) -> Any:
        from opentelemetry import trace

        return trace.set_span_in_context(self._span)

    def set(self, **attributes: Any) -> None:
        for key, value in attributes.items():
            if value is not None:
                self._span.set_attribute(key.replace("__", "."), value)

    def event(self, name: str, **attributes: Any) -> None:
        self._span.add_event(name, {k.replace("__", "."): v for k, v in attributes.items() if v is not None})

    def end(self, *, error: str | None = None, **attributes: Any) -> None:
        if self._ended:
            return
        self._ended = True
        self.set(**attributes)
        if error is not None:
            from opentelemetry.trace import Status, StatusCode

            self._span.set_status(Status(StatusCode.ERROR, error))
            self._span.set_attribute("error.type", error.split(":", 1)[0][:100])
        self._span.end()


class Tracer:
    """What the engine calls; one per runtime."""

    def __init__(self, tracer: Any, *, capture_content: bool) -> None:
        self._tracer = tracer
        self.capture_content = capture_content

    def operation(self, *, store: str, conversation_id: str, request_id: str, mode: str, resumed: bool) -> Span:
        """The ``invoke_agent`` span of one drive of an operation."""
        from opentelemetry.trace import Link, SpanKind

        anchor = _anchor(store, conversation_id, request_id)
        span = self._tracer.start_span(
            "invoke_agent agentcore",
            context=_anchor_context(store, conversation_id, request_id),
            kind=SpanKind.INTERNAL,
            links=[Link(anchor, {"agentcore.link": "request"})],
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "agentcore",
                "gen_ai.conversation.id": conversation_id,
                "agentcore.request_id": request_id,
                "agentcore.mode": mode,
                "agentcore.resumed": resumed,
            },
        )
        return Span(span)

    def chat(
        self,
        parent: Span,
        *,
        api_kind: str,
        model: str,
        max_tokens: int,
        step: int,
        attempt: int,
        start_time: int | None = None,
    ) -> Span:
        from opentelemetry.trace import SpanKind

        provider = PROVIDER_NAMES.get(api_kind, api_kind)
        span = self._tracer.start_span(
            f"chat {model}",
            context=parent.context,
            kind=SpanKind.CLIENT,
            start_time=start_time,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": model,
                "gen_ai.request.max_tokens": max_tokens,
                "gen_ai.request.stream": True,
                "agentcore.step": step,
                "agentcore.attempt": attempt,
            },
        )
        return Span(span)

    def tool(self, parent: Span, *, name: str, call_id: str, arguments: Any) -> Span:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(arguments)
        return Span(self._tracer.start_span(f"execute_tool {name}", context=parent.context, attributes=attributes))

    def decision(
        self, parent: Span | tuple[str, str, str], *, approval_id: str, approved: bool, notes: str
    ) -> None:
        """A plan review decision: a short span under the operation's drive, or — applied before
        a drive started (a resume) — under the request's anchor (store, conversation, request)."""
        attributes: dict[str, Any] = {
            "agentcore.plan.approval_id": approval_id,
            "agentcore.plan.decision": "approved" if approved else "rejected",
        }
        if self.capture_content and notes:
            attributes["agentcore.plan.notes"] = notes
        context = parent.context if isinstance(parent, Span) else _anchor_context(*parent)
        self._tracer.start_span("plan_review", context=context, attributes=attributes).end()

    def compaction(self, parent: Span, *, auto: bool) -> Span:
        return Span(
            self._tracer.start_span(
                "compaction", context=parent.context, attributes={"agentcore.compaction.auto": auto}
            )
        )


def usage_attributes(payload: dict[str, Any]) -> dict[str, Any]:
    """A ledger row's tokens as GenAI attributes. ``gen_ai.usage.input_tokens`` is the whole
    prompt (uncached + cache reads + cache writes), as the conventions define it; the cached
    parts are also given on their own."""
    cached = int(payload.get("cached_input_tokens", 0))
    created = int(payload.get("cache_creation_tokens", 0))
    return {
        "gen_ai__usage__input_tokens": int(payload.get("input_tokens", 0)) + cached + created,
        "gen_ai__usage__output_tokens": int(payload.get("output_tokens", 0)),
        "gen_ai__usage__cache_read__input_tokens": cached,
        "gen_ai__usage__cache_creation__input_tokens": created,
        "gen_ai__usage__reasoning__output_tokens": int(payload.get("reasoning_tokens", 0)),
        "agentcore__cost": float(payload.get("cost", 0.0)),
        "agentcore__record_id": payload.get("record_id"),
    }


def resolve_tracing(option: Any) -> Tracer | None:
    """The runtime's tracer for ``create_agent(tracing=...)``: ``None`` (default: the global
    provider if one is configured), ``False`` (off), ``True``, a TracerProvider, or
    ``AgentTracing``."""
    if option is False:
        return None
    try:  # the optional extra, imported only when tracing may be on
        from opentelemetry import trace as otel_trace
    except ImportError:
        if option is None:
            return None
        raise InputValidationError(
            "tracing needs OpenTelemetry: pip install 'agentcore-studio[otel]'", field="tracing"
        ) from None
    config = option if isinstance(option, AgentTracing) else AgentTracing(
        provider=None if option in (None, True) else option
    )
    provider = config.provider if config.provider is not None else otel_trace.get_tracer_provider()
    if not hasattr(provider, "get_tracer"):
        raise InputValidationError("tracing must be a TracerProvider, AgentTracing, True or False", field="tracing")
    if option is None and type(provider).__name__ in ("ProxyTracerProvider", "NoOpTracerProvider"):
        return None  # nothing configured: no spans, no cost
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("agentcore-studio")
    except PackageNotFoundError:  # pragma: no cover - a source checkout without metadata
        release = "0"
    return Tracer(provider.get_tracer(INSTRUMENTATION, release), capture_content=config.capture_content)


def output_messages(message: Any) -> str:
    """The response as the conventions' ``gen_ai.output.messages`` JSON (content capture only)."""
    parts: list[dict[str, Any]] = []
    for block in message.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append({"type": "text", "content": block.text})
        elif kind == "tool_call":
            parts.append({"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.arguments})
    return _json([{"role": "assistant", "parts": parts, "finish_reason": message.stop_reason}])


def _anchor(store: str, conversation_id: str, request_id: str) -> Any:
    from opentelemetry.trace import SpanContext, TraceFlags

    digest = hashlib.sha256(f"{store}\x00{conversation_id}\x00{request_id}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _anchor_context(store: str, conversation_id: str, request_id: str) -> Any:
    from opentelemetry import trace

    return trace.set_span_in_context(trace.NonRecordingSpan(_anchor(store, conversation_id, request_id)))


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)[:16_384]
    except (TypeError, ValueError):
        return str(value)[:16_384]
