"""The answer for a ``never`` tool call a crash interrupted (SPEC D2; DURABILITY 10).

Shared by direct calls and code mode's nested calls: first make sure nothing the call started
is still running — on the machine it ran on, through its execution environment — then tell the
model the outcome is unknown, so it checks instead of repeating a side effect.
"""

from __future__ import annotations

from typing import Any

from agentcore.tools.base import ToolResult
from agentcore.tools.environment import AgentExecutionEnv

INTERRUPTED_RESULT = (
    "The process running this tool call was interrupted before its result was recorded; "
    "the outcome is unknown. Check the current state before repeating it."
)


async def interrupted_result(intent: dict[str, Any], environment: AgentExecutionEnv) -> ToolResult:
    token = intent.get("call_token")
    if token:
        try:
            await environment.reap_call(str(token))
        except TimeoutError:
            return ToolResult.text(
                f"{INTERRUPTED_RESULT} Some of its processes could not be stopped and may still be running.",
                is_error=True,
            )
    return ToolResult.text(INTERRUPTED_RESULT, is_error=True)
