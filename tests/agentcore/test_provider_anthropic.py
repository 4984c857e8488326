"""Anthropic Messages adapter against the fake server's real SSE framing (SPEC P1, P2, M5, L8, T5)."""

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
    user_text,
)
from agentcore.messages import (
    ToolCall as ToolCallBlock,
)
from agentcore.providers.anthropic_messages import AnthropicMessagesProvider, messages_url
from agentcore.providers.base import ProviderRequest, StreamEvent, TextDelta
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

API = "anthropic-messages"


@pytest.fixture
async def provider() -> AsyncIterator[AnthropicMessagesProvider]:
    adapter = AnthropicMessagesProvider()
    yield adapter
    await adapter.aclose()


def request_for(server: FakeProviderServer, messages: list | None = None, **kwargs: object) -> ProviderRequest:
    names = ("reasoning", "images", "thinking_level_map", "model_id", "max_tokens")
    model_kwargs = {k: kwargs.pop(k) for k in names if k in kwargs}
    model = make_model(API, server.base_url, **model_kwargs)  # type: ignore[arg-type]
    return make_request(model, messages, **kwargs)  # type: ignore[arg-type]


def test_messages_url_follows_the_sdk_convention() -> None:
    assert messages_url("https://api.anthropic.com") == "https://api.anthropic.com/v1/messages"
    assert messages_url("http://127.0.0.1:9/v1/") == "http://127.0.0.1:9/v1/messages"
    assert messages_url("https://gw.example.com/anthropic") == "https://gw.example.com/anthropic/v1/messages"


async def test_plain_text_with_system_prompt_and_cache_breakpoints(fake_server, provider) -> None:
    """P1: text deltas; ``system`` block and last message carry cache_control; auth headers."""
    fake_server.enqueue([Text("Hello there, friend.", chunk_size=5)])
    out = await collect(provider, request_for(fake_server))
    assert out.text == "Hello there, friend."
    assert out.end.failure is None and out.end.message.stop_reason == "stop"
    sent = fake_server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "test-key" and sent.headers["anthropic-version"] == "2023-06-01"
    body = sent.json
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]}
    ]
    assert body["max_tokens"] == 32_000 and body["stream"] is True


async def test_thinking_with_signature_replays_only_to_same_model(fake_server, provider) -> None:
    """P1: thinking deltas + signature_delta; signed thinking is replayed to the same model only."""
    fake_server.enqueue([Thinking("Let me think.", signature="sig-abc"), Text("Answer.")], [Text("a")], [Text("b")])
    first = await collect(provider, request_for(fake_server, effort="medium"))
    assert first.thinking == "Let me think."
    block = first.end.message.content[0]
    assert isinstance(block, ThinkingContent) and block.signature == "sig-abc"

    history = [user_text("hello"), first.end.message, user_text("again")]
    await collect(provider, request_for(fake_server, history, effort="medium"))
    assistant = fake_server.requests[1].json["messages"][1]
    assert assistant["content"][0] == {"type": "thinking", "thinking": "Let me think.", "signature": "sig-abc"}
    await collect(provider, request_for(fake_server, history, model_id="claude-other", effort="medium"))
    assert fake_server.requests[2].json["messages"][1]["content"] == [{"type": "text", "text": "Answer."}]


async def test_redacted_thinking_is_kept_and_replayed(fake_server, provider) -> None:
    fake_server.enqueue([Thinking("", signature="opaque-data", redacted=True), Text("ok")], [Text("x")])
    first = await collect(provider, request_for(fake_server, effort="low"))
    block = first.end.message.content[0]
    assert isinstance(block, ThinkingContent) and block.redacted and block.signature == "opaque-data"
    await collect(provider, request_for(fake_server, [user_text("q"), first.end.message, user_text("r")], effort="low"))
    assert fake_server.requests[1].json["messages"][1]["content"][0] == {
        "type": "redacted_thinking",
        "data": "opaque-data",
    }


