"""OpenAI Responses adapter against the fake server's real SSE framing (SPEC P1, P2, M5, L8, T5)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from agentcore.messages import (
    AssistantMessage,
    ImageContent,
    NativeContent,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
    user_text,
)
from agentcore.messages import (
    ToolCall as ToolCallBlock,
)
from agentcore.providers.base import ProviderRequest, StreamEvent, TextDelta
from agentcore.providers.openai_responses import OpenAIResponsesProvider
from agentcore.providers.shared import RAW_ARGUMENTS_KEY
from agentcore.testing import (
    Aborted,
    Disconnect,
    FakeProviderServer,
    Hang,
    HttpError,
    NoTerminal,
    Overflow,
    Stop,
    StreamError,
    Text,
    Thinking,
    ToolCall,
    Usage,
    WebSearch,
)
from tests.agentcore.provider_fixtures import (
    PNG_1PX,
    PRICES,
    READ_TOOL,
    Collected,
    collect,
    image_message,
    make_model,
    make_request,
)

API = "openai-responses"


@pytest.fixture
async def provider() -> AsyncIterator[OpenAIResponsesProvider]:
    adapter = OpenAIResponsesProvider()
    yield adapter
    await adapter.aclose()


def request_for(server: FakeProviderServer, **kwargs: object) -> ProviderRequest:
    model_kwargs = {k: kwargs.pop(k) for k in ("reasoning", "images", "thinking_level_map", "model_id") if k in kwargs}
    model = make_model(API, server.base_url, **model_kwargs)  # type: ignore[arg-type]
    return make_request(model, **kwargs)  # type: ignore[arg-type]


async def test_plain_text_streams_deltas_and_sends_instructions(fake_server, provider) -> None:
    """P1: text arrives as deltas; system prompt goes in ``instructions``; stateless request."""
    fake_server.enqueue([Text("Hello there, friend.", chunk_size=5)])
    out = await collect(provider, request_for(fake_server))
    assert out.text == "Hello there, friend."
    assert len([e for e in out.events if isinstance(e, TextDelta)]) == 4
    assert [s.kind for s in out.starts] == ["text"]
    end = out.end
    assert end.failure is None and end.message.stop_reason == "stop"
    assert end.message.text == "Hello there, friend."
    assert (end.message.api_kind, end.message.model, end.message.provider) == (API, "fake-model", "fake")
    sent = fake_server.requests[0]
    assert sent.path == "/v1/responses" and sent.headers["authorization"] == "Bearer test-key"
    body = sent.json
    assert body["instructions"] == "You are terse."
    assert body["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "hello"}]}]
    assert body["stream"] is True and body["store"] is False
    assert body["max_output_tokens"] == 32_000
    assert body["prompt_cache_key"] == "session-1"


async def test_reasoning_summary_is_thinking_and_replays_only_to_same_model(fake_server, provider) -> None:
    """P1: summary deltas → thinking; the encrypted reasoning item is the signature, replayed
    to the same model only."""
    fake_server.enqueue(
        [Thinking("Consider the options.", signature="enc-123"), Text("Done.")], [Text("a")], [Text("b")]
    )
    first = await collect(provider, request_for(fake_server, effort="high"))
    assert first.thinking == "Consider the options."
    thinking = first.end.message.content[0]
    assert isinstance(thinking, ThinkingContent)
    item = json.loads(thinking.signature or "")
    assert item["type"] == "reasoning" and item["encrypted_content"] == "enc-123"

    history = [user_text("hello"), first.end.message, user_text("again")]
    await collect(provider, _with(fake_server, history))
    replayed = fake_server.requests[1].json["input"]
    assert replayed[1]["type"] == "reasoning" and replayed[1]["encrypted_content"] == "enc-123"
    assert replayed[2] == {"role": "assistant", "content": "Done."}

    await collect(provider, _with(fake_server, history, model_id="other-model"))
    assert all(item.get("type") != "reasoning" for item in fake_server.requests[2].json["input"])


def _with(server: FakeProviderServer, messages: list, **model_kwargs: object) -> ProviderRequest:
    model = make_model(API, server.base_url, **model_kwargs)  # type: ignore[arg-type]
    return make_request(model, messages)


async def test_one_tool_call_streams_arguments_then_parses_them(fake_server, provider) -> None:
    """P1: arguments arrive in several deltas and end as a parsed dict; stop is tool_use."""
    fake_server.enqueue([Text("Reading."), ToolCall("read", {"path": "a.txt"}, id="call_1", argument_chunks=3)])
    out = await collect(provider, request_for(fake_server, tools=[READ_TOOL]))
    assert len(out.tool_deltas) == 3
    [end] = out.tool_ends
    assert end.tool_call.name == "read" and end.tool_call.arguments == {"path": "a.txt"}
    assert end.tool_call.id.startswith("call_1|fc_")
    assert out.end.message.stop_reason == "tool_use"
    assert out.end.message.tool_calls == [end.tool_call]
    tools = fake_server.requests[0].json["tools"]
    assert tools == [
        {
            "type": "function",
            "name": "read",
            "description": "Read a file",
            "parameters": READ_TOOL.parameters,
            "strict": False,
        }
    ]


async def test_tool_call_and_result_replay_with_call_id(fake_server, provider) -> None:
    """P1: the next request carries function_call + function_call_output with the same call_id."""
    fake_server.enqueue([ToolCall("read", {"path": "a.txt"}, id="call_9")], [Text("ok")])
    first = await collect(provider, request_for(fake_server, tools=[READ_TOOL]))
    call = first.end.message.tool_calls[0]
    result = ToolResultMessage(call.id, "read", [TextContent("file body")])
    await collect(provider, _with(fake_server, [user_text("hello"), first.end.message, result]))
    items = fake_server.requests[1].json["input"]
    assert items[1]["type"] == "function_call" and items[1]["call_id"] == "call_9"
    assert json.loads(items[1]["arguments"]) == {"path": "a.txt"}
    assert items[2] == {"type": "function_call_output", "call_id": "call_9", "output": "file body"}


async def test_two_parallel_tool_calls(fake_server, provider) -> None:
    """P1: two calls in one response both complete, in order."""
    fake_server.enqueue([ToolCall("read", {"path": "a"}), ToolCall("read", {"path": "b"})])
    out = await collect(provider, request_for(fake_server, tools=[READ_TOOL]))
    assert [e.tool_call.arguments["path"] for e in out.tool_ends] == ["a", "b"]
    assert len({e.tool_call.id for e in out.tool_ends}) == 2
    assert out.end.message.stop_reason == "tool_use"


async def test_invalid_tool_arguments_are_kept_raw(fake_server, provider) -> None:
    """P1: malformed JSON does not crash the stream; the engine gets the raw text."""
    fake_server.enqueue([ToolCall("read", raw_arguments='{"path": "a.t')])
    out = await collect(provider, request_for(fake_server, tools=[READ_TOOL]))
    assert out.end.failure is None
    assert out.end.message.tool_calls[0].arguments == {RAW_ARGUMENTS_KEY: '{"path": "a.t'}


async def test_image_input_and_image_tool_result(fake_server, provider) -> None:
    """P1: user images become input_image data URLs; tool-result images stay in the output."""
    fake_server.enqueue([Text("a pixel")], [Text("ok")])
    await collect(provider, _with(fake_server, [image_message()]))
    parts = fake_server.requests[0].json["input"][0]["content"]
    assert parts[1] == {"type": "input_image", "image_url": f"data:image/png;base64,{PNG_1PX}", "detail": "auto"}

    call = ToolCallBlock("call_1|fc_1", "screenshot", {})
    assistant = AssistantMessage([call], api_kind=API, model="fake-model")
    result = ToolResultMessage("call_1|fc_1", "screenshot", [TextContent("see"), ImageContent(PNG_1PX, "image/png")])
    await collect(provider, _with(fake_server, [user_text("shoot"), assistant, result]))
    output = fake_server.requests[1].json["input"][2]["output"]
    assert output[0] == {"type": "input_text", "text": "see"} and output[1]["type"] == "input_image"


async def test_images_are_replaced_for_text_only_models(fake_server, provider) -> None:
    fake_server.enqueue([Text("ok")])
    await collect(provider, _with(fake_server, [image_message()], images=False))
    assert "input_image" not in json.dumps(fake_server.requests[0].json)


async def test_usage_with_cached_and_reasoning_tokens_is_priced(fake_server, provider) -> None:
    """P1: OpenAI counts cached tokens inside input_tokens; we report them apart and price each."""
    fake_server.enqueue([Text("x"), Usage(input=1000, output=200, cached_input=4000, reasoning=50)])
    out = await collect(provider, request_for(fake_server))
    usage = out.end.message.usage
    assert usage is not None and out.end.usage is usage
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens, usage.reasoning_tokens) == (
        1000,
        4000,
        200,
        50,
    )
    assert usage.cost.input == pytest.approx(1000 * PRICES.input / 1e6)
    assert usage.cost.cache_read == pytest.approx(4000 * PRICES.cache_read / 1e6)
    assert usage.cost.output == pytest.approx(200 * PRICES.output / 1e6)


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([Text("done")], "stop"),
        ([Text("cut"), Stop("length")], "length"),
        ([ToolCall("read", {"path": "a"})], "tool_use"),
        ([Text("calling"), ToolCall("read", {"path": "a"}, streamed=False)], "tool_use"),
    ],
)
async def test_stop_reasons_are_normalized(fake_server, provider, steps, expected) -> None:
    """P1: completed → stop/tool_use; incomplete(max_output_tokens) → length."""
    fake_server.enqueue(steps)
    out = await collect(provider, request_for(fake_server))
    assert out.end.failure is None and out.end.message.stop_reason == expected


@pytest.mark.parametrize(
    ("steps", "kind", "status", "retry_after"),
    [
        ([Text("partial"), Disconnect()], "connection", None, None),
        ([Disconnect(after_events=0)], "connection", None, None),
        ([Text("partial text here"), Disconnect(after_events=4)], "connection", None, None),
        ([HttpError(429, retry_after=2)], "status", 429, 2.0),
        ([HttpError(503, retry_after_ms=1500)], "status", 503, 1.5),
        ([HttpError(408)], "status", 408, None),
        ([HttpError(409)], "status", 409, None),
        ([HttpError(500)], "status", 500, None),
        ([Text("half"), NoTerminal()], "incomplete", None, None),
        ([Text("half"), Aborted()], "provider_aborted", None, None),
        ([Overflow()], "overflow", 400, None),
        ([HttpError(401, "Incorrect API key provided")], "auth", 401, None),
        ([HttpError(403)], "auth", 403, None),
        ([HttpError(400, "Invalid value for 'tools'")], "bad_request", 400, None),
        ([HttpError(404, "The model does not exist")], "bad_request", 404, None),
        ([HttpError(422)], "bad_request", 422, None),
        ([HttpError(429, "You exceeded your current quota", code="insufficient_quota")], "quota", 429, None),
        ([HttpError(402, "Payment required")], "quota", 402, None),
        ([Text("x"), StreamError("boom", code="server_error")], "status", 500, None),
        (
            [Text("x"), StreamError("Your input exceeds the context window", code="context_length_exceeded")],
            "overflow",
            None,
            None,
        ),
    ],
)
async def test_faults_are_classified(fake_server, provider, steps, kind, status, retry_after) -> None:
    """T5, L2, L7: each fault ends in StreamEnd with the right FailureKind, never an exception."""
    fake_server.enqueue(steps)
    out = await collect(provider, request_for(fake_server))
    failure = out.end.failure
    assert failure is not None and failure.kind == kind, failure
    assert failure.status == status
    assert failure.retry_after == retry_after
    assert out.end.message.stop_reason == "error" and out.end.message.error_message == failure.message


async def test_partial_content_survives_a_disconnect(fake_server, provider) -> None:
    """L3: the message keeps committed text; an unfinished tool call is dropped."""
    fake_server.enqueue(
        [Text("kept text"), ToolCall("read", {"path": "a"}, argument_chunks=4), Disconnect(after_events=11)]
    )
    out = await collect(provider, request_for(fake_server))
    assert out.end.failure is not None and out.end.failure.kind == "connection"
    assert out.end.message.text == "kept text"
    assert out.end.message.tool_calls == []


async def test_cancellation_mid_stream_closes_the_connection(fake_server, provider) -> None:
    """L8: abort while the read is blocked → aborted, cancelled, partial text, socket closed."""
    fake_server.enqueue([Text("partial"), Hang(), Text("never")])
    abort = asyncio.Event()

    async def abort_when_held() -> None:
        await fake_server.until_hanging(1)
        abort.set()

    events: list[StreamEvent] = []
    trigger: asyncio.Task[None] | None = None
    async for event in provider.stream(request_for(fake_server), abort):
        events.append(event)
        if isinstance(event, TextDelta) and trigger is None:
            trigger = asyncio.create_task(abort_when_held())  # fires while the next read is blocked
    assert trigger is not None
    await trigger
    out = Collected(events)
    assert out.end.failure is not None and out.end.failure.kind == "cancelled"
    assert out.end.message.stop_reason == "aborted"
    assert out.end.message.text == "partial"
    assert out.end.message.usage is not None
    await fake_server.until(lambda s: s.requests[0].client_disconnected)


async def test_abort_set_between_events_stops_before_next_read(fake_server, provider) -> None:
    """L8: an abort noticed between events ends the stream without reading further."""
    fake_server.enqueue([Text("one two three four", chunk_size=4)])
    abort = asyncio.Event()
    events = []
    async for event in provider.stream(request_for(fake_server), abort):
        events.append(event)
        if isinstance(event, TextDelta):
            abort.set()
    end = events[-1]
    assert end.failure.kind == "cancelled" and end.message.text == "one "


async def test_abort_before_start_sends_nothing(fake_server, provider) -> None:
    abort = asyncio.Event()
    abort.set()
    out = await collect(provider, request_for(fake_server), abort)
    assert out.end.failure is not None and out.end.failure.kind == "cancelled"
    assert fake_server.requests == []


@pytest.mark.parametrize(
    ("effort", "level_map", "expected"),
    [
        (None, None, None),
        ("minimal", None, "minimal"),
        ("high", None, "high"),
        ("xhigh", None, "xhigh"),
        ("max", None, "xhigh"),
        ("max", {"max": "high"}, "high"),
        ("low", {"low": None}, None),
    ],
)
async def test_effort_mapping(fake_server, provider, effort, level_map, expected) -> None:
    """M5: reasoning.effort (max → xhigh unless mapped), summary auto; nothing when off."""
    fake_server.enqueue([Text("ok")])
    await collect(provider, request_for(fake_server, effort=effort, thinking_level_map=level_map))
    body = fake_server.requests[0].json
    if expected is None:
        assert "reasoning" not in body and "include" not in body
    else:
        assert body["reasoning"] == {"effort": expected, "summary": "auto"}
        assert body["include"] == ["reasoning.encrypted_content"]


async def test_no_reasoning_params_for_non_reasoning_models(fake_server, provider) -> None:
    fake_server.enqueue([Text("ok")])
    await collect(provider, request_for(fake_server, effort="high", reasoning=False))
    assert "reasoning" not in fake_server.requests[0].json


async def test_web_search_tool_events_and_native_replay(fake_server, provider) -> None:
    """P2: web_search tool sent; search call → web_search events + sources; native item kept
    and replayed only to the same model."""
    sources = [{"url": "https://example.com/a", "title": "A"}]
    fake_server.enqueue([WebSearch("python asyncio", sources), Text("Answer.")], [Text("x")], [Text("y")])
    out = await collect(provider, request_for(fake_server, web_search=True))
    assert {"type": "web_search"} in fake_server.requests[0].json["tools"]
    statuses = [s.search["status"] for s in out.searches]
    assert statuses == ["running", "success"]
    assert out.searches[-1].search["query"] == "python asyncio"
    assert out.searches[-1].search["sources"] == [{"url": "https://example.com/a"}]
    assert out.sources[0].sources == [{"url": "https://example.com/a", "title": "A"}]
    native = [b for b in out.end.message.content if isinstance(b, NativeContent)]
    assert native and native[0].payload["type"] == "web_search_call"

    history = [user_text("q"), out.end.message, user_text("more")]
    await collect(provider, _with(fake_server, history))
    assert any(i.get("type") == "web_search_call" for i in fake_server.requests[1].json["input"])
    await collect(provider, _with(fake_server, history, model_id="another"))
    assert not any(i.get("type") == "web_search_call" for i in fake_server.requests[2].json["input"])


async def test_history_conversion_is_cached_per_message(fake_server, provider) -> None:
    """Performance contract: each message is converted once; later requests reuse the dicts."""
    history = [user_text("a"), AssistantMessage([TextContent("b")], api_kind=API, model="fake-model")]
    model = make_model(API, fake_server.base_url)
    first = provider.build_body(make_request(model, history))
    second = provider.build_body(make_request(model, [*history, UserMessage([TextContent("c")])]))
    assert first["input"][0] is second["input"][0]
    assert first["input"][1] is second["input"][1]


async def test_output_only_in_the_terminal_response_is_built_in_output_order(fake_server, provider) -> None:
    """P1 (issue 23): a gateway translating another protocol (LiteLLM in front of Anthropic or a
    vLLM chat upstream) streams the text but puts reasoning, messages and function calls only in
    ``response.completed``'s ``output``. Every item that was not streamed is built, in output
    order, after the streamed ones (whose indices stay as streamed, E2), and none twice."""
    fake_server.enqueue(
        [
            Text("Let me look."),
            Thinking("I should read both files.", signature="enc-1", streamed=False),
            Text("Reading them now.", streamed=False),
            ToolCall("read", {"path": "a"}, id="call_a", streamed=False),
            ToolCall("read", {"path": "b"}, id="call_b", streamed=False),
        ]
    )
    out = await collect(provider, request_for(fake_server))
    message = out.end.message
    assert out.end.failure is None and message.stop_reason == "tool_use"
    kinds = [type(b).__name__ for b in message.content]
    assert kinds == ["TextContent", "ThinkingContent", "TextContent", "ToolCall", "ToolCall"]
    assert [b.text for b in message.content if isinstance(b, TextContent)] == ["Let me look.", "Reading them now."]
    thinking = message.content[1]
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == "I should read both files."
    assert json.loads(thinking.signature or "{}")["encrypted_content"] == "enc-1", "replayable reasoning"
    calls = message.tool_calls
    assert [(c.id.split("|")[0], c.arguments) for c in calls] == [("call_a", {"path": "a"}), ("call_b", {"path": "b"})]
    assert [e.tool_call.id for e in out.tool_ends] == [c.id for c in calls], "each call ends once, as an event too"
    assert out.text == "Let me look.Reading them now.", "terminal-only text is delivered as a delta"
    starts = [(s.index, s.kind) for s in out.starts]
    assert starts == [(0, "text"), (1, "thinking"), (2, "text"), (3, "tool_call"), (4, "tool_call")]


async def test_streamed_items_repeated_in_the_terminal_output_are_not_duplicated(fake_server, provider) -> None:
    """The real service repeats every streamed item in ``response.completed``: nothing doubles."""
    fake_server.enqueue([Thinking("thought"), Text("answer"), ToolCall("read", {"path": "a"})])
    out = await collect(provider, request_for(fake_server))
    message = out.end.message
    assert [type(b).__name__ for b in message.content] == ["ThinkingContent", "TextContent", "ToolCall"]
    assert out.text == "answer" and len(out.tool_ends) == 1


@pytest.mark.parametrize(
    ("code", "kind", "retryable"),
    [("503", "status", True), ("429", "status", True), ("500", "status", True), ("400", "bad_request", False),
     ("401", "auth", False)],
)
async def test_a_gateway_error_object_in_the_stream_is_an_error_with_its_message(
    fake_server, provider, code: str, kind: str, retryable: bool
) -> None:
    """L2/L7 (issue 23): LiteLLM's mid-stream ``data: {"error": {"message", "type", "code"}}`` has no
    ``type``; it ends the stream as an error carrying the provider's message, its code classified
    as the same HTTP status would be."""
    fake_server.enqueue([Text("partial"), StreamError("upstream overloaded", code=code, gateway=True)])
    out = await collect(provider, request_for(fake_server))
    failure = out.end.failure
    assert failure is not None and failure.kind == kind and failure.retryable is retryable
    assert "upstream overloaded" in failure.message
    assert out.end.message.stop_reason == "error" and out.text == "partial"


async def test_done_marker_is_the_end_of_the_stream_not_a_json_error(fake_server, provider) -> None:
    """L2 (issue 23): ``data: [DONE]`` (LiteLLM ends every wire with it) before
    ``response.completed`` is a stream that ended without its terminal event."""
    fake_server.enqueue([Text("partial"), NoTerminal(done_marker=True)])
    out = await collect(provider, request_for(fake_server))
    failure = out.end.failure
    assert failure is not None and failure.kind == "incomplete" and failure.retryable
    assert "JSON" not in failure.message and "terminal event" in failure.message
