"""Chat Completions adapter (``POST {base_url}/chat/completions``, SSE) — SPEC P1, M5, L8.

The lowest common denominator: OpenAI, and local servers (Ollama, vLLM, llama.cpp, LM
Studio). Choices made for that breadth:

- ``max_completion_tokens`` carries the output limit (OpenAI's current name; its reasoning
  models reject ``max_tokens``; vLLM and recent llama.cpp/Ollama accept it).
- Reasoning arrives as ``reasoning_content`` (vLLM, DeepSeek, llama.cpp) or ``reasoning``
  (Ollama, OpenRouter); it is never sent back (DeepSeek rejects it in input).
- Tool results cannot hold images, so images from a run of tool results follow it in one
  user message.
- ``stream_options.include_usage`` asks for the usage chunk; ``[DONE]`` is the terminal event.
  A stream that ends with ``[DONE]`` but without the usage chunk it asked for was cut: LiteLLM,
  when its upstream dies, sends ``finish_reason: "stop"`` and ``[DONE]`` and drops the rest, so
  it is a dropped stream (retried, or continued after content), never a completed answer.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable
from typing import Any

import httpx

from agentcore.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    StopReason,
    TextContent,
    ToolCall,
    UserContent,
    UserMessage,
)
from agentcore.models.attributes import ResolvedModel
from agentcore.providers.base import ProviderFailure, ProviderRequest, StreamEvent, ToolSpec
from agentcore.providers.shared import (
    IMAGE_OMITTED,
    HistoryPrefix,
    MessageBuilder,
    WireCache,
    bearer_headers,
    dumps,
    endpoint,
    image_url,
    json_object,
    openai_effort,
    splice_body,
    stream_error,
    token_count,
    wire_scope,
)
from agentcore.providers.sse import ServerSentEvent
from agentcore.providers.stream_limits import StreamTimeouts
from agentcore.providers.streaming import SSEAdapter
from agentcore.providers.wire_json import loads

API_KIND = "openai-completions"
_FINISH: dict[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "stop",
    "eos": "stop",
}
_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")


def wire_tool_id(tool_call_id: str) -> str:
    """OpenAI limits tool call ids to 40 characters."""
    return tool_call_id.partition("|")[0][:40]


def _user_content(content: list[UserContent], model: ResolvedModel) -> str | list[dict[str, Any]]:
    if all(isinstance(b, TextContent) for b in content):
        return "".join(b.text for b in content if isinstance(b, TextContent))
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "text": block.text})
        elif model.accepts_images:
            parts.append({"type": "image_url", "image_url": {"url": image_url(block.data, block.mime_type)}})
        else:
            parts.append({"type": "text", "text": IMAGE_OMITTED})
    return parts


def _assistant(message: AssistantMessage) -> dict[str, Any] | None:
    text = "".join(b.text for b in message.content if isinstance(b, TextContent))
    calls = [
        {
            "id": wire_tool_id(b.id),
            "type": "function",
            "function": {"name": b.name, "arguments": json.dumps(b.arguments)},
        }
        for b in message.content
        if isinstance(b, ToolCall)
    ]
    if not text and not calls:
        return None
    wire: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        wire["tool_calls"] = calls
    return wire


def message_wire(message: Message, model: ResolvedModel) -> tuple[dict[str, Any] | None, list[ImageContent]]:
    """A transcript message → (wire message or None, images that must follow in a user message)."""
    if isinstance(message, UserMessage):
        if not message.content:
            return None, []
        return {"role": "user", "content": _user_content(message.content, model)}, []
    if isinstance(message, AssistantMessage):
        return _assistant(message), []
    images = [b for b in message.content if isinstance(b, ImageContent)] if model.accepts_images else []
    text = message.text
    if not text and any(isinstance(b, ImageContent) for b in message.content):
        text = "(see the attached image)" if images else IMAGE_OMITTED
    return {"role": "tool", "tool_call_id": wire_tool_id(message.tool_call_id), "content": text}, images


_Entry = tuple[dict[str, Any] | None, bytes, list[tuple[dict[str, Any], bytes]]]
"""A message's cached wire form: (wire message or None, its encoding, image parts that must
follow in a user message, each with its encoding)."""


def _entry(message: Message, model: ResolvedModel) -> _Entry:
    wire, images = message_wire(message, model)
    parts = [_image_part(image) for image in images]
    return wire, dumps(wire) if wire is not None else b"", [(part, dumps(part)) for part in parts]


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": image_url(image.data, image.mime_type)}}


_IMAGES_INTRO = {"type": "text", "text": "Images returned by the tool calls above:"}
_IMAGES_HEAD = b'{"role":"user","content":[' + dumps(_IMAGES_INTRO)


def _images_message(parts: list[tuple[dict[str, Any], bytes]]) -> tuple[dict[str, Any], bytes]:
    wire = {"role": "user", "content": [_IMAGES_INTRO, *(part for part, _ in parts)]}
    return wire, b",".join((_IMAGES_HEAD, *(encoded for _, encoded in parts))) + b"]}"


def tool_dicts(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


class CompletionsParser:
    """Chat chunks → stream events. Text and reasoning open a new block when the kind
    switches; tool calls are keyed by their ``index`` and closed at ``finish_reason``."""

    def __init__(self, builder: MessageBuilder, *, expects_usage: bool = True) -> None:
        self.builder = builder
        self.done = False
        self.failure: ProviderFailure | None = None
        self.stop_reason: StopReason = "stop"
        self.finish_reason: str | None = None
        self.current: tuple[str, int] | None = None
        self.tools: dict[int, int] = {}
        self.finished = False
        self.expects_usage = expects_usage
        self.got_usage = False

    def on_end(self) -> Iterable[StreamEvent]:
        return self.builder.close_all_tools() if self.done else ()

    def end_marker(self) -> None:
        self.done = True
        if self.failure is None and self.expects_usage and not self.got_usage:
            self.failure = ProviderFailure(
                "incomplete",
                "the stream ended ([DONE]) without the usage chunk it asked for (stream_options.include_usage): "
                "it was cut short",
            )

    def feed(self, sse: ServerSentEvent) -> Iterable[StreamEvent]:
        chunk = loads(sse.data)
        failure = stream_error(chunk)
        if failure is not None:
            self.failure = failure
            self.done = True
            return ()
        usage = chunk.get("usage")
        if usage and isinstance(usage, dict):
            self.got_usage = True
            self._usage(usage)
        choices = chunk.get("choices")
        if not choices:
            return ()
        choice = choices[0]
        events: list[StreamEvent] = []
        delta = choice.get("delta")
        if delta:
            self._delta(delta, events)
        reason = choice.get("finish_reason")
        if reason:
            self._finish(reason, events)
        return events

    def _block(self, kind: str) -> int:
        if self.current is not None and self.current[0] == kind:
            return self.current[1]
        return -1

    def _delta(self, delta: dict[str, Any], events: list[StreamEvent]) -> None:
        b = self.builder
        for name in _REASONING_FIELDS:
            reasoning = delta.get(name)
            if reasoning:
                index = self._block("thinking")
                if index < 0:
                    start = b.open_thinking()
                    events.append(start)
                    index = start.index
                    self.current = ("thinking", index)
                events.append(b.thinking(index, reasoning))
                break
        content = delta.get("content")
        if content:
            index = self._block("text")
            if index < 0:
                start = b.open_text()
                events.append(start)
                index = start.index
                self.current = ("text", index)
            events.append(b.text(index, content))
        for position, call in enumerate(delta.get("tool_calls") or ()):
            wire_index = call.get("index", position)
            function = call.get("function") or {}
            tool_index = self.tools.get(wire_index)
            if tool_index is None:
                start = b.open_tool(call.get("id") or f"call_{wire_index}", function.get("name", ""))
                events.append(start)
                tool_index = self.tools[wire_index] = start.index
                self.current = None
            arguments = function.get("arguments")
            if arguments:
                events.append(b.tool_args(tool_index, arguments))

    def _finish(self, reason: str, events: list[StreamEvent]) -> None:
        events.extend(self.builder.close_all_tools())
        self.finished = True
        self.finish_reason = reason
        if reason == "abort":
            self.failure = ProviderFailure(
                "provider_aborted", "the server aborted the generation (finish_reason: abort)"
            )
        elif reason == "error":
            self.failure = ProviderFailure("provider_error", "the server reported an error (finish_reason: error)")
        else:
            self.stop_reason = _FINISH.get(reason, "stop")
            if self.stop_reason == "stop" and self.builder.tool_calls:
                self.stop_reason = "tool_use"  # some local servers say "stop" after tool calls

    def _usage(self, usage: dict[str, Any]) -> None:
        u = self.builder.usage
        details = json_object(usage.get("prompt_tokens_details"))
        cached = token_count(details, "cached_tokens") or token_count(usage, "prompt_cache_hit_tokens") or 0
        u.input_tokens = max(0, (token_count(usage, "prompt_tokens") or 0) - cached)
        u.cached_input_tokens = cached
        u.output_tokens = token_count(usage, "completion_tokens") or 0
        u.reasoning_tokens = token_count(json_object(usage.get("completion_tokens_details")), "reasoning_tokens") or 0


class OpenAICompletionsProvider(SSEAdapter):
    api_kind = API_KIND

    def __init__(self, client: httpx.AsyncClient | None = None, timeouts: StreamTimeouts | None = None) -> None:
        super().__init__(client, timeouts)
        self._cache = WireCache()
        self._system_wire: tuple[str, dict[str, Any], bytes] | None = None
        self._prefix: HistoryPrefix[tuple[list[bytes], list[tuple[dict[str, Any], bytes]]]] = HistoryPrefix()

    def parser(self, builder: MessageBuilder) -> CompletionsParser:
        return CompletionsParser(builder)

    def url(self, model: ResolvedModel) -> str:
        return endpoint(model.base_url, "/chat/completions")

    def headers(self, model: ResolvedModel) -> dict[str, str]:
        return bearer_headers(model.api_key)

    def _system(self, prompt: str) -> tuple[dict[str, Any], bytes]:
        cached = self._system_wire
        if cached is None or cached[0] != prompt:
            wire = {"role": "system", "content": prompt}
            cached = self._system_wire = (prompt, wire, dumps(wire))
        return cached[1], cached[2]

    def _entry(self, message: Message, model: ResolvedModel, scope: Hashable) -> _Entry:
        entry: _Entry | None = self._cache.get(message, scope)
        if entry is None:
            entry = self._cache.put(message, scope, _entry(message, model))
        return entry

    def _messages(self, request: ProviderRequest) -> list[tuple[dict[str, Any], bytes]]:
        """Each wire message with its JSON encoding (``build_body``'s path, from the cache)."""
        model = request.model
        out: list[tuple[dict[str, Any], bytes]] = []
        if request.system_prompt:
            out.append(self._system(request.system_prompt))
        pending_images: list[tuple[dict[str, Any], bytes]] = []
        scope = wire_scope(model)
        for message in request.messages:
            wire, encoded, images = self._entry(message, model, scope)
            if wire is None:
                continue
            if pending_images and wire["role"] != "tool":
                out.append(_images_message(pending_images))
                pending_images = []
            out.append((wire, encoded))
            pending_images.extend(images)
        if pending_images:
            out.append(_images_message(pending_images))
        return out

    def _encoded_messages(self, request: ProviderRequest) -> list[bytes]:
        """The same encodings as ``_messages``, resuming where the previous request ended."""
        model = request.model
        scope = wire_scope(model)
        start, state = self._prefix.resume(request.messages, scope)
        items, pending_images = (list(state[0]), list(state[1])) if state is not None else ([], [])
        for message in request.messages[start:]:
            wire, encoded, images = self._entry(message, model, scope)
            if wire is None:
                continue
            if pending_images and wire["role"] != "tool":
                items.append(_images_message(pending_images)[1])
                pending_images = []
            items.append(encoded)
            pending_images.extend(images)
        self._prefix.save(request.messages, scope, (items, pending_images), start)
        out = [self._system(request.system_prompt)[1], *items] if request.system_prompt else list(items)
        if pending_images:
            out.append(_images_message(pending_images)[1])
        return out

    def _head(self, request: ProviderRequest) -> dict[str, Any]:
        model = request.model
        body: dict[str, Any] = {
            "model": model.model_id,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_completion_tokens": request.max_tokens or model.max_tokens,
        }
        if request.tools:
            body["tools"] = tool_dicts(request.tools)
        effort = openai_effort(model, request.effort)
        if effort is not None:
            body["reasoning_effort"] = effort
        return body

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The request as a dict (what ``encode_body`` encodes)."""
        return {**self._head(request), "messages": [wire for wire, _ in self._messages(request)]}

    def encode_body(self, request: ProviderRequest) -> bytes:
        return splice_body(self._head(request), "messages", self._encoded_messages(request))