async def test_one_tool_call_streams_input_json(fake_server, provider) -> None:
    """P1: input_json_delta fragments end as parsed arguments; stop_reason tool_use."""
    fake_server.enqueue([Text("Reading."), ToolCall("read", {"path": "a.txt"}, id="toolu_1", argument_chunks=3)])
    out = await collect(provider, request_for(fake_server, tools=[READ_TOOL]))
    assert len(out.tool_deltas) == 3
    [end] = out.tool_ends
    assert (end.tool_call.id, end.tool_call.name, end.tool_call.arguments) == ("toolu_1", "read", {"path": "a.txt"})
    assert out.end.message.stop_reason == "tool_use"
    assert fake_server.requests[0].json["tools"] == [
        {"name": "read", "description": "Read a file", "input_schema": READ_TOOL.parameters}
    ]


async def test_two_parallel_tool_calls_and_results_in_one_user_message(fake_server, provider) -> None:
    """P1: both calls complete; their results go back together in one user message."""
    fake_server.enqueue([ToolCall("read", {"path": "a"}), ToolCall("read", {"path": "b"})], [Text("done")])
    out = await collect(provider, request_for(fake_server, tools=[READ_TOOL]))
    calls = [e.tool_call for e in out.tool_ends]
    assert [c.arguments["path"] for c in calls] == ["a", "b"]
    results = [ToolResultMessage(c.id, "read", [TextContent(f"body {c.arguments['path']}")]) for c in calls]
    results[1].is_error = True
    await collect(provider, request_for(fake_server, [user_text("go"), out.end.message, *results]))
    messages = fake_server.requests[1].json["messages"]
    assert len(messages) == 3 and messages[2]["role"] == "user"
    blocks = messages[2]["content"]
    assert [b["tool_use_id"] for b in blocks] == [c.id for c in calls]
    assert blocks[0]["content"] == [{"type": "text", "text": "body a"}] and "is_error" not in blocks[0]
    assert blocks[1]["is_error"] is True and blocks[1]["cache_control"] == {"type": "ephemeral"}


async def test_invalid_tool_arguments_do_not_crash(fake_server, provider) -> None:
    from agentcore.providers.shared import RAW_ARGUMENTS_KEY

    fake_server.enqueue([ToolCall("read", raw_arguments="{not json")])
    out = await collect(provider, request_for(fake_server))
    assert out.end.failure is None
    assert out.end.message.tool_calls[0].arguments == {RAW_ARGUMENTS_KEY: "{not json"}


async def test_image_input_and_image_in_tool_result(fake_server, provider) -> None:
    """P1: base64 image blocks in user messages and inside tool_result content."""
    fake_server.enqueue([Text("a pixel")], [Text("ok")])
    await collect(provider, request_for(fake_server, [image_message()]))
    image = fake_server.requests[0].json["messages"][0]["content"][1]
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_1PX},
        "cache_control": {"type": "ephemeral"},
    }
    call = ToolCallBlock("toolu_s", "screenshot", {})
    assistant = AssistantMessage([call], api_kind=API, model="fake-model")
    result = ToolResultMessage("toolu_s", "screenshot", [ImageContent(PNG_1PX, "image/png")])
    await collect(provider, request_for(fake_server, [user_text("shoot"), assistant, result]))
    block = fake_server.requests[1].json["messages"][2]["content"][0]
    assert block["type"] == "tool_result" and block["content"][0]["type"] == "image"


async def test_foreign_tool_ids_are_sanitized(fake_server, provider) -> None:
    """Ids from the Responses adapter (``call|fc``) become valid Anthropic ids on both sides."""
    fake_server.enqueue([Text("ok")])
    call = ToolCallBlock("call_1|fc_1", "read", {"path": "a"})
    assistant = AssistantMessage([call], api_kind="openai-responses", model="gpt")
    result = ToolResultMessage("call_1|fc_1", "read", [TextContent("x")])
    await collect(provider, request_for(fake_server, [user_text("q"), assistant, result]))
    messages = fake_server.requests[0].json["messages"]
    assert messages[1]["content"][0]["id"] == "call_1" and messages[2]["content"][0]["tool_use_id"] == "call_1"


