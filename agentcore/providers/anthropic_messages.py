"""Anthropic Messages adapter (``POST {base_url}/v1/messages``, SSE) — SPEC P1, P2, M5, L8.

Thinking is ``{type: enabled, budget_tokens}`` from a level→budget table (always below
``max_tokens``), or explicitly ``disabled`` on a reasoning model when effort is off. Signed
thinking, redacted thinking and native web-search blocks are replayed only to the model that
produced them. Prompt caching: the system prompt and the last message carry
``cache_control`` breakpoints, so each turn reads the previous turn's prefix from cache.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Iterable
from typing import Any

import httpx

from agentcore.messages import (
    AssistantMessage,
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
    BlockStart,
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
    dumps,
    mapped_effort,
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

API_KIND = "anthropic-messages"
ANTHROPIC_VERSION = "2023-06-01"
THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32000, "max": 64000}
MIN_BUDGET = 1024
ANSWER_ROOM = 1024  # output tokens left for the answer after the thinking budget
WEB_SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
_STOP: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "refusal": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_use",
    "pause_turn": "pause_turn",
}
_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_CACHE = {"type": "ephemeral"}


def messages_url(base_url: str) -> str:
    """Like the Anthropic SDK: the base URL excludes ``/v1`` (but one ending in ``/v1`` works too)."""
    base = base_url.rstrip("/")
    return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


def wire_tool_id(tool_call_id: str) -> str:
    """Anthropic ids must match ``^[a-zA-Z0-9_-]+$`` (ids from other providers may not)."""
    return _ID_CHARS.sub("_", tool_call_id.partition("|")[0])[:64] or "tool"


def _user_blocks(content: list[UserContent], model: ResolvedModel) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        elif model.accepts_images:
            source = {"type": "base64", "media_type": block.mime_type, "data": block.data}
            blocks.append({"type": "image", "source": source})
        else:
            blocks.append({"type": "text", "text": IMAGE_OMITTED})
    return blocks


def _assistant_blocks(message: AssistantMessage, model: ResolvedModel) -> list[dict[str, Any]]:
    replay = same_model(message, API_KIND, model)
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolCall):
            blocks.append(
                {"type": "tool_use", "id": wire_tool_id(block.id), "name": block.name, "input": block.arguments}
            )
        elif isinstance(block, ThinkingContent):
            if not replay or not block.signature:
                continue  # unsigned or foreign reasoning cannot be replayed
            if block.redacted:
                blocks.append({"type": "redacted_thinking", "data": block.signature})
            else:
                blocks.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
        elif isinstance(block, NativeContent) and replay and block.api_kind == API_KIND:
            blocks.append(block.payload)
    return blocks


def message_wire(message: Message, model: ResolvedModel) -> dict[str, Any] | None:
    """A user/assistant message → its wire message; a tool result → its ``tool_result``
    block (merged into one user message per run by the adapter). ``None``: nothing to send."""
    if isinstance(message, UserMessage):
        blocks = _user_blocks(message.content, model)
        return {"role": "user", "content": blocks} if blocks else None
    if isinstance(message, AssistantMessage):
        blocks = _assistant_blocks(message, model)
        return {"role": "assistant", "content": blocks} if blocks else None
    return _tool_result_block(message, model)


def _tool_result_block(message: ToolResultMessage, model: ResolvedModel) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": wire_tool_id(message.tool_call_id),
        "content": _user_blocks(message.content, model) or [{"type": "text", "text": "(no output)"}],
    }
    if message.is_error:
        block["is_error"] = True
    return block


def tool_dicts(tools: list[ToolSpec], web_search: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]
    if web_search:
        out.append(dict(WEB_SEARCH_TOOL))
    return out


def thinking_config(model: ResolvedModel, level: str | None, max_tokens: int) -> tuple[dict[str, Any] | None, int]:
    """(thinking param, max_tokens). The budget leaves ``ANSWER_ROOM`` tokens of ``max_tokens``
    for the answer (raising ``max_tokens`` only when even the 1024 minimum would not fit)."""
    if not model.reasoning:
        return None, max_tokens
    if level is None:
        return {"type": "disabled"}, max_tokens
    upstream = mapped_effort(model, level, {k: str(v) for k, v in THINKING_BUDGETS.items()})
    if upstream is None:
        return {"type": "disabled"}, max_tokens
    try:
        budget = int(upstream)
    except ValueError:
        budget = THINKING_BUDGETS.get(upstream, THINKING_BUDGETS["medium"])
    budget = min(budget, max_tokens - ANSWER_ROOM)
    if budget < MIN_BUDGET:
        budget = MIN_BUDGET
        max_tokens = max(max_tokens, 2 * MIN_BUDGET)
    return {"type": "enabled", "budget_tokens": budget}, max_tokens


_Entry = tuple[dict[str, Any] | None, list[bytes], bytes]
"""A message's cached wire form: (wire message, or a tool result's ``tool_result`` block, or
None; the encodings of a message's content blocks; the encoding of the whole wire form)."""

