"""Helpers for the built-in tool tests: a real context on a temp dir, and a call through the
same prepare → validate → execute path the engine uses.

``Target`` is where a test's tools run (SPEC X5): this machine, or a remote environment — a
real worker process (``agentcore.extensions.environment.worker``) talking JSON lines over
stdin/stdout. The ``target`` fixture that runs a test on both lives in
``environment_fixtures`` (``pytest_plugins = ("tests.agentcore.environment_fixtures",)``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentcore.extensions.environment.remote import RemoteExecutionEnv
from agentcore.messages import TextContent
from agentcore.tools import PathGuard, ToolContext, ToolResult, builtin_tools, execute_call, prepare_call
from agentcore.tools.guard import PermissionPolicy


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


class Target:
    """Where a test's tools run: ``local`` (``env`` None) or ``remote`` (a worker process)."""

    def __init__(self, kind: str, env: RemoteExecutionEnv | None) -> None:
        self.kind = kind
        self.env = env

    def ctx(
        self,
        root: Path,
        policy: PermissionPolicy = "workspace",
        *,
        allowed_directories: tuple[str, ...] = (),
        before_open: Callable[[Path], None] | None = None,
        **context: Any,
    ) -> ToolContext:
        """A context on ``root``; ``before_open`` runs right before each open, on whichever side opens."""
        local_hook = before_open if self.env is None else None
        if self.env is not None:
            self.env.before_open = before_open
        guard = PathGuard(root, policy, allowed_directories, before_open=local_hook)
        return ToolContext(workdir=root, guard=guard, abort=asyncio.Event(), tool_call_id="t1", env=self.env, **context)

    def scratch(self, ctx: ToolContext) -> Path | None:
        """Where bash saves full output for ``ctx``: its scratch dir here, the worker's there."""
        return ctx.scratch_dir if self.env is None else self.env.scratch
