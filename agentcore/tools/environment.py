"""Where the built-in tools run: the execution environment interface and the local one (SPEC X5).

The built-in tools are split in two. The *tool* half (schema, argument handling) runs in the
agent. The *target* half — resolving paths under the permission policy, opening files without
following symlinks, walking trees, running commands in their own process group tied to a
lifeline — runs where the files are, through an ``AgentExecutionEnv``:

* ``run_file_operation(ctx, operation)`` runs one ``FileOperation`` (``ReadFile``,
  ``WriteFile``, ``EditFile``, ``ListDirectory``, ``GrepFiles``, ``FindFiles``): a small frozen
  dataclass of plain, JSON-ready fields with a ``run(guard, should_stop)`` that does the work
  against a ``PathGuard`` built on the target. The target builds that guard from
  ``ctx.guard.scope`` (the policy as data), so **the path policy is enforced on the target**,
  where ``realpath`` and ``O_NOFOLLOW`` mean something.
* ``run_command(ctx, command, timeout)`` runs bash there: output streamed to ``ctx.on_update``,
  ``ctx.abort`` stops it (SIGTERM, then SIGKILL to its process group), its processes die with
  the environment (the lifeline) and carry ``ctx.call_token``.
* ``reap_call(token)`` kills what an interrupted call left running on the target.
* ``status()`` (``kind``, ``status``, ``message``; never credentials) and ``cleanup()``.

A business failure raises ``ToolError`` (the model reads it); an environment that cannot be
reached raises ``ToolError`` too, naming the environment — a tool never falls back to this
machine. ``LocalExecutionEnv`` is the default (``ToolContext.env`` is None): it runs the target
half in this process against ``ctx.guard`` itself, exactly as the tools always did. The remote
implementation and the session option live in ``agentcore.extensions.environment``.

The two protocols (``AgentExecutionEnv``, ``FileOperation``) live in ``base`` beside
``ToolContext``, which they and the tools share; they are re-exported here.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from agentcore.errors import ToolError
from agentcore.tools.base import AgentExecutionEnv, FileOperation, ToolContext, ToolResult
from agentcore.tools.lifeline import reap_orphaned_call
from agentcore.tools.shell import run_command

ENV_KINDS: Final = ("local", "remote")


class LocalExecutionEnv:
    """The tools on this machine, as the host process: the guard is ``ctx.guard`` itself."""

    def __init__(self, id: str = "local", label: str = "Local machine") -> None:
        self._id = id
        self._label = label
        self._closed = False

    @property
    def id(self) -> str:
        return self._id

    @property
    def label(self) -> str:
        return self._label

    @property
    def kind(self) -> str:
        return "local"

    def _check_open(self) -> None:
        if self._closed:
            raise ToolError(f"execution environment {self._label!r} ({self._id}) was closed")

    async def run_file_operation(self, ctx: ToolContext, operation: FileOperation) -> ToolResult:
        self._check_open()
        return await asyncio.to_thread(operation.run, ctx.guard, ctx.abort.is_set)

    async def run_command(self, ctx: ToolContext, command: str, timeout: float) -> ToolResult:  # noqa: ASYNC109
        self._check_open()
        return await run_command(command, timeout, ctx)

    async def reap_call(self, token: str) -> int:
        return await reap_orphaned_call(token)

    def status(self) -> dict[str, Any]:
        return {"kind": "local", "status": "closed" if self._closed else "connected", "message": None}

    async def cleanup(self) -> None:
        self._closed = True


def execution_env(ctx: ToolContext) -> AgentExecutionEnv:
    """The environment ``ctx``'s tools run against: ``ctx.env``, or this machine."""
    return ctx.env if ctx.env is not None else LocalExecutionEnv()


__all__ = ["ENV_KINDS", "AgentExecutionEnv", "FileOperation", "LocalExecutionEnv", "execution_env"]
