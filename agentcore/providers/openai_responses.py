"""OpenAI Responses adapter (``POST {base_url}/responses``, SSE) — SPEC P1, P2, M5, L8.

Requests are stateless (``store: false``): reasoning is replayed from the encrypted
reasoning item we keep as the thinking block's signature, and only to the model that
produced it. A tool call's id is ``"{call_id}|{item_id}"`` so both ids survive a replay;
other adapters use the part before ``|``.
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
    NativeContent,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserContent,
    UserMessage,
)
from agentcore.models.attributes import ResolvedModel
from agentcore.providers.base import (
    ProviderFailure,
    ProviderRequest,
    SourcesFound,
    StreamEvent,
    ToolSpec,
    WebSearchUpdate,
)
from agentcore.providers.shared import (
    IMAGE_OMITTED,
    HistoryPrefix,
    MessageBuilder,
    WireCache,
    bearer_headers,
    classify_payload,
    dumps,
    endpoint,
    image_url,
    json_object,
    openai_effort,
    same_model,
    splice_body,
    stream_error,
    token_count,
    wire_scope,
)
from agentcore.providers.sse import ServerSentEvent
from agentcore.providers.stream_limits import StreamTimeouts
from agentcore.providers.streaming import SSEAdapter
from agentcore.providers.wire_json import loads

API_KIND = "openai-responses"


def _split_id(tool_call_id: str) -> tuple[str, str | None]:
    call_id, _, item_id = tool_call_id.partition("|")
    return call_id, item_id or None


def _user_parts(content: list[UserContent], model: ResolvedModel) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "input_text", "text": block.text})
        elif model.accepts_images:
            parts.append({"type": "input_image", "image_url": image_url(block.data, block.mime_type), "detail": "auto"})
        else:
            parts.append({"type": "input_text", "text": IMAGE_OMITTED})
    return parts


def _assistant_items(message: AssistantMessage, model: ResolvedModel) -> list[dict[str, Any]]:
    replay = same_model(message, API_KIND, model)
    items: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                items.append({"role": "assistant", "content": block.text})
        elif isinstance(block, ToolCall):
            call_id, item_id = _split_id(block.id)
            item: dict[str, Any] = {
                "type": "function_call",
                "call_id": call_id,
                "name": block.name,
                "arguments": json.dumps(block.arguments),
            }
            if item_id and replay:
                item["id"] = item_id
            items.append(item)
        elif isinstance(block, ThinkingContent):
            if replay and block.signature:
                try:
                    reasoning = json.loads(block.signature)
                except json.JSONDecodeError:
                    continue
                if isinstance(reasoning, dict) and reasoning.get("type") == "reasoning":
                    items.append(reasoning_param(reasoning))
        elif isinstance(block, NativeContent) and replay and block.api_kind == API_KIND:
            items.append(block.payload)
    return items


_REASONING_PARAM_KEYS = ("id", "type", "summary", "content", "encrypted_content", "status")


def reasoning_param(item: dict[str, Any]) -> dict[str, Any]:
    """A received reasoning item as the input item the API accepts (``ResponseReasoningItemParam``):
    only its keys, and none that is null — the service sends ``"content": null, "status": null``
    and refuses them back. Applied when replaying, so items stored before this rule are cleaned too."""
    return {key: item[key] for key in _REASONING_PARAM_KEYS if item.get(key) is not None}


def message_items(message: Message, model: ResolvedModel) -> list[dict[str, Any]]:
    """One transcript message → its Responses input items (pure; cached by the adapter)."""
    if isinstance(message, UserMessage):
        return [{"role": "user", "content": _user_parts(message.content, model)}] if message.content else []
    if isinstance(message, AssistantMessage):
        return _assistant_items(message, model)
    return _tool_result_items(message, model)


def _tool_result_items(message: ToolResultMessage, model: ResolvedModel) -> list[dict[str, Any]]:
    call_id, _ = _split_id(message.tool_call_id)
    has_images = any(isinstance(b, ImageContent) for b in message.content)
    output: Any
    if has_images:
        output = _user_parts(message.content, model)
    else:
        output = message.text
    return [{"type": "function_call_output", "call_id": call_id, "output": output}]


_Converted = tuple[list[dict[str, Any]], bytes]
"""A message's cached wire form: its input items, and their encodings joined by commas."""


def tool_dicts(tools: list[ToolSpec], web_search: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": False}
        for t in tools
    ]
    if web_search:
        out.append({"type": "web_search"})
    return out


