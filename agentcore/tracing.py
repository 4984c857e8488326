"""OpenTelemetry traces of runs, following the GenAI semantic conventions (``agentcore[otel]``).

Spans: ``invoke_agent`` per operation (one input's run, each time it is driven), ``chat`` per
model request, ``execute_tool`` per tool call, ``compaction`` per summary, with ``gen_ai.*``
attributes (operation, provider, request and response model, token usage with cache reads and
writes and reasoning, finish reasons, tool name and call id). Message and tool contents are
recorded only with ``capture_content=True``.

Each logical request has its own trace: its operation stores a random trace anchor (a trace id
and a synthetic parent span id) when it starts, so every drive of it — resumed after a crash,
a close or a pause, even by another process — is placed in that trace, under that parent, and
links to it. Two runtimes (or stores) that happen to use the same request id get two traces.
Operations written before anchors were stored resume under the anchor earlier versions derived
from the store, the conversation and the request id. Each model response appears once: spans
are only made for requests this process sends, never for responses settled before it started.

Tracing is off unless a tracer provider is configured globally (``opentelemetry.trace.
set_tracer_provider``) or given to ``create_agent(tracing=...)``; without OpenTelemetry
installed it costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agentcore.errors import InputValidationError

INSTRUMENTATION = "agentcore"
CONTENT_LIMIT = 131_072
"""Characters of captured content per attribute. Message lists keep their newest messages that
fit (the JSON stays valid); a single text is cut."""

GENAI_PROVIDER_NAMES = {
    "openai": "openai",
    "anthropic": "anthropic",
    "azure": "azure.ai.openai",
    "azure-openai": "azure.ai.openai",
    "azure.ai.openai": "azure.ai.openai",
    "azure-ai-inference": "azure.ai.inference",
    "azure.ai.inference": "azure.ai.inference",
    "bedrock": "aws.bedrock",
    "aws-bedrock": "aws.bedrock",
    "aws.bedrock": "aws.bedrock",
    "gemini": "gcp.gemini",
    "google": "gcp.gemini",
    "gcp.gemini": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "vertex-ai": "gcp.vertex_ai",
    "gcp.vertex_ai": "gcp.vertex_ai",
    "cohere": "cohere",
    "deepseek": "deepseek",
    "groq": "groq",
    "mistral": "mistral_ai",
    "mistral_ai": "mistral_ai",
    "perplexity": "perplexity",
    "xai": "x_ai",
    "x_ai": "x_ai",
    "watsonx": "ibm.watsonx.ai",
    "ibm.watsonx.ai": "ibm.watsonx.ai",
}
"""agentcore provider names (and common spellings) → the GenAI conventions' well-known
``gen_ai.provider.name`` values; any other provider reports its own name."""


def genai_provider_name(provider: str) -> str:
    return GENAI_PROVIDER_NAMES.get(provider.lower(), provider)


TraceAnchor = tuple[int, int]
"""(trace id, parent span id) of one logical request: every drive of it is a child of it."""


def new_trace_anchor() -> dict[str, str]:
    """A random anchor for a new operation, as stored in its program counter (hex strings)."""
    return {"trace_id": secrets.token_hex(16), "span_id": secrets.token_hex(8)}


def trace_anchor(op: Mapping[str, object] | None, store: str, conversation_id: str, request_id: str) -> TraceAnchor:
    """The anchor stored with ``op``; for an operation written before anchors were stored, the
    one earlier versions derived from (store, conversation, request id)."""
    stored = op.get("trace") if op is not None else None
    if isinstance(stored, dict):
        try:
            trace_id, span_id = int(stored["trace_id"], 16), int(stored["span_id"], 16)
        except (KeyError, TypeError, ValueError):
            pass
        else:
            if trace_id and span_id:
                return trace_id, span_id
    digest = hashlib.sha256(f"{store}\x00{conversation_id}\x00{request_id}".encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1


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

    def operation(
        self,
        *,
        anchor: TraceAnchor,
        conversation_id: str,
        request_id: str,
        mode: str,
        resumed: bool,
        input_messages: Iterable[Any] = (),
    ) -> Span:
        """The ``invoke_agent`` span of one drive of an operation; ``input_messages`` (the
        operation's own input) is recorded only with content capture."""
        from opentelemetry.trace import Link, SpanKind

        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "agentcore",
            "gen_ai.conversation.id": conversation_id,
            "agentcore.request_id": request_id,
            "agentcore.mode": mode,
            "agentcore.resumed": resumed,
        }
        if self.capture_content:
            attributes["gen_ai.input.messages"] = input_messages_json(input_messages)
        span = self._tracer.start_span(
            "invoke_agent agentcore",
            context=_anchor_context(anchor),
            kind=SpanKind.INTERNAL,
            links=[Link(_anchor_span(anchor), {"agentcore.link": "request"})],
            attributes=attributes,
        )
        return Span(span)

    def chat(
        self,
        parent: Span,
        *,
        provider: str,
        model: str,
        max_tokens: int,
        step: int,
        attempt: int,
        start_time: int | None = None,
        system_prompt: str = "",
        messages: Iterable[Any] = (),
    ) -> Span:
        """A ``chat`` span; the prompt (``system_prompt``, ``messages``) is recorded only with
        content capture, as ``gen_ai.system_instructions`` and ``gen_ai.input.messages``."""
        from opentelemetry.trace import SpanKind

        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": genai_provider_name(provider),
            "gen_ai.request.model": model,
            "gen_ai.request.max_tokens": max_tokens,
            "gen_ai.request.stream": True,
            "agentcore.step": step,
            "agentcore.attempt": attempt,
        }
        if self.capture_content:
            if system_prompt:
                instructions = [{"type": "text", "content": system_prompt[:CONTENT_LIMIT]}]
                attributes["gen_ai.system_instructions"] = _dump(instructions)
            attributes["gen_ai.input.messages"] = input_messages_json(messages)
        span = self._tracer.start_span(
            f"chat {model}", context=parent.context, kind=SpanKind.CLIENT, start_time=start_time, attributes=attributes
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

    def decision(self, parent: Span | TraceAnchor, *, approval_id: str, approved: bool, notes: str) -> None:
        """A plan review decision: a short span under the operation's drive, or — applied before
        a drive started (a resume) — under the request's anchor."""
        attributes: dict[str, Any] = {
            "agentcore.plan.approval_id": approval_id,
            "agentcore.plan.decision": "approved" if approved else "rejected",
        }
        if self.capture_content and notes:
            attributes["agentcore.plan.notes"] = notes
        context = parent.context if isinstance(parent, Span) else _anchor_context(parent)
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


def output_messages(message: Any, finish_reason: str | None = None) -> str:
    """The response as the conventions' ``gen_ai.output.messages`` JSON (content capture only)."""
    parts = _parts(message)
    return _dump([{"role": "assistant", "parts": parts, "finish_reason": finish_reason or message.stop_reason}])


def final_output_messages(text: str, status: str) -> str:
    """A run's answer as ``gen_ai.output.messages`` on ``invoke_agent`` (content capture only)."""
    parts = [{"type": "text", "content": text[:CONTENT_LIMIT]}]
    return _dump([{"role": "assistant", "parts": parts, "finish_reason": status}])


def input_messages_json(messages: Iterable[Any]) -> str:
    """Transcript messages as the conventions' ``gen_ai.input.messages`` JSON: ``[{role, parts}]``
    with ``text``, ``tool_call``, ``tool_call_response`` and ``reasoning`` parts. Keeps the newest
    messages whose encoding fits ``CONTENT_LIMIT`` (the JSON stays valid)."""
    encoded: list[str] = []
    used = 2
    for message in reversed(list(messages)):
        item = _dump(_input_message(message))
        if encoded and used + len(item) + 1 > CONTENT_LIMIT:
            break
        encoded.append(item)
        used += len(item) + 1
    return "[" + ",".join(reversed(encoded)) + "]"


def _input_message(message: Any) -> dict[str, Any]:
    role = getattr(message, "role", "user")
    if role == "tool_result":
        part = {"type": "tool_call_response", "id": message.tool_call_id, "response": message.text[:CONTENT_LIMIT]}
        return {"role": "tool", "parts": [part]}
    return {"role": role, "parts": _parts(message)}


def _parts(message: Any) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in message.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append({"type": "text", "content": block.text[:CONTENT_LIMIT]})
        elif kind == "thinking" and block.thinking:
            parts.append({"type": "reasoning", "content": block.thinking[:CONTENT_LIMIT]})
        elif kind == "tool_call":
            parts.append({"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.arguments})
        elif kind == "image":  # a generic part: the image bytes are not recorded
            parts.append({"type": "image", "mime_type": block.mime_type})
    return parts


def _anchor_span(anchor: TraceAnchor) -> Any:
    from opentelemetry.trace import SpanContext, TraceFlags

    return SpanContext(anchor[0], anchor[1], is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _anchor_context(anchor: TraceAnchor) -> Any:
    from opentelemetry import trace

    return trace.set_span_in_context(trace.NonRecordingSpan(_anchor_span(anchor)))


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)[:16_384]
    except (TypeError, ValueError):
        return str(value)[:16_384]
