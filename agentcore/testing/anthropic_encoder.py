"""Anthropic Messages framing (``POST /v1/messages``, ``stream: true``).

Every frame has an ``event:`` line (the SDK requires it). Input usage, including cache reads
and writes, arrives in ``message_start``; the cumulative output count and ``stop_reason`` in
``message_delta``; the terminal event is ``message_stop``.
"""

from __future__ import annotations

import json
from typing import Any

from agentcore.testing.encoder import (
    Encoder,
    ErrorResponse,
    argument_chunks,
    error_body_bytes,
    error_headers,
    gateway_error_frame,
    new_id,
    sse_frame,
)
from agentcore.testing.steps import (
    Aborted,
    HttpError,
    Overflow,
    StreamError,
    Text,
    Thinking,
    ToolCall,
    Usage,
    WebSearch,
)

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_use": "tool_use", "pause_turn": "pause_turn"}


def _event(data: dict[str, Any]) -> bytes:
    return sse_frame(data, data["type"])


class AnthropicEncoder(Encoder):
    api_kind = "anthropic-messages"

    def __init__(self, model: str, usage: Usage, request: dict[str, Any]) -> None:
        super().__init__(model, usage, request)
        self.index = 0
        self.text_index = 0

    def _next_index(self) -> int:
        index = self.index
        self.index += 1
        return index

    def preamble(self) -> list[bytes]:
        u = self.usage
        message: dict[str, Any] = {
            "id": new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": u.wire
            if u.wire is not None
            else {
                "input_tokens": u.input,
                "cache_creation_input_tokens": u.cache_creation,
                "cache_read_input_tokens": u.cached_input,
                "output_tokens": 1,
            },
        }
        return [_event({"type": "message_start", "message": message}), _event({"type": "ping"})]

    def _block(self, block: dict[str, Any], deltas: list[dict[str, Any]]) -> list[bytes]:
        index = self._next_index()
        frames = [_event({"type": "content_block_start", "index": index, "content_block": block})]
        frames += [_event({"type": "content_block_delta", "index": index, "delta": delta}) for delta in deltas]
        frames.append(_event({"type": "content_block_stop", "index": index}))
        return frames

    def open_text(self) -> list[bytes]:
        self.text_index = self._next_index()
        block = {"type": "text", "text": ""}
        return [_event({"type": "content_block_start", "index": self.text_index, "content_block": block})]

    def text_delta(self, part: str) -> bytes:
        delta = {"type": "text_delta", "text": part}
        return _event({"type": "content_block_delta", "index": self.text_index, "delta": delta})

    def keepalive(self) -> bytes:
        return _event({"type": "ping"})

    def text(self, step: Text) -> list[bytes]:
        frames = self.open_text()
        frames += [self.text_delta(part) for part in step.parts()]
        citations: list[dict[str, Any]] = []
        for source in self.take_citations():
            citation = {
                "type": "web_search_result_location",
                "url": source["url"],
                "title": source.get("title", ""),
                "cited_text": source.get("cited_text", step.text[:150]),
                "encrypted_index": "ZmFrZQ==",
            }
            citations.append({"type": "citations_delta", "citation": citation})
        index = self.text_index
        frames += [_event({"type": "content_block_delta", "index": index, "delta": c}) for c in citations]
        frames.append(_event({"type": "content_block_stop", "index": index}))
        return frames

    def thinking(self, step: Thinking) -> list[bytes]:
        if step.redacted:
            return self._block({"type": "redacted_thinking", "data": step.signature}, [])
        deltas: list[dict[str, Any]] = [{"type": "thinking_delta", "thinking": part} for part in step.parts()]
        deltas.append({"type": "signature_delta", "signature": step.signature})
        return self._block({"type": "thinking", "thinking": "", "signature": ""}, deltas)

    def tool_call(self, step: ToolCall) -> list[bytes]:
        block = {"type": "tool_use", "id": step.id or new_id("toolu_"), "name": step.name, "input": {}}
        deltas: list[dict[str, Any]] = [{"type": "input_json_delta", "partial_json": c} for c in argument_chunks(step)]
        return self._block(block, deltas)

    def web_search(self, step: WebSearch) -> list[bytes]:
        tool_id = new_id("srvtoolu_")
        query = json.dumps({"query": step.query})
        frames = self._block(
            {"type": "server_tool_use", "id": tool_id, "name": "web_search", "input": {}},
            [{"type": "input_json_delta", "partial_json": query}],
        )
        content: Any
        if step.error:
            content = {"type": "web_search_tool_result_error", "error_code": step.error}
        else:
            content = [
                {
                    "type": "web_search_result",
                    "url": s["url"],
                    "title": s.get("title", ""),
                    "encrypted_content": "ZmFrZQ==",
                    "page_age": None,
                }
                for s in step.sources
            ]
            self.pending_citations = list(step.sources)
        frames += self._block({"type": "web_search_tool_result", "tool_use_id": tool_id, "content": content}, [])
        return frames

    def finish(self, stop: str, *, terminal: bool) -> list[bytes]:
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": _STOP.get(stop, "end_turn"), "stop_sequence": None},
            "usage": self.usage.wire if self.usage.wire is not None else {"output_tokens": self.usage.output},
        }
        frames = [_event(delta)]
        if terminal:
            frames.append(_event({"type": "message_stop"}))
        return frames

    def gateway_cut(self) -> list[bytes]:
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [_event(delta), _event({"type": "message_stop"})]

    def aborted(self, step: Aborted) -> list[bytes]:
        return self.stream_error(StreamError(f"request {step.reason}", "api_error"))

    def stream_error(self, step: StreamError) -> list[bytes]:
        if step.gateway:
            return [gateway_error_frame(step)]
        return [
            _event({"type": "error", "error": {"type": step.error_type or "overloaded_error", "message": step.message}})
        ]

    def http_error(self, step: HttpError) -> ErrorResponse:
        error_type = step.error_type or _ERROR_TYPES.get(step.status, "api_error")
        body = {"type": "error", "error": {"type": error_type, "message": step.message}, "request_id": new_id("req_")}
        return ErrorResponse(step.status, error_body_bytes(step, body), error_headers(step))

    def overflow(self, step: Overflow) -> ErrorResponse:
        message = f"prompt is too long: {step.tokens} tokens > {step.limit} maximum"
        body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        return ErrorResponse(400, error_body_bytes(HttpError(400), body))
