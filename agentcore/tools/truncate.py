"""Output bounds shared by the tools.

Every byte a tool returns lands in the model's context window, so tool output is bounded.
``read`` keeps the HEAD of a file (the model pages forward with ``offset``); ``bash`` keeps the
TAIL of a command's output (errors and summaries come last) and saves the whole output to a
file the model can ``read``. Both bounds apply at once: whichever of lines or bytes is hit
first wins. Cuts happen on whole lines, except that a tail cut keeps the end of an oversized
last line rather than returning nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

MAX_LINES: Final = 2000
MAX_BYTES: Final = 50 * 1024
MAX_LINE_CHARS: Final = 2000  # read: longer lines are cut
GREP_MAX_LINE_CHARS: Final = 500  # grep/find: a match line is context, not content


@dataclass(frozen=True, slots=True)
class Truncation:
    """The kept text and enough numbers to tell the model what was left out."""

    text: str
    truncated: bool
    truncated_by: Literal["lines", "bytes"] | None
    total_lines: int
    output_lines: int
    total_bytes: int
    output_bytes: int


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def truncate_head(text: str, *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> Truncation:
    """Keep the first whole lines of ``text`` that fit both bounds."""
    lines = text.split("\n")
    total_bytes = _utf8_len(text)
    if len(lines) <= max_lines and total_bytes <= max_bytes:
        return Truncation(text, False, None, len(lines), len(lines), total_bytes, total_bytes)
    kept: list[str] = []
    size = 0
    by: Literal["lines", "bytes"] = "lines"
    for line in lines:
        if len(kept) >= max_lines:
            by = "lines"
            break
        cost = _utf8_len(line) + (1 if kept else 0)
        if size + cost > max_bytes:
            by = "bytes"
            break
        kept.append(line)
        size += cost
    out = "\n".join(kept)
    return Truncation(out, True, by, len(lines), len(kept), total_bytes, _utf8_len(out))


def truncate_tail(text: str, *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> Truncation:
    """Keep the last whole lines of ``text`` that fit both bounds.

    If even the last line alone is larger than ``max_bytes`` its end is kept (cut on a
    character boundary), so a command that prints one enormous line still shows something.
    """
    lines = text.split("\n")
    total_bytes = _utf8_len(text)
    if len(lines) <= max_lines and total_bytes <= max_bytes:
        return Truncation(text, False, None, len(lines), len(lines), total_bytes, total_bytes)
    kept: list[str] = []
    size = 0
    by: Literal["lines", "bytes"] = "lines"
    for line in reversed(lines):
        if len(kept) >= max_lines:
            by = "lines"
            break
        cost = _utf8_len(line) + (1 if kept else 0)
        if size + cost > max_bytes:
            by = "bytes"
            if not kept:
                kept.append(_tail_of_line(line, max_bytes))
            break
        kept.append(line)
        size += cost
    kept.reverse()
    out = "\n".join(kept)
    return Truncation(out, True, by, len(lines), len(kept), total_bytes, _utf8_len(out))


def _tail_of_line(line: str, max_bytes: int) -> str:
    data = line.encode("utf-8", "surrogatepass")[-max_bytes:]
    return data.decode("utf-8", "ignore")


def cut_line(line: str, max_chars: int = MAX_LINE_CHARS) -> tuple[str, bool]:
    """Cut one line to ``max_chars`` characters, saying how long it was."""
    if len(line) <= max_chars:
        return line, False
    return f"{line[:max_chars]}… [line cut, {len(line)} chars]", True


def format_size(num_bytes: int) -> str:
    if num_bytes < 1024:
        return f"{num_bytes} B"
    if num_bytes < 1024 * 1024:
        return f"{num_bytes / 1024:.1f} KB"
    return f"{num_bytes / (1024 * 1024):.1f} MB"
