"""OpenTelemetry GenAI traces (issue: ecosystem; SPEC E1 and D1 for what is traced).

The SDK's in-memory exporter checks the span tree and attributes; a resumed request must not
repeat a settled response's usage; the real OTLP/HTTP exporter sends to a receiver this test
serves on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentcore import AgentHost, AgentInput, PlanResume, UserInputRequired
from agentcore.testing.steps import Hang, Text, ToolCall, Usage
from agentcore.tracing import AgentTracing
from tests.helpers import collect, final

COMPLETIONS = "openai-completions"
V1_STORE = Path(__file__).resolve().parents[1] / "fixtures" / "stores" / "v1.sqlite"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def provider_for(exporter: Any) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def by_name(spans: Any, prefix: str) -> list[Any]:
    return [s for s in spans if s.name.startswith(prefix)]


async def test_span_tree_and_genai_attributes(make_agent, fake_server, exporter) -> None:
    """invoke_agent → chat per model request, with the GenAI attributes; contents are not
    recorded unless asked for."""
    fake_server.enqueue(
        [ToolCall("ls", {"path": "."}, id="c1"), Usage(input=100, output=10, cached_input=40, cache_creation=5)],
        [Text("two files"), Usage(input=150, output=20)],
    )
    agent = await make_agent("anthropic-messages", tracing=provider_for(exporter), model="claude-test")
    assert final(await collect(agent, AgentInput(prompt="list", request_id="r1"))).status == "completed"
    spans = exporter.get_finished_spans()
    (run,) = by_name(spans, "invoke_agent")
    chats = by_name(spans, "chat ")
    assert len(chats) == 2 and all(c.parent.span_id == run.context.span_id for c in chats)
    assert {c.context.trace_id for c in spans} == {run.context.trace_id}
    first = dict(chats[0].attributes)
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.provider.name"] == "fake", "the custom provider"
    assert first["gen_ai.request.model"] == "claude-test" and first["gen_ai.response.model"]
    assert first["gen_ai.usage.input_tokens"] == 145, "the whole prompt: uncached + cache reads + writes"
    assert first["gen_ai.usage.cache_read.input_tokens"] == 40
    assert first["gen_ai.usage.cache_creation.input_tokens"] == 5
    assert first["gen_ai.usage.output_tokens"] == 10
    assert first["gen_ai.response.finish_reasons"] == ("tool_use",), "Anthropic's own stop_reason"
    assert dict(chats[1].attributes)["gen_ai.response.finish_reasons"] == ("end_turn",)
    (tool,) = by_name(spans, "execute_tool")
    assert tool.parent.span_id == run.context.span_id
    tool_attributes = dict(tool.attributes)
    assert tool_attributes["gen_ai.operation.name"] == "execute_tool" and tool_attributes["gen_ai.tool.name"] == "ls"
    assert tool_attributes["gen_ai.tool.call.id"].endswith(":c1")
    assert "gen_ai.tool.call.arguments" not in tool_attributes, "contents only on request"
    assert chats[0].end_time <= tool.start_time and tool.end_time <= chats[1].start_time, "request, tool, request"
    assert dict(run.attributes)["agentcore.request_id"] == "r1"
    assert dict(run.attributes)["agentcore.status"] == "completed"
    assert all("gen_ai.output.messages" not in dict(s.attributes) for s in spans)


async def test_reasoning_tokens_are_reported(make_agent, fake_server, exporter) -> None:
    fake_server.enqueue([Text("thought it through"), Usage(input=50, output=30, reasoning=12)])
    agent = await make_agent("openai-responses", tracing=provider_for(exporter))
    await collect(agent, "think")
    (chat,) = by_name(exporter.get_finished_spans(), "chat ")
    assert dict(chat.attributes)["gen_ai.usage.reasoning.output_tokens"] == 12
    assert dict(chat.attributes)["gen_ai.provider.name"] == "fake"


async def test_content_only_when_opted_in(make_agent, fake_server, exporter) -> None:
    fake_server.enqueue([Text("the secret answer")])
    tracing = AgentTracing(provider=provider_for(exporter), capture_content=True)
    agent = await make_agent(COMPLETIONS, tracing=tracing)
    await collect(agent, "question")
    (chat,) = by_name(exporter.get_finished_spans(), "chat ")
    assert "the secret answer" in dict(chat.attributes)["gen_ai.output.messages"]


async def test_compaction_and_plan_decisions_are_spans(make_agent, fake_server, exporter) -> None:
    """A compaction span holds its summary request; a plan review is a span of its request."""
    fake_server.enqueue([Text("first answer")], [Text("Summary: a question was asked.")], [Text("Plan: 1. do it")])
    agent = await make_agent(COMPLETIONS, tracing=provider_for(exporter))
    await collect(agent, "a question")
    await collect(agent, "/compact")

    async def pause(payload: dict[str, Any]) -> None:
        raise UserInputRequired("review", payload)

    host = AgentHost(approve_plan=pause)
    paused = final(await collect(agent, AgentInput(prompt="plan", request_id="p1", agent="plan"), host))
    fake_server.enqueue([Text("built")])
    decision = PlanResume(approval_id=paused.pending["approval_id"], approved=True)
    await collect(agent, AgentInput(request_id="p1", plan_resume=decision), host)
    spans = exporter.get_finished_spans()
    (compaction,) = by_name(spans, "compaction")
    summaries = [c for c in by_name(spans, "chat ") if c.parent.span_id == compaction.context.span_id]
    assert len(summaries) == 1 and dict(summaries[0].attributes)["gen_ai.usage.output_tokens"] > 0
    (review,) = by_name(spans, "plan_review")
    assert dict(review.attributes)["agentcore.plan.decision"] == "approved"
    runs = [s for s in by_name(spans, "invoke_agent") if dict(s.attributes)["agentcore.request_id"] == "p1"]
    assert len(runs) == 2 and {r.context.trace_id for r in runs} == {review.context.trace_id}


async def test_a_resumed_request_joins_its_trace_without_repeating_usage(
    make_agent, fake_server, exporter, tmp_path
) -> None:
    """A request driven again by a reopened runtime lands in the same trace, linked to the same
    anchor; the response settled before the interruption is reported once."""
    db = str(tmp_path / "traced.sqlite")
    fake_server.enqueue([ToolCall("ls", {"path": "."}, id="c1"), Usage(input=100, output=10)], [Hang()])
    first = await make_agent(COMPLETIONS, tracing=provider_for(exporter), database_path=db)
    interrupted = asyncio.ensure_future(collect(first, AgentInput(prompt="go", request_id="job")))
    await fake_server.until_hanging(1)  # the second request is in flight
    interrupted.cancel()
    with pytest.raises(asyncio.CancelledError):
        await interrupted
    await first.close()
    fake_server.enqueue([Text("done"), Usage(input=200, output=20)])
    second = await make_agent(COMPLETIONS, tracing=provider_for(exporter), database_path=db)
    assert final(await collect(second, AgentInput(request_id="job"))).status == "completed"
    spans = exporter.get_finished_spans()
    runs = by_name(spans, "invoke_agent")
    assert len(runs) == 2 and runs[0].context.trace_id == runs[1].context.trace_id
    assert runs[0].links[0].context.span_id == runs[1].links[0].context.span_id, "one anchor for the request"
    settled = [c for c in by_name(spans, "chat ") if "gen_ai.usage.output_tokens" in dict(c.attributes)]
    outputs = sorted(dict(c.attributes)["gen_ai.usage.output_tokens"] for c in settled)
    assert outputs == [10, 20], "each settled response once"


async def test_no_provider_means_no_spans(make_agent, fake_server) -> None:
    """Nothing is traced unless a provider is configured (the global one is the no-op proxy)."""
    fake_server.enqueue([Text("hi")])
    agent = await make_agent(COMPLETIONS)
    assert agent.tracer is None


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[bytes] = []  # noqa: RUF012 - the test's receiver, one per test run

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        _Receiver.bodies.append(self.rfile.read(length))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


async def test_real_otlp_http_export_to_a_local_receiver(make_agent, fake_server) -> None:
    """The OTLP/HTTP exporter sends the GenAI spans to an endpoint (here one we serve)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    _Receiver.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=5)))
        fake_server.enqueue([Text("exported")])
        agent = await make_agent(COMPLETIONS, tracing=provider)
        await collect(agent, "hello")
        provider.shutdown()
    finally:
        server.shutdown()
        thread.join()
    names = []
    for body in _Receiver.bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                assert scope.scope.name == "agentcore"
                names.extend(span.name for span in scope.spans)
    assert "invoke_agent agentcore" in names and any(n.startswith("chat ") for n in names)


