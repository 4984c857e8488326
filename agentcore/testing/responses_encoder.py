"""OpenAI Responses framing (``POST /v1/responses``, ``stream: true``).

Every event carries ``type`` and ``sequence_number`` and is preceded by an ``event:`` line,
as the real service sends it, and validates against the ``openai`` SDK's event models (which
gateways such as LiteLLM use to check upstream events). The terminal event is
``response.completed`` (or ``response.incomplete`` for a max-output-tokens stop or a cancelled
response). Items of steps with ``streamed=False`` appear only in the terminal response's
``output``, as gateways translating another protocol send tool calls.
"""

from __future__ import annotations

import time
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
    tool_arguments_text,
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

_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error", 404: "not_found"}


class ResponsesEncoder(Encoder):
    api_kind = "openai-responses"

    def __init__(self, model: str, usage: Usage, request: dict[str, Any]) -> None:
        super().__init__(model, usage, request)
        self.response_id = new_id("resp_")
        self.seq = 0
        self.output: list[dict[str, Any]] = []
        self.created_at = int(time.time())
        self.text_where: dict[str, Any] = {}
        tools = request.get("tools")
        self.tools = [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []

    def _event(self, data: dict[str, Any]) -> bytes:
        data["sequence_number"] = self.seq
        self.seq += 1
        return sse_frame(data, data["type"])

    def _response(self, status: str, **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": self.model,
            "output": list(self.output) if status != "in_progress" else [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": self.tools,
            "usage": None,
            "incomplete_details": None,
            "error": None,
        }
        body.update(extra)
        return body

    def _usage(self) -> dict[str, Any]:
        u = self.usage
        if u.wire is not None:
            return u.wire
        total_input = u.input + u.cached_input + u.cache_creation
        return {
            "input_tokens": total_input,
            "input_tokens_details": {"cached_tokens": u.cached_input, "cache_write_tokens": u.cache_creation},
            "output_tokens": u.output,
            "output_tokens_details": {"reasoning_tokens": u.reasoning},
            "total_tokens": total_input + u.output,
        }

    def preamble(self) -> list[bytes]:
        return [
            self._event({"type": "response.created", "response": self._response("in_progress")}),
            self._event({"type": "response.in_progress", "response": self._response("in_progress")}),
        ]

    def _item_added(self, item: dict[str, Any]) -> tuple[int, bytes]:
        index = len(self.output)
        self.output.append(item)
        return index, self._event({"type": "response.output_item.added", "output_index": index, "item": dict(item)})

    def _item_done(self, index: int, item: dict[str, Any]) -> bytes:
        self.output[index] = item
        return self._event({"type": "response.output_item.done", "output_index": index, "item": item})

    def open_text(self) -> list[bytes]:
        item_id = new_id("msg_")
        item = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        index, added = self._item_added(item)
        self.text_where = where = {"item_id": item_id, "output_index": index, "content_index": 0}
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        return [added, self._event({"type": "response.content_part.added", **where, "part": part})]

    def text_delta(self, part: str) -> bytes:
        return self._event({"type": "response.output_text.delta", **self.text_where, "delta": part, "logprobs": []})

    def _unstreamed(self, item: dict[str, Any]) -> list[bytes]:
        """An item that only the terminal response's ``output`` will carry."""
        self.output.append(item)
        return []

    def text(self, step: Text) -> list[bytes]:
        if not step.streamed:
            whole = {"type": "output_text", "text": step.text, "annotations": [], "logprobs": []}
            item = {"id": new_id("msg_"), "type": "message", "status": "completed", "role": "assistant"}
            return self._unstreamed({**item, "content": [whole]})
        frames = self.open_text()
        where = self.text_where
        index = where["output_index"]
        item = self.output[index]
        frames += [self.text_delta(part) for part in step.parts()]
        annotations = [
            {
                "type": "url_citation",
                "url": c["url"],
                "title": c.get("title", ""),
                "start_index": 0,
                "end_index": len(step.text),
            }
            for c in self.take_citations()
        ]
        for i, annotation in enumerate(annotations):
            frames.append(
                self._event(
                    {
                        "type": "response.output_text.annotation.added",
                        **where,
                        "annotation_index": i,
                        "annotation": annotation,
                    }
                )
            )
        part = {"type": "output_text", "text": step.text, "annotations": annotations, "logprobs": []}
        done = {"type": "response.output_text.done", **where, "text": step.text, "logprobs": []}
        frames.append(self._event(done))
        frames.append(self._event({"type": "response.content_part.done", **where, "part": part}))
        frames.append(self._item_done(index, {**item, "status": "completed", "content": [part]}))
        return frames

    def thinking(self, step: Thinking) -> list[bytes]:
        item_id = new_id("rs_")
        if not step.streamed:
            summary = [{"type": "summary_text", "text": step.text}]
            return self._unstreamed(
                {"id": item_id, "type": "reasoning", "summary": summary, "encrypted_content": step.signature}
            )
        index, added = self._item_added({"id": item_id, "type": "reasoning", "summary": []})
        where = {"item_id": item_id, "output_index": index, "summary_index": 0}
        frames = [
            added,
            self._event(
                {"type": "response.reasoning_summary_part.added", **where, "part": {"type": "summary_text", "text": ""}}
            ),
        ]
        frames += [
            self._event({"type": "response.reasoning_summary_text.delta", **where, "delta": part})
            for part in step.parts()
        ]
        part = {"type": "summary_text", "text": step.text}
        frames.append(self._event({"type": "response.reasoning_summary_text.done", **where, "text": step.text}))
        frames.append(self._event({"type": "response.reasoning_summary_part.done", **where, "part": part}))
        done = {"id": item_id, "type": "reasoning", "summary": [part], "encrypted_content": step.signature}
        frames.append(self._item_done(index, done))
        return frames

    def tool_call(self, step: ToolCall) -> list[bytes]:
        item_id = new_id("fc_")
        call_id = step.id or new_id("call_")
        if not step.streamed:
            arguments = tool_arguments_text(step)
            call = {"id": item_id, "type": "function_call", "status": "completed", "call_id": call_id}
            return self._unstreamed({**call, "name": step.name, "arguments": arguments})
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "call_id": call_id,
            "name": step.name,
            "arguments": "",
        }
        index, added = self._item_added(item)
        frames = [added]
        for chunk in argument_chunks(step):
            frames.append(
                self._event(
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item_id,
                        "output_index": index,
                        "delta": chunk,
                    }
                )
            )
        arguments = tool_arguments_text(step)
        frames.append(
            self._event(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item_id,
                    "output_index": index,
                    "arguments": arguments,
                }
            )
        )
        frames.append(self._item_done(index, {**item, "status": "completed", "arguments": arguments}))
        return frames

    def web_search(self, step: WebSearch) -> list[bytes]:
        item_id = new_id("ws_")
        searching = {"id": item_id, "type": "web_search_call", "status": "in_progress", "action": {"type": "search"}}
        index, added = self._item_added(searching)
        where = {"item_id": item_id, "output_index": index}
        frames = [
            added,
            self._event({"type": "response.web_search_call.in_progress", **where}),
            self._event({"type": "response.web_search_call.searching", **where}),
        ]
        status = "failed" if step.error else "completed"
        if not step.error:
            frames.append(self._event({"type": "response.web_search_call.completed", **where}))
            self.pending_citations = list(step.sources)
        action = {
            "type": "search",
            "query": step.query,
            "sources": [{"type": "url", "url": s["url"]} for s in step.sources],
        }
        frames.append(
            self._item_done(index, {"id": item_id, "type": "web_search_call", "status": status, "action": action})
        )
        return frames

    def finish(self, stop: str, *, terminal: bool) -> list[bytes]:
        if not terminal:
            return []
        if stop == "length":
            response = self._response(
                "incomplete", usage=self._usage(), incomplete_details={"reason": "max_output_tokens"}
            )
            return [self._event({"type": "response.incomplete", "response": response})]
        completed = self._response("completed", usage=self._usage())
        return [self._event({"type": "response.completed", "response": completed})]

    def aborted(self, step: Aborted) -> list[bytes]:
        response = self._response("cancelled", usage=self._usage())  # the SDK knows no cancel reason
        return [self._event({"type": "response.incomplete", "response": response})]

    def gateway_cut(self) -> list[bytes]:
        self.output, self.usage = [], Usage()  # what it had is dropped, and no usage is reported
        completed = self._response("completed", usage=self._usage())
        return [self._event({"type": "response.completed", "response": completed})]

    def stream_error(self, step: StreamError) -> list[bytes]:
        if step.gateway:
            return [gateway_error_frame(step)]
        return [
            self._event({"type": "error", "code": step.code or "server_error", "message": step.message, "param": None})
        ]

    def http_error(self, step: HttpError) -> ErrorResponse:
        default_type = _ERROR_TYPES.get(step.status, "server_error" if step.status >= 500 else "invalid_request_error")
        if step.status == 429:
            default_type = "requests"
        error = {
            "message": step.message,
            "type": step.error_type or default_type,
            "param": None,
            "code": step.code if step.code is not None else ("rate_limit_exceeded" if step.status == 429 else None),
        }
        return ErrorResponse(step.status, error_body_bytes(step, {"error": error}), error_headers(step))

    def overflow(self, step: Overflow) -> ErrorResponse:
        error = {
            "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
        return ErrorResponse(400, error_body_bytes(HttpError(400), {"error": error}))
