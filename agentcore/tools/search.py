"""The ``grep`` and ``find`` tools (SPEC T1, T2).

Both walk the tree with ``walk.walk``: no symlink is ever followed (symlinked files are not
searched, symlinked directories are not entered), ``.git`` is skipped, and order is stable.
grep reads each file in binary, skips it early when its first 8 KB contain a NUL byte, and
only splits into lines the files the compiled pattern matches at all, which keeps a
50,000-file tree fast without threads (a thread pool measured slower: the work is CPU-bound
under the GIL).

Bytes that are not UTF-8 — in names and in file text — are shown (and matched) as ``\\xNN``,
the convention of ``display``.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from agentcore.errors import ToolError
from agentcore.tools.base import AgentTool, ToolContext, ToolResult
from agentcore.tools.display import decode_bytes
from agentcore.tools.environment import execution_env
from agentcore.tools.guard import PathGuard
from agentcore.tools.truncate import GREP_MAX_LINE_CHARS, MAX_BYTES, cut_line, truncate_head
from agentcore.tools.walk import compile_glob, walk

GREP_DEFAULT_LIMIT: Final = 100
FIND_DEFAULT_LIMIT: Final = 1000
MAX_GREP_FILE_BYTES: Final = 16 * 1024 * 1024
_SNIFF: Final = 8192
_FILE_OPEN: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

GREP_DESCRIPTION = (
    "Search file contents with a regular expression (Python syntax) or a literal string. Searches a file or, "
    "recursively, a directory (default: the working directory); skips binary files and .git, never follows "
    "symbolic links. Output lines are `path:line: text` (context lines use `-`). glob filters files, e.g. `*.py` "
    "(name) or `src/**/*.ts` (path). Stops after limit matches (default "
    f"{GREP_DEFAULT_LIMIT}); match lines longer than {GREP_MAX_LINE_CHARS} characters are cut; output is at most "
    f"{MAX_BYTES // 1024} KB."
)
GREP_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "minLength": 1, "description": "Regular expression (or literal text)."},
        "path": {"type": "string", "description": "File or directory to search. Default: working directory."},
        "glob": {"type": "string", "description": "Only search files matching this glob, e.g. *.py or src/**/*.ts"},
        "ignore_case": {"type": "boolean", "description": "Case-insensitive search. Default false."},
        "literal": {"type": "boolean", "description": "Treat pattern as plain text, not a regex. Default false."},
        "context": {"type": "integer", "minimum": 0, "maximum": 50, "description": "Lines of context around hits."},
        "limit": {"type": "integer", "minimum": 1, "description": f"Maximum matches (default {GREP_DEFAULT_LIMIT})."},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}

FIND_DESCRIPTION = (
    "Find files and directories by glob pattern, e.g. `*.py` (matches names anywhere below path) or "
    "`src/**/test_*.py` (matches paths relative to path). Skips .git, never follows symbolic links. "
    f"Directories end with `/`. Returns at most limit paths (default {FIND_DEFAULT_LIMIT})."
)
FIND_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "minLength": 1, "description": "Glob pattern: *, ?, [abc], {a,b}, **."},
        "path": {"type": "string", "description": "Directory to search. Default: working directory."},
        "limit": {"type": "integer", "minimum": 1, "description": f"Maximum results (default {FIND_DEFAULT_LIMIT})."},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class GrepQuery:
    regex: re.Pattern[str]
    needle: bytes | None  # literal, case-sensitive search: a fast bytes pre-check
    context: int
    limit: int
    matches_glob: Callable[[str, str], bool] | None


def compile_query(args: dict[str, Any]) -> GrepQuery:
    pattern: str = args["pattern"]
    literal = bool(args.get("literal", False))
    ignore_case = bool(args.get("ignore_case", False))
    flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
    try:
        regex = re.compile(re.escape(pattern) if literal else pattern, flags)
    except re.error as exc:
        hint = "set literal=true to search plain text"
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}; {hint}") from None
    # A literal with a backslash may be an ``\\xNN`` escape, which matches decoded text, not raw bytes.
    plain = literal and not ignore_case and "\n" not in pattern and "\\" not in pattern
    needle = pattern.encode("utf-8", "surrogatepass") if plain else None
    glob = args.get("glob")
    return GrepQuery(
        regex=regex,
        needle=needle,
        context=int(args.get("context") or 0),
        limit=int(args.get("limit") or GREP_DEFAULT_LIMIT),
        matches_glob=compile_glob(glob) if glob else None,
    )


def _read_bytes(fd: int) -> bytes | None:
    """The file's content, or None when it is binary (NUL early on) or too large to search."""
    head = os.read(fd, 65536)
    if b"\x00" in head[:_SNIFF]:
        return None
    if len(head) < 65536:
        return head
    chunks = [head]
    size = len(head)
    while chunk := os.read(fd, 1 << 20):
        size += len(chunk)
        if size > MAX_GREP_FILE_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _file_hits(text: str, query: GrepQuery, budget: int) -> list[tuple[int, str, bool]]:
    """(line index, line, is_match) rows for one file, at most ``budget`` matches."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    hits: list[int] = []
    for index, line in enumerate(lines):
        if query.regex.search(line):
            hits.append(index)
            if len(hits) >= budget:
                break
    shown: dict[int, bool] = {}
    for index in hits:
        for near in range(max(0, index - query.context), min(len(lines), index + query.context + 1)):
            shown.setdefault(near, False)
        shown[index] = True
    return [(index, lines[index].rstrip("\r"), shown[index]) for index in sorted(shown)]


def _format_rows(shown: str, rows: list[tuple[int, str, bool]], out: list[str], with_context: bool) -> None:
    previous = -2
    for index, line, is_match in rows:
        if with_context and previous >= 0 and index != previous + 1:
            out.append("--")
        sep = ":" if is_match else "-"
        out.append(f"{shown}{sep}{index + 1}{sep} {cut_line(line, GREP_MAX_LINE_CHARS)[0]}")
        previous = index


def _join(prefix: str, rel: str) -> str:
    if not rel:
        return prefix
    return rel if prefix == "." else f"{prefix}/{rel}"


def grep_path(guard: PathGuard, path: str, query: GrepQuery, should_stop: Callable[[], bool]) -> ToolResult:
    fd, real = guard.open_file(path, os.O_RDONLY | os.O_NONBLOCK)
    root = guard.display(real)
    out: list[str] = []
    matches = 0
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            data = _read_bytes(fd)
            if data is None:
                raise ToolError(f"{root} is a binary file (or larger than 16 MB); grep skips such files")
            text = decode_bytes(data)
            if query.regex.search(text):
                rows = _file_hits(text, query, query.limit)
                matches = sum(1 for row in rows if row[2])
                _format_rows(root, rows, out, query.context > 0)
        elif stat.S_ISDIR(mode):
            matches = _grep_tree(fd, root, query, out, should_stop)
        else:
            raise ToolError(f"{root} is neither a file nor a directory")
    finally:
        os.close(fd)
    if should_stop():
        return ToolResult.text("grep was cancelled", is_error=True)
    if matches == 0:
        return ToolResult.text(f"No matches for {query.regex.pattern!r} in {root}.")
    bounded = truncate_head("\n".join(out), max_lines=1_000_000)
    notes: list[str] = []
    if matches >= query.limit:
        notes.append(f"[Stopped after {query.limit} matches; narrow the search or raise limit.]")
    if bounded.truncated:
        notes.append(f"[Output cut at {MAX_BYTES // 1024} KB; narrow the search (path, glob) to see the rest.]")
    return ToolResult.text(bounded.text + ("\n\n" + "\n".join(notes) if notes else ""))


def _grep_tree(root_fd: int, root: str, query: GrepQuery, out: list[str], should_stop: Callable[[], bool]) -> int:
    matches = 0
    size = 0
    for entry in walk(root_fd, should_stop):
        if entry.kind != "file" or (query.matches_glob and not query.matches_glob(entry.label, entry.rel)):
            continue
        try:
            fd = os.open(entry.name, _FILE_OPEN, dir_fd=entry.dir_fd)
        except OSError:
            continue  # vanished, unreadable, or swapped for a symlink
        try:
            data = _read_bytes(fd)
        except OSError:
            data = None
        finally:
            os.close(fd)
        if data is None or (query.needle is not None and query.needle not in data):
            continue
        text = decode_bytes(data)
        if query.regex.search(text) is None:
            continue
        rows = _file_hits(text, query, query.limit - matches)
        if not rows:
            continue
        before = len(out)
        _format_rows(_join(root, entry.rel), rows, out, query.context > 0)
        if query.context > 0 and before:
            out.insert(before, "--")
        matches += sum(1 for row in rows if row[2])
        size += sum(len(line) + 1 for line in out[before:])
        if matches >= query.limit or size > 2 * MAX_BYTES:
            break
    return matches


def find_path(guard: PathGuard, path: str, pattern: str, limit: int, should_stop: Callable[[], bool]) -> ToolResult:
    matches_glob = compile_glob(pattern)
    fd, real = guard.open_file(path, os.O_RDONLY | os.O_NONBLOCK)
    root = guard.display(real)
    found: list[str] = []
    hit_limit = False
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            raise ToolError(f"{root} is not a directory")
        for entry in walk(fd, should_stop):
            if matches_glob(entry.label, entry.rel):
                if len(found) >= limit:
                    hit_limit = True
                    break
                found.append(_join(root, entry.rel) + ("/" if entry.kind == "dir" else ""))
    finally:
        os.close(fd)
    if should_stop():
        return ToolResult.text("find was cancelled", is_error=True)
    if not found:
        return ToolResult.text(f"No files matching {pattern!r} in {root}.")
    bounded = truncate_head("\n".join(found), max_lines=1_000_000)
    notes: list[str] = []
    if hit_limit:
        notes.append(f"[Stopped after {limit} results; narrow the pattern or raise limit.]")
    if bounded.truncated:
        notes.append(f"[Output cut at {MAX_BYTES // 1024} KB; narrow the pattern or path.]")
    return ToolResult.text(bounded.text + ("\n\n" + "\n".join(notes) if notes else ""))


@dataclass(frozen=True, slots=True)
class GrepFiles:
    """The target half of ``grep`` (``environment.FileOperation``): the query is compiled there."""

    pattern: str
    path: str = "."
    glob: str | None = None
    ignore_case: bool = False
    literal: bool = False
    context: int = 0
    limit: int = GREP_DEFAULT_LIMIT

    @property
    def name(self) -> str:
        return "grep"

    def query(self) -> GrepQuery:
        return compile_query(
            {
                "pattern": self.pattern,
                "glob": self.glob,
                "ignore_case": self.ignore_case,
                "literal": self.literal,
                "context": self.context,
                "limit": self.limit,
            }
        )

    def run(self, guard: PathGuard, should_stop: Callable[[], bool]) -> ToolResult:
        return grep_path(guard, self.path, self.query(), should_stop)


@dataclass(frozen=True, slots=True)
class FindFiles:
    """The target half of ``find`` (``environment.FileOperation``)."""

    pattern: str
    path: str = "."
    limit: int = FIND_DEFAULT_LIMIT

    @property
    def name(self) -> str:
        return "find"

    def run(self, guard: PathGuard, should_stop: Callable[[], bool]) -> ToolResult:
        return find_path(guard, self.path, self.pattern, self.limit, should_stop)


async def _grep(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    operation = GrepFiles(
        pattern=args["pattern"],
        path=args.get("path") or ".",
        glob=args.get("glob") or None,
        ignore_case=bool(args.get("ignore_case", False)),
        literal=bool(args.get("literal", False)),
        context=int(args.get("context") or 0),
        limit=int(args.get("limit") or GREP_DEFAULT_LIMIT),
    )
    operation.query()  # a bad pattern is refused here, before anything reaches the target
    return await execution_env(ctx).run_file_operation(ctx, operation)


async def _find(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    operation = FindFiles(args["pattern"], args.get("path") or ".", int(args.get("limit") or FIND_DEFAULT_LIMIT))
    return await execution_env(ctx).run_file_operation(ctx, operation)


def make_grep_tool() -> AgentTool:
    return AgentTool(
        name="grep",
        description=GREP_DESCRIPTION,
        parameters=GREP_PARAMETERS,
        execute=_grep,
        replay="safe",
        read_only=True,
        builtin=True,
    )


def make_find_tool() -> AgentTool:
    return AgentTool(
        name="find",
        description=FIND_DESCRIPTION,
        parameters=FIND_PARAMETERS,
        execute=_find,
        replay="safe",
        read_only=True,
        builtin=True,
    )
