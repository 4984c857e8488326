"""What the three wire-protocol adapters share besides the stream itself (``streaming``):
transport, failure classification, usage numbers, message assembly and the per-message wire
cache (SPEC P1, L2, L7).

Why httpx and not the official SDKs: the SDKs cost roughly 10x the transport floor per
request (pydantic models for every chunk, per-request option merging, work that grows with
history), and the agent loop must stay within 1.5x of raw httpx at 100 turns. So the hot
path here is: look up each message's cached JSON encoding, splice the body from those
bytes (``splice_body``; only new messages are encoded), stream, parse SSE from the raw
bytes (``providers.sse``, which says why not httpx-sse), decode each event's JSON once
(``providers.wire_json``, which also removes lone surrogates), and turn events into plain
dataclasses. No pydantic on the hot path.
"""

from __future__ import annotations

import email.utils
import functools
import json
import operator
import re
import ssl
import time
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import httpx

from agentcore.messages import (
    AssistantContent,
    AssistantMessage,
    Message,
    NativeContent,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from agentcore.models.attributes import ResolvedModel
from agentcore.providers.base import (
    BlockStart,
    ProviderFailure,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
)
from agentcore.providers.wire_json import loads

RAW_ARGUMENTS_KEY = "__raw_arguments__"
"""Tool-call arguments that are not a JSON object are kept as text under this key, so the
engine can tell the model its call was malformed instead of the adapter crashing."""

DEFAULT_TIMEOUT = httpx.Timeout(connect=15.0, read=300.0, write=60.0, pool=60.0)
"""The client's own timeouts: a request of an adapter replaces them with its stream bounds."""


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """httpx's default verification context (certifi, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``),
    built once per process: loading the CA bundle takes ~45 ms, which a fresh client per
    runtime (one per session) would otherwise pay on its first request."""
    return httpx.create_ssl_context()


def new_http_client() -> httpx.AsyncClient:
    """One pooled client per registry/provider, never one per request (a host running many
    runtimes gives them one ``connection_lanes.new_host_http_client`` instead)."""
    return httpx.AsyncClient(
        verify=default_ssl_context(),
        timeout=DEFAULT_TIMEOUT,
        limits=httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=30.0),
    )


def endpoint(base_url: str, path: str) -> str:
    """``base_url`` + protocol path. A bare host (no path) gets ``/v1`` first, so both
    ``https://api.anthropic.com`` and ``http://localhost:11434/v1`` work."""
    base = base_url.rstrip("/")
    if "/" not in base.split("://", 1)[-1]:
        base += "/v1"
    return base + path


# --- effort ----------------------------------------------------------------------------

_OPENAI_EFFORT = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "xhigh",
}
_MISSING = object()


def mapped_effort(model: ResolvedModel, level: str | None, defaults: dict[str, str]) -> str | None:
    """The upstream value for a clamped level: the model's ``thinking_level_map`` wins
    (``None`` there = unsupported → send nothing), else the protocol default."""
    if level is None or not model.reasoning:
        return None
    mapped = model.thinking_level_map.get(level, _MISSING)
    if mapped is not _MISSING:
        return mapped if isinstance(mapped, str) else None
    return defaults.get(level)


def openai_effort(model: ResolvedModel, level: str | None) -> str | None:
    return mapped_effort(model, level, _OPENAI_EFFORT)


# --- failure classification -----------------------------------------------------------------

