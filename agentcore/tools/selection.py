"""Which tools the model sees in a run (SPEC T2, T3, PL1).

Three independent filters, applied in this order:

1. The permission policy and the mode decide which BUILT-IN tools exist: ``read-only`` and
   ``plan`` mode remove ``write``, ``edit`` and ``bash``.
2. The host's ``tool_definitions`` govern EXTRA tools: ``enabled=False`` hides one. Extra
   tools are not subject to the permission policy (or plan mode: approval in plan rounds is
   the engine's job via ``auto_approve``).
3. ``tools=[...]`` narrows what is left. It can never bring back a tool removed by 1 or 2;
   a name that no tool has is an input error, because a typo would silently remove a tool.
   It narrows the BUILT-IN tools only: an enabled extra tool the list leaves out is an input
   error too — the caller passed it in ``extra_tools`` and would otherwise lose it silently.
   (To hide an extra tool, leave it out of ``extra_tools`` or disable it in ``tool_definitions``.)
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Final, Literal, TypeAlias

from agentcore.errors import InputValidationError
from agentcore.tools.base import AgentTool, ToolDefinition
from agentcore.tools.builtin import builtin_tools
from agentcore.tools.guard import PermissionPolicy, validate_policy

Mode: TypeAlias = Literal["build", "plan"]
MODES: Final = ("build", "plan")
WRITE_TOOLS: Final = frozenset({"write", "edit", "bash"})
TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _check_extra_tools(builtin_names: Collection[str], extra_tools: Sequence[AgentTool]) -> None:
    seen: set[str] = set()
    for tool in extra_tools:
        if not isinstance(tool, AgentTool):
            raise InputValidationError(f"extra_tools must contain AgentTool objects, got {tool!r}", field="extra_tools")
        if not TOOL_NAME.match(tool.name):
            raise InputValidationError(
                f"extra tool name {tool.name!r} must be 1-64 letters, digits, '_' or '-'", field="extra_tools"
            )
        if tool.name in builtin_names:
            raise InputValidationError(f"extra tool {tool.name!r} has the name of a built-in tool", field="extra_tools")
        if tool.name in seen:
            raise InputValidationError(f"two extra tools are named {tool.name!r}", field="extra_tools")
        seen.add(tool.name)


def _disabled_by_definitions(
    builtin_names: Collection[str], extra_names: Collection[str], definitions: Sequence[ToolDefinition]
) -> set[str]:
    seen: set[str] = set()
    disabled: set[str] = set()
    for definition in definitions:
        name = definition.name
        if name in seen:
            raise InputValidationError(f"tool_definitions names {name!r} twice", field="tool_definitions")
        seen.add(name)
        if name in builtin_names:
            raise InputValidationError(
                f"tool_definitions entry {name!r} is a built-in tool; built-in tools are governed by permission_policy",
                field="tool_definitions",
            )
        if name not in extra_names:
            raise InputValidationError(f"tool_definitions names an unknown tool {name!r}", field="tool_definitions")
        if not definition.enabled:
            disabled.add(name)
    return disabled


def select_tools(
    *,
    policy: PermissionPolicy | str = "workspace",
    mode: Mode | str = "build",
    tools: Sequence[str] | None = None,
    extra_tools: Sequence[AgentTool] = (),
    tool_definitions: Sequence[ToolDefinition] = (),
    builtins: Sequence[AgentTool] | None = None,
    also_known: Collection[str] = (),
) -> list[AgentTool]:
    """The tools exposed to the model: built-ins (canonical order) then extra tools (given order).

    ``builtins`` defaults to a fresh ``builtin_tools()``. ``also_known`` lists names the caller
    adds itself (e.g. ``ask_user``) so that ``tools=[...]`` may mention them without error.
    """
    validate_policy(policy)
    if mode not in MODES:
        raise InputValidationError(f"mode must be 'build' or 'plan'; got {mode!r}", field="mode")
    if builtins is None:
        builtins = builtin_tools()
    builtin_names = {tool.name for tool in builtins}
    _check_extra_tools(builtin_names, extra_tools)
    extra_names = {tool.name for tool in extra_tools}
    disabled = _disabled_by_definitions(builtin_names, extra_names, tool_definitions)

    if tools is not None:
        if isinstance(tools, str) or not all(isinstance(name, str) for name in tools):
            raise InputValidationError("tools must be a list of tool names", field="tools")
        known = builtin_names | extra_names | set(also_known)
        unknown = [name for name in tools if name not in known]
        if unknown:
            raise InputValidationError(
                f"tools names unknown tool(s): {', '.join(map(repr, unknown))}; "
                f"known tools: {', '.join(sorted(known))}",
                field="tools",
            )
        left_out = [tool.name for tool in extra_tools if tool.name not in disabled and tool.name not in tools]
        if left_out:
            raise InputValidationError(
                f"tools leaves out the extra tool(s) {', '.join(map(repr, left_out))}, which would be dropped "
                "silently; list them in tools, or do not pass them in extra_tools (or disable them in "
                "tool_definitions)",
                field="tools",
            )
    wanted = set(tools) if tools is not None else None

    removed = WRITE_TOOLS if policy == "read-only" or mode == "plan" else frozenset()
    selected = [tool for tool in builtins if tool.name not in removed]
    selected += [tool for tool in extra_tools if tool.name not in disabled]
    if wanted is not None:
        selected = [tool for tool in selected if tool.name in wanted]
    return selected
