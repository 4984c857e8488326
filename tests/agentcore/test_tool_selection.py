"""Which tools the model sees: policy, mode, narrowing, extra tools and definitions (SPEC T1, T2, T3, PL1)."""

from __future__ import annotations

from typing import Any

import pytest

from agentcore.errors import InputValidationError
from agentcore.tools import AgentTool, ToolContext, ToolDefinition, ToolResult, builtin_tools, select_tools
from tests.helpers import collect

ALL = ["read", "write", "edit", "bash", "grep", "find", "ls"]
READ_ONLY = ["read", "grep", "find", "ls"]


def extra(name: str) -> AgentTool:
    async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.text(name)

    return AgentTool(name=name, description=name, parameters={"type": "object"}, execute=execute)


def names(tools: list[AgentTool]) -> list[str]:
    return [tool.name for tool in tools]


def test_builtin_tools_factory_and_replay_flags() -> None:
    """T1/D2: seven built-ins, fresh per call; read/grep/find/ls are safe to replay and read-only."""
    first, second = builtin_tools(), builtin_tools()
    assert names(first) == ALL
    assert all(a is not b for a, b in zip(first, second, strict=True))
    for tool in first:
        assert tool.builtin
        if tool.name in READ_ONLY:
            assert tool.replay == "safe" and tool.read_only
        else:
            assert tool.replay == "never" and not tool.read_only


def test_default_is_workspace_with_everything() -> None:
    """T2: workspace (default) exposes every built-in tool."""
    assert names(select_tools()) == ALL
    assert names(select_tools(policy="auto")) == ALL


def test_read_only_hides_write_tools() -> None:
    """T2: read-only does not expose write, edit or bash at all."""
    assert names(select_tools(policy="read-only")) == READ_ONLY


def test_plan_mode_hides_write_tools() -> None:
    """PL1: plan mode does not expose write, edit or bash."""
    assert names(select_tools(mode="plan")) == READ_ONLY


def test_tools_only_narrow() -> None:
    """T3: tools=[...] narrows; it can never re-enable a tool the policy removed."""
    assert names(select_tools(tools=["read", "bash"])) == ["read", "bash"]
    assert names(select_tools(policy="read-only", tools=["read", "bash"])) == ["read"]
    assert names(select_tools(mode="plan", tools=["write"])) == []
    assert names(select_tools(tools=[])) == []


def test_unknown_tool_name_is_input_error() -> None:
    """T3: an unknown name in tools is an input_validation error naming field "tools"."""
    with pytest.raises(InputValidationError) as info:
        select_tools(tools=["read", "raed"])
    assert info.value.field == "tools" and "raed" in info.value.message
    assert names(select_tools(tools=["read", "ask_user"], also_known={"ask_user"})) == ["read"]


def test_extra_tools_follow_definitions_not_policy() -> None:
    """T3: extra tools are added after built-ins, governed by tool definitions, not by the policy."""
    tools = [extra("deploy"), extra("lookup")]
    selected = select_tools(policy="read-only", mode="plan", extra_tools=tools)
    assert names(selected) == [*READ_ONLY, "deploy", "lookup"]
    hidden = select_tools(extra_tools=tools, tool_definitions=[ToolDefinition("deploy", enabled=False)])
    assert "deploy" not in names(hidden) and "lookup" in names(hidden)
    narrowed = select_tools(extra_tools=tools, tools=["read", "deploy", "lookup"])
    assert names(narrowed) == ["read", "deploy", "lookup"]
    reenabled = select_tools(
        extra_tools=tools, tool_definitions=[ToolDefinition("deploy", enabled=False)], tools=["deploy", "lookup"]
    )
    assert names(reenabled) == ["lookup"]


def test_tools_list_that_leaves_out_an_extra_tool_is_an_input_error() -> None:
    """T3 (#17): `tools` narrows the built-ins only; an extra tool it leaves out would be dropped silently,
    so that is an input_validation error naming the tool. A disabled extra tool may be left out."""
    tools = [extra("deploy"), extra("lookup")]
    with pytest.raises(InputValidationError) as info:
        select_tools(extra_tools=tools, tools=["read", "deploy"])
    assert info.value.field == "tools" and "'lookup'" in info.value.message and "'deploy'" not in info.value.message
    with pytest.raises(InputValidationError) as empty:
        select_tools(extra_tools=tools, tools=[])
    assert "'deploy', 'lookup'" in empty.value.message
    hidden = select_tools(
        extra_tools=tools, tool_definitions=[ToolDefinition("lookup", enabled=False)], tools=["read", "deploy"]
    )
    assert names(hidden) == ["read", "deploy"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tool_definitions": [ToolDefinition("nope")]}, "tool_definitions"),
        (
            {"extra_tools": [extra("x")], "tool_definitions": [ToolDefinition("x"), ToolDefinition("x")]},
            "tool_definitions",
        ),
        ({"tool_definitions": [ToolDefinition("read")]}, "tool_definitions"),
        ({"extra_tools": [extra("x"), extra("x")]}, "extra_tools"),
        ({"extra_tools": [extra("bash")]}, "extra_tools"),
        ({"extra_tools": [extra("bad name!")]}, "extra_tools"),
        ({"policy": "yolo"}, "permission_policy"),
        ({"mode": "debug"}, "mode"),
        ({"tools": "read"}, "tools"),
    ],
)
def test_invalid_configuration(kwargs: dict[str, Any], field: str) -> None:
    """T3: unknown or duplicate names and invalid policy/mode are input_validation errors naming the field."""
    with pytest.raises(InputValidationError) as info:
        select_tools(**kwargs)
    assert info.value.field == field


async def test_run_whose_tools_list_drops_an_extra_tool_fails_before_anything_is_written(
    make_agent, fake_server
) -> None:
    """T3 (#17): through the runtime the same error surfaces from run(), before any request or commit."""
    agent = await make_agent(extra_tools=[extra("deploy")], tools=["read"])
    with pytest.raises(InputValidationError) as info:
        await collect(agent, "hi")
    assert info.value.field == "tools" and "'deploy'" in info.value.message
    assert not fake_server.requests and agent.read_transcript() == [] and agent.pending_request_id is None
