"""``STUDIO_OTLP_ENDPOINT``: every runtime Studio opens exports its OpenTelemetry GenAI spans over
OTLP/HTTP, through one tracer provider (one batch processor) per process, flushed when the host
closes (issue 16; README "Tracing").

A real session host with the default runtime factory, a registered model on the scripted fake
provider server (with an API key), and a real OTLP/HTTP receiver the test serves on 127.0.0.1.
The batch processor's schedule delay is set to a minute, so spans can only arrive by the flush
the host's ``close()`` performs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Stop, Text, Usage
from studio import runtime_options
from studio.host.session_host import SessionHost, set_session_host

pytestmark = pytest.mark.django_db(transaction=True)

MODEL_KEY = "sk-model-secret-0123456789"
OTLP_TOKEN = "otlp-secret-token-987"
PROMPT_MARKER = "PROMPT-MARKER-17"
ANSWER_MARKER = "ANSWER-MARKER-42"


@dataclass
class Received:
    bodies: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[tuple[str, Received]]:
    """An OTLP/HTTP receiver on loopback: records each export request and answers 200."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            received.bodies.append(self.rfile.read(length))
            received.headers.append({k.lower(): v for k, v in self.headers.items()})
            received.paths.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        thread.join()


@pytest.fixture
def model_server() -> Iterator[FakeProviderServer]:
    def answer(_request: Any) -> list[Any]:
        return [Text(f"{ANSWER_MARKER} here you go"), Usage(input=20, output=5), Stop("stop")]

    server = FakeProviderServer(responder=answer).start_in_thread()
    try:
        yield server
    finally:
        server.stop_in_thread()


@pytest.fixture
def keyed_model(db: Any, model_server: FakeProviderServer) -> Any:
    from studio.models import RegisteredModel

    return RegisteredModel.objects.create(
        name="Keyed (OTLP test)",
        provider="custom",
        model_id="scripted-otlp",
        base_url=model_server.base_url,
        api_kind="openai-completions",
        api_key=MODEL_KEY,
    )


def _spans(bodies: list[bytes]) -> list[tuple[str, dict[str, Any], str]]:
    """(span name, attributes, service.name) of every exported span."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out = []
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            service = next(a.value.string_value for a in resource.resource.attributes if a.key == "service.name")
            for scope in resource.scope_spans:
                for span in scope.spans:
                    attributes = {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}
                    out.append((span.name, attributes, service))
    return out


async def _run_turns(make_session: Any, user: Any, keyed_model: Any, count: int) -> SessionHost:
    host = SessionHost(flush_interval=0.01)
    set_session_host(host)
    for n in range(count):
        session = await sync_to_async(make_session)(user, registered_model=keyed_model)
        await host.prompt(str(session.pk), prompt=f"{PROMPT_MARKER} turn {n}", agent="build")
        await host.wait_idle(str(session.pk))
    return host


async def test_a_studio_turn_exports_its_spans_through_one_batch_provider_flushed_on_close(
    settings: Any, monkeypatch: pytest.MonkeyPatch, receiver: tuple[str, Received], user: Any, make_session: Any,
    keyed_model: Any,
) -> None:  # fmt: skip
    """Two sessions of one host share the process's provider; nothing is sent before the host
    closes (the batch waits), everything after; the OTLP headers reach the receiver; neither the
    model's API key, nor the prompt, nor the answer is in any exported byte."""
    endpoint, received = receiver
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
    settings.STUDIO_OTLP_ENDPOINT = endpoint
    settings.STUDIO_OTLP_HEADERS = f"Authorization=Bearer%20{OTLP_TOKEN}"
    settings.STUDIO_OTLP_SERVICE_NAME = "studio-under-test"
    first = runtime_options.runtime_options()["tracing"]
    assert first.provider is runtime_options.runtime_options()["tracing"].provider, "one provider per process"
    assert first.capture_content is False

    host = await _run_turns(make_session, user, keyed_model, 2)
    try:
        assert received.bodies == [], "the batch processor waits (its delay is a minute)"
    finally:
        await host.close()
        set_session_host(None)

    spans = _spans(received.bodies)
    names = [name for name, _, _ in spans]
    assert names.count("invoke_agent agentcore") == 2 and names.count("chat scripted-otlp") == 2
    requests = {attrs["agentcore.request_id"] for name, attrs, _ in spans if name.startswith("invoke_agent")}
    assert len(requests) == 2, "both sessions' runs went through the one provider"
    assert {service for _, _, service in spans} == {"studio-under-test"}
    chat = next(attrs for name, attrs, _ in spans if name.startswith("chat"))
    assert chat["gen_ai.usage.input_tokens"] == 20 and chat["gen_ai.usage.output_tokens"] == 5
    assert set(received.paths) == {"/v1/traces"}
    assert {h.get("authorization") for h in received.headers} == {f"Bearer {OTLP_TOKEN}"}
    exported = b"".join(received.bodies)
    for secret in (MODEL_KEY, PROMPT_MARKER, ANSWER_MARKER, OTLP_TOKEN):
        assert secret.encode() not in exported, secret
    # After the host closed, a new runtime gets a new provider (the old one is shut down).
    assert runtime_options.runtime_options()["tracing"].provider is not first.provider
    runtime_options.close_tracing()


async def test_content_is_exported_only_with_capture_content_and_keys_never(
    settings: Any, receiver: tuple[str, Received], user: Any, make_session: Any, keyed_model: Any
) -> None:
    """``STUDIO_OTLP_CAPTURE_CONTENT``: the answer appears (``gen_ai.output.messages``); the API
    key still does not."""
    endpoint, received = receiver
    settings.STUDIO_OTLP_ENDPOINT = endpoint + "/v1/traces"
    settings.STUDIO_OTLP_CAPTURE_CONTENT = True
    host = await _run_turns(make_session, user, keyed_model, 1)
    await host.close()
    set_session_host(None)
    exported = b"".join(received.bodies)
    assert ANSWER_MARKER.encode() in exported
    assert MODEL_KEY.encode() not in exported
    assert set(received.paths) == {"/v1/traces"}, "a full traces URL is used as it is"


async def test_without_an_endpoint_runtimes_get_no_tracer(settings: Any) -> None:
    settings.STUDIO_OTLP_ENDPOINT = ""
    assert runtime_options.runtime_options() == {}
