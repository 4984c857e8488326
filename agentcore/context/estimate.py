"""Context-size estimation without a tokenizer (SPEC C1, C2).

Why a heuristic: the runtime must show how full the window is *before* the first model
request and while text streams in, for any provider, without shipping a tokenizer per model.
The rule below counts the same things a BPE pre-tokenizer splits on — words, 1–3 digit
groups, punctuation runs, newline/indent runs — with weights calibrated against OpenAI's
``o200k_base`` and ``cl100k_base``: English prose, Python code, Markdown and JSON land within
a few percent (``bench/context_estimate.py`` prints the table; the accuracy test holds ±15%).
CJK is counted per character (≈1 token, exact for cl100k; o200k needs ~0.7 per character, so
for Chinese the estimate errs high, which is the safe side for a compaction trigger).

Why calibration: a real response's usage is exact, so ``ContextTracker`` anchors on the last
valid one (cache tokens included) and only *estimates* what came after it (C2). Billed usages
of several requests are never added up: each request re-sends the whole context, so their sum
says nothing about the window.

Nothing here does I/O; ``ContextTracker`` and ``StreamingUsage`` are plain objects owned by
one run. The one thing shared is a bounded memo of a pure function (``static_text_tokens``:
the estimate of the text every request carries), which no caller can observe except by speed.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import re
import string
import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

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
    Usage,
    UserContent,
    parse_messages,
)

__all__ = [
    "DEFAULT_IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "ContextTracker",
    "StreamingUsage",
    "ToolSpec",
    "UsageThrottle",
    "estimate_agent_context_tokens",
    "estimate_image_tokens",
    "estimate_message_tokens",
    "estimate_static_context_tokens",
    "estimate_text_tokens",
    "estimate_tool_tokens",
]

# --- text ------------------------------------------------------------------------------


def _byte_table(classes: dict[bytes, bytes], default: bytes = b" ") -> bytes:
    table = bytearray(default * 256)
    for members, cls in classes.items():
        for byte in members:
            table[byte] = cls[0]
    return bytes(table)


# Every character becomes one class byte: UTF-8 continuation bytes are deleted and a lead
# byte stands for its character. Lead bytes E3–ED and EF cover U+3000–U+D7FF and U+F000–
# U+FFFF (kana, Han, Hangul, CJK punctuation, full-width forms): one token per character.
# C2–E1 are other alphabets (accented Latin, Greek, Cyrillic, Arabic, Indic…); E2, EE and
# F0–F4 are symbols, typographic quotes and emoji.
_CLASS_OF_BYTE = _byte_table(
    {
        string.ascii_lowercase.encode(): b"l",
        string.ascii_uppercase.encode(): b"U",
        string.digits.encode(): b"d",
        string.punctuation.encode(): b"p",
        b" \t\x0b\x0c": b"s",
        b"\n\r": b"n",
        bytes(range(0xC2, 0xE2)): b"o",
        bytes(range(0xE3, 0xEE)) + b"\xef": b"c",
        b"\xe2\xee" + bytes(range(0xF0, 0xF5)): b"y",
    },
    default=b"p",  # control characters and invalid bytes
)
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))
_LETTERS_ONLY = _byte_table({b"lU": b"a"})
_DIGITS_ONLY = _byte_table({b"d": b"d"})
_PUNCT_ONLY = _byte_table({b"p": b"p"})
_SPACES_ONLY = _byte_table({b"s": b"s"})
_RUN_OF_10, _RUN_OF_14, _RUN_OF_18 = (b" " + b"a" * length for length in (10, 14, 18))
_ALNUM_BLOB = re.compile(rb"[lUd]{24,}")  # no word is this long: hashes, base64, hex, repeats
_PUNCT_BLOB = re.compile(rb"p{16,}")
_ALNUM_ONLY = _byte_table({b"lUd": b"a"})
_ALNUM_RUN = b"a" * 24
_PUNCT_RUN = b"p" * 16
_CHARS_PER_BLOB_TOKEN = 2.0  # random base64 ~1.5, hex ~1.75, one repeated letter ~8
_CHARS_PER_PUNCT_BLOB_TOKEN = 4.0

# Weights fitted (least squares on relative error) against o200k_base and cl100k_base over
# prose, Python, Markdown and JSON, rounded with a slight bias to over-estimate (the safe
# side for a compaction trigger); see bench/context_estimate.py.
_W_WORD = 1.0  # a letter run, with its leading space: almost always one token up to 7 letters
_W_LONG_WORD_LETTER = 0.15  # each letter past the 7th
_W_DIGIT_GROUP = 0.7  # both encodings split digits into groups of at most three
_W_PUNCT_RUN = 1.1
_W_SPACE_RUN = 0.5  # runs of 2+ spaces/tabs (indentation); a single space rides on the next token
_W_NEWLINE_RUN = 0.4
_W_CJK = 1.0
_W_OTHER_LETTER = 0.5
_W_SYMBOL = 1.0


def _runs(classes: bytes, cls: bytes) -> int:
    """Number of maximal runs of ``cls`` in a string of ``cls`` and spaces."""
    return classes.count(b" " + cls) + (1 if classes[:1] == cls else 0)


def _weighted_runs(classes: bytes) -> float:
    """The run-based estimate of a class string (ASCII classes only)."""
    letters = classes.translate(_LETTERS_ONLY)
    # Letters past the 7th of each run = sum over k >= 8 of (runs at least k long), sampled at
    # k = 10, 14, 18 for the bands 8–11, 12–15, 16–19 (midpoint rule, four letters each).
    long_letters = 4 * (letters.count(_RUN_OF_10) + letters.count(_RUN_OF_14) + letters.count(_RUN_OF_18))
    digits = classes.translate(_DIGITS_ONLY)
    digit_runs = _runs(digits, b"d")
    digit_groups = digit_runs + (classes.count(b"d") - digit_runs) / 3
    return (
        _W_WORD * _runs(letters, b"a")
        + _W_LONG_WORD_LETTER * long_letters
        + _W_DIGIT_GROUP * digit_groups
        + _W_PUNCT_RUN * _runs(classes.translate(_PUNCT_ONLY), b"p")
        + _W_SPACE_RUN * _runs(classes.translate(_SPACES_ONLY), b"ss")
        + _W_NEWLINE_RUN * (classes.count(b"n") - classes.count(b"nn"))
    )


def _blob_correction(classes: bytes) -> float:
    """Extra tokens for long runs that are not words (C2).

    BPE vocabularies cover words, not hashes, base64, hex or a character repeated thousands of
    times: such runs cost far more tokens than the word rule says (random base64 is about 1.5
    characters per token). Tool-call arguments carry exactly this kind of text, and an
    estimate that misses it lets an oversized call through the window check.
    """
    extra = 0.0
    blobs = []
    if _ALNUM_RUN in classes.translate(_ALNUM_ONLY):  # a memmem pre-check keeps the common case cheap
        blobs = [blob for blob in _ALNUM_BLOB.findall(classes) if blob.strip(b"d")]  # digits: grouped by 3
    if blobs:
        joined = b" ".join(blobs)
        extra += max(0.0, (len(joined) - len(blobs) + 1) / _CHARS_PER_BLOB_TOKEN - _weighted_runs(joined))
    punct = _PUNCT_BLOB.findall(classes) if _PUNCT_RUN in classes else []
    if punct:
        extra += max(0.0, sum(map(len, punct)) / _CHARS_PER_PUNCT_BLOB_TOKEN - _W_PUNCT_RUN * len(punct))
    return extra


def estimate_text_tokens(text: str) -> int:
    """Estimated tokens of ``text`` for a modern BPE tokenizer (C2).

    Counts what a BPE pre-tokenizer splits on — letter runs (long ones cost extra), digit
    groups, punctuation runs, indentation and newline runs — plus one token per CJK
    character, and long non-word runs (hashes, base64, repeated characters) by their length.
    Runs at C speed (byte translations, counts and one regex scan, no per-word Python loop):
    tens of µs per KB, several times faster than tiktoken itself. Empty → 0; any other text →
    at least 1.
    """
    if not text:
        return 0
    classes = text.encode("utf-8", "surrogatepass").translate(_CLASS_OF_BYTE, _CONTINUATION_BYTES)
    total = _weighted_runs(classes) + _blob_correction(classes)
    if not text.isascii():
        total += _W_CJK * classes.count(b"c") + _W_OTHER_LETTER * classes.count(b"o") + _W_SYMBOL * classes.count(b"y")
    return max(1, round(total))


# --- images ------------------------------------------------------------------------------

DEFAULT_IMAGE_TOKENS = 1_600
"""Tokens assumed for an image whose size cannot be read cheaply (about a full-size image)."""

_IMAGE_MAX_EDGE = 1_568  # providers downscale larger images before tokenizing
_IMAGE_PIXELS_PER_TOKEN = 750


def _image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from the first bytes of PNG, GIF, WebP or JPEG data, else ``None``."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return int(width), int(height)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8X":
            return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
        if chunk == b"VP8 ":
            width, height = struct.unpack("<HH", data[26:30])
            return int(width) & 0x3FFF, int(height) & 0x3FFF
        if chunk == b"VP8L" and len(data) >= 25:
            bits = int.from_bytes(data[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        return None
    if data.startswith(b"\xff\xd8"):
        index = 2
        while index + 9 < len(data):
            if data[index] != 0xFF:
                return None
            marker = data[index + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                index += 2
                continue
            length = int.from_bytes(data[index + 2 : index + 4], "big")
            if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                height, width = struct.unpack(">HH", data[index + 5 : index + 9])
                return int(width), int(height)
            index += 2 + length
    return None


def estimate_image_tokens(image: ImageContent) -> int:
    """Tokens of one image: from its pixel size when the header is cheap to read (C2).

    Uses the common vision rule (about 750 pixels a token after scaling the long edge to at
    most 1,568 px, capped at ``DEFAULT_IMAGE_TOKENS``); undecodable data → the default.
    JPEG headers may sit after metadata, so up to 64 KiB of base64 is decoded; others need 40 B.
    """
    head = image.data[: 65_536 if image.mime_type in ("image/jpeg", "image/jpg") else 64]
    head = head[: len(head) - len(head) % 4]
    try:
        size = _image_size(base64.b64decode(head, validate=False))
    except (binascii.Error, ValueError, struct.error):
        size = None
    if size is None or size[0] <= 0 or size[1] <= 0:
        return DEFAULT_IMAGE_TOKENS
    width, height = size
    scale = min(1.0, _IMAGE_MAX_EDGE / max(width, height))
    tokens = math.ceil(width * scale * height * scale / _IMAGE_PIXELS_PER_TOKEN)
    return max(1, min(DEFAULT_IMAGE_TOKENS, tokens))


# --- messages ---------------------------------------------------------------------------

MESSAGE_OVERHEAD_TOKENS = 4
"""Role markers and separators every chat format adds around a message."""
_TOOL_CALL_OVERHEAD_TOKENS = 8  # call id, type, name wrapper
_TOOL_RESULT_OVERHEAD_TOKENS = 8
_TOOL_DEFINITION_OVERHEAD_TOKENS = 10
_SECTION_OVERHEAD_TOKENS = 4


def _json_text(value: Any) -> str:
    """JSON as providers send it (compact, non-ASCII kept); unserialisable values via ``str``."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(value)


