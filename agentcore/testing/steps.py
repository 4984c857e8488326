"""Script steps for the fake provider server (SPEC T5, P3).

A scripted response is a list of steps. Content steps (``Text``, ``Thinking``, ``ToolCall``,
``WebSearch``) become the protocol's real SSE events; ``Usage`` and ``Stop`` are data the
encoder places where that protocol reports them (Anthropic reports input usage in
``message_start`` before any content, so their position in the list does not matter).
Fault steps reproduce what real services and networks do to a client, so the adapters'
failure classification is tested against the same bytes they will meet in production.

Steps are plain data: they can also be written as JSON (``{"step": "text", "text": "hi"}``)
for the CLI and the HTTP control API, see ``step_from_json``.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeAlias


@dataclass(slots=True)
class Text:
    """Assistant text, streamed as several deltas (``chunks`` wins over ``chunk_size``)."""

    text: str
    chunk_size: int = 16
    chunks: list[str] | None = None
    pace_s: float = 0.0  # seconds between streamed frames: a slow, token-by-token provider
    streamed: bool = True  # False: Responses only, the item appears only in the terminal output

    def parts(self) -> list[str]:
        if self.chunks is not None:
            return list(self.chunks)
        return split_chunks(self.text, self.chunk_size)


@dataclass(slots=True)
class Thinking:
    """Reasoning: Responses summary deltas, Anthropic thinking (+ signature) or
    Chat Completions ``reasoning_content`` (``completions_field`` picks ``reasoning`` instead,
    as some local servers do). ``redacted`` sends an Anthropic ``redacted_thinking`` block."""

    text: str
    signature: str = "sig-fake"
    chunk_size: int = 16
    redacted: bool = False
    completions_field: Literal["reasoning_content", "reasoning"] = "reasoning_content"
    streamed: bool = True  # False: Responses only, the item appears only in the terminal output
    pace_s: float = 0.0  # seconds between streamed frames, as for ``Text``

    def parts(self) -> list[str]:
        return split_chunks(self.text, self.chunk_size)


@dataclass(slots=True)
class ToolCall:
    """A function call whose JSON arguments are streamed in ``argument_chunks`` deltas.
    ``raw_arguments`` sends exactly that text instead (e.g. invalid JSON)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    argument_chunks: int = 3
    raw_arguments: str | None = None
    streamed: bool = True  # False: Responses only, the item appears only in the terminal output


@dataclass(slots=True)
class WebSearch:
    """A provider-native web search (Responses ``web_search_call``; Anthropic
    ``server_tool_use`` + ``web_search_tool_result``). Sources are ``{url, title?}``; the next
    ``Text`` cites them (url_citation annotations / citations_delta). ``error`` fails it."""

    query: str
    sources: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None


@dataclass(slots=True)
class Usage:
    """Usage in agentcore's convention: ``input`` excludes ``cached_input`` and
    ``cache_creation``; ``reasoning`` is part of ``output``. Encoders convert to each wire's
    convention (OpenAI counts cached tokens inside input tokens). ``wire`` replaces the whole
    usage object with exactly that JSON wherever the protocol reports usage (Anthropic: both
    ``message_start`` and ``message_delta``), to send what misbehaving servers send
    (negative, fractional or string counts)."""

    input: int = 0
    output: int = 0
    cached_input: int = 0
    cache_creation: int = 0
    reasoning: int = 0
    wire: dict[str, Any] | None = None


@dataclass(slots=True)
class Stop:
    reason: Literal["stop", "length", "tool_use", "pause_turn"] = "stop"


@dataclass(slots=True)
class Delay:
    """Pause the stream (a slow provider). This is server behaviour, not test synchronisation."""

    seconds: float


@dataclass(slots=True)
class Disconnect:
    """Close the socket abruptly. ``after_events=None``: at this position in the script;
    ``after_events=N``: after N SSE events of this response have been written, wherever the
    step is placed. The chunked body is left unterminated, as a dropped connection leaves it."""

    after_events: int | None = None


@dataclass(slots=True)
class HttpError:
    """Answer with an HTTP error in the protocol's JSON shape. ``body`` replaces the JSON
    (a dict is JSON-encoded, a str is sent as is). Placed after streamed content, it becomes
    an in-stream error event (HTTP status cannot change after the headers)."""

    status: int
    message: str = "fake provider error"
    retry_after: float | str | None = None
    retry_after_ms: int | None = None
    error_type: str | None = None
    code: str | None = None
    body: dict[str, Any] | str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Overflow:
    """The provider's real context-length-exceeded error (HTTP 400)."""

    tokens: int = 210_000
    limit: int = 200_000


