"""Helpers for the built-in tool tests: a real context on a temp dir, and a call through the
same prepare → validate → execute path the engine uses."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentcore.messages import TextContent
from agentcore.tools import PathGuard, ToolContext, ToolResult, builtin_tools, execute_call, prepare_call


def make_ctx(root: Path, **context: Any) -> ToolContext:
    return ToolContext(workdir=root, guard=PathGuard(root), abort=asyncio.Event(), tool_call_id="t1", **context)


async def call(ctx: ToolContext, name: str, **args: object) -> ToolResult:
    tool = next(t for t in builtin_tools() if t.name == name)
    prepared = prepare_call(tool, args)
    if isinstance(prepared, ToolResult):
        return prepared
    return await execute_call(tool, prepared, ctx)


def text(result: ToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))
