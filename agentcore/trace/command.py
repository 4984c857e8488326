"""``python -m agentcore trace``: a store's trace as JSON or OTLP/JSON on stdout (SPEC W11).

    python -m agentcore trace --database PATH [--request-id R] [--format json|otlp]
    python -m agentcore trace --database-url postgresql://…?store=NAME --format otlp > spans.json

Reads the store read-only (never its owner lock), so it works beside a running agent. The OTLP
output posts as is to a receiver of OTLP/HTTP JSON (``/v1/traces``, ``Content-Type:
application/json``).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, TextIO

from agentcore.errors import InputValidationError

DATABASE_URL_ENV = "AGENTCORE_DATABASE_URL"


def add_trace_parser(sub: Any) -> None:
    trace = sub.add_parser("trace", help="print a store's trace (timeline of spans) as JSON or OTLP/JSON")
    where = trace.add_mutually_exclusive_group()
    where.add_argument("--database", help="the SQLite store file")
    where.add_argument("--database-url", help=f"a PostgreSQL store (postgresql://…?store=NAME); or {DATABASE_URL_ENV}")
    trace.add_argument("--request-id", help="only this turn (and its subagents and tasks)")
    trace.add_argument("--conversation", help="only this conversation (and its subagents)")
    trace.add_argument("--format", choices=["json", "otlp"], default="json")
    trace.add_argument("--details", action="store_true", help="json: embed each span's details (sent and received)")
    trace.add_argument(
        "--capture-content", action="store_true", help="otlp: include prompts and result previews (off by default)"
    )
    trace.add_argument("--store-label", help="otlp: the store as the live runtime named it (for joining trace ids)")


def trace_command(args: argparse.Namespace, out: TextIO) -> int:
    from agentcore.trace.builder import TraceBuilder
    from agentcore.trace.details import span_details
    from agentcore.trace.export_json import trace_document
    from agentcore.trace.otlp import otlp_document
    from agentcore.trace.records import open_trace_source

    source = args.database or args.database_url or os.environ.get(DATABASE_URL_ENV)
    if not source:
        raise InputValidationError("trace needs --database or --database-url", field="database")
    reader = open_trace_source(source)
    builder = TraceBuilder(reader.label)
    builder.add(reader.read(0))
    trace = builder.trace(request_id=args.request_id, conversation_id=args.conversation)
    if args.request_id is not None and not trace.spans:
        raise InputValidationError(f"no turn {args.request_id!r} in {reader.label}", field="request_id")
    document: dict[str, Any]
    if args.format == "otlp":
        document = otlp_document(trace, store_label=args.store_label, capture_content=args.capture_content)
    else:
        details = {span.id: span_details(reader, span) for span in trace.spans} if args.details else None
        document = trace_document(
            trace, request_id=args.request_id, conversation_id=args.conversation, details=details
        )
    json.dump(document, out, ensure_ascii=False)
    out.write("\n")
    return 0
