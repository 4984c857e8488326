"""The Trace: every model request, tool call, script, subagent, compaction, wait, task and
restart gap of a session on one time axis, built from the store (SPEC W8, W11).

``build_trace(source)`` reads a store (a SQLite path, a ``postgresql://`` URL, an open storage
or a runtime) and returns its spans; ``TraceBuilder`` does the same incrementally (feed it the
rows after the last ``seq`` it saw); ``span_details`` loads what a span sent and received;
``trace_document`` / ``otlp_document`` are the JSON and OTLP/JSON exports. Re-exports only.
"""

from agentcore.trace.builder import TraceBuilder, build_trace
from agentcore.trace.details import span_details
from agentcore.trace.export_json import SCHEMA_VERSION, TraceDocument, json_schema, trace_document
from agentcore.trace.model import SPAN_KINDS, SPAN_STATUSES, SpanKind, SpanStatus, Trace, TraceConversation, TraceSpan
from agentcore.trace.otlp import otlp_document
from agentcore.trace.records import TraceRecords, TraceSource, open_trace_source, read_trace_records
from agentcore.trace.redact import Redactor

__all__ = [
    "SCHEMA_VERSION",
    "SPAN_KINDS",
    "SPAN_STATUSES",
    "Redactor",
    "SpanKind",
    "SpanStatus",
    "Trace",
    "TraceBuilder",
    "TraceConversation",
    "TraceDocument",
    "TraceRecords",
    "TraceSource",
    "TraceSpan",
    "build_trace",
    "json_schema",
    "open_trace_source",
    "otlp_document",
    "read_trace_records",
    "span_details",
    "trace_document",
]
