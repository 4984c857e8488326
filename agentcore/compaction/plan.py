"""Planning a compaction: what to summarize, what to keep, and the summary prompts (C3, C4, C5).

Pure logic apart from I/O (STYLE): everything here is a function of the transcript and
the settings, so the interesting rules — where the cut goes, that tool call/result pairs
stay together, that every summary request fits the window — are property-tested without a
model. ``summary`` runs the plan (the model calls); ``step`` and ``background`` write its outcome.

The cut (C4): walk back from the newest message until ``keep_recent_tokens`` are covered;
that recent window is kept verbatim. The cut is aligned to the start of a user turn inside
the window; with no user message there, to the earliest assistant message in it (the latest
assistant turn); with neither, to the nearest turn start before it — the one case where
the kept part may exceed the budget. The newest message is always kept, and the cut never
lands on a tool result, so a tool result is never separated from the call before it.

Overflow (C5): the part to summarize is split into chunks whose summary requests each fit
``window − max_summary_tokens − prompt overhead``; their summaries are merged with
``build_merge_request``. A single message too large to send at all is reported
(``CompactionPlan.oversize_error``) instead of being silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentcore.context.estimate import estimate_message_tokens, estimate_text_tokens
from agentcore.errors import InputValidationError
from agentcore.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    NativeContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserContent,
    UserMessage,
)
from agentcore.prompts import load_prompt

__all__ = [
    "SUMMARY_CLOSE",
    "SUMMARY_OPEN",
    "CompactionPlan",
    "build_merge_request",
    "build_summary_request",
    "find_cut_point",
    "is_summary_message",
    "plan_compaction",
    "render_transcript",
    "should_compact",
    "summary_message",
    "summary_text_of",
    "touched_paths",
]

MessageEstimate = Callable[[Message], int]

DEFAULT_THRESHOLD = 0.9

# How much of each block the summarizer sees. A summary needs the gist of a 200 KB file
# read, not the file, and capping blocks keeps every summary request bounded.
_TEXT_MAX_CHARS = 8_000
_THINKING_MAX_CHARS = 1_000
_TOOL_ARGS_MAX_CHARS = 1_000
_TOOL_RESULT_MAX_CHARS = 2_000
_VERBATIM_REQUEST_MAX_CHARS = 400
_VERBATIM_REQUESTS_MAX = 30
# Headroom for the fixed wording around the transcript and estimate error.
_REQUEST_SLACK_TOKENS = 256

SUMMARY_OPEN = "<conversation-summary>"
SUMMARY_CLOSE = "</conversation-summary>"
_SUMMARY_LEAD = "The earlier part of this conversation was compacted. This is a summary of it:"

_MODIFYING_TOOLS = frozenset(
    {"write", "edit", "multi_edit", "multiedit", "apply_patch", "create", "delete", "remove", "move", "rename"}
)
_PATH_KEYS = frozenset(
    {"path", "paths", "file", "files", "file_path", "file_paths", "filepath", "filename", "filenames", "notebook_path"}
)


# --- when -----------------------------------------------------------------------------


def should_compact(used: int, window: int, *, reserve_tokens: int, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """Whether automatic compaction is due before the next model request (C4).

    Due at ``threshold`` (90%) of the window, or earlier when fewer than ``reserve_tokens``
    would remain for the answer. An unknown window (≤ 0) never triggers.
    """
    if window <= 0:
        return False
    return used >= threshold * window or window - used < reserve_tokens


# --- where ----------------------------------------------------------------------------


def _is_turn_start(message: Message) -> bool:
    return isinstance(message, UserMessage | AssistantMessage)


def find_cut_point(
    messages: Sequence[Message],
    *,
    keep_recent_tokens: int,
    estimate: MessageEstimate = estimate_message_tokens,
) -> int:
    """Index of the first kept message; ``messages[:index]`` get summarized (C4).

    0 means nothing to summarize (everything fits the recent window, or no valid cut exists).
    Guarantees: the result is ≤ ``len(messages) - 1`` (the newest message is kept);
    ``messages[result]`` is a user or assistant message, never a tool result; when the
    recent window holds a user message the cut is the earliest such message in it.
    """
    count = len(messages)
    if count <= 1:
        return 0
    window_start = count
    covered = 0
    for index in range(count - 1, -1, -1):
        tokens = estimate(messages[index])
        if index < count - 1 and covered + tokens > keep_recent_tokens:
            break
        covered += tokens
        window_start = index
    if window_start == 0:
        return 0
    recent = range(window_start, count)
    for index in recent:
        if isinstance(messages[index], UserMessage):
            return index
    for index in recent:
        if isinstance(messages[index], AssistantMessage):
            return index
    for index in range(window_start - 1, 0, -1):
        if _is_turn_start(messages[index]):
            return index
    return 0


# --- rendering for the summarizer --------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    """Head and tail of ``text`` within ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    tail = limit - head
    return f"{text[:head]}\n[… {len(text) - limit} characters omitted …]\n{text[-tail:]}"


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def _content_text(content: Sequence[UserContent], limit: int) -> str:
    parts: list[str] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"[image: {block.mime_type}]")
    return _clip("\n".join(parts), limit)