_Turn = _Entry | list[_Entry]
"""One wire message of a request: a cached message, or a run of tool results (one user message)."""

_CACHEABLE = ("text", "image", "tool_result", "tool_use")
_CACHE_FIELD = b',"cache_control":' + dumps(_CACHE) + b"}"
_MESSAGE_START = {role: b'{"role":' + dumps(role) + b',"content":[' for role in ("user", "assistant")}


def _entry(wire: dict[str, Any] | None) -> _Entry:
    if wire is None:
        return None, [], b""
    if "role" not in wire:
        return wire, [], dumps(wire)  # a tool_result block
    blocks = [dumps(block) for block in wire["content"]]
    return wire, blocks, _message_encoding(wire["role"], blocks)


def _message_encoding(role: str, blocks: list[bytes]) -> bytes:
    return b"".join((_MESSAGE_START[role], b",".join(blocks), b"]}"))


def _turn_wire(turn: _Turn) -> dict[str, Any]:
    if isinstance(turn, list):
        return {"role": "user", "content": [wire for wire, _, _ in turn]}
    assert turn[0] is not None
    return turn[0]


def _turn_encoding(turn: _Turn) -> bytes:
    if isinstance(turn, list):
        return b"".join((_MESSAGE_START["user"], b",".join([encoded for _, _, encoded in turn]), b"]}"))
    return turn[2]


def _with_cache_breakpoint(turn: _Turn) -> tuple[dict[str, Any], bytes]:
    """The last message, its last cacheable block carrying ``cache_control`` (in a copy: the
    cache is shared), as a dict and as its encoding (spliced into the cached block bytes)."""
    wire = _turn_wire(turn)
    content: list[dict[str, Any]] = wire["content"]
    blocks = [encoded for _, _, encoded in turn] if isinstance(turn, list) else turn[1]
    for i in range(len(content) - 1, -1, -1):
        if content[i].get("type") in _CACHEABLE:
            marked = {**content[i], "cache_control": _CACHE}
            blocks = list(blocks)
            blocks[i] = dumps(marked) if "cache_control" in content[i] else blocks[i][:-1] + _CACHE_FIELD
            content = list(content)
            content[i] = marked
            return {**wire, "content": content}, _message_encoding(wire["role"], blocks)
    return wire, _turn_encoding(turn)


