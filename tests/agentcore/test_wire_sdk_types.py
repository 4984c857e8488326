"""The wire as the official SDKs define it (SPEC P1, T5): every event the fake provider server
emits validates against the ``openai`` / ``anthropic`` SDKs' own event models, and every
request body agentcore sends validates against their param types.

Gateways (LiteLLM) validate upstream events with these very models, so an event that does not
validate is one a gateway rejects mid-stream. The SDKs are test dependencies only; the events
are read with plain httpx and validated with pydantic's ``TypeAdapter(...).validate_python``.
The gateway-shaped frames the fake server can also send on purpose (``StreamError(gateway=True)``,
``NoTerminal(done_marker=True)``, the Chat Completions ``data: {"error": ...}`` object) are not
protocol events and are checked to be exactly that shape instead; vLLM's ``finish_reason:
"abort"`` (``Aborted`` on Chat Completions) is the one value outside the SDK's literal.
"""

from __future__ import annotations

import json
import typing
from typing import Any

import anthropic.types as anthropic_types
import httpx
import openai.types.responses as responses_types
import pytest
from anthropic.types.message_create_params import MessageCreateParamsStreaming
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsStreaming
from pydantic import TypeAdapter

from agentcore.messages import (
    AssistantMessage,
    ImageContent,
    NativeContent,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    user_text,
)
from agentcore.messages import ToolCall as ToolCallBlock
from agentcore.providers.anthropic_messages import AnthropicMessagesProvider
from agentcore.providers.openai_completions import OpenAICompletionsProvider
from agentcore.providers.openai_responses import OpenAIResponsesProvider
from agentcore.providers.sse import SSEDecoder
from agentcore.testing import (
    Aborted,
    FakeProviderServer,
    GatewayCut,
    HttpError,
    NoTerminal,
    Step,
    Stop,
    StreamError,
    Text,
    Thinking,
    ToolCall,
    Usage,
    WebSearch,
)
from tests.agentcore.provider_fixtures import PNG_1PX, READ_TOOL, make_model, make_request


def by_type(union: Any) -> dict[str, TypeAdapter[Any]]:
    """The members of an SDK event union keyed by their ``type`` literal: validating against the
    one member an event names gives an error that says what is wrong with it."""
    members = typing.get_args(typing.get_args(union)[0]) if typing.get_origin(union) is typing.Annotated else ()
    members = members or typing.get_args(union)
    return {typing.get_args(m.model_fields["type"].annotation)[0]: TypeAdapter(m) for m in members}


RESPONSES_EVENTS = by_type(responses_types.ResponseStreamEvent)
ANTHROPIC_EVENTS = by_type(anthropic_types.RawMessageStreamEvent)
ANTHROPIC_ERROR = TypeAdapter(anthropic_types.ErrorResponse)
CHAT_CHUNK = TypeAdapter(ChatCompletionChunk)

PATHS = {"openai-responses": "/responses", "anthropic-messages": "/messages", "openai-completions": "/chat/completions"}

SCRIPTS: dict[str, list[Step]] = {
    "text, reasoning, tool call, usage": [
        Thinking("Let me think about it."),
        Text("Reading the file now."),
        ToolCall("read", {"path": "a.txt"}),
        Usage(input=120, output=30, cached_input=40, cache_creation=8, reasoning=12),
    ],
    "two tool calls": [ToolCall("read", {"path": "a"}), ToolCall("ls", {"path": "."})],
    "web search with citations": [
        WebSearch(
            "python asyncio", sources=[{"url": "https://docs.python.org/3/library/asyncio.html", "title": "asyncio"}]
        ),
        Text("asyncio is the standard library's event loop."),
    ],
    "failed web search": [WebSearch("anything", error="too_many_requests"), Text("I could not search.")],
    "redacted thinking": [Thinking("", signature="opaque", redacted=True), Text("ok")],
    "reasoning field of local servers": [Thinking("hmm", completions_field="reasoning"), Text("done")],
    "length stop": [Text("a long answer that was cut"), Stop("length")],
    "pause turn": [Text("still searching"), Stop("pause_turn")],
    "provider aborted": [Text("partial"), Aborted()],
    "in-stream error": [Text("partial"), StreamError("The server had an error.")],
    "error after content": [Text("partial"), HttpError(503, "overloaded")],
    "output only in the terminal response": [
        Thinking("planned", streamed=False),
        Text("streamed text"),
        Text("terminal-only text", streamed=False),
        ToolCall("read", {"path": "b"}, streamed=False),
    ],
    "missing terminal event": [Text("cut"), NoTerminal()],
    "gateway cut": [GatewayCut()],
}


