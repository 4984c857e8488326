"""Helpers for the session-protocol tests: a gate tool and a run driven by event callbacks."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from agentcore import AgentRuntime, AgentTool, ToolContext, ToolResult
from agentcore.events import AgentEvent

OnEvent = Callable[[AgentEvent], Awaitable[None] | None]


class Gate:
    """A tool that blocks until opened: it holds a turn inside its tool round, so a test can
    send commands while the turn is provably busy (no sleeps)."""

    def __init__(self, name: str = "gate") -> None:
        self.opened = asyncio.Event()
        self.entered = asyncio.Event()
        self.calls = 0
        self.name = name

    def open(self) -> None:
        self.opened.set()

    def tool(self) -> AgentTool:
        async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
            self.calls += 1
            self.entered.set()
            waiter = asyncio.ensure_future(self.opened.wait())
            aborted = asyncio.ensure_future(ctx.abort.wait())
            try:
                await asyncio.wait({waiter, aborted}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                aborted.cancel()
            if ctx.abort.is_set():
                return ToolResult.text("gate: cancelled", is_error=True)
            return ToolResult.text(f"{self.name} passed")

        return AgentTool(
            name=self.name,
            description="Wait at the gate.",
            parameters={"type": "object", "properties": {}},
            execute=execute,
            read_only=True,
            replay="safe",
        )


async def run_with(
    runtime: AgentRuntime, input: Any, on_event: OnEvent | None = None, host: Any = None
) -> list[AgentEvent]:
    """Collect the events of ``runtime.run(input)``, calling ``on_event`` on each as it arrives."""
    events: list[AgentEvent] = []
    async for event in runtime.run(input, host):
        events.append(event)
        if on_event is not None:
            result = on_event(event)
            if asyncio.iscoroutine(result):
                await result
    return events


def ends(events: list[AgentEvent]) -> list[Any]:
    return [e for e in events if e.type == "end"]


def last_snapshot(events: list[AgentEvent]) -> dict[str, Any]:
    snapshots = [e.snapshot for e in events if e.type == "session"]
    assert snapshots, "session mode emits session events"
    return snapshots[-1]


def user_texts(request: Any) -> list[str]:
    """The user-message texts of a recorded Chat Completions request."""
    out = []
    for message in request.json["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out.append("".join(part.get("text", "") for part in content if isinstance(part, dict)))
    return out