def summary_text_of(message: Message) -> str | None:
    """The summary inside a message made by ``summary_message``, else ``None``."""
    if not isinstance(message, UserMessage) or len(message.content) != 1:
        return None
    block = message.content[0]
    if not isinstance(block, TextContent):
        return None
    text = block.text
    if not (text.startswith(SUMMARY_OPEN) and text.endswith(SUMMARY_CLOSE)):
        return None
    body = text[len(SUMMARY_OPEN) : len(text) - len(SUMMARY_CLOSE)].strip()
    if body.startswith(_SUMMARY_LEAD):
        body = body[len(_SUMMARY_LEAD) :]
    return body.strip()


def is_summary_message(message: Message) -> bool:
    """True for the message that stands in for a compacted part of the conversation."""
    return summary_text_of(message) is not None


def _render_message(message: Message) -> str:
    """One message as the summarizer reads it; blocks are clipped (see the limits above)."""
    if isinstance(message, UserMessage):
        previous = summary_text_of(message)
        if previous is not None:
            return f"[Summary of an earlier part]:\n{previous}"
        return f"[User]: {_content_text(message.content, _TEXT_MAX_CHARS)}"
    if isinstance(message, ToolResultMessage):
        status = " (error)" if message.is_error else ""
        body = _content_text(message.content, _TOOL_RESULT_MAX_CHARS)
        if not message.content and message.structured_content is not None:
            body = _clip(_json_text(message.structured_content), _TOOL_RESULT_MAX_CHARS)
        return f"[Tool result {message.tool_name}{status}]: {body}"
    lines: list[str] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                lines.append(f"[Assistant]: {_clip(block.text, _TEXT_MAX_CHARS)}")
        elif isinstance(block, ThinkingContent):
            if block.thinking and not block.redacted:
                lines.append(f"[Assistant thinking]: {_clip(block.thinking, _THINKING_MAX_CHARS)}")
        elif isinstance(block, ToolCall):
            lines.append(f"[Tool call {block.name}]: {_clip(_json_text(block.arguments), _TOOL_ARGS_MAX_CHARS)}")
        elif isinstance(block, NativeContent):
            lines.append(f"[Provider tool activity]: {_clip(_json_text(block.payload), _TOOL_ARGS_MAX_CHARS)}")
    if message.error_message:
        lines.append(f"[Assistant error]: {_clip(message.error_message, _TOOL_ARGS_MAX_CHARS)}")
    return "\n".join(lines) if lines else "[Assistant]: (no content)"


def render_transcript(messages: Sequence[Message]) -> str:
    """The conversation as plain text for a summary request (earlier summaries included)."""
    return "\n\n".join(_render_message(message) for message in messages)


def _user_request_text(message: Message) -> str | None:
    """A short user request quoted verbatim in the summary request, or ``None``."""
    if not isinstance(message, UserMessage) or is_summary_message(message):
        return None
    text = "\n".join(block.text for block in message.content if isinstance(block, TextContent)).strip()
    if not text or len(text) > _VERBATIM_REQUEST_MAX_CHARS:
        return None
    return text