async def stream_events(server: FakeProviderServer, api_kind: str, steps: list[Step]) -> list[tuple[str, Any]]:
    """(SSE event name, decoded data) of one scripted response, read with plain httpx."""
    server.enqueue(steps)
    body: dict[str, Any] = {"model": "fake-model", "stream": True, "messages": [], "input": []}
    if api_kind == "openai-completions":
        body["stream_options"] = {"include_usage": True}
    decoder = SSEDecoder()
    events: list[tuple[str, Any]] = []
    async with httpx.AsyncClient() as client:
        async with client.stream("POST", server.base_url + PATHS[api_kind], json=body) as response:
            assert response.status_code == 200
            async for chunk in response.aiter_raw():
                for sse in decoder.feed(chunk):
                    events.append((sse.event, sse.data if sse.data == "[DONE]" else json.loads(sse.data)))
    return events


def validate(api_kind: str, event: str, data: Any) -> None:
    """One protocol event against the SDK's model for it."""
    if api_kind == "openai-responses":
        assert event == data["type"], "the event line names the type"
        RESPONSES_EVENTS[data["type"]].validate_python(data)
    elif api_kind == "anthropic-messages":
        assert event == data["type"], "the event line names the type"
        if event == "ping":
            assert data == {"type": "ping"}
        elif event == "error":
            ANTHROPIC_ERROR.validate_python(data)
        else:
            ANTHROPIC_EVENTS[data["type"]].validate_python(data)
    elif data == "[DONE]":
        pass
    elif "error" in data:  # Chat Completions has no error event: OpenAI sends the bare error object
        assert set(data) == {"error"} and data["error"]["message"]
    elif data["choices"] and data["choices"][0]["finish_reason"] == "abort":
        # vLLM's abort: the only finish reason the SDK's literal does not list; the rest must validate
        CHAT_CHUNK.validate_python({**data, "choices": [{**data["choices"][0], "finish_reason": None}]})
    else:
        CHAT_CHUNK.validate_python(data)


@pytest.mark.parametrize("api_kind", list(PATHS))
@pytest.mark.parametrize("script", list(SCRIPTS))
async def test_every_event_the_fake_server_emits_validates_against_the_sdk(
    fake_server, api_kind: str, script: str
) -> None:
    """T5 / P1: openai 3.57 ``ResponseStreamEvent`` and ``ChatCompletionChunk``, anthropic 2.15
    ``RawMessageStreamEvent`` (plus its ``ErrorResponse`` and the ``ping`` keep-alive)."""
    events = await stream_events(fake_server, api_kind, SCRIPTS[script])
    assert events, "the script produced events"
    for event, data in events:
        validate(api_kind, event, data)


@pytest.mark.parametrize("api_kind", list(PATHS))
async def test_gateway_shaped_frames_are_the_gateway_shape(fake_server, api_kind: str) -> None:
    """The frames that imitate LiteLLM are exactly its shape: a bare error object with a numeric
    code and no ``type`` (no ``event:`` line), and ``data: [DONE]`` on every wire."""
    events = await stream_events(
        fake_server, api_kind, [Text("partial"), StreamError("upstream overloaded", code="503", gateway=True)]
    )
    assert events[-1] == (
        "message",
        {"error": {"message": "upstream overloaded", "type": None, "param": None, "code": "503"}},
    )
    for event, data in events[:-1]:
        validate(api_kind, event, data)
    cut = await stream_events(fake_server, api_kind, [Text("partial"), NoTerminal(done_marker=True)])
    assert cut[-1] == ("message", "[DONE]")