def _user_content_tokens(content: Sequence[UserContent]) -> int:
    total = 0
    for block in content:
        if isinstance(block, TextContent):
            total += estimate_text_tokens(block.text)
        else:
            total += estimate_image_tokens(block)
    return total


def estimate_message_tokens(message: Message) -> int:
    """Estimated tokens one transcript message occupies in the window (C2).

    Counts text, reasoning (redacted reasoning by its opaque size), each tool call's name and
    JSON arguments, tool results (text and images; structured content only when there is no
    content, since adapters then send it as JSON), provider-native blocks as JSON, and a
    per-message overhead.
    """
    total = MESSAGE_OVERHEAD_TOKENS
    if isinstance(message, AssistantMessage):
        for block in message.content:
            if isinstance(block, TextContent):
                total += estimate_text_tokens(block.text)
            elif isinstance(block, ThinkingContent):
                total += len(block.thinking) // 4 if block.redacted else estimate_text_tokens(block.thinking)
            elif isinstance(block, ToolCall):
                total += (
                    _TOOL_CALL_OVERHEAD_TOKENS
                    + estimate_text_tokens(block.name)
                    + estimate_text_tokens(_json_text(block.arguments))
                )
            elif isinstance(block, NativeContent):
                total += estimate_text_tokens(_json_text(block.payload))
        return total
    if isinstance(message, ToolResultMessage):
        total += _TOOL_RESULT_OVERHEAD_TOKENS + _user_content_tokens(message.content)
        if not message.content and message.structured_content is not None:
            total += estimate_text_tokens(_json_text(message.structured_content))
        return total
    return total + _user_content_tokens(message.content)