async def test_usage_with_cache_read_and_write_is_priced(fake_server, provider) -> None:
    """P1: input (excluding cache), cache reads and cache writes are separate and priced apart."""
    fake_server.enqueue([Text("x"), Usage(input=100, output=40, cached_input=5000, cache_creation=800)])
    out = await collect(provider, request_for(fake_server))
    usage = out.end.message.usage
    assert usage is not None
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_creation_tokens, usage.output_tokens) == (
        100,
        5000,
        800,
        40,
    )
    assert usage.cost.cache_write == pytest.approx(800 * PRICES.cache_write / 1e6)
    assert usage.cost.cache_read == pytest.approx(5000 * PRICES.cache_read / 1e6)
    assert usage.cost.total == pytest.approx(
        (100 * PRICES.input + 40 * PRICES.output + 5000 * PRICES.cache_read + 800 * PRICES.cache_write) / 1e6
    )


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([Text("done")], "stop"),
        ([Text("cut"), Stop("length")], "length"),
        ([ToolCall("read", {"path": "a"})], "tool_use"),
        ([Text("calling"), Stop("tool_use")], "tool_use"),
        ([WebSearch("q", [{"url": "https://a"}]), Stop("pause_turn")], "pause_turn"),
    ],
)
async def test_stop_reasons_are_normalized(fake_server, provider, steps, expected) -> None:
    """P1, P2: end_turn → stop, max_tokens → length, tool_use, pause_turn."""
    fake_server.enqueue(steps)
    out = await collect(provider, request_for(fake_server))
    assert out.end.failure is None and out.end.message.stop_reason == expected


@pytest.mark.parametrize(
    ("steps", "kind", "status", "retry_after"),
    [
        ([Text("partial"), Disconnect()], "connection", None, None),
        ([Disconnect(after_events=0)], "connection", None, None),
        ([HttpError(429, retry_after=7)], "status", 429, 7.0),
        ([HttpError(529, "Overloaded")], "status", 529, None),
        ([HttpError(500)], "status", 500, None),
        ([HttpError(408)], "status", 408, None),
        ([Text("half"), NoTerminal()], "incomplete", None, None),
        ([Text("x"), StreamError("Overloaded")], "status", 529, None),
        ([Text("x"), Aborted()], "status", 500, None),
        ([Overflow()], "overflow", 400, None),
        ([HttpError(401, "invalid x-api-key")], "auth", 401, None),
        ([HttpError(403)], "auth", 403, None),
        ([HttpError(400, "messages: text content blocks must be non-empty")], "bad_request", 400, None),
        ([HttpError(404, "model: not found")], "bad_request", 404, None),
        ([HttpError(400, "Your credit balance is too low to access the Anthropic API.")], "quota", 400, None),
    ],
)
async def test_faults_are_classified(fake_server, provider, steps, kind, status, retry_after) -> None:
    """T5, L2, L7: each fault ends in StreamEnd with the right FailureKind, never an exception."""
    fake_server.enqueue(steps)
    out = await collect(provider, request_for(fake_server))
    failure = out.end.failure
    assert failure is not None and failure.kind == kind, failure
    assert failure.status == status and failure.retry_after == retry_after
    assert out.end.message.stop_reason == "error"


async def test_cancellation_returns_usage_so_far_and_closes_the_connection(fake_server, provider) -> None:
    """L8: input usage from message_start is kept when the user aborts mid-stream."""
    fake_server.enqueue([Usage(input=42, output=7, cached_input=10), Text("partial"), Hang(), Text("never")])
    abort = asyncio.Event()

    async def abort_when_held() -> None:
        await fake_server.until_hanging(1)
        abort.set()

    events: list[StreamEvent] = []
    trigger: asyncio.Task[None] | None = None
    async for event in provider.stream(request_for(fake_server), abort):
        events.append(event)
        if isinstance(event, TextDelta) and trigger is None:
            trigger = asyncio.create_task(abort_when_held())
    assert trigger is not None
    await trigger
    end = Collected(events).end
    assert end.failure is not None and end.failure.kind == "cancelled"
    assert end.message.stop_reason == "aborted" and end.message.text == "partial"
    assert end.usage is not None and (end.usage.input_tokens, end.usage.cached_input_tokens) == (42, 10)
    assert end.usage.cost.input > 0
    await fake_server.until(lambda s: s.requests[0].client_disconnected)