# --- request bodies -------------------------------------------------------------------------


def _keys(typed_dict: Any) -> set[str]:
    return set(typing.get_type_hints(typed_dict))


def _history(api_kind: str) -> list[Any]:
    """A history with every kind of block each adapter sends: text, images, thinking with a
    signature, tool calls and results (with an image and an error), native search content."""
    image = ImageContent(PNG_1PX, "image/png")
    if api_kind == "openai-responses":
        reasoning = {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "thought"}],
            "encrypted_content": "opaque",
            "content": None,
            "status": None,
        }
        signature = json.dumps(reasoning)
        native = NativeContent(
            api_kind,
            "fake-model",
            {
                "id": "ws_1",
                "type": "web_search_call",
                "status": "completed",
                "action": {"type": "search", "query": "q"},
            },
        )
    else:
        signature = "sig-1"
        native = NativeContent(
            api_kind,
            "fake-model",
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
        )
    assistant = AssistantMessage(
        [
            ThinkingContent("thought", signature),
            native,
            TextContent("Let me read both."),
            ToolCallBlock("call_1|fc_1", "read", {"path": "a"}),
            ToolCallBlock("call_2|fc_2", "read", {"path": "b"}),
        ],
        api_kind=api_kind,
        provider="fake",
        model="fake-model",
        stop_reason="tool_use",
    )
    if api_kind == "anthropic-messages":
        assistant.content.remove(native)  # a server tool use needs its result block; covered by the web-search test
    return [
        user_text("look at this", [image]),
        assistant,
        ToolResultMessage("call_1|fc_1", "read", [TextContent("contents of a")]),
        ToolResultMessage("call_2|fc_2", "read", [TextContent("no such file")], is_error=True),
        ToolResultMessage("call_3", "read", [image]),
        user_text("and now?"),
    ]


ADAPTERS = {
    "openai-responses": (OpenAIResponsesProvider, ResponseCreateParamsStreaming),
    "anthropic-messages": (AnthropicMessagesProvider, MessageCreateParamsStreaming),
    "openai-completions": (OpenAICompletionsProvider, CompletionCreateParamsStreaming),
}


@pytest.mark.parametrize("api_kind", list(ADAPTERS))
@pytest.mark.parametrize("effort", [None, "high"])
@pytest.mark.parametrize("web_search", [False, True])
async def test_request_bodies_validate_against_the_sdk_params(
    api_kind: str, effort: str | None, web_search: bool
) -> None:
    """P1, M5, P2: the body agentcore sends (as encoded on the wire) is a valid
    ``ResponseCreateParamsStreaming`` / ``MessageCreateParamsStreaming`` /
    ``CompletionCreateParamsStreaming``, and names no parameter the SDK does not know."""
    if web_search and api_kind == "openai-completions":
        web_search = False  # no native search on Chat Completions (P2)
    adapter_cls, params = ADAPTERS[api_kind]
    adapter = adapter_cls()
    model = make_model(api_kind, "http://127.0.0.1:1/v1")
    request = make_request(model, _history(api_kind), tools=[READ_TOOL], effort=effort, web_search=web_search)
    body = json.loads(adapter.encode_body(request))
    assert set(body) <= _keys(params), f"unknown parameters {set(body) - _keys(params)}"
    TypeAdapter(params).validate_python(body)


def test_replayed_reasoning_is_exactly_what_the_reasoning_item_param_accepts() -> None:
    """A reasoning item received with ``content: null, status: null`` (as the service sends it)
    is replayed without the null keys: ``ResponseReasoningItemParam`` refuses them."""
    adapter = OpenAIResponsesProvider()
    model = make_model("openai-responses", "http://127.0.0.1:1/v1")
    body = json.loads(adapter.encode_body(make_request(model, _history("openai-responses"))))
    (reasoning,) = [item for item in body["input"] if item.get("type") == "reasoning"]
    assert reasoning == {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "thought"}],
        "encrypted_content": "opaque",
    }
    TypeAdapter(responses_types.ResponseReasoningItemParam).validate_python(reasoning)
