"""The model's session tools (SPEC S5): ``update_plan`` and ``subagent``.

Both are ordinary ``AgentTool``s whose effects go through the session (plan entries, child
contexts), so they inherit the whole tool contract: argument validation, intents before
effects, results in the model's order. ``update_plan`` is replay-safe because it writes the
whole plan (running it twice leaves the same plan). ``subagent`` is replay-safe because a
child's identity is derived from the parent's committed call: a replay finds the child it
started and waits for it instead of spawning a twin.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agentcore.tools.base import AgentTool, ToolContext, ToolResult

UPDATE_PLAN = "update_plan"
SUBAGENT = "subagent"

PlanWriter = Callable[[list[dict[str, Any]]], int]
SubagentRunner = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]

_PLAN_ITEM = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "minLength": 1, "maxLength": 200},
        "text": {"type": "string", "minLength": 1, "maxLength": 10_000},
        "status": {"enum": ["pending", "in_progress", "completed"]},
    },
    "required": ["text", "status"],
    "additionalProperties": False,
}


def update_plan_tool(write_plan: PlanWriter) -> AgentTool:
    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        items = [
            {"id": str(item.get("id") or f"step-{n + 1}"), "text": item["text"], "status": item["status"]}
            for n, item in enumerate(arguments["items"])
        ]
        ids = [item["id"] for item in items]
        if len(set(ids)) != len(ids):
            return ToolResult.text("Plan item ids must be unique.", is_error=True)
        version = write_plan(items)
        done = sum(1 for item in items if item["status"] == "completed")
        return ToolResult.text(f"Plan updated (version {version}): {done} of {len(items)} steps completed.")

    return AgentTool(
        name=UPDATE_PLAN,
        description=(
            "Replace the task plan shown to the user: the full list of steps, each with a status "
            "(pending, in_progress, completed). Keep at most one step in_progress; update the plan "
            "as you finish steps."
        ),
        parameters={
            "type": "object",
            "properties": {"items": {"type": "array", "items": _PLAN_ITEM, "maxItems": 200}},
            "required": ["items"],
            "additionalProperties": False,
        },
        execute=execute,
        replay="safe",
        builtin=True,  # a session tool: governed by the session options, never by approvals
    )


def subagent_tool(run: SubagentRunner, *, models: list[dict[str, str]]) -> AgentTool:
    model_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"provider": {"type": "string"}, "model_id": {"type": "string"}},
        "required": ["provider", "model_id"],
        "additionalProperties": False,
    }
    listed = ", ".join(f"{m['provider']}/{m['model_id']}" for m in models) or "none besides your own"

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await run(arguments, ctx)

    return AgentTool(
        name=SUBAGENT,
        description=(
            "Delegate a self-contained task to a subagent with a fresh context and a subset of your "
            "tools. It cannot delegate further. With background=true it runs while you continue and "
            "its result arrives later as a message; otherwise this call returns its final answer. "
            f"Optional model (exact match only): {listed}."
        ),
        parameters={
            "type": "object",
            "properties": {
                "task": {"type": "string", "minLength": 1, "maxLength": 100_000},
                "background": {"type": "boolean"},
                "model": model_schema,
            },
            "required": ["task"],
            "additionalProperties": False,
        },
        execute=execute,
        replay="safe",
        builtin=True,
    )
