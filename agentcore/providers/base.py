"""The provider-neutral streaming contract every wire-protocol adapter implements.

An adapter turns a ``ProviderRequest`` into one HTTP/SSE request and yields ``StreamEvent``s.
Once ``stream()`` has been called it never raises: every failure (HTTP status, connection
drop, missing terminal event, cancellation) is encoded in the final ``StreamEnd`` with a
``ProviderFailure``. The engine has exactly one place that decides what a failure means
(retry, continue, compact, fail) — adapters only classify.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from agentcore.messages import AssistantMessage, Message, ToolCall, Usage
from agentcore.models.attributes import ResolvedModel

FailureKind: TypeAlias = Literal[
    "connect",  # the request never reached a server: refused, unreachable, DNS, connect timeout (retryable)
    "connection",  # reset / disconnect after connecting (retryable)
    "status",  # retryable HTTP status: 408, 409, 429, 5xx
    "incomplete",  # stream ended without a terminal event (retryable)
    "provider_aborted",  # provider said aborted, we did not cancel (retryable)
    "overflow",  # context too long (compact, then retry once)
    "auth",  # 401/403 (never retried)
    "bad_request",  # 400/404/422 other than overflow (never retried)
    "quota",  # billing / insufficient quota (never retried)
    "cancelled",  # our own abort signal (never retried)
    "provider_error",  # provider-reported error event we cannot classify further (retryable)
    "timeout",  # no headers within header_s, or no event within idle_s (retryable)
    "overrun",  # streamed output far past what max_tokens allows (retryable)
]

RETRYABLE_KINDS: frozenset[str] = frozenset(
    {"connect", "connection", "status", "incomplete", "provider_aborted", "provider_error", "timeout", "overrun"}
)


@dataclass(slots=True)
class ProviderFailure:
    kind: FailureKind
    message: str
    status: int | None = None
    retry_after: float | None = None  # seconds, from Retry-After / retry-after-ms
    endpoint: str | None = None  # "host:port" a ``connect`` failure could not reach

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS


@dataclass(slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(slots=True)
class ProviderRequest:
    model: ResolvedModel
    system_prompt: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    effort: str | None = None  # a clamped level: minimal|low|medium|high|xhigh|max, or None = off
    max_tokens: int | None = None
    web_search: bool = False
    session_id: str | None = None


# --- stream events ----------------------------------------------------------------------


@dataclass(slots=True)
class BlockStart:
    index: int
    kind: Literal["text", "thinking", "tool_call"]
    tool_call_id: str | None = None
    tool_name: str | None = None
    type: Literal["block_start"] = "block_start"


@dataclass(slots=True)
class TextDelta:
    index: int
    text: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(slots=True)
class ThinkingDelta:
    index: int
    text: str
    type: Literal["thinking_delta"] = "thinking_delta"


@dataclass(slots=True)
class ToolCallDelta:
    index: int
    partial_json: str
    type: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(slots=True)
class ToolCallEnd:
    index: int
    tool_call: ToolCall
    type: Literal["tool_call_end"] = "tool_call_end"


@dataclass(slots=True)
class WebSearchUpdate:
    search: dict[str, Any]  # {id, status: running|success|failed, query?, sources, error?}
    type: Literal["web_search"] = "web_search"


@dataclass(slots=True)
class SourcesFound:
    sources: list[dict[str, Any]]  # [{url, title?, cited_text?}]
    type: Literal["sources"] = "sources"


@dataclass(slots=True)
class StreamEnd:
    """Always the last event. ``message`` holds everything received, even on failure."""

    message: AssistantMessage
    failure: ProviderFailure | None = None
    usage: Usage | None = None
    finish_reason: str | None = None  # the provider's own (``tool_calls``, ``end_turn``, ...), for traces
    type: Literal["stream_end"] = "stream_end"


StreamEvent: TypeAlias = (
    BlockStart | TextDelta | ThinkingDelta | ToolCallDelta | ToolCallEnd | WebSearchUpdate | SourcesFound | StreamEnd
)


class Provider(Protocol):
    """One wire protocol. ``abort`` set → the HTTP stream is closed and the stream ends
    with ``stop_reason="aborted"`` and ``failure.kind == "cancelled"``."""

    api_kind: str

    def stream(self, request: ProviderRequest, abort: asyncio.Event | None = None) -> AsyncIterator[StreamEvent]: ...

    async def aclose(self) -> None: ...