# --- issue 23: trace identity, provider names, prompts ---------------------------------------


async def test_independent_runtimes_with_the_same_request_id_get_their_own_traces(
    make_agent, fake_server, exporter
) -> None:
    """A trace id is unique per logical request and store, never derived from the request id
    alone: two in-memory runtimes that both run request "r1" land in two traces (a viewer that
    files spans by trace id, such as Phoenix, would otherwise hide the second run)."""
    fake_server.enqueue([Text("first")], [Text("second")])
    for _ in range(2):
        agent = await make_agent(COMPLETIONS, tracing=provider_for(exporter))
        assert final(await collect(agent, AgentInput(prompt="hi", request_id="r1"))).status == "completed"
    runs = by_name(exporter.get_finished_spans(), "invoke_agent")
    assert len(runs) == 2 and runs[0].context.trace_id != runs[1].context.trace_id
    for run in runs:
        chats = [s for s in by_name(exporter.get_finished_spans(), "chat ") if s.parent.span_id == run.context.span_id]
        assert len(chats) == 1 and chats[0].context.trace_id == run.context.trace_id


async def test_a_store_written_before_trace_ids_were_stored_still_resumes_traced(
    fake_server, exporter, tmp_path
) -> None:
    """The v1 fixture's open operation carries no trace id: it resumes, traced, under the anchor
    earlier versions derived for it (store, conversation, request), so its old spans stay joined."""
    import hashlib
    import shutil

    from agentcore import create_agent

    db = tmp_path / "v1.sqlite"
    shutil.copy(V1_STORE, db)
    fake_server.enqueue([Text("README.md, a short readme."), Usage(input=150, output=8)])
    runtime = await create_agent(
        provider="fake",
        model="fake-model",
        base_url=fake_server.base_url,
        api_key="k",
        api_kind=COMPLETIONS,
        database_path=str(db),
        workdir=str(tmp_path),
        tracing=provider_for(exporter),
    )
    try:
        assert final(await collect(runtime, AgentInput(request_id="job-v1"))).status == "completed"
    finally:
        await runtime.close()
    (run,) = by_name(exporter.get_finished_spans(), "invoke_agent")
    legacy = hashlib.sha256(f"{db}\x00main\x00job-v1".encode()).digest()
    assert run.context.trace_id == int.from_bytes(legacy[:16], "big")


