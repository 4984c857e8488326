"""Arize Phoenix (20.26) as the OpenTelemetry consumer of agentcore's traces (issue 23).

A real ``phoenix serve`` on loopback (its own virtual environment, installed by ``dev.py test``)
receives the spans over OTLP/HTTP. Phoenix files spans by trace id, so a trace id reused by a
second run hides that run: two in-memory runtimes run the *same* request id here, and each run
must come back from Phoenix's REST API as its own trace, classified AGENT / LLM / TOOL, with
the prompt (content capture on), the model, the tokens and the tool call.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentcore import AgentInput, create_agent
from agentcore.testing.steps import Text, ToolCall, Usage
from agentcore.tracing import AgentTracing
from tests.interop.tools import free_port, program, serving

SPANS_PER_RUN = 4  # invoke_agent, chat (tool call), execute_tool, chat (answer)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = dict(
        os.environ,
        PHOENIX_WORKING_DIR=str(root / "data"),
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(free_port()),
        PHOENIX_TELEMETRY_ENABLED="false",
    )
    base = f"http://127.0.0.1:{port}"
    command = [str(program("phoenix", "phoenix")), "serve"]
    with serving(command, what="Phoenix", health_url=f"{base}/healthz", root=root, env=env):
        yield base


def phoenix_spans(base: str, project: str = "default") -> list[dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"{base}/v1/projects/{project}/spans?limit=1000", timeout=10) as response:
            return list(json.load(response)["data"])
    except urllib.error.HTTPError as exc:
        if exc.code == 404:  # the project exists once its first span is stored
            return []
        raise


def until_spans(base: str, count: int, project: str = "default") -> list[dict[str, Any]]:
    """Phoenix ingests asynchronously: read its API until ``count`` spans are stored (bounded)."""
    waiter = threading.Event()
    for _ in range(300):
        spans = phoenix_spans(base, project)
        if len(spans) >= count:
            return spans
        waiter.wait(0.1)  # a pause between reads of the real condition, bounded by the loop
    raise AssertionError(f"Phoenix stored {len(spans)} spans, expected {count}")


async def test_each_run_is_its_own_trace_with_prompts_model_tokens_and_tools(
    phoenix: str, fake_server: Any, tmp_path: Path
) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "agentcore-interop"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces", timeout=10)))
    (tmp_path / "README.md").write_text("# demo\n")
    for run in ("first", "second"):
        fake_server.enqueue(
            [ToolCall("ls", {"path": "."}), Usage(input=100, output=10)],
            [Text(f"the {run} answer"), Usage(input=150, output=20)],
        )
        agent = await create_agent(
            provider="fake",
            model="fake-model",
            base_url=fake_server.base_url,
            api_key="k",
            api_kind="openai-completions",
            workdir=str(tmp_path),
            system_prompt="Answer briefly.",
            tracing=AgentTracing(provider=provider, capture_content=True),
        )
        try:
            events = [e async for e in agent.run(AgentInput(prompt=f"list the files ({run})", request_id="same-id"))]
        finally:
            await agent.close()
        assert events[-1].status == "completed"
    provider.shutdown()

    spans = until_spans(phoenix, 2 * SPANS_PER_RUN)
    traces: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        traces.setdefault(span["context"]["trace_id"], []).append(span)
    assert len(traces) == 2, "the same request id in two runtimes: two traces"
    for run, trace in zip(
        ("first", "second"), sorted(traces.values(), key=lambda t: min(s["start_time"] for s in t)), strict=True
    ):
        kinds = sorted(span["span_kind"] for span in trace)
        assert kinds == ["AGENT", "LLM", "LLM", "TOOL"], kinds
        (agent_span,) = [s for s in trace if s["span_kind"] == "AGENT"]
        assert all(s["parent_id"] == agent_span["context"]["span_id"] for s in trace if s is not agent_span)
        llm = sorted((s for s in trace if s["span_kind"] == "LLM"), key=lambda s: s["start_time"])
        first = llm[0]["attributes"]
        assert first["llm.model_name"] == "fake-model" and first["llm.system"] == "fake"
        assert (first["llm.token_count.prompt"], first["llm.token_count.completion"]) == (100, 10)
        assert first["llm.input_messages.0.message.role"] == "system"
        assert "Answer briefly." in first["llm.input_messages.0.message.content"]
        assert first["llm.input_messages.1.message.content"] == f"list the files ({run})", "the prompt is shown"
        assert llm[1]["attributes"]["llm.token_count.prompt"] == 150
        tool_names = [v for k, v in llm[1]["attributes"].items() if k.endswith("tool_call.function.name")]
        assert tool_names == ["ls"], "the tool call is part of the second request's history"
        (tool,) = [s for s in trace if s["span_kind"] == "TOOL"]
        assert tool["attributes"]["tool.name"] == "ls" and "README.md" in tool["attributes"]["output.value"]
        assert agent_span["attributes"]["llm.output_messages.0.message.content"] == f"the {run} answer"


async def test_an_exported_store_trace_imports_with_its_tree_kinds_and_tokens(
    phoenix: str, fake_server: Any, tmp_path: Path
) -> None:
    """W11 (issue 26): a store's trace exported as OTLP/JSON (``agentcore.trace.otlp_document``),
    turned into the protobuf request an OTLP/JSON receiver makes of it (Phoenix takes only
    protobuf), is accepted: every span stored, one trace, every parent present, classified
    AGENT / LLM / TOOL, with the tokens Phoenix reads from the GenAI usage attributes."""
    from agentcore import build_trace, otlp_document
    from agentcore.testing.steps import HttpError
    from tests.agentcore.test_trace_export import parsed

    db = tmp_path / "exported.sqlite"
    fake_server.enqueue(
        [ToolCall("ls", {"path": "."}, id="c1"), Usage(input=100, output=10, cached_input=40)],
        [HttpError(503, "busy")],
        [ToolCall("codemode", {"code": "await tools.ls({}); return 2"}, id="k1")],
        [Text("done"), Usage(input=120, output=4)],
    )
    agent = await create_agent(
        provider="fake",
        model="fake-model",
        base_url=fake_server.base_url,
        api_key="k",
        api_kind="openai-completions",
        database_path=str(db),
        workdir=str(tmp_path),
        session={"code_mode": {}},
        tracing=False,
        sleep=_no_sleep,
    )
    try:
        [e async for e in agent.run(AgentInput(prompt="go", request_id="exported"))]
    finally:
        await agent.close()
    project = "agentcore-trace-export"
    document = otlp_document(build_trace(db), resource_attributes={"openinference.project.name": project})
    exported = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    async with httpx.AsyncClient(timeout=10) as client:
        body = parsed(document).SerializeToString()
        headers = {"Content-Type": "application/x-protobuf"}
        posted = await client.post(f"{phoenix}/v1/traces", content=body, headers=headers)
    assert posted.status_code == 200, posted.text
    spans = until_spans(phoenix, len(exported), project=project)
    assert len(spans) == len(exported) == 9
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    ids = {s["context"]["span_id"] for s in spans}
    assert all(s["parent_id"] in ids for s in spans if s["parent_id"])
    kinds = {s["name"]: s["span_kind"] for s in spans}
    assert (kinds["invoke_agent agentcore"], kinds["chat fake-model"], kinds["execute_tool ls"]) == (
        "AGENT",
        "LLM",
        "TOOL",
    )
    first = min((s for s in spans if s["name"] == "chat fake-model"), key=lambda s: s["start_time"])
    assert (first["attributes"]["llm.token_count.prompt"], first["attributes"]["llm.token_count.completion"]) == (
        140,
        10,
    )


async def _no_sleep(seconds: float) -> None:
    return None