@dataclass(slots=True)
class StreamError:
    """An error event inside a 200 stream (Responses ``error``; Anthropic ``event: error``;
    Chat Completions ``data: {"error": ...}``). ``gateway=True`` sends what LiteLLM sends on
    every wire instead: ``data: {"error": {"message", "type": null, "param": null, "code"}}``
    with no ``event:`` line and no ``type`` (its ``code`` is an HTTP status as text, e.g. "503")."""

    message: str = "The server had an error while processing your request."
    error_type: str | None = None
    code: str | None = None
    gateway: bool = False


@dataclass(slots=True)
class Aborted:
    """The provider reports it aborted the response (Responses status ``cancelled``; Chat
    Completions ``finish_reason: "abort"`` as vLLM sends). Anthropic has no such signal and
    gets an ``api_error`` event instead."""

    reason: str = "cancelled"


@dataclass(slots=True)
class NoTerminal:
    """End the stream cleanly (chunked body terminated) without the terminal event.
    ``done_marker=True`` ends it with ``data: [DONE]`` instead, as LiteLLM does on every wire
    when its upstream stops (on Chat Completions ``[DONE]`` is the terminal event itself, so
    there it is sent without the usage chunk the request asked for)."""

    done_marker: bool = False


@dataclass(slots=True)
class GatewayCut:
    """What LiteLLM sends when its upstream dies mid-stream: the protocol's *normal* finish,
    without what it had received and without usage — Chat Completions ``finish_reason: "stop"``
    and ``[DONE]`` with no usage chunk; Messages ``message_delta`` ``end_turn`` with zero usage
    and ``message_stop``; Responses ``response.completed`` with an empty output and zero usage.
    Content steps placed before it are still streamed (a gateway that forwarded them)."""


@dataclass(slots=True)
class Hang:
    """Hold the response here until ``server.release()`` or until ``event`` is set
    (an ``asyncio.Event`` of the server's loop or a ``threading.Event``).
    ``before_headers=True`` holds before the status line and headers are sent (a server that
    accepts the connection and never answers); otherwise the headers go out first.
    ``after_terminal=True`` holds after the terminal event, with the chunked body not yet
    ended (a complete response on a connection the server keeps open), wherever it is placed."""

    event: asyncio.Event | threading.Event | None = None
    before_headers: bool = False
    after_terminal: bool = False


@dataclass(slots=True)
class Endless:
    """Stream forever, until the client hangs up — what only a client-side bound can end.

    ``kind="comments"``: SSE comments (``: ping``), as proxies keep idle connections alive;
    ``"pings"``: the protocol's keep-alive event (Anthropic ``event: ping``; the OpenAI
    protocols have none and send comments); ``"text"``: text deltas of ``chunk``, a model
    ignoring its output limit. One frame every ``interval_s`` (server pacing)."""

    kind: Literal["comments", "pings", "text"] = "comments"
    chunk: str = "all work and no play makes a runaway stream. "
    interval_s: float = 0.002

    def __post_init__(self) -> None:
        if self.kind not in ("comments", "pings", "text"):
            raise ValueError(f"Endless.kind must be comments, pings or text, not {self.kind!r}")
        if not self.interval_s >= 0:
            raise ValueError("Endless.interval_s must be >= 0")


Step: TypeAlias = (
    Text
    | Thinking
    | ToolCall
    | WebSearch
    | Usage
    | Stop
    | Delay
    | Disconnect
    | HttpError
    | Overflow
    | StreamError
    | Aborted
    | NoTerminal
    | GatewayCut
    | Hang
    | Endless
)

STEP_TYPES: dict[str, type[Any]] = {
    "text": Text,
    "thinking": Thinking,
    "tool_call": ToolCall,
    "web_search": WebSearch,
    "usage": Usage,
    "stop": Stop,
    "delay": Delay,
    "disconnect": Disconnect,
    "http_error": HttpError,
    "overflow": Overflow,
    "stream_error": StreamError,
    "aborted": Aborted,
    "no_terminal": NoTerminal,
    "gateway_cut": GatewayCut,
    "hang": Hang,
    "endless": Endless,
}


def split_chunks(text: str, size: int) -> list[str]:
    if not text:
        return []
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def step_from_json(data: dict[str, Any]) -> Step:
    """``{"step": "text", "text": "hi", "chunk_size": 2}`` → ``Text("hi", chunk_size=2)``."""
    kind = data.get("step")
    cls = STEP_TYPES.get(str(kind))
    if cls is None:
        raise ValueError(f"unknown step {kind!r}; expected one of {', '.join(STEP_TYPES)}")
    allowed = {f.name for f in fields(cls)} - {"event"}
    args = {k: v for k, v in data.items() if k != "step"}
    unknown = set(args) - allowed
    if unknown:
        raise ValueError(f"step {kind!r} has unknown field(s): {', '.join(sorted(unknown))}")
    step: Step = cls(**args)
    return step


def response_from_json(data: list[dict[str, Any]]) -> list[Step]:
    return [step_from_json(item) for item in data]
