"""The seven built-in tools, in the order the model is shown them (SPEC T1).

``builtin_tools()`` makes a fresh list for one run; tools hold no state of their own —
everything run-specific (workdir, permission guard, abort signal, the execution environment
they run against) comes in through ``ToolContext``. Re-exported by ``agentcore.tools``.
"""

from __future__ import annotations

from agentcore.tools.base import AgentTool
from agentcore.tools.bash import make_bash_tool
from agentcore.tools.edit import make_edit_tool
from agentcore.tools.ls import make_ls_tool
from agentcore.tools.read import make_read_tool
from agentcore.tools.search import make_find_tool, make_grep_tool
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