_OVERFLOW = re.compile(
    r"prompt is too long|context[_ ]length[_ ]exceeded|exceeds the context window|maximum context length"
    r"|context window exceeds|reduce the length of the messages|input is too long|too many tokens"
    r"|exceeds the available context size|greater than the context length|exceeded max context length"
    r"|input token count.*exceeds|maximum prompt length|token limit exceeded|prompt too long",
    re.IGNORECASE,
)
_QUOTA = re.compile(
    r"insufficient_quota|exceeded your current quota|credit balance is too low|billing|payment required",
    re.IGNORECASE,
)
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "billing_not_active"})
_ERROR_TYPE_KINDS: dict[str, tuple[str, int | None]] = {
    "overloaded_error": ("status", 529),
    "api_error": ("status", 500),
    "rate_limit_error": ("status", 429),
    "rate_limit_exceeded": ("status", 429),
    "server_error": ("status", 500),
    "timeout_error": ("status", 504),
    "authentication_error": ("auth", None),
    "permission_error": ("auth", None),
    "invalid_api_key": ("auth", None),
    "billing_error": ("quota", None),
    "invalid_request_error": ("bad_request", None),
    "not_found_error": ("bad_request", None),
    "request_too_large": ("overflow", None),
}


def is_overflow(message: str, code: str | None = None) -> bool:
    return code == "context_length_exceeded" or bool(_OVERFLOW.search(message))