class ToolSpec(Protocol):
    """What a tool definition costs in the prompt: ``AgentTool`` satisfies this."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]: ...


STATIC_TEXT_MEMO_SIZE = 1024
"""Distinct static texts (system prompts, prompt sections, tool names, descriptions and
schemas) whose estimates are remembered, least recently used first out."""


@functools.lru_cache(maxsize=STATIC_TEXT_MEMO_SIZE)
def static_text_tokens(text: str) -> int:
    """``estimate_text_tokens`` for the text every request of a configuration carries.

    Why a process-wide memo: a host runs many runtimes (Studio: one per session) that all carry
    the same system prompt and tool definitions, and each one's first turn estimated them
    afresh — most of the cost of configuring a turn. The function is pure and its key an
    immutable ``str``, so sharing results between runtimes can never change one (the memo is
    not mutable state anyone can see); it is bounded (LRU) so ever-new texts cost at most
    ``STATIC_TEXT_MEMO_SIZE`` entries. Only for static text: message text is seen once and
    goes through the tracker's per-message cache instead.
    """
    return estimate_text_tokens(text)


def estimate_tool_tokens(tool: ToolSpec | Mapping[str, Any]) -> int:
    """Tokens one tool definition adds: name, description and JSON schema (C2).

    Accepts an ``AgentTool``-like object or a mapping with ``name``/``description`` and
    ``parameters`` (or ``input_schema``), as the wire formats spell it. The texts are estimated
    through ``static_text_tokens``, keyed by the definition's text (the schema as its JSON), so
    a schema changed in place is estimated anew.
    """
    if isinstance(tool, Mapping):
        name = str(tool.get("name", ""))
        description = str(tool.get("description", ""))
        schema: Any = tool.get("parameters", tool.get("input_schema", {}))
    else:
        name, description, schema = tool.name, tool.description, tool.parameters
    return (
        _TOOL_DEFINITION_OVERHEAD_TOKENS
        + static_text_tokens(name)
        + static_text_tokens(description)
        + static_text_tokens(_json_text(schema))
    )


def estimate_static_context_tokens(
    *,
    system_prompt: str = "",
    tools: Iterable[ToolSpec | Mapping[str, Any]] | None = None,
    sections: Mapping[str, str] | Iterable[str] | None = None,
) -> int:
    """Tokens of what every request carries besides messages: system prompt, sections, tools."""
    total = static_text_tokens(system_prompt) + (MESSAGE_OVERHEAD_TOKENS if system_prompt else 0)
    if sections is not None:
        if isinstance(sections, Mapping):
            items: Iterable[str] = (f"{name}\n{text}" for name, text in sections.items())
        else:
            items = sections
        total += sum(static_text_tokens(text) + _SECTION_OVERHEAD_TOKENS for text in items)
    if tools is not None:
        total += sum(estimate_tool_tokens(tool) for tool in tools)
    return total


def estimate_agent_context_tokens(
    messages: Iterable[Message | Mapping[str, Any]],
    *,
    system_prompt: str = "",
    tools: Iterable[ToolSpec | Mapping[str, Any]] | None = None,
    sections: Mapping[str, str] | Iterable[str] | None = None,
) -> int:
    """Estimated context size of a transcript with no usage at all (public API, C2).

    The sum of the static context (system prompt, named prompt ``sections`` as name → text or
    plain texts, ``tools`` definitions) and every message. ``messages`` may be message objects
    or message dicts — the format ``AgentRuntime.read_transcript()`` returns — or a mix; the
    estimate is the same either way. An entry that is neither is ``input_validation`` naming
    ``messages.<index>``. Pure; the same result every call.
    """
    return estimate_static_context_tokens(system_prompt=system_prompt, tools=tools, sections=sections) + sum(
        estimate_message_tokens(message) for message in parse_messages(messages)
    )


# --- tracking a live run --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Anchor:
    """A known context size covering ``messages[:start]``.

    ``message`` is the response the usage came from; it must still sit at ``start - 1`` for
    the anchor to count, so a list rewritten behind the tracker's back falls back to estimation.
    ``total`` is set for an external measurement only.
    """

    tokens: int
    start: int
    message: Message | None = None
    total: float | None = None


def _validate_number(value: object, field: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputValidationError(f"{field} must be a number, got {type(value).__name__}", field=field)
    number = float(value)
    if not math.isfinite(number):
        raise InputValidationError(f"{field} must be finite, got {value!r}", field=field)
    if positive and number <= 0:
        raise InputValidationError(f"{field} must be positive, got {value!r}", field=field)
    if not positive and number < 0:
        raise InputValidationError(f"{field} must not be negative, got {value!r}", field=field)
    return number


class ContextTracker:
    """Current context usage of one agent's transcript (C1, C2).

    ``current(messages)`` = the anchor (last valid response usage, or an external measurement)
    + estimates of the messages after it; with no anchor, the static context plus every
    message. Per-message estimates are cached by identity, so a call costs only the messages
    not seen before: callers must not mutate a message after passing it here (completed
    transcript messages are immutable by contract; stream partial output through
    ``StreamingUsage`` instead).
    """

    def __init__(
        self,
        *,
        system_prompt: str = "",
        tools: Iterable[ToolSpec | Mapping[str, Any]] | None = None,
        sections: Mapping[str, str] | Iterable[str] | None = None,
    ) -> None:
        self._static_tokens = 0
        self._anchor: _Anchor | None = None
        self._compacted_prefix = 0
        self._last_length = 0
        self._cache: dict[int, tuple[Message, int]] = {}
        self.set_static_context(system_prompt=system_prompt, tools=tools, sections=sections)

    # configuration

    def set_static_context(
        self,
        *,
        system_prompt: str = "",
        tools: Iterable[ToolSpec | Mapping[str, Any]] | None = None,
        sections: Mapping[str, str] | Iterable[str] | None = None,
    ) -> None:
        """Replace the system prompt / sections / tools counted when nothing calibrates."""
        self._static_tokens = estimate_static_context_tokens(
            system_prompt=system_prompt, tools=tools, sections=sections
        )

    @property
    def static_tokens(self) -> int:
        return self._static_tokens

    # queries

    def message_tokens(self, message: Message) -> int:
        """Cached ``estimate_message_tokens`` (keyed by identity; the entry pins the message)."""
        entry = self._cache.get(id(message))
        if entry is not None and entry[0] is message:
            return entry[1]
        tokens = estimate_message_tokens(message)
        self._cache[id(message)] = (message, tokens)
        return tokens

    def current(self, messages: Sequence[Message]) -> int:
        """Estimated tokens in the window for ``messages`` (C2); never a sum of billed usage."""
        self._last_length = len(messages)
        anchor = self._anchor
        if anchor is not None and self._anchor_holds(anchor, messages):
            base, start = anchor.tokens, anchor.start
        else:
            base, start = self._static_tokens, 0
        return base + sum(self.message_tokens(messages[i]) for i in range(start, len(messages)))

    def _anchor_holds(self, anchor: _Anchor, messages: Sequence[Message]) -> bool:
        if anchor.start > len(messages):
            return False
        return anchor.message is None or (anchor.start > 0 and messages[anchor.start - 1] is anchor.message)

    @property
    def calibrated(self) -> bool:
        """True while a response usage or a measurement anchors the estimate."""
        return self._anchor is not None

    @property
    def measured_total(self) -> float | None:
        """The ``total`` of the external measurement in force, if that is the anchor (C2)."""
        return self._anchor.total if self._anchor is not None else None

    # updates

    def record_usage(self, message_index: int, usage: Usage | None, message: Message | None = None) -> bool:
        """Calibrate on the response at ``message_index``; returns whether it counted (C2).

        ``usage.context_tokens`` (input + cache reads + cache writes + output) is what the
        model held after answering. Usage without tokens (a provider that reported none, an
        aborted stream) is ignored, as is a response retained from before the last compaction.
        Pass ``message`` (the response itself) so a later rewrite of the list is detected.
        """
        if usage is None or usage.context_tokens <= 0 or message_index < 0:
            return False
        if message_index < self._compacted_prefix:
            return False
        tokens = usage.context_tokens
        if message is not None:
            # The answer stays in the window as what it contains, whatever the bill says: a
            # provider (or proxy) that under-reports output must not hide a huge tool call.
            tokens += max(0, self.message_tokens(message) - usage.output_tokens)
        self._anchor = _Anchor(tokens, message_index + 1, message)
        return True

    def recalibrate(self, messages: Sequence[Message], *, first_eligible_index: int = 0) -> bool:
        """Re-anchor from a restored transcript: the last assistant message with valid usage.

        ``first_eligible_index`` is the length of the transcript right after the last
        compaction (summary + kept messages): responses before it no longer calibrate (C2).
        Clears any anchor first; returns whether one was found.
        """
        self._anchor = None
        self._compacted_prefix = max(0, first_eligible_index)
        for index in range(len(messages) - 1, self._compacted_prefix - 1, -1):
            message = messages[index]
            if isinstance(message, AssistantMessage) and message.usage is not None:
                if self.record_usage(index, message.usage, message):
                    return True
        return False

    def set_measurement(self, used: float, total: float, *, message_count: int | None = None) -> None:
        """Adopt an external meter's reading (``update_context_usage``, C2).

        ``used`` must be a non-negative finite number and ``total`` a positive finite one
        (else ``InputValidationError`` naming the field). The reading covers the first
        ``message_count`` messages (default: as many as the last ``current`` call saw); later
        estimates grow from it until a valid response usage or a compaction replaces it.
        ``total`` is reported back via ``measured_total``; it does not change the model's window.
        """
        used_value = _validate_number(used, "used", positive=False)
        total_value = _validate_number(total, "total", positive=True)
        count = self._last_length if message_count is None else message_count
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InputValidationError("message_count must be a non-negative integer", field="message_count")
        self._anchor = _Anchor(math.ceil(used_value), count, None, total_value)

    def after_compaction(self, new_messages: Sequence[Message]) -> None:
        """Forget calibration after a compaction (C2).

        The responses kept from before the cut described a larger context, so until the next
        response the estimate is pure estimation of ``new_messages``; their cached estimates
        are kept, all others are dropped.
        """
        self._anchor = None
        self._compacted_prefix = len(new_messages)
        self._last_length = len(new_messages)
        keep = {id(message) for message in new_messages}
        self._cache = {key: entry for key, entry in self._cache.items() if key in keep}

    def reset(self) -> None:
        """Clear calibration, measurement and caches (``reset()`` of the agent, C2)."""
        self._anchor = None
        self._compacted_prefix = 0
        self._last_length = 0
        self._cache.clear()


# --- streaming ----------------------------------------------------------------------------


class UsageThrottle:
    """Decides when a ``context_usage`` event may go out (C1).

    Streaming updates go out at most once per ``interval`` seconds and only when the value
    changed; ``force=True`` (message end, tool result, after compaction) always goes out.
    The clock is injectable so tests need no sleeping.
    """

    def __init__(self, interval: float = 0.1, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval
        self._clock = clock
        self._last_time: float | None = None
        self._last_value: int | None = None

    def offer(self, value: int, *, force: bool = False) -> bool:
        """True when ``value`` should be emitted now (and records it as emitted)."""
        now = self._clock()
        if not force:
            if value == self._last_value:
                return False
            if self._last_time is not None and now - self._last_time < self._interval:
                return False
        self._last_time = now
        self._last_value = value
        return True

    @property
    def last_value(self) -> int | None:
        return self._last_value


class StreamingUsage:
    """Context usage while one response streams in (C1).

    ``base_tokens`` is ``ContextTracker.current(messages)`` before the response; deltas of
    text, reasoning and tool-call arguments are added as they arrive. Text is estimated in
    whole pieces cut at whitespace, so a word split across two deltas is not counted twice;
    cost per delta is bounded by the small unsettled tail.
    """

    _SETTLE_CHARS = 256

    def __init__(
        self,
        base_tokens: int,
        *,
        throttle: UsageThrottle | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._base = base_tokens
        self._settled = MESSAGE_OVERHEAD_TOKENS
        self._tail = ""
        self._throttle = throttle if throttle is not None else UsageThrottle(clock=clock)

    def add_text(self, delta: str) -> None:
        """Add a text, reasoning or tool-argument delta."""
        self._tail += delta
        if len(self._tail) > self._SETTLE_CHARS:
            cut = max(self._tail.rfind(" ", 0, -1), self._tail.rfind("\n", 0, -1))
            if cut <= 0:
                cut = len(self._tail) - 1
            self._settled += estimate_text_tokens(self._tail[:cut])
            self._tail = self._tail[cut:]

    def add_tokens(self, tokens: int) -> None:
        """Add a known amount, e.g. a tool call's fixed overhead or an image."""
        self._settled += tokens

    def add_tool_call(self, name: str) -> None:
        """A tool call block started: its wrapper and name (arguments follow as deltas)."""
        self._settled += _TOOL_CALL_OVERHEAD_TOKENS + estimate_text_tokens(name)

    @property
    def tokens(self) -> int:
        """Current estimate: base + everything streamed so far."""
        return self._base + self._settled + estimate_text_tokens(self._tail)

    def take_update(self, *, force: bool = False) -> int | None:
        """The value to emit as ``context_usage`` now, or ``None`` while throttled."""
        value = self.tokens
        return value if self._throttle.offer(value, force=force) else None
