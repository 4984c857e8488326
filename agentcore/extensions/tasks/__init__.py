"""Extensions and durable tasks (SPEC X1, X2): ``session={"registry": registry}``.

Public API: ``create_agent_registry``, ``define_agent_task``, ``define_agent_extension``,
``define_agent_doc``, ``agent_hook`` and ``define_task_tool`` (re-exported by ``agentcore``).
This module is also the ``registry`` session extension: ``parse_option`` / ``create``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentcore.errors import InputValidationError
from agentcore.extensions.tasks.definitions import (
    AgentDoc,
    AgentExtension,
    AgentHook,
    AgentTaskDefinition,
    agent_hook,
    define_agent_doc,
    define_agent_extension,
    define_agent_task,
)
from agentcore.extensions.tasks.registry import AgentRegistry, RegistrySnapshot, create_agent_registry
from agentcore.extensions.tasks.runner import PhaseContext, TaskHandle, TaskRuntime, TaskScheduler
from agentcore.extensions.tasks.task_tools import STARTS_TASK
from agentcore.tools.base import AgentTool, ToolContext, ToolResult

if TYPE_CHECKING:
    from agentcore.session.extension import ExtensionHost


def parse_option(raw: Any) -> AgentRegistry:
    if not isinstance(raw, AgentRegistry):
        raise InputValidationError(
            "session.registry must be an AgentRegistry (create_agent_registry())", field="session.registry"
        )
    return raw


def create(session: ExtensionHost, registry: AgentRegistry) -> TaskScheduler:
    return TaskScheduler(session, registry)


def define_task_tool(
    *,
    name: str,
    description: str,
    parameters: dict[str, Any],
    task: str,
    input: Callable[[dict[str, Any]], Any] | None = None,
    background: bool = True,
) -> AgentTool:
    """A tool the model calls to start the registered task ``task`` (X1: "started by a tool the
    extension declares"). ``input(arguments)`` builds the task input (default: the arguments).
    In the background the call returns the task id at once; otherwise it waits for the outcome.
    The task's id is derived from the committed call, so a replayed call finds its task."""

    async def unbound(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.text("This tool only works inside a session with its registry.", is_error=True)

    return AgentTool(
        name=name,
        description=description,
        parameters=parameters,
        execute=unbound,
        replay="safe",
        metadata={STARTS_TASK: {"task": task, "input": input, "background": background}},
    )


__all__ = [
    "AgentDoc",
    "AgentExtension",
    "AgentHook",
    "AgentRegistry",
    "AgentTaskDefinition",
    "PhaseContext",
    "RegistrySnapshot",
    "TaskHandle",
    "TaskRuntime",
    "agent_hook",
    "create_agent_registry",
    "define_agent_doc",
    "define_agent_extension",
    "define_agent_task",
    "define_task_tool",
]
