"""The trace as OTLP/JSON: spans Arize Phoenix, Jaeger or an OpenTelemetry Collector import
(SPEC W11).

``otlp_document(trace)`` returns an ``ExportTraceServiceRequest`` in the OTLP/JSON encoding:
``{"resourceSpans": [{"resource": ..., "scopeSpans": [{"scope": ..., "spans": [...]}]}]}`` with
hex ``traceId`` / ``spanId``, times as decimal strings of nanoseconds, attributes as OTLP
``AnyValue``s, parent links and status. Model and tool spans follow the OpenTelemetry GenAI
semantic conventions with the names ``agentcore.tracing`` uses for live spans (``chat {model}``,
``execute_tool {tool}``, ``invoke_agent agentcore``, ``gen_ai.usage.*`` from
``tracing.usage_attributes``), so the two look alike in one backend.

Trace ids: one trace per request, as live tracing has it — a turn with its model and tool spans,
scripts and the tasks its calls started; a subagent's run is a request of its own, in a trace of
its own that links to the tool call that started it. A request's trace id and its span's id are
the request's trace anchor (``tracing.trace_anchor``: the random one its receipt persists, or for
a request written before anchors were stored the one derived from the store, conversation and
request id), whose span id is the synthetic parent of the request's live ``invoke_agent`` spans —
so exported and live spans of one request join in one trace. Other roots (a task a command
started, a background compaction) get an id derived from the store and the span. Other span ids
derive from the span's stable id: exporting a store twice gives the same ids.

A span whose start is unknown (an older store) starts at its own end or its parent's start; one
whose end is unknown ends where it starts and says so (``agentcore.time_unknown``); a span with
no time at all, nor a parent with one, is left out. Message and tool contents (prompts, result
previews) are included only with ``capture_content=True``, as the conventions ask.
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from agentcore.trace.model import Trace, TraceSpan
from agentcore.tracing import INSTRUMENTATION, trace_anchor, usage_attributes

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
_CONTENT = frozenset({"prompt", "result_preview"})
# Span attributes the conventions already carry (gen_ai.*), not repeated as agentcore.*.
_MAPPED = frozenset(
    {"input_tokens", "output_tokens", "cached_input_tokens", "cache_creation_tokens", "reasoning_tokens", "model",
     "provider", "stop_reason", "tool", "tool_call_id", "time_to_first_token_ms", "trace_anchor"}
)  # fmt: skip
_MS = 1_000_000


def otlp_document(
    trace: Trace,
    *,
    store_label: str | None = None,
    capture_content: bool = False,
    resource_attributes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``trace`` as one OTLP/JSON ``ExportTraceServiceRequest``. ``store_label`` is the store as
    the live runtime named it (its ``database_path`` as given), which live trace ids derive from;
    it defaults to the trace's label. ``resource_attributes`` are added to the resource (e.g.
    ``openinference.project.name`` for Phoenix). (The builder already removed credentials.)"""
    store = trace.label if store_label is None else store_label
    resource = {"service.name": INSTRUMENTATION, "agentcore.store": store, **(resource_attributes or {})}
    ids = _Ids(store, {span.id: span for span in trace.spans})
    starts: dict[str, int | None] = {}
    spans = []
    for span in trace.spans:
        start = _start(span, ids.spans, starts)
        if start is not None:
            spans.append(_span(span, start, ids, capture_content))
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(resource)},
                "scopeSpans": [{"scope": {"name": "agentcore.trace", "version": _release()}, "spans": spans}],
            }
        ]
    }


class _Ids:
    """Trace and span ids (hex) for the spans of one export, each computed once."""

    def __init__(self, store: str, spans: dict[str, TraceSpan]) -> None:
        self._store = store
        self.spans = spans
        self._roots: dict[str, TraceSpan] = {}
        self._trace_ids: dict[str, str] = {}  # root span id -> trace id
        self._span_ids: dict[str, str] = {}

    def root(self, span: TraceSpan) -> TraceSpan:
        """The span whose trace ``span`` is in: its request's turn (a subagent's run is a request
        of its own, as live tracing has it), else its topmost ancestor."""
        found = self._roots.get(span.id)
        if found is None:
            found, seen = span, {span.id}
            while not _anchored(found) and found.parent_id in self.spans and found.parent_id not in seen:
                found = self.spans[str(found.parent_id)]
                seen.add(found.id)
            self._roots[span.id] = found
        return found

    def trace_id(self, span: TraceSpan) -> str:
        root = self.root(span)
        found = self._trace_ids.get(root.id)
        if found is None:
            if _anchored(root):
                found = f"{self._anchor(root)[0]:032x}"
            else:
                found = _digest(f"{self._store}\x00{root.id}", 16)
            self._trace_ids[root.id] = found
        return found

    def span_id(self, span: TraceSpan) -> str:
        found = self._span_ids.get(span.id)
        if found is None:
            if _anchored(span):  # the synthetic parent of the request's live ``invoke_agent`` spans
                found = f"{self._anchor(span)[1]:016x}"
            else:
                found = _digest(f"{self.trace_id(span)}\x00{span.id}", 8)
            self._span_ids[span.id] = found
        return found

    def _anchor(self, turn: TraceSpan) -> tuple[int, int]:
        """The request's trace anchor as its receipt persisted it, or — for a request written
        before anchors were stored — the one live tracing derives (``tracing.trace_anchor``)."""
        op = {"trace": turn.attributes.get("trace_anchor")}
        return trace_anchor(op, self._store, turn.conversation_id, str(turn.request_id))