class ResponsesParser:
    """Responses SSE → stream events. Keyed by ``output_index`` of each output item.

    The terminal response's ``output`` is the whole answer: items in it that the stream did not
    carry (a gateway translating another protocol streams text but puts function calls only
    there) are built from it, in output order, after the streamed ones."""

    def __init__(self, builder: MessageBuilder) -> None:
        self.builder = builder
        self.done = False
        self.failure: ProviderFailure | None = None
        self.stop_reason: StopReason = "stop"
        self.finish_reason: str | None = None
        self.blocks: dict[int, int] = {}
        self.streamed: dict[int, str] = {}  # output_index → type of each item the stream added
        self.streamed_ids: set[str] = set()
        self.finished: set[int] = set()  # output indices whose ``output_item.done`` arrived
        self.cited: set[str] = set()

    def on_end(self) -> Iterable[StreamEvent]:
        return ()

    def end_marker(self) -> None:
        """``[DONE]`` is not a Responses event (LiteLLM sends it): without ``response.completed``
        the stream is incomplete."""

    def feed(self, sse: ServerSentEvent) -> Iterable[StreamEvent]:
        data = loads(sse.data)
        kind = data.get("type", sse.event)
        b = self.builder
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            return (b.text(self.blocks[data["output_index"]], data["delta"]),)
        if kind == "response.function_call_arguments.delta":
            return (b.tool_args(self.blocks[data["output_index"]], data["delta"]),)
        if kind == "response.reasoning_summary_text.delta":
            return (b.thinking(self.blocks[data["output_index"]], data["delta"]),)
        if kind == "response.output_item.added":
            index, item = data["output_index"], data["item"]
            self.streamed[index] = str(item.get("type"))
            if item.get("id"):
                self.streamed_ids.add(str(item["id"]))
            return self._item_added(index, item)
        if kind == "response.output_item.done":
            self.finished.add(data["output_index"])
            return self._item_done(data["output_index"], data["item"])
        if kind == "response.reasoning_summary_part.added" and data.get("summary_index", 0) > 0:
            index = self.blocks.get(data["output_index"])
            if index is not None and b.has_parts(index):
                return (b.thinking(index, "\n\n"),)
            return ()
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            return self._terminal(data.get("response") or {})
        failure = stream_error(data)  # the ``error`` event, or a gateway's bare error object
        if failure is not None:
            self.failure = failure
            self.done = True
        return ()

    def _item_added(self, output_index: int, item: dict[str, Any]) -> Iterable[StreamEvent]:
        b = self.builder
        item_type = item.get("type")
        if item_type == "message":
            start = b.open_text()
        elif item_type == "reasoning":
            start = b.open_thinking()
        elif item_type == "function_call":
            call_id = f"{item.get('call_id', '')}|{item['id']}" if item.get("id") else str(item.get("call_id", ""))
            start = b.open_tool(call_id, item.get("name", ""))
        elif item_type == "web_search_call":
            return (WebSearchUpdate({"id": item.get("id", ""), "status": "running", "sources": []}),)
        else:
            return ()
        self.blocks[output_index] = start.index
        return (start,)

    def _item_done(self, output_index: int, item: dict[str, Any]) -> Iterable[StreamEvent]:
        b = self.builder
        item_type = item.get("type")
        index = self.blocks.get(output_index)
        if item_type == "function_call" and index is not None:
            end = b.close_tool(index, item.get("arguments"))
            return (end,) if end is not None else ()
        if item_type == "reasoning" and index is not None:
            events: list[StreamEvent] = []
            if not b.has_parts(index):
                summary = "\n\n".join(p.get("text", "") for p in item.get("summary") or [])
                if summary:
                    events.append(b.thinking(index, summary))
            b.set_signature(index, json.dumps(item))
            return events
        if item_type == "message" and index is not None:
            return self._message_done(index, item)
        if item_type == "web_search_call":
            return self._search_done(item)
        return ()

    def _unstreamed(self, output: list[Any]) -> list[StreamEvent]:
        """Build each item of the terminal ``output`` the stream did not (fully) carry. An item
        counts as streamed when its id was streamed or an item of its type was added at its
        position (translating gateways give every event a new id); a streamed item whose
        ``output_item.done`` never came is completed from it."""
        events: list[StreamEvent] = []
        for position, item in enumerate(output):
            if not isinstance(item, dict):
                continue
            if str(item.get("id")) in self.streamed_ids or self.streamed.get(position) == item.get("type"):
                if position not in self.finished:
                    events.extend(self._item_done(position, item))
                continue
            key = -1 - position  # its own block key: the position may hold a streamed item of another type
            events.extend(self._item_added(key, item))
            events.extend(self._item_done(key, item))
        return events

    def _message_done(self, index: int, item: dict[str, Any]) -> Iterable[StreamEvent]:
        b = self.builder
        sources: list[dict[str, Any]] = []
        texts: list[str] = []
        for part in item.get("content") or []:
            texts.append(part.get("text") or part.get("refusal") or "")
            for note in part.get("annotations") or []:
                url = note.get("url")
                if note.get("type") == "url_citation" and url and url not in self.cited:
                    self.cited.add(url)
                    source = {"url": url}
                    if note.get("title"):
                        source["title"] = note["title"]
                    sources.append(source)
        events: list[StreamEvent] = []
        if not b.has_parts(index) and any(texts):
            events.append(b.text(index, "".join(texts)))
        if sources:
            events.append(SourcesFound(sources))
        return events

    def _search_done(self, item: dict[str, Any]) -> Iterable[StreamEvent]:
        self.builder.add_native(API_KIND, item)
        action = item.get("action") or {}
        failed = item.get("status") == "failed"
        search: dict[str, Any] = {
            "id": item.get("id", ""),
            "status": "failed" if failed else "success",
            "sources": [{"url": s["url"]} for s in action.get("sources") or [] if s.get("url")],
        }
        if action.get("query"):
            search["query"] = action["query"]
        if failed:
            search["error"] = "web search failed"
        return (WebSearchUpdate(search),)

    def _terminal(self, response: dict[str, Any]) -> Iterable[StreamEvent]:
        self.done = True
        usage = response.get("usage")
        if usage and isinstance(usage, dict):
            u = self.builder.usage
            cached = token_count(json_object(usage.get("input_tokens_details")), "cached_tokens") or 0
            u.input_tokens = max(0, (token_count(usage, "input_tokens") or 0) - cached)
            u.cached_input_tokens = cached
            u.output_tokens = token_count(usage, "output_tokens") or 0
            u.reasoning_tokens = token_count(json_object(usage.get("output_tokens_details")), "reasoning_tokens") or 0
        status = response.get("status")
        reason = (response.get("incomplete_details") or {}).get("reason")
        self.finish_reason = str(reason or status) if (reason or status) else None
        events: list[StreamEvent] = []
        output = response.get("output")
        if status in ("completed", "incomplete") and isinstance(output, list):
            events = self._unstreamed(output)
        if status == "failed":
            self.failure = classify_payload(response.get("error") or {"message": "the response failed"})
        elif status == "cancelled":
            self.failure = ProviderFailure(
                "provider_aborted", f"the provider cancelled the response ({reason or status})"
            )
        elif status == "incomplete" and reason == "max_output_tokens":
            self.stop_reason = "length"
        elif status == "incomplete" and reason != "content_filter":
            self.failure = ProviderFailure("provider_aborted", f"the response is incomplete ({reason})")
        else:
            called = any(isinstance(item, dict) and item.get("type") == "function_call" for item in output or [])
            self.stop_reason = "tool_use" if self.builder.tool_calls or called else "stop"
        return events


