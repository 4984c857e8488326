"""Built-in tools, the permission guard, tool selection and the tool executor (SPEC T1–T3).

``builtin_tools()`` makes a fresh list of the seven built-in tools for one run; tools hold no
state of their own — everything run-specific (workdir, permission guard, abort signal, the
execution environment they run against) comes in through ``ToolContext``.
"""

from __future__ import annotations

from agentcore.tools.base import AgentTool, Replay, ToolContext, ToolDefinition, ToolExecute, ToolResult
from agentcore.tools.bash import make_bash_tool
from agentcore.tools.edit import make_edit_tool
from agentcore.tools.environment import AgentExecutionEnv, FileOperation, LocalExecutionEnv, execution_env
from agentcore.tools.executor import PendingCall, execute_call, prepare_call, run_concurrently
from agentcore.tools.guard import PERMISSION_POLICIES, PathGuard, PermissionPolicy, validate_policy
from agentcore.tools.ls import make_ls_tool
from agentcore.tools.read import make_read_tool
from agentcore.tools.search import make_find_tool, make_grep_tool
from agentcore.tools.selection import WRITE_TOOLS, Mode, select_tools
from agentcore.tools.write import make_write_tool

BUILTIN_TOOL_NAMES = ("read", "write", "edit", "bash", "grep", "find", "ls")


def builtin_tools() -> list[AgentTool]:
    """The built-in tools, in the order they are shown to the model."""
    return [
        make_read_tool(),
        make_write_tool(),
        make_edit_tool(),
        make_bash_tool(),
        make_grep_tool(),
        make_find_tool(),
        make_ls_tool(),
    ]


__all__ = [
    "BUILTIN_TOOL_NAMES",
    "PERMISSION_POLICIES",
    "WRITE_TOOLS",
    "AgentExecutionEnv",
    "AgentTool",
    "FileOperation",
    "LocalExecutionEnv",
    "Mode",
    "PathGuard",
    "PendingCall",
    "PermissionPolicy",
    "Replay",
    "ToolContext",
    "ToolDefinition",
    "ToolExecute",
    "ToolResult",
    "builtin_tools",
    "execute_call",
    "execution_env",
    "prepare_call",
    "run_concurrently",
    "select_tools",
    "validate_policy",
]
