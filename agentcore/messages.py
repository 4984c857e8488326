"""Transcript messages and content blocks, provider-neutral.

These are the shapes the engine keeps in memory and the store persists (as JSON via
``message_to_dict`` / ``message_from_dict``). Provider adapters translate them to and from
their wire formats; nothing here knows any wire format.

Usage counts are kept separate so each can be priced separately and never double counted:
``input_tokens`` excludes cache reads (``cached_input_tokens``) and cache writes
(``cache_creation_tokens``); ``reasoning_tokens`` is the part of ``output_tokens`` spent
thinking.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from agentcore.errors import InputValidationError

StopReason: TypeAlias = Literal["stop", "length", "tool_use", "error", "aborted", "pause_turn"]


@dataclass(slots=True)
class TextContent:
    text: str
    type: Literal["text"] = "text"


@dataclass(slots=True)
class ThinkingContent:
    thinking: str
    signature: str | None = None
    redacted: bool = False
    type: Literal["thinking"] = "thinking"


@dataclass(slots=True)
class ImageContent:
    data: str  # base64, no data: prefix
    mime_type: str
    type: Literal["image"] = "image"


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    type: Literal["tool_call"] = "tool_call"


@dataclass(slots=True)
class NativeContent:
    """Provider-native content (e.g. web search calls/results) replayed only to the same model."""

    api_kind: str
    model: str
    payload: dict[str, Any]
    type: Literal["native"] = "native"


UserContent: TypeAlias = TextContent | ImageContent
AssistantContent: TypeAlias = TextContent | ThinkingContent | ToolCall | NativeContent


@dataclass(slots=True)
class Cost:
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0

    @property
    def total(self) -> float:
        return self.input + self.output + self.cache_read + self.cache_write


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    cost: Cost = field(default_factory=Cost)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cached_input_tokens + self.cache_creation_tokens

    @property
    def context_tokens(self) -> int:
        """Tokens the model had in its window after this response (prompt + answer)."""
        return self.total_tokens


@dataclass(slots=True)
class UserMessage:
    content: list[UserContent]
    role: Literal["user"] = "user"


@dataclass(slots=True)
class AssistantMessage:
    content: list[AssistantContent]
    api_kind: str = ""
    provider: str = ""
    model: str = ""
    stop_reason: StopReason = "stop"
    usage: Usage | None = None
    error_message: str | None = None
    # What the answer cited (P2 ``sources``: ``{url, title?, cited_text?}``), kept for people
    # reading the transcript later; never sent back to a model.
    sources: list[dict[str, Any]] = field(default_factory=list)
    role: Literal["assistant"] = "assistant"

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextContent))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [block for block in self.content if isinstance(block, ToolCall)]


@dataclass(slots=True)
class ToolResultMessage:
    tool_call_id: str
    tool_name: str
    content: list[UserContent]
    is_error: bool = False
    structured_content: Any = None
    role: Literal["tool_result"] = "tool_result"

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage


def user_text(text: str, images: list[ImageContent] | None = None) -> UserMessage:
    content: list[UserContent] = [TextContent(text)] if text else []
    content.extend(images or [])
    return UserMessage(content)


# --- JSON (de)serialisation -------------------------------------------------------------


def _content_to_dict(block: AssistantContent | UserContent) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, ThinkingContent):
        out: dict[str, Any] = {"type": "thinking", "thinking": block.thinking}
        if block.signature is not None:
            out["signature"] = block.signature
        if block.redacted:
            out["redacted"] = True
        return out
    if isinstance(block, ImageContent):
        return {"type": "image", "data": block.data, "mime_type": block.mime_type}
    if isinstance(block, ToolCall):
        return {"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.arguments}
    return {"type": "native", "api_kind": block.api_kind, "model": block.model, "payload": block.payload}


def _content_from_dict(data: dict[str, Any]) -> AssistantContent | UserContent:
    kind = data["type"]
    if kind == "text":
        return TextContent(data["text"])
    if kind == "thinking":
        return ThinkingContent(data["thinking"], data.get("signature"), bool(data.get("redacted", False)))
    if kind == "image":
        return ImageContent(data["data"], data["mime_type"])
    if kind == "tool_call":
        return ToolCall(data["id"], data["name"], dict(data["arguments"]))
    if kind == "native":
        return NativeContent(data["api_kind"], data["model"], dict(data["payload"]))
    raise ValueError(f"unknown content block type {kind!r}")


def usage_to_dict(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cached_input_tokens": usage.cached_input_tokens,
        "cache_creation_tokens": usage.cache_creation_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cost": {
            "input": usage.cost.input,
            "output": usage.cost.output,
            "cache_read": usage.cost.cache_read,
            "cache_write": usage.cost.cache_write,
        },
    }


def usage_from_dict(data: dict[str, Any]) -> Usage:
    cost = data.get("cost") or {}
    return Usage(
        input_tokens=int(data.get("input_tokens", 0)),
        output_tokens=int(data.get("output_tokens", 0)),
        cached_input_tokens=int(data.get("cached_input_tokens", 0)),
        cache_creation_tokens=int(data.get("cache_creation_tokens", 0)),
        reasoning_tokens=int(data.get("reasoning_tokens", 0)),
        cost=Cost(
            float(cost.get("input", 0.0)),
            float(cost.get("output", 0.0)),
            float(cost.get("cache_read", 0.0)),
            float(cost.get("cache_write", 0.0)),
        ),
    )


def message_to_dict(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "content": [_content_to_dict(c) for c in message.content]}
    if isinstance(message, AssistantMessage):
        out: dict[str, Any] = {
            "role": "assistant",
            "content": [_content_to_dict(c) for c in message.content],
            "api_kind": message.api_kind,
            "provider": message.provider,
            "model": message.model,
            "stop_reason": message.stop_reason,
        }
        if message.usage is not None:
            out["usage"] = usage_to_dict(message.usage)
        if message.error_message is not None:
            out["error_message"] = message.error_message
        if message.sources:
            out["sources"] = [dict(source) for source in message.sources]
        return out
    out = {
        "role": "tool_result",
        "tool_call_id": message.tool_call_id,
        "tool_name": message.tool_name,
        "content": [_content_to_dict(c) for c in message.content],
        "is_error": message.is_error,
    }
    if message.structured_content is not None:
        out["structured_content"] = message.structured_content
    return out


def message_from_dict(data: dict[str, Any]) -> Message:
    role = data["role"]
    if role == "user":
        return UserMessage([_content_from_dict(c) for c in data["content"]])  # type: ignore[misc]
    if role == "assistant":
        usage = data.get("usage")
        return AssistantMessage(
            content=[_content_from_dict(c) for c in data["content"]],  # type: ignore[misc]
            api_kind=data.get("api_kind", ""),
            provider=data.get("provider", ""),
            model=data.get("model", ""),
            stop_reason=data.get("stop_reason", "stop"),
            usage=usage_from_dict(usage) if usage else None,
            error_message=data.get("error_message"),
            sources=[dict(source) for source in data.get("sources") or []],
        )
    if role == "tool_result":
        return ToolResultMessage(
            tool_call_id=data["tool_call_id"],
            tool_name=data["tool_name"],
            content=[_content_from_dict(c) for c in data["content"]],  # type: ignore[misc]
            is_error=bool(data.get("is_error", False)),
            structured_content=data.get("structured_content"),
        )
    raise ValueError(f"unknown message role {role!r}")


def parse_messages(messages: Iterable[Message | Mapping[str, Any]], *, path: str = "messages") -> list[Message]:
    """Message objects as they are, message dicts (``message_to_dict``'s and so
    ``read_transcript``'s format; extra keys such as ``synthetic`` are ignored) parsed.

    Public functions taking a transcript accept both, since a host holds whichever its source
    gave it. Anything else is ``input_validation`` naming ``<path>.<index>``.
    """
    parsed: list[Message] = []
    for index, raw in enumerate(messages):
        if isinstance(raw, UserMessage | AssistantMessage | ToolResultMessage):
            parsed.append(raw)
            continue
        where = f"{path}.{index}"
        if not isinstance(raw, Mapping):
            raise InputValidationError(
                f"{where} must be a message or a message dict, not {type(raw).__name__}", field=where
            )
        try:
            parsed.append(message_from_dict(dict(raw)))
        except KeyError as exc:
            raise InputValidationError(f"{where}: missing key {exc}", field=where) from exc
        except (TypeError, ValueError, AttributeError) as exc:
            raise InputValidationError(f"{where}: {exc}", field=where) from exc
    return parsed
