"""Tools that start tasks (SPEC X1: a task "started by a tool the extension declares").

``define_task_tool`` makes an ``AgentTool`` that only says which task it starts; the scheduler
binds it to a session context here. The task id is derived from the committed tool call, so a
call replayed after a crash finds the task it started instead of starting a second one.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Protocol

from agentcore.extensions.tasks.definitions import AgentTaskDefinition
from agentcore.harness.projection import StoreView
from agentcore.harness.storage import Commit, TaskRow
from agentcore.session.contexts import Context
from agentcore.tools.base import AgentTool, ToolContext, ToolResult

STARTS_TASK = "starts_task"


class TaskStarter(Protocol):
    """What a task-starting tool needs of the scheduler: the store, the installed definitions,
    making a checked row, announcing it, and waiting for a task's end."""

    @property
    def view(self) -> StoreView: ...

    def definition(self, name: str) -> AgentTaskDefinition | None: ...

    def new_row(
        self,
        definition: AgentTaskDefinition,
        input: Any,
        *,
        conversation_id: str,
        target_id: int,
        parent_id: str | None,
        background: bool,
        request_id: str | None,
    ) -> TaskRow: ...

    def notify(self, task_id: str) -> None: ...

    def row(self, task_id: str) -> TaskRow: ...

    async def wait_terminal(self, task_id: str, abort: asyncio.Event | None = None) -> None: ...


def bind_task_tool(scheduler: TaskStarter, tool: AgentTool, context: Context) -> AgentTool:
    """``tool`` as the model of ``context`` gets it: a task-starting tool is bound to the
    scheduler and the context; any other extension tool is returned as it is."""
    spec = tool.metadata.get(STARTS_TASK)
    if not spec:
        return tool

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await _start(scheduler, spec, context, arguments, ctx)

    return AgentTool(
        name=tool.name,
        description=tool.description,
        parameters=tool.parameters,
        execute=execute,
        replay="safe",  # the task id is derived from the committed call: a replay finds it
        metadata=tool.metadata,
    )


async def _start(
    scheduler: TaskStarter, spec: dict[str, Any], context: Context, arguments: dict[str, Any], ctx: ToolContext
) -> ToolResult:
    view = scheduler.view
    task_id = f"task-{uuid.uuid5(uuid.NAMESPACE_URL, ctx.tool_call_id).hex[:16]}"
    if task_id not in view.tasks:
        definition = scheduler.definition(spec["task"])
        if definition is None:
            return ToolResult.text(f"Task {spec['task']!r} is not installed.", is_error=True)
        make_input = spec.get("input")
        task_input = make_input(arguments) if callable(make_input) else arguments
        row = scheduler.new_row(
            definition,
            task_input,
            conversation_id=context.conversation_id,
            target_id=context.target_id,
            parent_id=None,
            background=bool(spec.get("background", True)),
            request_id=ctx.tool_call_id,
        )
        view.log(context.conversation_id).commit(Commit(tasks=[TaskRow(task_id, row.conversation_id, row.payload)]))
        scheduler.notify(task_id)
    if spec.get("background", True):
        return ToolResult.text(f"Started task {task_id} ({spec['task']}); it runs in the background.")
    await scheduler.wait_terminal(task_id, ctx.abort)
    outcome = scheduler.row(task_id).payload.get("outcome") or {}
    text = f"Task {task_id} ended {outcome.get('status')}: {outcome.get('result')!r}"
    return ToolResult.text(text, is_error=outcome.get("status") != "completed")
