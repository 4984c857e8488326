"""The ``write`` tool: create or overwrite a file, creating parent directories (SPEC T1).

The file is opened through ``PathGuard.open_file`` so a symlink swapped in after the
permission check cannot redirect the write outside the workspace.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentcore.errors import ToolError
from agentcore.tools.base import AgentTool, ToolContext, ToolResult
from agentcore.tools.environment import execution_env
from agentcore.tools.guard import PathGuard

DESCRIPTION = (
    "Write a file: creates it (and any missing parent directories) or replaces its whole content. "
    "Use edit to change part of an existing file."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File to write, relative to the working directory or absolute."},
        "content": {"type": "string", "description": "The complete new content of the file."},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_path(guard: PathGuard, path: str, content: str) -> ToolResult:
    data = content.encode("utf-8")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK  # O_NONBLOCK: a FIFO fails instead of hanging
    fd, real = guard.open_file(path, flags, write=True, create_parents=True)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"{guard.display(real)} is not a regular file; refusing to write to it")
        write_all(fd, data)
    finally:
        os.close(fd)
    return ToolResult.text(f"Wrote {len(data)} bytes to {guard.display(real)}")


@dataclass(frozen=True, slots=True)
class WriteFile:
    """The target half of ``write`` (``environment.FileOperation``)."""

    path: str
    content: str

    @property
    def name(self) -> str:
        return "write"

    def run(self, guard: PathGuard, should_stop: Callable[[], bool]) -> ToolResult:
        return write_path(guard, self.path, self.content)


async def _execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return await execution_env(ctx).run_file_operation(ctx, WriteFile(args["path"], args["content"]))


def make_write_tool() -> AgentTool:
    return AgentTool(
        name="write",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        execute=_execute,
        replay="never",
        read_only=False,
        builtin=True,
    )