def _anchored(span: TraceSpan) -> bool:
    return span.kind in ("turn", "subagent") and span.request_id is not None


def _span(span: TraceSpan, start: int, ids: _Ids, capture_content: bool) -> dict[str, Any]:
    end = span.end_ms
    attributes = _conventions(span)
    attributes["agentcore.span.id"] = span.id
    attributes["agentcore.span.kind"] = span.kind
    attributes["agentcore.status"] = span.status
    attributes["agentcore.request_id"] = span.request_id
    attributes["gen_ai.conversation.id"] = span.conversation_id
    for key, value in span.attributes.items():
        if value is None or key in _MAPPED or (key in _CONTENT and not capture_content):
            continue
        if key == "cost_detail" and isinstance(value, dict):
            for part, cost in value.items():
                attributes[f"agentcore.cost.{part}"] = float(cost)
            continue
        attributes[f"agentcore.{key}"] = value
    if span.start_ms is None or end is None:
        attributes["agentcore.time_unknown"] = True
    trace_id = ids.trace_id(span)
    out: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": ids.span_id(span),
        "name": _name(span),
        "kind": SPAN_KIND_CLIENT if span.kind == "model" else SPAN_KIND_INTERNAL,
        "startTimeUnixNano": str(start * _MS),
        "endTimeUnixNano": str(max(start, end if end is not None else start) * _MS),
        "attributes": _attributes(attributes),
        "status": _status(span),
    }
    parent = ids.spans.get(span.parent_id or "")
    if parent is not None and ids.trace_id(parent) == trace_id:
        out["parentSpanId"] = ids.span_id(parent)
    elif parent is not None:  # a subagent's run, in a trace of its own: linked to the call that started it
        link = {"traceId": ids.trace_id(parent), "spanId": ids.span_id(parent)}
        out["links"] = [dict(link, attributes=_attributes({"agentcore.link": "started_by"}))]
    return out


def _name(span: TraceSpan) -> str:
    if span.kind in ("turn", "subagent"):
        return "invoke_agent agentcore" if span.kind == "turn" else "invoke_agent subagent"
    if span.kind == "model":
        return f"chat {span.attributes.get('model') or ''}".strip()
    if span.kind in ("tool", "nested_call"):
        return f"execute_tool {span.attributes.get('tool') or ''}".strip()
    return span.name


def _conventions(span: TraceSpan) -> dict[str, Any]:
    """The GenAI semantic-convention attributes of ``span`` (as ``agentcore.tracing`` sets them)."""
    a = span.attributes
    if span.kind in ("turn", "subagent"):
        return {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": INSTRUMENTATION}
    if span.kind == "model":
        out = {key.replace("__", "."): value for key, value in usage_attributes(dict(a, record_id=None)).items()}
        out.update(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": a.get("provider"),
                "gen_ai.request.model": a.get("model"),
                "gen_ai.response.model": a.get("model"),
                "gen_ai.response.finish_reasons": [a["stop_reason"]] if a.get("stop_reason") else None,
                "agentcore.record_id": span.refs.get("usage_record"),
            }
        )
        if a.get("time_to_first_token_ms") is not None:
            out["gen_ai.response.time_to_first_chunk"] = a["time_to_first_token_ms"] / 1000
        error = a.get("error")
        if isinstance(error, dict):
            out["error.type"] = error.get("kind")
        retry = a.get("retry")
        if isinstance(retry, dict):
            out.update({"agentcore.retry.kind": retry.get("kind"), "agentcore.retry.reason": retry.get("reason")})
        return out
    if span.kind in ("tool", "nested_call"):
        return {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": a.get("tool"),
            "gen_ai.tool.call.id": a.get("tool_call_id") or span.id.split(":", 1)[1],
            "gen_ai.tool.type": "function",
        }
    return {}


def _status(span: TraceSpan) -> dict[str, Any]:
    if span.status == "error":
        error = span.attributes.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        return {"code": STATUS_ERROR, "message": str(message or "error")[:500]}
    if span.status == "interrupted":
        return {"code": STATUS_ERROR, "message": "interrupted"}
    if span.status == "ok":
        return {"code": STATUS_OK}
    return {"code": STATUS_UNSET}


def _start(span: TraceSpan, by_id: dict[str, TraceSpan], memo: dict[str, int | None]) -> int | None:
    """The span's start, or the best stand-in: its own end, else its parent's start."""
    if span.id in memo:
        return memo[span.id]
    memo[span.id] = None  # a cycle (never written by agentcore) resolves to unknown
    start = span.start_ms if span.start_ms is not None else span.end_ms
    if start is None and span.parent_id in by_id:
        start = _start(by_id[span.parent_id], by_id, memo)
    memo[span.id] = start
    return start


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _any_value(value)} for key, value in values.items() if value is not None]


def _any_value(value: Any) -> dict[str, Any]:
    """An OTLP ``AnyValue`` (int64 as a decimal string, as the JSON encoding of protobuf wants)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, bool, int, float)) for v in value):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    return {"stringValue": json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)}


def _digest(text: str, size: int) -> str:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:size]
    return digest.hex() if any(digest) else "01".rjust(size * 2, "0")


def _release() -> str:
    try:
        return version("agentcore-studio")
    except PackageNotFoundError:  # pragma: no cover - a source checkout without metadata
        return "0"