class AnthropicParser:
    """Messages SSE → stream events. Keyed by the wire ``index`` of each content block."""

    def __init__(self, builder: MessageBuilder) -> None:
        self.builder = builder
        self.done = False
        self.failure: ProviderFailure | None = None
        self.stop_reason: StopReason = "stop"
        self.finish_reason: str | None = None
        self.blocks: dict[int, tuple[str, int]] = {}
        self.server_tools: dict[int, tuple[dict[str, Any], list[str]]] = {}
        self.cited: set[str] = set()

    def on_end(self) -> Iterable[StreamEvent]:
        return ()

    def end_marker(self) -> None:
        """``[DONE]`` is not an Anthropic event: without ``message_stop`` the stream is incomplete."""

    def feed(self, sse: ServerSentEvent) -> Iterable[StreamEvent]:
        kind = sse.event
        if kind == "ping":
            return ()
        data = loads(sse.data)
        if kind == "content_block_delta":
            return self._delta(data["index"], data["delta"])
        if kind == "content_block_start":
            return self._start(data["index"], data["content_block"])
        if kind == "content_block_stop":
            return self._stop(data["index"])
        if kind == "message_start":
            self._usage((data.get("message") or {}).get("usage") or {})
        elif kind == "message_delta":
            self._usage(data.get("usage") or {})
            reason = (data.get("delta") or {}).get("stop_reason")
            if reason:
                self.stop_reason = _STOP.get(reason, "stop")
                self.finish_reason = reason
        elif kind == "message_stop":
            self.done = True
        elif (failure := stream_error(data)) is not None:  # ``event: error``, or a gateway's bare error object
            self.failure = failure
            self.done = True
        return ()

    def _usage(self, usage: Any) -> None:
        """Counts in ``message_start`` and cumulative ones in ``message_delta``: a count that
        is present and usable replaces the earlier one (see ``token_count``)."""
        if not isinstance(usage, dict):
            return
        u = self.builder.usage
        if (count := token_count(usage, "input_tokens")) is not None:
            u.input_tokens = count
        if (count := token_count(usage, "cache_read_input_tokens")) is not None:
            u.cached_input_tokens = count
        if (count := token_count(usage, "cache_creation_input_tokens")) is not None:
            u.cache_creation_tokens = count
        if (count := token_count(usage, "output_tokens")) is not None:
            u.output_tokens = count

    def _start(self, wire_index: int, block: dict[str, Any]) -> Iterable[StreamEvent]:
        b = self.builder
        block_type = block.get("type")
        start: BlockStart
        if block_type == "text":
            start = b.open_text(block.get("text") or "")
        elif block_type == "thinking":
            start = b.open_thinking()
        elif block_type == "redacted_thinking":
            start = b.open_thinking(signature=block.get("data", ""), redacted=True)
        elif block_type == "tool_use":
            start = b.open_tool(block["id"], block["name"])
        elif block_type == "server_tool_use":
            self.server_tools[wire_index] = (dict(block), [])
            return (WebSearchUpdate({"id": block.get("id", ""), "status": "running", "sources": []}),)
        elif block_type == "web_search_tool_result":
            return self._search_result(block)
        else:
            return ()
        self.blocks[wire_index] = (str(block_type), start.index)
        return (start,)

    def _delta(self, wire_index: int, delta: dict[str, Any]) -> Iterable[StreamEvent]:
        b = self.builder
        delta_type = delta.get("type")
        if wire_index in self.server_tools:
            if delta_type == "input_json_delta":
                self.server_tools[wire_index][1].append(delta.get("partial_json", ""))
            return ()
        entry = self.blocks.get(wire_index)
        if entry is None:
            return ()
        index = entry[1]
        if delta_type == "text_delta":
            return (b.text(index, delta["text"]),)
        if delta_type == "thinking_delta":
            return (b.thinking(index, delta["thinking"]),)
        if delta_type == "input_json_delta":
            return (b.tool_args(index, delta.get("partial_json", "")),)
        if delta_type == "signature_delta":
            b.set_signature(index, delta["signature"])
        elif delta_type == "citations_delta":
            citation = delta.get("citation") or {}
            url = citation.get("url")
            if url and url not in self.cited:
                self.cited.add(url)
                source = {"url": url}
                for field in ("title", "cited_text"):
                    if citation.get(field):
                        source[field] = citation[field]
                return (SourcesFound([source]),)
        return ()

    def _stop(self, wire_index: int) -> Iterable[StreamEvent]:
        server = self.server_tools.pop(wire_index, None)
        if server is not None:
            block, parts = server
            try:
                block["input"] = loads("".join(parts)) if parts else block.get("input") or {}
            except json.JSONDecodeError:
                block["input"] = {}
            self.builder.add_native(API_KIND, block)
            search = {"id": block.get("id", ""), "status": "running", "sources": []}
            query = block["input"].get("query") if isinstance(block["input"], dict) else None
            if query:
                search["query"] = query
            return (WebSearchUpdate(search),)
        entry = self.blocks.get(wire_index)
        if entry is not None and entry[0] == "tool_use":
            end = self.builder.close_tool(entry[1])
            return (end,) if end is not None else ()
        return ()

    def _search_result(self, block: dict[str, Any]) -> Iterable[StreamEvent]:
        self.builder.add_native(API_KIND, block)
        content = block.get("content")
        search: dict[str, Any] = {"id": block.get("tool_use_id", ""), "sources": []}
        if isinstance(content, list):
            search["status"] = "success"
            search["sources"] = [
                {"url": r["url"], "title": r.get("title", "")} for r in content if isinstance(r, dict) and r.get("url")
            ]
        else:
            search["status"] = "failed"
            search["error"] = (content or {}).get("error_code", "unknown") if isinstance(content, dict) else "unknown"
        return (WebSearchUpdate(search),)


