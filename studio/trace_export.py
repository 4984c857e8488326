"""A session's trace as a download: the JSON document and OTLP/JSON (SPEC W11). Sync, pure I/O.

Read from the store alone, read-only, beside a running owner (``agentcore.trace``), scoped to
the page's conversation and its subagents (a fork's download holds only its own turns), with
credentials removed by ``studio.timeline_store.studio_redactor``.
"""

from __future__ import annotations

from typing import Any

from agentcore.errors import AgentError
from agentcore.trace import Redactor, TraceBuilder, open_trace_source, otlp_document, trace_document
from studio.stores import StoreLocation
from studio.timeline_store import trace_source

MAIN_CONVERSATION = "main"  # the runtime's session id, which Studio leaves at its default


class ExportError(Exception):
    """The store cannot be read (none yet, or not a store); the message says why."""


def trace_download(
    location: StoreLocation, target_id: int, name: str, *, redactor: Redactor, request_id: str | None = None
) -> dict[str, Any]:
    """``trace.json`` or ``trace.otlp.json`` of the conversation ``target_id`` (one turn of it
    with ``request_id``)."""
    try:
        reader = open_trace_source(trace_source(location))
        builder = TraceBuilder(reader.label, redactor=redactor)
        builder.add(reader.read(0))
    except AgentError as exc:
        raise ExportError(f"This session has no readable store yet ({exc.code}).") from exc
    conversation = MAIN_CONVERSATION
    if target_id:
        found = [c.conversation_id for c in builder.conversations() if c.target_id == target_id]
        if not found:
            raise ExportError("This conversation is not in the store.")
        conversation = found[0]
    trace = builder.trace(request_id=request_id) if request_id else builder.trace(conversation_id=conversation)
    if name == "trace.json":
        if request_id:
            return trace_document(trace, request_id=request_id)
        return trace_document(trace, conversation_id=conversation)
    return otlp_document(trace, store_label=location.path or location.label)