class OpenAIResponsesProvider(SSEAdapter):
    api_kind = API_KIND

    def __init__(self, client: httpx.AsyncClient | None = None, timeouts: StreamTimeouts | None = None) -> None:
        super().__init__(client, timeouts)
        self._cache = WireCache()
        self._prefix: HistoryPrefix[list[bytes]] = HistoryPrefix()

    def parser(self, builder: MessageBuilder) -> ResponsesParser:
        return ResponsesParser(builder)

    def url(self, model: ResolvedModel) -> str:
        return endpoint(model.base_url, "/responses")

    def headers(self, model: ResolvedModel) -> dict[str, str]:
        return bearer_headers(model.api_key)

    def _converted(self, message: Message, model: ResolvedModel, scope: Hashable) -> _Converted:
        converted: _Converted | None = self._cache.get(message, scope)
        if converted is None:
            items = message_items(message, model)
            converted = self._cache.put(message, scope, (items, b",".join(dumps(item) for item in items)))
        return converted

    def _input(self, messages: list[Message], model: ResolvedModel) -> list[dict[str, Any]]:
        """The input items (a message may become several); ``build_body``'s path."""
        scope = wire_scope(model)
        return [item for message in messages for item in self._converted(message, model, scope)[0]]

    def _encoded_input(self, messages: list[Message], model: ResolvedModel) -> list[bytes]:
        """Per message that sends anything, its items' encodings joined by commas; resumes
        where the previous request ended."""
        scope = wire_scope(model)
        start, state = self._prefix.resume(messages, scope)
        encoded = list(state) if state is not None else []
        for message in messages[start:]:
            items, blob = self._converted(message, model, scope)
            if items:
                encoded.append(blob)
        self._prefix.save(messages, scope, encoded, start)
        return encoded

    def _head(self, request: ProviderRequest) -> dict[str, Any]:
        model = request.model
        body: dict[str, Any] = {
            "model": model.model_id,
            "stream": True,
            "store": False,
            "max_output_tokens": request.max_tokens or model.max_tokens,
        }
        if request.system_prompt:
            body["instructions"] = request.system_prompt
        tools = tool_dicts(request.tools, request.web_search)
        if tools:
            body["tools"] = tools
        effort = openai_effort(model, request.effort)
        if effort is not None:
            body["reasoning"] = {"effort": effort, "summary": "auto"}
            body["include"] = ["reasoning.encrypted_content"]
        if request.session_id:
            body["prompt_cache_key"] = request.session_id
        return body

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The request as a dict (what ``encode_body`` encodes)."""
        return {**self._head(request), "input": self._input(request.messages, request.model)}

    def encode_body(self, request: ProviderRequest) -> bytes:
        return splice_body(self._head(request), "input", self._encoded_input(request.messages, request.model))
