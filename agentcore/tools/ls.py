"""The ``ls`` tool: one directory's entries, sorted, directories marked with ``/`` (SPEC T1).

Symbolic links are listed as ``name -> target`` and never followed, so a link cannot make an
outside directory look like part of the workspace. Names (and link targets) that are not UTF-8
show their odd bytes as ``\\xNN``; the other file tools accept a name written that way.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from agentcore.errors import ToolError
from agentcore.tools.base import AgentTool, ToolContext, ToolResult
from agentcore.tools.display import display_name
from agentcore.tools.environment import execution_env
from agentcore.tools.guard import PathGuard
from agentcore.tools.truncate import MAX_BYTES, truncate_head

LS_DEFAULT_LIMIT: Final = 500

DESCRIPTION = (
    "List a directory (default: the working directory): entries sorted by name, including dotfiles; directories "
    f"end with `/`, symbolic links show `name -> target`. Returns at most limit entries (default {LS_DEFAULT_LIMIT})."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Directory to list. Default: working directory."},
        "limit": {"type": "integer", "minimum": 1, "description": f"Maximum entries (default {LS_DEFAULT_LIMIT})."},
    },
    "additionalProperties": False,
}


def _describe(entry: os.DirEntry[str], dir_fd: int) -> str:
    name = display_name(entry.name)
    try:
        if entry.is_symlink():
            return f"{name} -> {display_name(os.readlink(entry.name, dir_fd=dir_fd))}"
        if entry.is_dir(follow_symlinks=False):
            return name + "/"
    except OSError:
        pass
    return name


def ls_path(guard: PathGuard, path: str, limit: int) -> ToolResult:
    fd, real = guard.open_file(path, os.O_RDONLY | os.O_NONBLOCK)
    shown = guard.display(real)
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            raise ToolError(f"{shown} is not a directory; use read to see a file")
        with os.scandir(fd) as it:
            entries = sorted(it, key=lambda e: (e.name.casefold(), e.name))
        lines = [_describe(entry, fd) for entry in entries]
    finally:
        os.close(fd)
    if not lines:
        return ToolResult.text(f"{shown} is empty.")
    notes: list[str] = []
    if len(lines) > limit:
        notes.append(f"[Showing {limit} of {len(lines)} entries; raise limit or use find to narrow.]")
        lines = lines[:limit]
    bounded = truncate_head("\n".join(lines), max_lines=1_000_000)
    if bounded.truncated:
        notes.append(f"[Output cut at {MAX_BYTES // 1024} KB; use find to narrow.]")
    return ToolResult.text(bounded.text + ("\n\n" + "\n".join(notes) if notes else ""))


@dataclass(frozen=True, slots=True)
class ListDirectory:
    """The target half of ``ls`` (``environment.FileOperation``)."""

    path: str = "."
    limit: int = LS_DEFAULT_LIMIT

    @property
    def name(self) -> str:
        return "ls"

    def run(self, guard: PathGuard, should_stop: Callable[[], bool]) -> ToolResult:
        return ls_path(guard, self.path, self.limit)


async def _execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    operation = ListDirectory(args.get("path") or ".", int(args.get("limit") or LS_DEFAULT_LIMIT))
    return await execution_env(ctx).run_file_operation(ctx, operation)


def make_ls_tool() -> AgentTool:
    return AgentTool(
        name="ls",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        execute=_execute,
        replay="safe",
        read_only=True,
        builtin=True,
    )
