"""Chat Completions adapter against the fake server's real SSE framing (SPEC P1, M5, L8, T5)."""

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
from agentcore.providers.base import ProviderRequest, StreamEvent, TextDelta
from agentcore.providers.openai_completions import OpenAICompletionsProvider
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

API = "openai-completions"


@pytest.fixture
async def provider() -> AsyncIterator[OpenAICompletionsProvider]:
    adapter = OpenAICompletionsProvider()
    yield adapter
    await adapter.aclose()


def request_for(server: FakeProviderServer, messages: list | None = None, **kwargs: object) -> ProviderRequest:
    names = ("reasoning", "images", "thinking_level_map", "model_id", "max_tokens")
    model_kwargs = {k: kwargs.pop(k) for k in names if k in kwargs}
    model = make_model(API, server.base_url, **model_kwargs)  # type: ignore[arg-type]
    return make_request(model, messages, **kwargs)  # type: ignore[arg-type]


async def test_plain_text_with_system_message_and_usage_requested(fake_server, provider) -> None:
    """P1: system prompt is the first message; usage chunk requested; max_completion_tokens."""
    fake_server.enqueue([Text("Hello there, friend.", chunk_size=5)])
    out = await collect(provider, request_for(fake_server))
    assert out.text == "Hello there, friend."
    assert out.end.failure is None and out.end.message.stop_reason == "stop"
    sent = fake_server.requests[0]
    assert sent.path == "/v1/chat/completions" and sent.headers["authorization"] == "Bearer test-key"
    body = sent.json
    assert body["messages"] == [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello"}]
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 32_000 and "max_tokens" not in body


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_fields_become_thinking_and_are_not_replayed(fake_server, provider, field) -> None:
    """P1: vLLM/DeepSeek ``reasoning_content`` and Ollama ``reasoning`` → thinking; never sent back."""
    fake_server.enqueue([Thinking("Hmm, let me see.", completions_field=field), Text("Answer.")], [Text("x")])
    out = await collect(provider, request_for(fake_server))
    assert out.thinking == "Hmm, let me see." and out.text == "Answer."
    assert [s.kind for s in out.starts] == ["thinking", "text"]
    assert isinstance(out.end.message.content[0], ThinkingContent)
    await collect(provider, request_for(fake_server, [user_text("q"), out.end.message, user_text("r")]))
    assistant = fake_server.requests[1].json["messages"][2]
    assert assistant == {"role": "assistant", "content": "Answer."}


async def test_one_tool_call_streams_arguments(fake_server, provider) -> None:
    """P1: tool call arguments in several chunks; finish_reason tool_calls → tool_use."""
    fake_server.enqueue([ToolCall("read", {"path": "a.txt"}, id="call_1", argument_chunks=3)])
    out = await collect(provider, request_for(fake_server, tools=[READ_TOOL]))
    assert len(out.tool_deltas) == 3
    [end] = out.tool_ends
    assert (end.tool_call.id, end.tool_call.arguments) == ("call_1", {"path": "a.txt"})
    assert out.end.message.stop_reason == "tool_use"
    assert fake_server.requests[0].json["tools"] == [
        {
            "type": "function",
            "function": {"name": "read", "description": "Read a file", "parameters": READ_TOOL.parameters},
        }
    ]


async def test_two_parallel_tool_calls_and_their_results(fake_server, provider) -> None:
    """P1: two calls by index; results go back as ``tool`` messages with matching ids."""
    fake_server.enqueue([Text("Both."), ToolCall("read", {"path": "a"}), ToolCall("read", {"path": "b"})], [Text("ok")])
    out = await collect(provider, request_for(fake_server, tools=[READ_TOOL]))
    calls = [e.tool_call for e in out.tool_ends]
    assert [c.arguments["path"] for c in calls] == ["a", "b"]
    results = [ToolResultMessage(c.id, "read", [TextContent("body")]) for c in calls]
    await collect(provider, request_for(fake_server, [user_text("go"), out.end.message, *results]))
    messages = fake_server.requests[1].json["messages"]
    assert messages[2]["content"] == "Both."
    assert [c["id"] for c in messages[2]["tool_calls"]] == [c.id for c in calls]
    assert messages[3:] == [{"role": "tool", "tool_call_id": c.id, "content": "body"} for c in calls]


async def test_invalid_tool_arguments_do_not_crash(fake_server, provider) -> None:
    fake_server.enqueue([ToolCall("read", raw_arguments="[1, 2")])
    out = await collect(provider, request_for(fake_server))
    assert out.end.failure is None
    assert out.end.message.tool_calls[0].arguments == {RAW_ARGUMENTS_KEY: "[1, 2"}


async def test_image_input_and_tool_result_images_follow_in_a_user_message(fake_server, provider) -> None:
    """P1: image_url parts; tool results cannot hold images, so they follow the run of tool messages."""
    fake_server.enqueue([Text("a pixel")], [Text("ok")])
    await collect(provider, request_for(fake_server, [image_message()]))
    parts = fake_server.requests[0].json["messages"][1]["content"]
    assert parts[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_1PX}"}}

    calls = [ToolCallBlock("call_a", "shot", {}), ToolCallBlock("call_b", "shot", {})]
    assistant = AssistantMessage(list(calls), api_kind=API, model="fake-model")
    results = [
        ToolResultMessage("call_a", "shot", [ImageContent(PNG_1PX, "image/png")]),
        ToolResultMessage("call_b", "shot", [TextContent("no image")]),
    ]
    await collect(provider, request_for(fake_server, [user_text("shoot"), assistant, *results]))
    messages = fake_server.requests[1].json["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert messages[5]["content"][1]["type"] == "image_url"


async def test_native_content_from_other_protocols_is_dropped(fake_server, provider) -> None:
    fake_server.enqueue([Text("ok")])
    native = NativeContent("anthropic-messages", "claude", {"type": "server_tool_use"})
    assistant = AssistantMessage([native, TextContent("found it")], api_kind="anthropic-messages", model="claude")
    await collect(provider, request_for(fake_server, [user_text("q"), assistant, user_text("r")]))
    assert fake_server.requests[0].json["messages"][2] == {"role": "assistant", "content": "found it"}


async def test_usage_with_cached_and_reasoning_tokens_is_priced(fake_server, provider) -> None:
    """P1: prompt_tokens includes cached tokens; we report them apart and price each class."""
    fake_server.enqueue([Text("x"), Usage(input=300, output=90, cached_input=700, reasoning=60)])
    out = await collect(provider, request_for(fake_server))
    usage = out.end.usage
    assert usage is not None
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens, usage.reasoning_tokens) == (
        300,
        700,
        90,
        60,
    )
    assert usage.cost.input == pytest.approx(300 * PRICES.input / 1e6)
    assert usage.cost.cache_read == pytest.approx(700 * PRICES.cache_read / 1e6)


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([Text("done")], "stop"),
        ([Text("cut"), Stop("length")], "length"),
        ([ToolCall("read", {"path": "a"})], "tool_use"),
        ([Text("calling"), Stop("tool_use")], "tool_use"),
    ],
)
async def test_stop_reasons_are_normalized(fake_server, provider, steps, expected) -> None:
    """P1: finish_reason stop/length/tool_calls → stop/length/tool_use."""
    fake_server.enqueue(steps)
    out = await collect(provider, request_for(fake_server))
    assert out.end.failure is None and out.end.message.stop_reason == expected


