"""The encoder contract: one subclass per wire protocol turns script steps into SSE frames.

The player (``fake_server``) owns timing, faults and the socket; an encoder owns only the
bytes of one protocol, so each protocol's framing lives in one small module that can be read
side by side with that provider's documentation.
"""

from __future__ import annotations

import json
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

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

COMMENT_FRAME = b": ping\n\n"
"""An SSE comment: proxies send these to keep an idle connection open; clients ignore them."""


def sse_frame(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    """One SSE event. JSON is ASCII-only (``json.dumps``' default), so any non-ASCII text —
    also a lone surrogate, which UTF-8 cannot carry — goes out as ``\\uXXXX`` escapes, as
    real services and proxies send it."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    if event is None:
        return f"data: {payload}\n\n".encode()
    return f"event: {event}\ndata: {payload}\n\n".encode()


DONE_FRAME = b"data: [DONE]\n\n"


def gateway_error_frame(step: StreamError) -> bytes:
    """LiteLLM's mid-stream error on every wire: a bare error object, no ``event:`` line, no
    ``type``, the HTTP status as ``code`` text."""
    error = {"message": step.message, "type": step.error_type, "param": None, "code": step.code}
    return sse_frame({"error": error})


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


@dataclass(slots=True)
class ErrorResponse:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def error_headers(step: HttpError) -> dict[str, str]:
    headers = dict(step.headers)
    if step.retry_after is not None:
        value = step.retry_after
        headers["retry-after"] = f"{value:g}" if isinstance(value, float | int) else str(value)
    if step.retry_after_ms is not None:
        headers["retry-after-ms"] = str(step.retry_after_ms)
    return headers


def error_body_bytes(step: HttpError, default: dict[str, Any]) -> bytes:
    if isinstance(step.body, str):
        return step.body.encode()
    return json.dumps(step.body if step.body is not None else default).encode()


class Encoder(ABC):
    """Frames for one response. ``usage`` is known up front (Anthropic needs it first)."""

    api_kind: str = ""

    def __init__(self, model: str, usage: Usage, request: dict[str, Any]) -> None:
        self.model = model
        self.usage = usage
        self.request = request
        self.pending_citations: list[dict[str, str]] = []

    @abstractmethod
    def preamble(self) -> list[bytes]: ...

    @abstractmethod
    def text(self, step: Text) -> list[bytes]: ...

    @abstractmethod
    def open_text(self) -> list[bytes]:
        """The frames that open a text block whose deltas follow (``text_delta``)."""

    @abstractmethod
    def text_delta(self, part: str) -> bytes:
        """One delta of the text block opened last."""

    def keepalive(self) -> bytes:
        """The protocol's keep-alive event; protocols without one send a comment."""
        return COMMENT_FRAME

    @abstractmethod
    def thinking(self, step: Thinking) -> list[bytes]: ...

    @abstractmethod
    def tool_call(self, step: ToolCall) -> list[bytes]: ...

    @abstractmethod
    def web_search(self, step: WebSearch) -> list[bytes]: ...

    @abstractmethod
    def finish(self, stop: str, *, terminal: bool) -> list[bytes]:
        """The closing events; ``terminal=False`` omits only the terminal event itself."""

    def done_marker_end(self, stop: str) -> list[bytes]:
        """``NoTerminal(done_marker=True)``: the closing events without the terminal one, then
        ``data: [DONE]`` (what a gateway sends when its upstream stopped)."""
        return [*self.finish(stop, terminal=False), DONE_FRAME]

    @abstractmethod
    def gateway_cut(self) -> list[bytes]:
        """``GatewayCut``: the protocol's normal finish with nothing more and no usage."""

    @abstractmethod
    def aborted(self, step: Aborted) -> list[bytes]: ...

    @abstractmethod
    def stream_error(self, step: StreamError) -> list[bytes]: ...

    @abstractmethod
    def http_error(self, step: HttpError) -> ErrorResponse: ...

    @abstractmethod
    def overflow(self, step: Overflow) -> ErrorResponse: ...

    def take_citations(self) -> list[dict[str, str]]:
        citations, self.pending_citations = self.pending_citations, []
        return citations


def tool_arguments_text(step: ToolCall) -> str:
    if step.raw_arguments is not None:
        return step.raw_arguments
    return json.dumps(step.arguments)


def argument_chunks(step: ToolCall) -> list[str]:
    text = tool_arguments_text(step)
    n = max(1, step.argument_chunks)
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
