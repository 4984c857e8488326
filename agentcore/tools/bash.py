"""The ``bash`` tool: run a shell command in the working directory (SPEC T1, T2).

The command runs as the host user via ``/bin/bash -c`` in ``workdir``. It is NOT confined to
the workspace by any permission policy — only ``read-only`` (which does not expose bash at
all) or a host-side sandbox limit what a command can do. This is the tool half (schema,
arguments): it hands the command to the call's execution environment (``environment``), and
``shell.run_command`` is what runs it on the target — process group, lifeline, streamed output,
the tail kept and the whole output saved when it is cut.
"""

from __future__ import annotations

from typing import Any

from agentcore.tools.base import AgentTool, ToolContext, ToolResult
from agentcore.tools.environment import execution_env
from agentcore.tools.shell import DEFAULT_TIMEOUT, MAX_TIMEOUT
from agentcore.tools.truncate import MAX_BYTES, MAX_LINES

DESCRIPTION = (
    "Run a bash command in the working directory and return its combined stdout and stderr. It runs as the host "
    "user and is not limited to the workspace. Only the last "
    f"{MAX_LINES} lines or {MAX_BYTES // 1024} KB of output are returned; when output is cut, the full output is "
    "saved to a file whose path is given (read it with the read tool). A non-zero exit code is reported as an "
    f"error. timeout is in seconds (default {DEFAULT_TIMEOUT:.0f}, at most {MAX_TIMEOUT:.0f}); on timeout the "
    "command and everything it started are killed. Redirect the output of background processes "
    "(`cmd > log 2>&1 &`) so the call can finish; they keep running after the call but not after the agent "
    "exits. Bytes that are not UTF-8 are shown as \\xNN."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "minLength": 1, "description": "The bash command to run."},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": MAX_TIMEOUT,
            "description": f"Seconds before the command is killed (default {DEFAULT_TIMEOUT:.0f}).",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


async def _execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    timeout = float(args.get("timeout") or DEFAULT_TIMEOUT)
    return await execution_env(ctx).run_command(ctx, args["command"], min(timeout, MAX_TIMEOUT))


def make_bash_tool() -> AgentTool:
    return AgentTool(
        name="bash",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        execute=_execute,
        replay="never",
        read_only=False,
        builtin=True,
    )
