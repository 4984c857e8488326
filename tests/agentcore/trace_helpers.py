"""Helpers for the Trace tests: a fake-clock tool and a request interrupted by one owner and
resumed by another (as after a crash), with no sleeps."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from agentcore import AgentInput, AgentRuntime, AgentTool, ToolContext, ToolResult
from agentcore.testing.steps import Text, ToolCall
from tests.agentcore.session_helpers import Gate
from tests.helpers import FakeClock, collect

T0 = 1_700_000_000_000
COMPLETIONS = "openai-completions"


def advancing_tool(clock: FakeClock, ms: int, name: str = "work") -> AgentTool:
    """A tool that takes exactly ``ms`` on the fake clock."""

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        clock.advance(ms)
        return ToolResult.text("worked")

    return AgentTool(name, "Do some work.", {"type": "object", "properties": {}}, execute)


async def resumed_by_another_owner(
    make_agent: Any,
    fake_server: Any,
    db: str,
    clock: FakeClock,
    down_ms: int,
    on_commit: Callable[[Any, int], None] | None = None,
) -> tuple[AgentRuntime, AgentRuntime]:
    """Request ``r`` calls ``gate``; its first owner is closed while the call runs (close writes
    nothing, so the request stays open as a crash leaves it), ``down_ms`` pass, and a second
    owner re-runs ``r`` to its end. Returns (first, second); ``on_commit`` sees every commit."""
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g1")], [Text("through")])
    first = await make_agent(COMPLETIONS, database_path=db, clock=clock, extra_tools=[gate.tool()])
    if on_commit is not None:
        first.log.view.on_commit(on_commit)
    running = asyncio.ensure_future(collect(first, AgentInput(prompt="go", request_id="r")))
    await gate.entered.wait()
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    await first.close()
    clock.advance(down_ms)
    opened = Gate()
    opened.open()
    second = await make_agent(COMPLETIONS, database_path=db, clock=clock, extra_tools=[opened.tool()])
    if on_commit is not None:
        second.log.view.on_commit(on_commit)
    events = await collect(second, AgentInput(request_id="r"))
    assert events[-1].status == "completed"
    return first, second
