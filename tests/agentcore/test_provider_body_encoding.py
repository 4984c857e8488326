"""Request bodies spliced from per-message cached encodings (all three adapters).

Contract: ``encode_body`` is the JSON of ``build_body`` (parse-equal), on a cold and on a warm
cache, for every history shape the adapters group or split (tool-result runs, images after
tool results, several items per message, cache breakpoints); and a history message is
converted once, however many requests carry it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentcore.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    NativeContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    user_text,
)
from agentcore.providers import anthropic_messages, openai_completions, openai_responses
from agentcore.providers.base import ProviderRequest
from agentcore.providers.shared import splice_body
from tests.agentcore.provider_fixtures import PNG_1PX, READ_TOOL, make_model

ADAPTERS = {
    "openai-completions": (openai_completions.OpenAICompletionsProvider, openai_completions, "message_wire"),
    "openai-responses": (openai_responses.OpenAIResponsesProvider, openai_responses, "message_items"),
    "anthropic-messages": (anthropic_messages.AnthropicMessagesProvider, anthropic_messages, "message_wire"),
}
IMAGE = ImageContent(PNG_1PX, "image/png")


def rich_history(api: str) -> list[Message]:
    signature = '{"type":"reasoning","id":"r1","summary":[]}' if api == "openai-responses" else "sig"
    native = (
        {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}
        if api == "anthropic-messages"
        else {"type": "web_search_call", "id": "ws1"}
    )
    return [
        user_text('héllo ✓ \u2028 "quoted" \\ 🎉', [IMAGE]),
        AssistantMessage(
            [
                ThinkingContent("hmm", signature),
                TextContent("let me look"),
                ToolCall("call_1|fc_1", "read", {"path": "ä.txt"}),
                ToolCall("call_2|fc_2", "read", {"path": "b"}),
                NativeContent(api, "fake-model", native),
            ],
            api_kind=api,
            model="fake-model",
        ),
        ToolResultMessage("call_1|fc_1", "read", [TextContent("contents ü")]),
        ToolResultMessage("call_2|fc_2", "read", [TextContent("see"), IMAGE], is_error=True),
        AssistantMessage([ThinkingContent("only thinking", "sig2")], api_kind=api, model="fake-model"),
        user_text(""),
        user_text("next"),
        AssistantMessage([ToolCall("call_3", "read", {"path": "c"})], api_kind="other", model="x"),
        ToolResultMessage("call_3", "read", [IMAGE]),
    ]


@pytest.mark.parametrize("images", [True, False])
@pytest.mark.parametrize("api", list(ADAPTERS))
def test_encoded_body_is_the_json_of_the_body_as_history_grows(api: str, images: bool) -> None:
    provider: Any = ADAPTERS[api][0]()
    model = make_model(api, "http://fake/v1", images=images)
    history = rich_history(api)
    for n in range(len(history) + 1):
        for system_prompt in ("You are terse.", ""):
            request = ProviderRequest(model, system_prompt, history[:n], [READ_TOOL], "high", None, n % 2 == 0, "s")
            assert json.loads(provider.encode_body(request)) == provider.build_body(request), (n, system_prompt)


@pytest.mark.parametrize("api", list(ADAPTERS))
def test_each_history_message_is_converted_once(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    provider_class, module, convert_name = ADAPTERS[api]
    converted: list[Message] = []
    convert = getattr(module, convert_name)

    def counting(message: Message, model: Any) -> Any:
        converted.append(message)
        return convert(message, model)

    monkeypatch.setattr(module, convert_name, counting)
    provider: Any = provider_class()
    model = make_model(api, "http://fake/v1")
    history = rich_history(api)
    for n in range(1, len(history) + 1):
        provider.encode_body(ProviderRequest(model, "sys", history[:n]))
    assert len(converted) == len(history)


@pytest.mark.parametrize("api", list(ADAPTERS))
def test_resumed_history_encodes_like_a_fresh_adapter_when_history_changes(api: str) -> None:
    """The saved prefix is dropped on anything but a pure extension: an in-place edit, a
    compacted (replaced) prefix, a shorter history, another model; a retry reuses it."""
    provider_class = ADAPTERS[api][0]
    provider: Any = provider_class()
    model = make_model(api, "http://fake/v1")
    other_model = make_model(api, "http://fake/v1", model_id="other-model", images=False)
    history = rich_history(api)
    summary = user_text("summary of the conversation so far")

    def check(messages: list[Message], on_model: Any = model) -> None:
        request = ProviderRequest(on_model, "sys", messages, [READ_TOOL])
        fresh: Any = provider_class()
        assert provider.encode_body(request) == fresh.encode_body(request)
        assert json.loads(provider.encode_body(request)) == provider.build_body(request)

    for n in range(1, len(history) + 1):
        check(history[:n])
    check(history)  # a retry: same history
    check(history[:4])  # shorter
    check([summary, *history[6:]])  # compacted
    check(list(history), other_model)  # another model (scope)
    check(list(history))
    first = history[0]
    assert isinstance(first, type(user_text("x")))
    first.content.append(TextContent("edited in place"))
    check(list(history))
    check([*history[:2], user_text("a new branch"), *history[2:]])  # an insertion


def test_splice_body_places_the_list_last_and_handles_an_empty_head() -> None:
    assert splice_body({"a": 1}, "m", [b"1", b'{"x":"\xc3\xa9"}']) == '{"a":1,"m":[1,{"x":"é"}]}'.encode()
    assert splice_body({}, "m", []) == b'{"m":[]}'
