"""The ``read`` tool: line-numbered text, images, bounded output (SPEC T1).

A read never returns more than ``MAX_LINES`` lines or ``MAX_BYTES`` bytes; when it stops
early it says which ``offset`` continues. Files are streamed, so a huge log costs only the
slice that is shown (plus one pass counting its lines).
"""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, Final

from agentcore.errors import ToolError
from agentcore.inputs import image_mime_type
from agentcore.tools.base import AgentTool, ToolContext, ToolResult
from agentcore.tools.display import decode_bytes
from agentcore.tools.environment import execution_env
from agentcore.tools.guard import PathGuard
from agentcore.tools.truncate import MAX_BYTES, MAX_LINE_CHARS, MAX_LINES, cut_line, format_size

MAX_IMAGE_BYTES: Final = 5 * 1024 * 1024  # the smallest per-image limit of the supported providers
_SNIFF_BYTES: Final = 8192
_LINE_READ_CAP: Final = 64 * 1024  # bytes of one line held in memory; the rest is skipped

DESCRIPTION = (
    "Read a file. Text comes back with 1-based line numbers (number, tab, line). Output is limited to "
    f"{MAX_LINES} lines or {MAX_BYTES // 1024} KB, whichever comes first; lines longer than {MAX_LINE_CHARS} "
    "characters are cut. When output stops early the result says which offset continues. Use offset (first "
    "line, 1-based) and limit (number of lines) to read large files in parts. PNG, JPEG, GIF and WebP images are "
    "returned as images. Binary files are refused."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File to read, relative to the working directory or absolute."},
        "offset": {"type": "integer", "minimum": 1, "description": "First line to show (1-based). Default 1."},
        "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to show."},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def _read_image(handle: BinaryIO, size: int, mime: str, shown: str, accepts_images: bool) -> ToolResult:
    if not accepts_images:
        return ToolResult.text(
            f"{shown} is an image ({mime}, {format_size(size)}). The current model does not accept image "
            "input, so it cannot be shown."
        )
    if size > MAX_IMAGE_BYTES:
        raise ToolError(
            f"{shown} is an image ({mime}) of {format_size(size)}; images larger than "
            f"{format_size(MAX_IMAGE_BYTES)} cannot be sent to the model. Make a smaller copy first."
        )
    data = handle.read(MAX_IMAGE_BYTES + 1)  # the file may have grown since fstat
    if len(data) > MAX_IMAGE_BYTES:
        raise ToolError(f"{shown} grew past {format_size(MAX_IMAGE_BYTES)} while it was read; make a smaller copy.")
    return ToolResult.image(base64.b64encode(data).decode("ascii"), mime, f"Read image {shown} [{mime}]")


def _lines(handle: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """Yield ``(start_of_line, length_without_newline)``; a huge line never sits in memory whole."""
    while True:
        raw = handle.readline(_LINE_READ_CAP)
        if not raw:
            return
        length = len(raw)
        last = raw
        if length == _LINE_READ_CAP and not raw.endswith(b"\n"):
            while more := handle.readline(_LINE_READ_CAP):
                length += len(more)
                last = more
                if more.endswith(b"\n"):
                    break
        yield raw, length - 1 if last.endswith(b"\n") else length


def _count_lines(handle: BinaryIO) -> int:
    """Lines left in ``handle``, counted in bulk (no per-line Python work)."""
    count = 0
    last = b"\n"
    while chunk := handle.read(1 << 20):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (0 if last == b"\n" else 1)


def _read_text(handle: BinaryIO, shown: str, offset: int, limit: int | None) -> ToolResult:
    max_lines = min(limit, MAX_LINES) if limit is not None else MAX_LINES
    out: list[str] = []
    size = 0
    line_no = 0
    stopped_at: int | None = None  # first line not shown because a bound was hit
    cut_any = False
    for raw, length in _lines(handle):
        line_no += 1
        if line_no < offset:
            continue
        if len(out) >= max_lines:
            stopped_at = line_no
            break
        text = decode_bytes(raw).rstrip("\r\n")
        text, cut = cut_line(text)
        if length >= _LINE_READ_CAP:
            text, cut = f"{text[:MAX_LINE_CHARS]}… [line cut, {length} bytes]", True
        cut_any = cut_any or cut
        entry = f"{line_no:>6}\t{text}"
        cost = len(entry.encode("utf-8")) + 1
        if out and size + cost > MAX_BYTES:
            stopped_at = line_no
            break
        out.append(entry)
        size += cost
    total = line_no + (_count_lines(handle) if stopped_at is not None else 0)
    if total == 0:
        return ToolResult.text(f"{shown} is empty.")
    if offset > total:
        raise ToolError(f"offset {offset} is past the end of {shown}, which has {total} lines")
    last_shown = offset + len(out) - 1
    notes: list[str] = []
    if stopped_at is not None:
        if limit is not None and len(out) >= limit:
            notes.append(f"[Showing lines {offset}-{last_shown} of {total}. Use offset={stopped_at} to read more.]")
        else:
            notes.append(
                f"[Showing lines {offset}-{last_shown} of {total} (output limit of {MAX_LINES} lines or "
                f"{MAX_BYTES // 1024} KB reached). Use offset={stopped_at} to continue.]"
            )
    if cut_any:
        notes.append(f"[Some lines were longer than {MAX_LINE_CHARS} characters and were cut; use bash to see them.]")
    body = "\n".join(out)
    return ToolResult.text(body + ("\n\n" + "\n".join(notes) if notes else ""))


def read_path(guard: PathGuard, path: str, offset: int, limit: int | None, accepts_images: bool) -> ToolResult:
    fd, real = guard.open_file(path, os.O_RDONLY | os.O_NONBLOCK)
    shown = guard.display(real)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{shown} is a directory; use ls to list it")
        raise ToolError(f"{shown} is not a regular file (device, socket or pipe); refusing to read it")
    with os.fdopen(fd, "rb") as handle:
        head = handle.read(_SNIFF_BYTES)
        mime = image_mime_type(head)
        handle.seek(0)
        if mime is not None:
            return _read_image(handle, info.st_size, mime, shown, accepts_images)
        if b"\x00" in head:
            raise ToolError(
                f"{shown} looks like a binary file ({format_size(info.st_size)}); read shows text only. "
                "Use bash (for example `file` or `xxd | head`) to inspect it."
            )
        return _read_text(handle, shown, offset, limit)


@dataclass(frozen=True, slots=True)
class ReadFile:
    """The target half of ``read`` (``environment.FileOperation``)."""

    path: str
    offset: int = 1
    limit: int | None = None
    accepts_images: bool = True

    @property
    def name(self) -> str:
        return "read"

    def run(self, guard: PathGuard, should_stop: Callable[[], bool]) -> ToolResult:
        return read_path(guard, self.path, self.offset, self.limit, self.accepts_images)


async def _execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    limit = args.get("limit")
    operation = ReadFile(
        args["path"], int(args.get("offset") or 1), int(limit) if limit is not None else None, ctx.accepts_images
    )
    return await execution_env(ctx).run_file_operation(ctx, operation)


def make_read_tool() -> AgentTool:
    return AgentTool(
        name="read",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        execute=_execute,
        replay="safe",
        read_only=True,
        builtin=True,
    )