@pytest.mark.parametrize(
    ("provider", "api_kind", "expected"),
    [
        ("fake", COMPLETIONS, "fake"),
        ("fake", "openai-responses", "fake"),
        ("my-gateway", "anthropic-messages", "my-gateway"),
        ("openai", COMPLETIONS, "openai"),
        ("anthropic", "anthropic-messages", "anthropic"),
        ("azure", "openai-responses", "azure.ai.openai"),
        ("bedrock", "anthropic-messages", "aws.bedrock"),
        ("mistral", COMPLETIONS, "mistral_ai"),
        ("xai", COMPLETIONS, "x_ai"),
    ],
)
async def test_provider_name_follows_the_genai_conventions(
    make_agent, fake_server, exporter, provider: str, api_kind: str, expected: str
) -> None:
    """``gen_ai.provider.name`` is the provider, not the wire: the conventions' well-known value
    for a well-known provider, and a custom provider's own name."""
    fake_server.enqueue([Text("hi")])
    agent = await make_agent(api_kind, provider=provider, tracing=provider_for(exporter))
    await collect(agent, "hello")
    (chat,) = by_name(exporter.get_finished_spans(), "chat ")
    assert dict(chat.attributes)["gen_ai.provider.name"] == expected


async def test_prompts_are_recorded_with_content_capture(make_agent, fake_server, exporter) -> None:
    """With ``capture_content=True`` each chat span carries the conversation it sent
    (``gen_ai.input.messages``, the conventions' JSON: role + parts) and the system prompt
    (``gen_ai.system_instructions``); ``invoke_agent`` carries the run's input and output; the
    finish reason is the provider's own (``tool_calls`` on the Chat Completions wire)."""
    import json

    fake_server.enqueue(
        [ToolCall("ls", {"path": "."}, id="c1"), Usage(input=100, output=10)],
        [Text("two files"), Usage(input=150, output=20)],
    )
    tracing = AgentTracing(provider=provider_for(exporter), capture_content=True)
    agent = await make_agent(COMPLETIONS, tracing=tracing, system_prompt="You are a terse assistant.")
    assert final(await collect(agent, "list the files")).status == "completed"
    spans = exporter.get_finished_spans()
    first, second = by_name(spans, "chat ")
    assert dict(first.attributes)["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert dict(second.attributes)["gen_ai.response.finish_reasons"] == ("stop",)
    system = json.loads(dict(first.attributes)["gen_ai.system_instructions"])
    assert system[0]["type"] == "text" and "You are a terse assistant." in system[0]["content"]
    sent = json.loads(dict(first.attributes)["gen_ai.input.messages"])
    assert sent == [{"role": "user", "parts": [{"type": "text", "content": "list the files"}]}]
    history = json.loads(dict(second.attributes)["gen_ai.input.messages"])
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    (call,) = history[1]["parts"]
    assert call["type"] == "tool_call" and call["name"] == "ls" and call["arguments"] == {"path": "."}
    (result,) = history[2]["parts"]
    assert result["type"] == "tool_call_response" and result["id"] == call["id"] and "README.md" in result["response"]
    (run,) = by_name(spans, "invoke_agent")
    run_input = json.loads(dict(run.attributes)["gen_ai.input.messages"])
    assert run_input == [{"role": "user", "parts": [{"type": "text", "content": "list the files"}]}]
    run_output = json.loads(dict(run.attributes)["gen_ai.output.messages"])
    assert run_output[0]["role"] == "assistant" and run_output[0]["parts"][0]["content"] == "two files"


async def test_prompts_are_not_recorded_by_default(make_agent, fake_server, exporter) -> None:
    fake_server.enqueue([Text("the answer")])
    agent = await make_agent(COMPLETIONS, tracing=provider_for(exporter), system_prompt="secret instructions")
    await collect(agent, "a private question")
    for span in exporter.get_finished_spans():
        attributes = dict(span.attributes)
        assert not {"gen_ai.input.messages", "gen_ai.system_instructions", "gen_ai.output.messages"} & set(attributes)
        assert "a private question" not in str(attributes) and "secret instructions" not in str(attributes)
