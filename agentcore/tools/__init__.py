"""Built-in tools, the permission guard, tool selection and the tool executor (SPEC T1–T3).

``builtin_tools()`` makes a fresh list of the seven built-in tools for one run; tools hold no
state of their own — everything run-specific (workdir, permission guard, abort signal, the
execution environment they run against) comes in through ``ToolContext``.
"""

from __future__ import annotations

from agentcore.tools.base import AgentTool, Replay, ToolContext, ToolDefinition, ToolExecute, ToolResult
from agentcore.tools.builtin import BUILTIN_TOOL_NAMES, builtin_tools
from agentcore.tools.environment import AgentExecutionEnv, FileOperation, LocalExecutionEnv, execution_env
from agentcore.tools.executor import PendingCall, execute_call, prepare_call, run_concurrently
from agentcore.tools.guard import PERMISSION_POLICIES, PathGuard, PermissionPolicy, validate_policy
from agentcore.tools.selection import WRITE_TOOLS, Mode, select_tools

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