@pytest.mark.parametrize(
    ("effort", "level_map", "max_tokens", "expected", "expected_max"),
    [
        (None, None, 32_000, {"type": "disabled"}, 32_000),
        ("minimal", None, 32_000, {"type": "enabled", "budget_tokens": 1024}, 32_000),
        ("low", None, 32_000, {"type": "enabled", "budget_tokens": 2048}, 32_000),
        ("medium", None, 32_000, {"type": "enabled", "budget_tokens": 8192}, 32_000),
        ("high", None, 32_000, {"type": "enabled", "budget_tokens": 16384}, 32_000),
        ("xhigh", None, 64_000, {"type": "enabled", "budget_tokens": 32000}, 64_000),
        ("max", None, 32_000, {"type": "enabled", "budget_tokens": 30_976}, 32_000),
        ("high", {"high": "5000"}, 32_000, {"type": "enabled", "budget_tokens": 5000}, 32_000),
        ("high", None, 1500, {"type": "enabled", "budget_tokens": 1024}, 2048),
    ],
)
async def test_effort_maps_to_thinking_budget(
    fake_server, provider, effort, level_map, max_tokens, expected, expected_max
):
    """M5: budget table, always below max_tokens; effort off → thinking disabled."""
    fake_server.enqueue([Text("ok")])
    request = request_for(fake_server, effort=effort, thinking_level_map=level_map, max_tokens=max_tokens)
    await collect(provider, request)
    body = fake_server.requests[0].json
    assert body["thinking"] == expected and body["max_tokens"] == expected_max


async def test_no_thinking_param_for_non_reasoning_models(fake_server, provider) -> None:
    fake_server.enqueue([Text("ok")])
    await collect(provider, request_for(fake_server, effort="high", reasoning=False))
    assert "thinking" not in fake_server.requests[0].json


async def test_web_search_tool_events_citations_and_native_replay(fake_server, provider) -> None:
    """P2: web_search_20250305 (max 5 uses); server_tool_use/web_search_tool_result → events;
    citations → sources; native blocks replayed to the same model only."""
    sources = [{"url": "https://example.com/a", "title": "A"}, {"url": "https://example.com/b", "title": "B"}]
    fake_server.enqueue([WebSearch("asyncio", sources), Text("Answer.")], [Text("x")], [Text("y")])
    out = await collect(provider, request_for(fake_server, web_search=True))
    assert {"type": "web_search_20250305", "name": "web_search", "max_uses": 5} in fake_server.requests[0].json["tools"]
    searches = [s.search for s in out.searches]
    assert [s["status"] for s in searches] == ["running", "running", "success"]
    assert searches[1]["query"] == "asyncio"
    assert [s["url"] for s in searches[2]["sources"]] == ["https://example.com/a", "https://example.com/b"]
    cited = [source for event in out.sources for source in event.sources]
    assert [c["url"] for c in cited] == ["https://example.com/a", "https://example.com/b"]
    assert cited[0]["title"] == "A" and cited[0]["cited_text"]
    native = [b.payload["type"] for b in out.end.message.content if isinstance(b, NativeContent)]
    assert native == ["server_tool_use", "web_search_tool_result"]

    history = [user_text("q"), out.end.message, user_text("more")]
    await collect(provider, request_for(fake_server, history))
    replayed = [b["type"] for b in fake_server.requests[1].json["messages"][1]["content"]]
    assert replayed == ["server_tool_use", "web_search_tool_result", "text"]
    await collect(provider, request_for(fake_server, history, model_id="claude-other"))
    assert [b["type"] for b in fake_server.requests[2].json["messages"][1]["content"]] == ["text"]


async def test_failed_web_search_reports_the_error(fake_server, provider) -> None:
    fake_server.enqueue([WebSearch("q", error="max_uses_exceeded"), Text("sorry")])
    out = await collect(provider, request_for(fake_server, web_search=True))
    assert out.searches[-1].search["status"] == "failed"
    assert out.searches[-1].search["error"] == "max_uses_exceeded"


async def test_history_conversion_is_cached_per_message(fake_server, provider) -> None:
    """Performance contract: unchanged messages are not converted again on the next turn."""
    history = [user_text("a"), AssistantMessage([TextContent("b")], api_kind=API, model="fake-model"), user_text("c")]
    model = make_model(API, fake_server.base_url)
    first = provider.build_body(make_request(model, history))
    second = provider.build_body(make_request(model, [*history, user_text("d")]))
    assert first["messages"][0] is second["messages"][0]
    assert first["messages"][1] is second["messages"][1]
    assert "cache_control" not in json.dumps(second["messages"][2])  # breakpoint moved to the new last message