@pytest.mark.parametrize(
    ("steps", "kind", "status", "retry_after"),
    [
        ([Text("partial"), Disconnect()], "connection", None, None),
        ([Disconnect(after_events=0)], "connection", None, None),
        ([HttpError(429, retry_after=1)], "status", 429, 1.0),
        ([HttpError(502)], "status", 502, None),
        ([HttpError(409)], "status", 409, None),
        ([Text("half"), NoTerminal()], "incomplete", None, None),
        ([Text("half"), Aborted()], "provider_aborted", None, None),
        ([Overflow()], "overflow", 400, None),
        (
            [HttpError(400, body={"error": "the request exceeds the available context size, try increasing it"})],
            "overflow",
            400,
            None,
        ),
        ([HttpError(401)], "auth", 401, None),
        ([HttpError(400, "Unrecognized request argument supplied: foo")], "bad_request", 400, None),
        ([HttpError(422)], "bad_request", 422, None),
        ([HttpError(429, "quota", code="insufficient_quota")], "quota", 429, None),
        ([Text("x"), StreamError("upstream failed")], "status", 500, None),
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


async def test_connection_refused_is_a_connect_failure(provider) -> None:
    """L2/W14: nothing listening → ``connect`` (retryable, naming host and port), not an exception."""
    server = FakeProviderServer()
    await server.start()
    base_url = server.base_url
    await server.stop()
    model = make_model(API, base_url)
    out = await collect(provider, make_request(model))
    assert out.end.failure is not None and out.end.failure.kind == "connect" and out.end.failure.retryable
    assert out.end.failure.endpoint == base_url.split("//", 1)[1].split("/", 1)[0]


async def test_cancellation_mid_stream_closes_the_connection(fake_server, provider) -> None:
    """L8: abort while blocked on the socket → aborted/cancelled with the text so far."""
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
            trigger = asyncio.create_task(abort_when_held())
    assert trigger is not None
    await trigger
    end = Collected(events).end
    assert end.failure is not None and end.failure.kind == "cancelled"
    assert end.message.stop_reason == "aborted" and end.message.text == "partial"
    assert end.usage is not None
    await fake_server.until(lambda s: s.requests[0].client_disconnected)


async def test_cancellation_outside_of_our_abort_propagates(fake_server, provider) -> None:
    """Only our own abort is turned into a StreamEnd; a task cancellation still cancels."""
    fake_server.enqueue([Text("partial"), Hang()])

    async def consume() -> None:
        async for _ in provider.stream(request_for(fake_server), asyncio.Event()):
            pass

    task = asyncio.create_task(consume())
    await fake_server.until_hanging(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize(
    ("effort", "level_map", "expected"),
    [
        (None, None, None),
        ("low", None, "low"),
        ("high", None, "high"),
        ("max", None, "xhigh"),
        ("max", {"max": "high"}, "high"),
    ],
)
async def test_effort_maps_to_reasoning_effort(fake_server, provider, effort, level_map, expected) -> None:
    """M5: ``reasoning_effort`` only when effort is set on a reasoning model."""
    fake_server.enqueue([Text("ok")])
    await collect(provider, request_for(fake_server, effort=effort, thinking_level_map=level_map))
    assert fake_server.requests[0].json.get("reasoning_effort") == expected


async def test_no_reasoning_effort_for_non_reasoning_models(fake_server, provider) -> None:
    fake_server.enqueue([Text("ok")])
    await collect(provider, request_for(fake_server, effort="high", reasoning=False))
    assert "reasoning_effort" not in fake_server.requests[0].json


async def test_history_conversion_is_cached_per_message(fake_server, provider) -> None:
    """Performance contract: each message converts once; later turns reuse the wire dicts."""
    history = [user_text("a"), AssistantMessage([TextContent("b")], api_kind=API, model="fake-model")]
    model = make_model(API, fake_server.base_url)
    first = provider.build_body(make_request(model, history))
    second = provider.build_body(make_request(model, [*history, user_text("c")]))
    assert first["messages"][1] is second["messages"][1] and first["messages"][2] is second["messages"][2]
    assert json.loads(json.dumps(second))["messages"][-1] == {"role": "user", "content": "c"}