def error_fields(payload: Any) -> tuple[str, str | None, str | None]:
    """(message, code, type) from any provider error shape: OpenAI ``{"error": {...}}``,
    Anthropic ``{"type": "error", "error": {...}}``, Ollama ``{"error": "text"}``, bare objects."""
    error = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(error, str):
        return error, None, None
    if not isinstance(error, dict):
        return str(payload), None, None
    message = error.get("message") or error.get("detail") or json.dumps(error)[:500]
    code = error.get("code")
    kind = error.get("type")
    return str(message), str(code) if code is not None else None, str(kind) if kind is not None else None


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` (OpenAI) or ``retry-after`` (seconds or HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def classify_status(status: int, body: bytes, headers: httpx.Headers) -> ProviderFailure:
    """An HTTP error response → failure kind (the only place statuses get a meaning)."""
    text = body.decode("utf-8", "replace")
    try:
        payload = loads(text)
    except json.JSONDecodeError:
        payload = None
    if payload is not None:
        message, code, kind = error_fields(payload)
    else:
        message, code, kind = text.strip()[:500] or f"HTTP {status}", None, None
    return _classify(f"HTTP {status}: {message}", message, code, kind, status, parse_retry_after(headers), payload)


def classify_payload(payload: Any) -> ProviderFailure:
    """An error reported inside a 200 stream (SSE ``error`` event, ``response.failed``, a
    gateway's bare ``{"error": {...}}``). A ``code`` that is an HTTP status (LiteLLM sends
    ``"503"``) is classified exactly as that status would be."""
    message, code, kind = error_fields(payload)
    return _classify(message, message, code, kind, _status_code(code), None, payload)


def stream_error(data: Any) -> ProviderFailure | None:
    """The failure an SSE event reports, or ``None`` when it is not an error: a protocol
    ``{"type": "error", ...}`` event (Responses, Messages) or an error object without a ``type``
    (Chat Completions, and LiteLLM on every wire: ``{"error": {"message", "type", "code"}}``)."""
    if not isinstance(data, dict):
        return None
    if data.get("type") == "error" or (data.get("error") and "type" not in data):
        return classify_payload(data)
    return None


def _status_code(code: str | None) -> int | None:
    if code is not None and code.isdigit() and 100 <= int(code) <= 599:
        return int(code)
    return None


def _classify(
    described: str,
    message: str,
    code: str | None,
    kind: str | None,
    status: int | None,
    retry_after: float | None,
    payload: Any,
) -> ProviderFailure:
    if is_overflow(message, code) or status == 413 or kind == "request_too_large":
        return ProviderFailure("overflow", described, status)
    if status == 402 or code in _QUOTA_CODES or kind == "billing_error" or _QUOTA.search(message):
        return ProviderFailure("quota", described, status)
    if status is None:
        for key in (kind, code):
            if key in _ERROR_TYPE_KINDS:
                failure_kind, mapped = _ERROR_TYPE_KINDS[key]
                return ProviderFailure(failure_kind, described, mapped)  # type: ignore[arg-type]
        return ProviderFailure("provider_error", described)
    if status in (401, 403):
        return ProviderFailure("auth", described, status)
    if status in (408, 409, 429) or status >= 500:
        return ProviderFailure("status", described, status, retry_after)
    refused = refused_parameters(message, payload)
    if refused:
        described = f"{described}\n{refused_parameters_hint(refused)}"
    return ProviderFailure("bad_request", described, status)


_REFUSED = (
    re.compile(r"does not support parameters?:?\s*\[([^\]]*)\]", re.IGNORECASE),  # LiteLLM UnsupportedParamsError
    re.compile(r"unsupported parameter:?\s*'([^']+)'", re.IGNORECASE),  # OpenAI
    re.compile(r"unrecognized request arguments? supplied:?\s*(\w+(?:\s*,\s*\w+)*)", re.IGNORECASE),  # OpenAI, older
)
REASONING_PARAMETERS = frozenset({"reasoning_effort", "reasoning", "thinking", "include"})


def refused_parameters(message: str, payload: Any) -> list[str]:
    """The request parameters a 400 says the endpoint does not support (empty: none named)."""
    names: list[str] = []
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and error.get("code") == "unsupported_parameter" and isinstance(error.get("param"), str):
        names.append(error["param"])
    for pattern in _REFUSED:
        for match in pattern.finditer(message):
            names.extend(n.strip(" '\"") for n in match.group(1).split(","))
    return list(dict.fromkeys(n for n in names if n))


def refused_parameters_hint(names: list[str]) -> str:
    """What to do about refused parameters. The reasoning ones are sent because a model id
    agentcore does not know is assumed to reason (SPEC M2), which a gateway in front of a
    model without reasoning refuses unless it drops them."""
    listed = ", ".join(names)
    if REASONING_PARAMETERS.intersection(names):
        return (
            f"The endpoint refused the parameter(s) {listed}. agentcore sends them because it treats this "
            "model as a reasoning model (a model id it does not know is assumed to reason): set "
            'model_attributes {"reasoning": false} for this model, or let the gateway drop parameters a '
            "model does not support (LiteLLM: litellm_settings.drop_params: true)."
        )
    return f"The endpoint refused the parameter(s) {listed}."


def parse_arguments(text: str) -> dict[str, Any]:
    """Streamed tool arguments → dict; anything else is kept raw under ``RAW_ARGUMENTS_KEY``."""
    if not text.strip():
        return {}
    try:
        value = loads(text)
    except (json.JSONDecodeError, RecursionError):  # too deep to decode is the model's mistake, not a drop
        return {RAW_ARGUMENTS_KEY: text}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS_KEY: text}


# --- usage numbers ---------------------------------------------------------------------------


def token_count(usage: Mapping[str, Any], key: str) -> int | None:
    """A provider's token count, or ``None`` when it is absent or unusable.

    Providers (and proxies in front of them) have sent negative and fractional counts;
    priced as-is they become negative or fractional cost. The rule: an integer (also a float
    with an integral value, as some servers send) counts, a negative one as 0; anything else —
    a string, a boolean, a fractional, infinite or NaN number — is ignored (``None``: an
    adapter keeps the count it already had, or 0)."""
    value = usage.get(key)
    if type(value) is int:
        return value if value >= 0 else 0
    if type(value) is float and value.is_integer():
        return int(value) if value >= 0 else 0
    return None


def json_object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (for optional nested details)."""
    return value if isinstance(value, dict) else {}


# --- the message under construction ----------------------------------------------------------


class _OpenTool:
    __slots__ = ("args", "id", "name")

    def __init__(self, call_id: str, name: str) -> None:
        self.id = call_id
        self.name = name
        self.args: list[str] = []


class MessageBuilder:
    """Collects streamed blocks. Text is joined once at the end (deltas can number in the
    thousands); tool calls enter the message only when complete, so a dropped stream never
    leaves a half-received call behind. ``output_chars`` counts the streamed text, thinking
    and tool-call arguments (the measure of the output cap)."""

    def __init__(self, model: ResolvedModel) -> None:
        self.model = model
        self.blocks: list[AssistantContent | None] = []
        self.parts: dict[int, list[str]] = {}
        self.tools: dict[int, _OpenTool] = {}
        self.usage = Usage()
        self.tool_calls = 0
        self.output_chars = 0

    def open_text(self, initial: str = "") -> BlockStart:
        index = len(self.blocks)
        self.blocks.append(TextContent(""))
        self.parts[index] = [initial] if initial else []
        self.output_chars += len(initial)
        return BlockStart(index, "text")

    def open_thinking(self, signature: str | None = None, redacted: bool = False) -> BlockStart:
        index = len(self.blocks)
        self.blocks.append(ThinkingContent("", signature, redacted))
        self.parts[index] = []
        return BlockStart(index, "thinking")

    def text(self, index: int, delta: str) -> TextDelta:
        self.parts[index].append(delta)
        self.output_chars += len(delta)
        return TextDelta(index, delta)

    def thinking(self, index: int, delta: str) -> ThinkingDelta:
        self.parts[index].append(delta)
        self.output_chars += len(delta)
        return ThinkingDelta(index, delta)

    def has_parts(self, index: int) -> bool:
        return bool(self.parts.get(index))

    def set_signature(self, index: int, signature: str) -> None:
        block = self.blocks[index]
        if isinstance(block, ThinkingContent):
            block.signature = signature

    def open_tool(self, call_id: str, name: str) -> BlockStart:
        index = len(self.blocks)
        self.blocks.append(None)
        self.tools[index] = _OpenTool(call_id, name)
        return BlockStart(index, "tool_call", call_id, name)

    def tool_args(self, index: int, delta: str) -> ToolCallDelta:
        self.tools[index].args.append(delta)
        self.output_chars += len(delta)
        return ToolCallDelta(index, delta)

    def close_tool(self, index: int, arguments: str | None = None) -> ToolCallEnd | None:
        tool = self.tools.pop(index, None)
        if tool is None:
            return None
        call = ToolCall(tool.id, tool.name, parse_arguments(arguments if arguments is not None else "".join(tool.args)))
        self.blocks[index] = call
        self.tool_calls += 1
        return ToolCallEnd(index, call)

    def close_all_tools(self) -> list[ToolCallEnd]:
        return [end for index in list(self.tools) if (end := self.close_tool(index)) is not None]

    def is_empty(self) -> bool:
        """Nothing was received: no text, no thinking, no tool call, no native content."""
        for index, block in enumerate(self.blocks):
            if isinstance(block, TextContent):
                if block.text or any(self.parts.get(index, ())):
                    return False
            elif isinstance(block, ThinkingContent):
                if block.thinking or block.signature or any(self.parts.get(index, ())):
                    return False
            elif block is not None:
                return False
        return True

    def add_native(self, api_kind: str, payload: dict[str, Any]) -> None:
        self.blocks.append(NativeContent(api_kind, self.model.model_id, payload))

    def message(self, api_kind: str, stop_reason: StopReason, failure: ProviderFailure | None) -> AssistantMessage:
        content: list[AssistantContent] = []
        for index, block in enumerate(self.blocks):
            if block is None:
                continue  # a tool call whose arguments never completed
            parts = self.parts.get(index)
            if isinstance(block, TextContent):
                block.text = "".join(parts) if parts is not None else block.text
                if not block.text:
                    continue
            elif isinstance(block, ThinkingContent) and parts is not None:
                block.thinking = "".join(parts)
                if not block.thinking and not block.signature:
                    continue
            content.append(block)
        self.usage.cost = self.model.price(self.usage)
        return AssistantMessage(
            content=content,
            api_kind=api_kind,
            provider=self.model.provider,
            model=self.model.model_id,
            stop_reason=stop_reason,
            usage=self.usage,
            error_message=failure.message if failure is not None else None,
        )


# --- the per-message wire cache ----------------------------------------------------------------


class WireCache:
    """Wire-format form of each transcript message, computed once per message object.

    Keyed by ``id(message)`` and holding the message itself (so an id is never reused while
    its entry lives). An entry is valid for one ``scope`` (what the conversion depended on:
    target model, image support; see ``wire_scope``) and one content length, so a message
    whose content list is edited in place is converted again. Bounded: the oldest half is
    dropped when full. The lookup allocates nothing, since it runs for every message of
    every request."""

    def __init__(self, limit: int = 8192) -> None:
        self._entries: dict[int, tuple[Message, Hashable, int, Any]] = {}
        self._limit = limit

    def get(self, message: Message, scope: Hashable) -> Any:
        entry = self._entries.get(id(message))
        if entry is not None and entry[0] is message and entry[2] == len(message.content) and entry[1] == scope:
            return entry[3]
        return None

    def put(self, message: Message, scope: Hashable, value: Any) -> Any:
        if len(self._entries) >= self._limit:
            for stale in list(self._entries)[: self._limit // 2]:
                del self._entries[stale]
        self._entries[id(message)] = (message, scope, len(message.content), value)
        return value

    def __len__(self) -> int:
        return len(self._entries)


_CONTENT = operator.attrgetter("content")
State = TypeVar("State")


class HistoryPrefix(Generic[State]):
    """Where the previous request's history assembly ended, so the next request — in a tool
    loop, the same messages plus a few new ones — resumes there: only new messages are looked
    up, converted and encoded, and the per-request work on the rest is C-level list
    operations (compare, copy, join), not a Python loop over the history.

    The saved ``state`` (the adapter's assembly state after the last message) is used while
    the history starts with the same messages (list equality: identity first, then value;
    equal messages have equal wire forms) with the same content lengths (an in-place edit
    invalidates it, as in ``WireCache``), under the same scope. The adapter copies the state
    before extending it and saves the result."""

    __slots__ = ("_lengths", "_messages", "_scope", "_state")

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._lengths: list[int] = []
        self._scope: Hashable = None
        self._state: State | None = None

    def resume(self, messages: list[Message], scope: Hashable) -> tuple[int, State | None]:
        """(how many leading messages the saved state covers, the state); (0, None) if none."""
        count = len(self._messages)
        if self._state is None or count > len(messages) or scope != self._scope:
            return 0, None
        prefix = messages[:count]
        if prefix != self._messages or list(map(len, map(_CONTENT, prefix))) != self._lengths:
            return 0, None
        return count, self._state

    def save(self, messages: list[Message], scope: Hashable, state: State, start: int) -> None:
        """``state`` after all of ``messages``, of which the first ``start`` came from ``resume``."""
        self._lengths = self._lengths[:start] + list(map(len, map(_CONTENT, messages[start:])))
        self._messages = list(messages)
        self._scope = scope
        self._state = state


def same_model(message: AssistantMessage, api_kind: str, model: ResolvedModel) -> bool:
    """Native content and signed reasoning go back only to the model that produced them."""
    return message.api_kind == api_kind and message.model == model.model_id


def wire_scope(model: ResolvedModel) -> Hashable:
    """What a message's wire form depends on besides the message itself."""
    return (model.model_id, model.accepts_images)


def image_url(data: str, mime_type: str) -> str:
    return f"data:{mime_type};base64,{data}"


IMAGE_OMITTED = "(image omitted: this model does not accept images)"


def bearer_headers(api_key: str | None) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


def dumps(value: Any) -> bytes:
    """The one JSON encoding of request parts (compact, UTF-8, not ASCII-escaped)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def splice_body(head: dict[str, Any], key: str, items: Iterable[bytes]) -> bytes:
    """``dumps({**head, key: [...]})`` where the list's items come already encoded.

    The history is the bulk of every request and changes only at its end, so adapters keep
    each message's encoding in their ``WireCache`` and a request costs one encoding of the
    small ``head`` (model, options, tools) plus a join. The list goes last in the object;
    ``head`` must not hold ``key``."""
    encoded = dumps(head)
    separator = b"," if len(encoded) > 2 else b""
    return b"".join((encoded[:-1], separator, dumps(key), b":[", b",".join(items), b"]}"))
