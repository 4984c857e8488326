"""Taking the trace away: the versioned JSON document and OTLP/JSON spans (SPEC W11).

The JSON export is validated against the shipped JSON Schema (with a real validator); the OTLP
export is parsed by the official protobuf definitions (``opentelemetry-proto``) as an
``ExportTraceServiceRequest``, and its trace ids are checked against the live spans
``agentcore.tracing`` emitted for the same request.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentcore import AgentInput, build_trace, otlp_document, span_details, trace_document
from agentcore.testing.steps import HttpError, Text, ToolCall, Usage
from agentcore.trace import TraceDocument, json_schema
from agentcore.trace.export_json import SCHEMA_FILE, shipped_schema
from tests.agentcore.trace_helpers import T0, advancing_tool
from tests.helpers import FakeClock, collect

COMPLETIONS = "openai-completions"
ROOT = Path(__file__).resolve().parents[2]


async def a_session(make_agent: Any, fake_server: Any, db: Path, **options: Any) -> Any:
    """A turn with a retried request, a tool call and a code-mode script calling a tool."""
    clock = FakeClock(T0, tick=1)
    fake_server.enqueue(
        [ToolCall("work", {}, id="c1"), Usage(input=100, output=10, cached_input=40)],
        [HttpError(503, "busy")],
        [ToolCall("codemode", {"code": "await tools.work({}); return 2"}, id="k1")],
        [Text("done"), Usage(input=120, output=4)],
    )
    agent = await make_agent(
        COMPLETIONS,
        database_path=str(db),
        clock=clock,
        extra_tools=[advancing_tool(clock, 20)],
        session={"code_mode": {}},
        **options,
    )
    await collect(agent, AgentInput(prompt="go", request_id="r1"))
    return agent


def parsed(document: dict[str, Any]) -> ExportTraceServiceRequest:
    """Parse OTLP/JSON the way an OTLP/JSON receiver does: ids are hex in OTLP/JSON (not the
    base64 of protobuf's JSON mapping), everything else is protobuf JSON — unknown fields refused."""
    converted = copy.deepcopy(document)
    for resource in converted["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for item in (span, *span.get("links", ())):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in item:
                            item[key] = base64.b64encode(bytes.fromhex(item[key])).decode()
    return json_format.Parse(json.dumps(converted), ExportTraceServiceRequest(), ignore_unknown_fields=False)


def attributes(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        kind = kv.value.WhichOneof("value")
        value = getattr(kv.value, kind)
        out[kv.key] = list(v.string_value or v.int_value for v in value.values) if kind == "array_value" else value
    return out


def test_the_shipped_json_schema_is_the_documents_model() -> None:
    """W11: the JSON Schema file shipped with the package is generated from the document model,
    so the two cannot drift apart."""
    assert SCHEMA_FILE.is_file()
    assert shipped_schema() == json_schema()
    assert shipped_schema()["properties"]["version"]["const"] == 1


async def test_the_json_export_validates_against_its_schema_and_holds_the_timeline(
    make_agent, fake_server, tmp_path: Path
) -> None:
    """W11: a session's trace as JSON is a version-1 document that a JSON Schema validator
    accepts, with every span (times, status, attributes, refs) and, on request, each span's
    details; one turn's document holds only that turn."""
    db = tmp_path / "e.sqlite"
    await a_session(make_agent, fake_server, db)
    trace = build_trace(db)
    document = trace_document(trace, details={s.id: span_details(db, s) for s in trace.spans})
    jsonschema.validate(document, shipped_schema())
    TraceDocument.model_validate(document)
    assert (document["schema"], document["version"]) == ("agentcore.trace", 1)
    kinds = sorted(s["kind"] for s in document["spans"])
    assert kinds == sorted(["turn", "model", "model", "model", "model", "tool", "tool", "script", "nested_call"])
    model = next(s for s in document["spans"] if s["kind"] == "model")
    assert model["attributes"]["cached_input_tokens"] == 40 and model["details"]["response"]["role"] == "assistant"
    assert all(s["start_ms"] is not None and s["end_ms"] >= s["start_ms"] for s in document["spans"])
    single = trace_document(build_trace(db, request_id="r1"), request_id="r1")
    jsonschema.validate(single, shipped_schema())
    assert single["scope"]["request_id"] == "r1" and len(single["spans"]) == len(document["spans"])
    broken = dict(document, version=2)
    try:
        jsonschema.validate(broken, shipped_schema())
    except jsonschema.ValidationError as exc:
        assert "version" in str(exc.path) or "1 was expected" in exc.message
    else:
        raise AssertionError("the schema must refuse another version")


async def test_the_otlp_export_is_an_export_trace_service_request_with_genai_spans(
    make_agent, fake_server, tmp_path: Path
) -> None:
    """W11: the OTLP/JSON export parses as ``ExportTraceServiceRequest`` (official protobuf
    definitions, unknown fields refused): one trace for the turn, 16/8-byte ids, every parent
    present, times as nanosecond strings, GenAI attributes on model and tool spans, error status
    on the failed attempt."""
    db = tmp_path / "o.sqlite"
    await a_session(make_agent, fake_server, db)
    document = otlp_document(build_trace(db))
    raw_spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert all(isinstance(s["startTimeUnixNano"], str) and s["startTimeUnixNano"].isdigit() for s in raw_spans)
    request = parsed(document)
    (resource,) = request.resource_spans
    spans = list(resource.scope_spans[0].spans)
    assert len(spans) == 9
    assert {len(s.trace_id) for s in spans} == {16} and {len(s.span_id) for s in spans} == {8}
    assert len({s.trace_id for s in spans}) == 1, "one turn, one trace"
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_span_id]
    assert len(roots) == 1 and all(s.parent_span_id in ids for s in spans if s.parent_span_id)
    assert all(s.end_time_unix_nano >= s.start_time_unix_nano >= T0 * 1_000_000 for s in spans)
    by_name: dict[str, list[Any]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    assert set(by_name) == {"invoke_agent agentcore", "chat fake-model", "execute_tool work", "execute_tool codemode",
                            "codemode script"}  # fmt: skip
    chats = by_name["chat fake-model"]
    assert all(c.kind == c.SPAN_KIND_CLIENT for c in chats)
    first = attributes(chats[0])
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.provider.name"] == "fake"
    assert first["gen_ai.request.model"] == "fake-model"
    assert first["gen_ai.usage.input_tokens"] == 140 and first["gen_ai.usage.cache_read.input_tokens"] == 40
    assert first["gen_ai.usage.output_tokens"] == 10 and first["gen_ai.response.finish_reasons"] == ["tool_use"]
    failed = [c for c in chats if c.status.code == c.status.STATUS_CODE_ERROR]
    assert len(failed) == 1 and "busy" in failed[0].status.message
    assert attributes(failed[0])["agentcore.retry.kind"] == "dropped"
    tool = attributes(by_name["execute_tool work"][0])
    assert tool["gen_ai.operation.name"] == "execute_tool" and tool["gen_ai.tool.name"] == "work"
    assert "agentcore.result_preview" not in tool and "agentcore.prompt" not in attributes(roots[0])
    with_content = otlp_document(build_trace(db), capture_content=True)
    root = next(s for s in parsed(with_content).resource_spans[0].scope_spans[0].spans if not s.parent_span_id)
    assert attributes(root)["agentcore.prompt"] == "go", "contents only on request"
    assert otlp_document(build_trace(db)) == document, "exporting twice gives the same ids"


async def test_exported_spans_join_the_live_spans_of_the_same_request(
    make_agent, fake_server, tmp_path: Path
) -> None:
    """W11: each exported request is in the trace live tracing gave it (the random anchor its
    receipt keeps), and its span is the live ``invoke_agent`` spans' parent, so a backend that has
    both shows them in one trace; a subagent's run is its own request, in its own trace, linked
    to the tool call that started it."""
    db = tmp_path / "j.sqlite"
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    fake_server.enqueue([ToolCall("subagent", {"task": "look"}, id="d1")], [Text("two files")], [Text("done")])
    agent = await make_agent(
        COMPLETIONS, database_path=str(db), tracing=provider, session={"subagents": {"tools": ["ls"]}}
    )
    await collect(agent, AgentInput(prompt="delegate", request_id="r1"))
    live = {dict(s.attributes)["agentcore.request_id"]: s for s in exporter.get_finished_spans()
            if s.name.startswith("invoke_agent")}  # fmt: skip
    child_request = next(r for r in live if r != "r1")
    receipt = agent.log.storage.load().receipts["r1"].payload
    assert receipt["trace"]["trace_id"] == f"{live['r1'].context.trace_id:032x}", "the receipt keeps the anchor"
    spans = parsed(otlp_document(build_trace(db))).resource_spans[0].scope_spans[0].spans
    by_request = {attributes(s)["agentcore.request_id"]: s for s in spans if s.name.startswith("invoke_agent")}
    for request_id in ("r1", child_request):
        exported = by_request[request_id]
        assert int.from_bytes(exported.trace_id, "big") == live[request_id].context.trace_id
        assert int.from_bytes(exported.span_id, "big") == live[request_id].parent.span_id
    child = by_request[child_request]
    (call,) = [s for s in spans if s.name == "execute_tool subagent"]
    assert not child.parent_span_id and [(link.trace_id, link.span_id) for link in child.links] == [
        (call.trace_id, call.span_id)
    ]
    assert child.trace_id != call.trace_id


async def test_the_cli_prints_the_trace_as_json_or_otlp(make_agent, fake_server, tmp_path: Path) -> None:
    """W11/R5: ``python -m agentcore trace --database PATH`` prints the JSON document, ``--format
    otlp`` the OTLP/JSON request, ``--request-id`` one turn; an unknown turn is exit 2, naming it."""
    db = tmp_path / "c.sqlite"
    await a_session(make_agent, fake_server, db)
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "agentcore", "trace", "--database", str(db), *args]
        return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    as_json = cli("--request-id", "r1")
    assert as_json.returncode == 0, as_json.stderr
    jsonschema.validate(json.loads(as_json.stdout), shipped_schema())
    as_otlp = cli("--format", "otlp")
    assert as_otlp.returncode == 0, as_otlp.stderr
    assert len(parsed(json.loads(as_otlp.stdout)).resource_spans[0].scope_spans[0].spans) == 9
    missing = cli("--request-id", "nope")
    assert missing.returncode == 2 and "nope" in missing.stderr and missing.stdout == ""