class AnthropicMessagesProvider(SSEAdapter):
    api_kind = API_KIND

    def __init__(self, client: httpx.AsyncClient | None = None, timeouts: StreamTimeouts | None = None) -> None:
        super().__init__(client, timeouts)
        self._cache = WireCache()
        self._prefix: HistoryPrefix[tuple[list[bytes], _Turn | None]] = HistoryPrefix()

    def parser(self, builder: MessageBuilder) -> AnthropicParser:
        return AnthropicParser(builder)

    def url(self, model: ResolvedModel) -> str:
        return messages_url(model.base_url)

    def output_limit(self, request: ProviderRequest) -> int:
        """``max_tokens`` as sent: a thinking budget may have raised it."""
        return thinking_config(request.model, request.effort, request.max_tokens or request.model.max_tokens)[1]

    def _entry(self, message: Message, model: ResolvedModel, scope: Hashable) -> _Entry:
        entry: _Entry | None = self._cache.get(message, scope)
        if entry is None:
            entry = self._cache.put(message, scope, _entry(message_wire(message, model)))
        return entry

    def _turns(self, messages: list[Message], model: ResolvedModel) -> list[_Turn]:
        """The wire messages of a request (``build_body``'s path): each message converted and
        encoded once; a run of tool results becomes one user message."""
        turns: list[_Turn] = []
        results: list[_Entry] | None = None
        scope = wire_scope(model)
        for message in messages:
            entry = self._entry(message, model, scope)
            if entry[0] is None:
                continue
            if isinstance(message, ToolResultMessage):
                if results is None:
                    results = []
                    turns.append(results)
                results.append(entry)
            else:
                results = None
                turns.append(entry)
        return turns

    def _encoded_messages(self, messages: list[Message], model: ResolvedModel) -> list[bytes]:
        """The encodings of ``_turns`` (the last one with its cache breakpoint), resuming
        where the previous request ended: all turns but the last are encoded; the last may
        be an open run of tool results that new results join."""
        scope = wire_scope(model)
        start, state = self._prefix.resume(messages, scope)
        closed, last = (list(state[0]), state[1]) if state is not None else ([], None)
        if isinstance(last, list):
            last = list(last)
        for message in messages[start:]:
            entry = self._entry(message, model, scope)
            if entry[0] is None:
                continue
            if isinstance(message, ToolResultMessage) and isinstance(last, list):
                last.append(entry)
                continue
            if last is not None:
                closed.append(_turn_encoding(last))
            last = [entry] if isinstance(message, ToolResultMessage) else entry
        self._prefix.save(messages, scope, (closed, last), start)
        return [*closed, _with_cache_breakpoint(last)[1]] if last is not None else closed

    def _head(self, request: ProviderRequest) -> dict[str, Any]:
        model = request.model
        max_tokens = request.max_tokens or model.max_tokens
        thinking, max_tokens = thinking_config(model, request.effort, max_tokens)
        body: dict[str, Any] = {"model": model.model_id, "max_tokens": max_tokens, "stream": True}
        if request.system_prompt:
            body["system"] = [{"type": "text", "text": request.system_prompt, "cache_control": _CACHE}]
        tools = tool_dicts(request.tools, request.web_search)
        if tools:
            body["tools"] = tools
        if thinking is not None:
            body["thinking"] = thinking
        return body

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The request as a dict (what ``encode_body`` encodes)."""
        turns = self._turns(request.messages, request.model)
        messages = [_turn_wire(turn) for turn in turns[:-1]]
        if turns:
            messages.append(_with_cache_breakpoint(turns[-1])[0])
        return {**self._head(request), "messages": messages}

    def encode_body(self, request: ProviderRequest) -> bytes:
        encoded = self._encoded_messages(request.messages, request.model)
        return splice_body(self._head(request), "messages", encoded)

    def headers(self, model: ResolvedModel) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if model.api_key:
            headers["x-api-key"] = model.api_key
        return headers
