"""The trace as JSON: a documented, versioned document (SPEC W11, "take the data away").

``trace_document(trace)`` returns ``{"schema": "agentcore.trace", "version": 1, ...}``. The
pydantic models below are the schema's one definition: ``trace-v1.schema.json`` (shipped next to
this module) is generated from ``TraceDocument`` and a test keeps the two equal, so a consumer
can validate a download with any JSON Schema validator. Version 1's meaning is frozen: a change
that is not a pure addition of optional fields is version 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentcore.trace.model import SpanKind, SpanStatus, Trace

SCHEMA_NAME = "agentcore.trace"
SCHEMA_VERSION = 1
SCHEMA_FILE = Path(__file__).with_name("trace-v1.schema.json")


class SpanDocument(BaseModel):
    """One span. Times are epoch milliseconds of the store's clock; ``null`` when unknown."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Stable id, unique in the store (e.g. 'tool:<request>/<step>/<index>').")
    parent_id: str | None = Field(description="The enclosing span's id; null for a root.")
    kind: SpanKind
    name: str
    conversation_id: str
    request_id: str | None = Field(description="The turn (operation) the span belongs to, if any.")
    start_ms: int | None
    end_ms: int | None
    duration_ms: int | None
    status: SpanStatus
    attributes: dict[str, Any] = Field(description="Kind-specific facts (tokens, cost, model, retry, tool, ...).")
    refs: dict[str, str] = Field(description="Store records the span was built from (entry ids, record ids).")
    seq: int = Field(description="Store sequence number of the newest record the span was built from.")
    details: dict[str, Any] | None = Field(default=None, description="span_details(), when exported with details.")


class ConversationDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversation_id: str
    kind: Literal["main", "fork", "subagent"]
    target_id: int
    parent_conversation_id: str | None
    base: dict[str, str] | None
    owner_request: str | None
    owner_call: str | None
    label: str
    created_ms: int | None
    deleted: bool


class ScopeDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request_id: str | None = None
    conversation_id: str | None = None


class TraceDocument(BaseModel):
    """A session's (or one turn's) trace."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_name: Literal["agentcore.trace"] = Field(alias="schema")
    version: Literal[1]
    store: str = Field(description="The store's label (a path or a PostgreSQL store name; never a password).")
    last_seq: int = Field(description="The store position the trace is current as of.")
    scope: ScopeDocument
    conversations: list[ConversationDocument]
    spans: list[SpanDocument]


def trace_document(
    trace: Trace,
    *,
    request_id: str | None = None,
    conversation_id: str | None = None,
    details: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``trace`` as a version-1 document (a plain JSON-ready dict). ``details`` (span id → its
    ``span_details``) are embedded when given. (The builder already removed credentials from
    the spans, and ``span_details`` from the details.)"""
    spans = []
    for span in trace.spans:
        data = span.to_dict()
        if details is not None and span.id in details:
            data["details"] = details[span.id]
        spans.append(data)
    return {
        "schema": SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "store": trace.label,
        "last_seq": trace.last_seq,
        "scope": {"request_id": request_id, "conversation_id": conversation_id},
        "conversations": [c.to_dict() for c in trace.conversations],
        "spans": spans,
    }


def json_schema() -> dict[str, Any]:
    """The JSON Schema of version 1 (what ``trace-v1.schema.json`` holds)."""
    schema = TraceDocument.model_json_schema(by_alias=True)
    schema["$id"] = "urn:agentcore:trace:v1"
    schema["title"] = "agentcore trace, version 1"
    return schema


def shipped_schema() -> dict[str, Any]:
    """The schema file shipped with the package."""
    data: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return data
