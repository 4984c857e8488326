"""The ``edit`` tool: replace one unique occurrence of a text (SPEC T1).

Models reproduce file text imperfectly: trailing spaces vanish, CRLF becomes LF, straight
quotes become curly ones (or the reverse), a non-breaking space becomes a plain one. So the
match is tried exactly first and then on a normalised view of both texts, mapped back to the
original characters so everything outside the replaced span stays byte for byte. An edit
never guesses between several places: zero or several matches are refused, and the error
lists the closest candidates so the model can retry with more context.

The file keeps its BOM and its line-ending style; ``new_text`` is converted to that style.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from agentcore.errors import ToolError
from agentcore.tools.base import AgentTool, ToolContext, ToolResult
from agentcore.tools.environment import execution_env
from agentcore.tools.guard import PathGuard
from agentcore.tools.truncate import cut_line, truncate_head
from agentcore.tools.write import write_all

UTF8_BOM: Final = b"\xef\xbb\xbf"
_MAX_CANDIDATE_WINDOWS: Final = 20_000

DESCRIPTION = (
    "Edit a file by replacing old_text with new_text. old_text must occur exactly once in the file; include "
    "enough surrounding lines to make it unique. Small differences in trailing whitespace, line endings (CRLF/LF), "
    "curly versus straight quotes, Unicode dashes and non-breaking spaces are tolerated. If old_text is not found "
    "or occurs more than once nothing is changed and the error shows the closest candidates. The file's line "
    "endings and byte-order mark are kept. Returns a unified diff."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File to edit, relative to the working directory or absolute."},
        "old_text": {"type": "string", "description": "The exact text to replace (must occur once)."},
        "new_text": {"type": "string", "description": "The replacement text."},
    },
    "required": ["path", "old_text", "new_text"],
    "additionalProperties": False,
}


def _fold_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for ch in "\u2018\u2019\u201a\u201b\u2032":
        table[ord(ch)] = "'"
    for ch in "\u201c\u201d\u201e\u201f\u2033":
        table[ord(ch)] = '"'
    for code in [*range(0x2010, 0x2016), 0x2212, 0xFE58, 0xFE63, 0xFF0D]:
        table[code] = "-"
    for code in [0x00A0, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000]:
        table[code] = " "
    return table


_FOLD: Final = _fold_table()


def normalize_with_map(text: str) -> tuple[str, list[int]]:
    """Fold look-alike characters and drop trailing whitespace (including CR) on every line.

    Returns the normalised text and, for each of its characters, the index of the original
    character it came from, so a match in the normalised text maps back to an exact span.
    """
    out: list[str] = []
    index: list[int] = []
    pending: list[int] = []  # original indices of a whitespace run not yet known to be inner
    for i, ch in enumerate(text):
        if ch == "\n":
            pending.clear()
            out.append("\n")
            index.append(i)
            continue
        folded = _FOLD.get(ord(ch), ch)
        if folded.isspace():
            pending.append(i)
            continue
        for j in pending:
            out.append(_FOLD.get(ord(text[j]), text[j]))
            index.append(j)
        pending.clear()
        out.append(folded)
        index.append(i)
    return "".join(out), index


def find_all(haystack: str, needle: str) -> list[int]:
    """Every start index of ``needle``, overlapping occurrences included."""
    found: list[int] = []
    start = haystack.find(needle)
    while start != -1:
        found.append(start)
        start = haystack.find(needle, start + 1)
    return found


def line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


@dataclass(frozen=True, slots=True)
class Match:
    start: int
    end: int
    fuzzy: bool


def locate(content: str, old_text: str, shown: str) -> Match:
    """The single span of ``content`` that ``old_text`` denotes, or a ToolError explaining why not."""
    exact = find_all(content, old_text)
    if len(exact) == 1:
        return Match(exact[0], exact[0] + len(old_text), fuzzy=False)
    if len(exact) > 1:
        raise _ambiguous(shown, [line_of(content, i) for i in exact])
    norm_content, index = normalize_with_map(content)
    norm_old, _ = normalize_with_map(old_text)
    if not norm_old.strip():
        raise ToolError(f"old_text was not found in {shown} (it is only whitespace after normalising)")
    fuzzy = find_all(norm_content, norm_old)
    if len(fuzzy) == 1:
        start = index[fuzzy[0]]
        end = index[fuzzy[0] + len(norm_old) - 1] + 1
        return Match(start, end, fuzzy=True)
    if len(fuzzy) > 1:
        raise _ambiguous(shown, [line_of(content, index[i]) for i in fuzzy])
    raise ToolError(f"old_text was not found in {shown}; nothing was changed.\n{closest_candidates(content, old_text)}")


def _ambiguous(shown: str, lines: list[int]) -> ToolError:
    listed = ", ".join(str(n) for n in lines[:20]) + (", …" if len(lines) > 20 else "")
    return ToolError(
        f"old_text occurs {len(lines)} times in {shown} (starting at lines {listed}); nothing was changed. "
        "Include more surrounding lines in old_text so it matches exactly one place."
    )


def closest_candidates(content: str, old_text: str, count: int = 3) -> str:
    """The places in ``content`` most similar to ``old_text``, as line ranges plus snippets."""
    lines = normalize_with_map(content)[0].split("\n")
    original = content.split("\n")
    target = normalize_with_map(old_text)[0].strip("\n")
    width = max(1, target.count("\n") + 1)
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(target)
    windows = range(max(1, len(lines) - width + 1))[:_MAX_CANDIDATE_WINDOWS]
    rough: list[tuple[float, int]] = []
    for start in windows:
        matcher.set_seq1("\n".join(lines[start : start + width]))
        rough.append((matcher.quick_ratio(), start))
    rough.sort(reverse=True)
    scored: list[tuple[float, int]] = []
    for _, start in rough[:12]:
        matcher.set_seq1("\n".join(lines[start : start + width]))
        scored.append((matcher.ratio(), start))
    scored.sort(key=lambda item: (-item[0], item[1]))
    if not scored or scored[0][0] == 0:
        return "No similar text was found; read the file to see its current content."
    parts = ["Closest candidates:"]
    for ratio, start in [item for item in scored if item[0] > 0][:count]:
        end = min(len(original), start + width)
        where = f"line {start + 1}" if end - start == 1 else f"lines {start + 1}-{end}"
        parts.append(f"  {where} ({ratio:.0%} similar):")
        for n in range(start, min(end, start + 6)):
            parts.append(f"    {n + 1:>5}| {cut_line(original[n].rstrip(chr(13)), 200)[0]}")
        if end - start > 6:
            parts.append("          …")
    return "\n".join(parts)


def detect_eol(text: str) -> str:
    crlf = text.count("\r\n")
    return "\r\n" if crlf > text.count("\n") - crlf else "\n"


def apply_edit(content: str, old_text: str, new_text: str, shown: str) -> tuple[str, Match]:
    if old_text == "":
        raise ToolError("old_text must not be empty; use write to create or replace a whole file")
    if old_text == new_text:
        raise ToolError("old_text and new_text are identical; nothing to change")
    match = locate(content, old_text, shown)
    replacement = new_text.replace("\r\n", "\n")
    if detect_eol(content) == "\r\n":
        replacement = replacement.replace("\n", "\r\n")
    return content[: match.start] + replacement + content[match.end :], match


def unified_diff(before: str, after: str, shown: str) -> str:
    diff = difflib.unified_diff(
        before.replace("\r\n", "\n").splitlines(keepends=True),
        after.replace("\r\n", "\n").splitlines(keepends=True),
        fromfile=f"a/{shown}",
        tofile=f"b/{shown}",
        n=3,
    )
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff)
    bounded = truncate_head(text.rstrip("\n"))
    return bounded.text + ("\n[diff truncated]" if bounded.truncated else "")


def edit_path(guard: PathGuard, path: str, old_text: str, new_text: str) -> ToolResult:
    fd, real = guard.open_file(path, os.O_RDWR | os.O_NONBLOCK, write=True)
    shown = guard.display(real)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"{shown} is not a regular file; refusing to edit it")
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        raw = b"".join(chunks)
        bom = raw.startswith(UTF8_BOM)
        try:
            content = raw[len(UTF8_BOM) if bom else 0 :].decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{shown} is not UTF-8 text; edit only changes UTF-8 files") from None
        updated, match = apply_edit(content, old_text, new_text, shown)
        data = (UTF8_BOM if bom else b"") + updated.encode("utf-8", "surrogatepass")
        os.lseek(fd, 0, os.SEEK_SET)
        write_all(fd, data)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)
    how = "tolerant match: whitespace, quotes or dashes differed" if match.fuzzy else "exact match"
    first = line_of(content, match.start)
    return ToolResult.text(f"Edited {shown} at line {first} ({how}).\n{unified_diff(content, updated, shown)}")


@dataclass(frozen=True, slots=True)
class EditFile:
    """The target half of ``edit`` (``environment.FileOperation``)."""

    path: str
    old_text: str
    new_text: str

    @property
    def name(self) -> str:
        return "edit"

    def run(self, guard: PathGuard, should_stop: Callable[[], bool]) -> ToolResult:
        return edit_path(guard, self.path, self.old_text, self.new_text)


async def _execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    operation = EditFile(args["path"], args["old_text"], args["new_text"])
    return await execution_env(ctx).run_file_operation(ctx, operation)


def make_edit_tool() -> AgentTool:
    return AgentTool(
        name="edit",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        execute=_execute,
        replay="never",
        read_only=False,
        builtin=True,
    )