def _paths_in(arguments: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for key in sorted(arguments):
        normalized = key.lower()
        if normalized not in _PATH_KEYS and not normalized.endswith(("_path", "_file")):
            continue
        value = arguments[key]
        values = value if isinstance(value, list) else [value]
        found.extend(item for item in values if isinstance(item, str) and item.strip())
    return found


def touched_paths(messages: Sequence[Message]) -> tuple[list[str], list[str]]:
    """(paths read or searched, paths modified) from tool call arguments, first-seen order.

    Deterministic (argument keys are visited sorted) so the same transcript always yields
    the same prompt. A path both read and modified is listed as modified only.
    """
    read: dict[str, None] = {}
    modified: dict[str, None] = {}
    for message in messages:
        if not isinstance(message, AssistantMessage):
            continue
        for call in message.tool_calls:
            target = modified if call.name.lower() in _MODIFYING_TOOLS else read
            for path in _paths_in(call.arguments):
                target.setdefault(path, None)
    return [path for path in read if path not in modified], list(modified)


# --- requests -----------------------------------------------------------------------------


def build_summary_request(
    messages_to_summarize: Sequence[Message],
    *,
    previous_summary: str | None = None,
    instructions: str | None = None,
) -> tuple[str, str]:
    """(system prompt, user text) asking a model to summarize ``messages_to_summarize`` (C3).

    The summary keeps goals, decisions, files touched, progress and unfinished work; short
    user requests and the touched paths are extracted deterministically and listed so the
    model can keep them exactly. A leading earlier summary in the messages is used as
    ``previous_summary`` when none is given, so repeated compaction folds summaries together.
    ``instructions`` are the user's extra wishes (e.g. text after ``/compact``).
    """
    messages = list(messages_to_summarize)
    if previous_summary is None and messages:
        leading = summary_text_of(messages[0])
        if leading is not None:
            previous_summary = leading
            messages = messages[1:]
    parts: list[str] = []
    if previous_summary:
        parts.append(f"<previous-summary>\n{previous_summary.strip()}\n</previous-summary>")
    parts.append(f"<conversation>\n{render_transcript(messages)}\n</conversation>")
    read, modified = touched_paths(messages)
    if read or modified:
        lines = ["Files touched by tool calls:"]
        lines.extend(f"- modified: {path}" for path in modified)
        lines.extend(f"- read: {path}" for path in read)
        parts.append("\n".join(lines))
    requests = [text for text in map(_user_request_text, messages) if text is not None]
    if requests:
        quoted = requests[-_VERBATIM_REQUESTS_MAX:]
        parts.append("User requests (keep these verbatim):\n" + "\n".join(f"- {_quote(text)}" for text in quoted))
    if instructions and instructions.strip():
        parts.append(f"Additional instructions for this summary:\n{instructions.strip()}")
    parts.append("Write the summary of the conversation above now.")
    return load_prompt("compaction.md"), "\n\n".join(parts)


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def build_merge_request(summaries: Sequence[str], *, instructions: str | None = None) -> tuple[str, str]:
    """(system prompt, user text) merging the summaries of consecutive chunks, oldest first (C5)."""
    total = len(summaries)
    parts = [
        f'<summary part="{number}" of="{total}">\n{text.strip()}\n</summary>'
        for number, text in enumerate(summaries, start=1)
    ]
    if instructions and instructions.strip():
        parts.append(f"Additional instructions for this summary:\n{instructions.strip()}")
    parts.append("Write the merged summary now.")
    return load_prompt("compaction_merge.md"), "\n\n".join(parts)


def summary_message(summary_text: str) -> UserMessage:
    """The user message that replaces the summarized part of the transcript (C3, C4).

    Marked with ``<conversation-summary>`` so the model reads it as a summary of earlier
    conversation rather than a new request, and so ``is_summary_message`` finds it again.
    """
    body = summary_text.strip()
    return UserMessage([TextContent(f"{SUMMARY_OPEN}\n{_SUMMARY_LEAD}\n\n{body}\n{SUMMARY_CLOSE}")])


# --- the plan -----------------------------------------------------------------------------


def _summary_cost(message: Message) -> int:
    """Tokens ``message`` adds to a summary request: its rendering plus what is extracted."""
    tokens = estimate_text_tokens(_render_message(message)) + 2
    request = _user_request_text(message)
    if request is not None:
        tokens += estimate_text_tokens(request) + 4
    if isinstance(message, AssistantMessage):
        for call in message.tool_calls:
            tokens += sum(estimate_text_tokens(path) + 4 for path in _paths_in(call.arguments))
    return tokens


def _describe(message: Message, index: int) -> str:
    if isinstance(message, ToolResultMessage):
        return f"the result of tool {message.tool_name!r} (message {index})"
    if isinstance(message, AssistantMessage):
        return f"an assistant message (message {index})"
    return f"a user message (message {index})"


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a compaction will do; built by ``plan_compaction`` (C3, C4, C5).

    ``to_summarize`` + ``kept`` == the transcript. ``chunks`` partitions ``to_summarize`` in
    order; one chunk is the normal case, several mean the history already overflows a single
    summary request and the chunk summaries must be merged. ``oversize_index`` names a message
    that cannot be sent or summarized at all; the engine must then stop with
    ``oversize_error()`` rather than call the model.
    """

    cut_index: int
    to_summarize: tuple[Message, ...]
    kept: tuple[Message, ...]
    chunks: tuple[tuple[Message, ...], ...]
    tokens_before: int
    kept_tokens: int
    chunk_budget: int
    oversize_index: int | None = None
    oversize_tokens: int = 0
    oversize_limit: int = 0
    oversize_description: str = ""

    @property
    def oversize(self) -> bool:
        return self.oversize_index is not None

    @property
    def needed(self) -> bool:
        """True when there is something to summarize and nothing blocks it."""
        return bool(self.to_summarize) and not self.oversize

    def oversize_error(self) -> str | None:
        """A message for the user naming what is too large, or ``None`` (C5)."""
        if self.oversize_index is None:
            return None
        return (
            f"{self.oversize_description[:1].upper()}{self.oversize_description[1:]} is about "
            f"{self.oversize_tokens:,} tokens, more than the {self.oversize_limit:,} tokens that fit "
            "the model's context window even after compaction. Shorten the input or the tool output "
            "(for example read a file in parts or filter a command's output) and try again."
        )


def _require(value: int, field: str, *, positive: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputValidationError(f"{field} must be an integer", field=field)
    if value < 0 or (positive and value == 0):
        raise InputValidationError(f"{field} must be {'positive' if positive else 'non-negative'}", field=field)


def plan_compaction(
    messages: Sequence[Message],
    *,
    window: int,
    reserve_tokens: int,
    keep_recent_tokens: int,
    max_summary_tokens: int,
    force: bool = False,
    estimate: MessageEstimate = estimate_message_tokens,
) -> CompactionPlan:
    """Plan an automatic (C4) or, with ``force=True``, a full manual compaction (C3).

    ``window`` is the model's context window, ``reserve_tokens`` the room kept free for an
    answer, ``keep_recent_tokens`` the budget of recent messages kept verbatim and
    ``max_summary_tokens`` the output reserved for each summary request. ``estimate`` is the
    per-message estimate (pass ``ContextTracker.message_tokens`` to reuse its cache).
    """
    _require(window, "window", positive=True)
    _require(reserve_tokens, "reserve_tokens", positive=False)
    _require(keep_recent_tokens, "keep_recent_tokens", positive=False)
    _require(max_summary_tokens, "max_summary_tokens", positive=True)
    cut = len(messages) if force else find_cut_point(messages, keep_recent_tokens=keep_recent_tokens, estimate=estimate)
    context_tokens = [estimate(message) for message in messages]
    overhead = estimate_text_tokens(load_prompt("compaction.md")) + _REQUEST_SLACK_TOKENS
    chunk_budget = window - max_summary_tokens - overhead
    usable = window - reserve_tokens

    oversize: tuple[int, int, int] | None = None
    for index in range(cut, len(messages)):
        if context_tokens[index] > usable:
            oversize = (index, context_tokens[index], usable)
            break

    chunks: list[tuple[Message, ...]] = []
    current: list[Message] = []
    current_tokens = 0
    for index in range(cut):
        cost = _summary_cost(messages[index])
        if cost > chunk_budget:
            if oversize is None or index < oversize[0]:
                oversize = (index, cost, max(chunk_budget, 0))
            break
        if current and current_tokens + cost > chunk_budget:
            chunks.append(tuple(current))
            current, current_tokens = [], 0
        current.append(messages[index])
        current_tokens += cost
    if current:
        chunks.append(tuple(current))

    oversize_index, oversize_tokens, oversize_limit = oversize if oversize is not None else (None, 0, 0)
    return CompactionPlan(
        cut_index=cut,
        to_summarize=tuple(messages[:cut]),
        kept=tuple(messages[cut:]),
        chunks=tuple(chunks) if oversize is None else (),
        tokens_before=sum(context_tokens),
        kept_tokens=sum(context_tokens[cut:]),
        chunk_budget=chunk_budget,
        oversize_index=oversize_index,
        oversize_tokens=oversize_tokens,
        oversize_limit=oversize_limit,
        oversize_description=_describe(messages[oversize_index], oversize_index) if oversize_index is not None else "",
    )
