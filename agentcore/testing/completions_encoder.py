"""Chat Completions framing (``POST /v1/chat/completions``, ``stream: true``).

``data:`` lines only, every chunk ``"object": "chat.completion.chunk"``; the usage chunk
(``"choices": []``) is sent only when the request asked for it with
``stream_options.include_usage``, as OpenAI does; the terminal line is ``data: [DONE]``.
"""

from __future__ import annotations

import time
from typing import Any

from agentcore.testing.encoder import (
    DONE_FRAME,
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

_FINISH = {"stop": "stop", "length": "length", "tool_use": "tool_calls", "pause_turn": "stop"}


class CompletionsEncoder(Encoder):
    api_kind = "openai-completions"

    def __init__(self, model: str, usage: Usage, request: dict[str, Any]) -> None:
        super().__init__(model, usage, request)
        self.chunk_id = new_id("chatcmpl-")
        self.created = int(time.time())
        self.tool_index = 0
        options = request.get("stream_options")
        self.include_usage = isinstance(options, dict) and bool(options.get("include_usage"))

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return sse_frame(
            {
                "id": self.chunk_id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            }
        )

    def preamble(self) -> list[bytes]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def text(self, step: Text) -> list[bytes]:
        return [self.text_delta(part) for part in step.parts()]

    def open_text(self) -> list[bytes]:
        return []

    def text_delta(self, part: str) -> bytes:
        return self._chunk({"content": part})

    def thinking(self, step: Thinking) -> list[bytes]:
        return [self._chunk({step.completions_field: part}) for part in step.parts()]

    def tool_call(self, step: ToolCall) -> list[bytes]:
        index = self.tool_index
        self.tool_index += 1
        head = {
            "index": index,
            "id": step.id or new_id("call_"),
            "type": "function",
            "function": {"name": step.name, "arguments": ""},
        }
        frames = [self._chunk({"tool_calls": [head]})]
        frames += [
            self._chunk({"tool_calls": [{"index": index, "function": {"arguments": c}}]}) for c in argument_chunks(step)
        ]
        return frames

    def web_search(self, step: WebSearch) -> list[bytes]:
        return []  # Chat Completions has no native search; the step is ignored.

    def _usage(self) -> dict[str, Any]:
        u = self.usage
        if u.wire is not None:
            return u.wire
        prompt = u.input + u.cached_input + u.cache_creation
        return {
            "prompt_tokens": prompt,
            "completion_tokens": u.output,
            "total_tokens": prompt + u.output,
            "prompt_tokens_details": {"cached_tokens": u.cached_input},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning},
        }

    def _usage_chunk(self) -> list[bytes]:
        if not self.include_usage:
            return []
        body = {
            "id": self.chunk_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": self._usage(),
        }
        return [sse_frame(body)]

    def finish(self, stop: str, *, terminal: bool) -> list[bytes]:
        frames = [self._chunk({}, _FINISH.get(stop, "stop")), *self._usage_chunk()]
        if terminal:
            frames.append(sse_frame("[DONE]"))
        return frames

    def done_marker_end(self, stop: str) -> list[bytes]:
        return [self._chunk({}, _FINISH.get(stop, "stop")), DONE_FRAME]  # [DONE] without the usage chunk

    def gateway_cut(self) -> list[bytes]:
        return [self._chunk({}, "stop"), DONE_FRAME]

    def aborted(self, step: Aborted) -> list[bytes]:
        return [self._chunk({}, "abort"), *self._usage_chunk(), sse_frame("[DONE]")]

    def stream_error(self, step: StreamError) -> list[bytes]:
        if step.gateway:
            return [gateway_error_frame(step)]
        error = {"message": step.message, "type": step.error_type or "server_error", "param": None, "code": step.code}
        return [sse_frame({"error": error})]

    def http_error(self, step: HttpError) -> ErrorResponse:
        default_type = "server_error" if step.status >= 500 else "invalid_request_error"
        error = {
            "message": step.message,
            "type": step.error_type or ("requests" if step.status == 429 else default_type),
            "param": None,
            "code": step.code if step.code is not None else ("rate_limit_exceeded" if step.status == 429 else None),
        }
        return ErrorResponse(step.status, error_body_bytes(step, {"error": error}), error_headers(step))

    def overflow(self, step: Overflow) -> ErrorResponse:
        message = (
            f"This model's maximum context length is {step.limit} tokens. However, your messages resulted in "
            f"{step.tokens} tokens. Please reduce the length of the messages."
        )
        error = {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
        return ErrorResponse(400, error_body_bytes(HttpError(400), {"error": error}))
