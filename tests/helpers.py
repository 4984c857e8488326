"""Helpers shared by test modules (import as ``from tests.helpers import ...``)."""

from __future__ import annotations

from typing import Any

from agentcore import AgentRuntime
from agentcore.events import RunEndEvent, SessionEvent


class SleepRecorder:
    """Replaces asyncio.sleep for retry backoff: records delays, never waits."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


async def collect(runtime: AgentRuntime, input: Any, host: Any = None) -> list[Any]:
    return [event async for event in runtime.run(input, host)]


def final(events: list[Any]) -> RunEndEvent:
    """The run's end event: the last event, or in session mode the last end event before the
    closing ``session`` snapshot."""
    last = events[-1]
    if isinstance(last, SessionEvent):
        last = next((e for e in reversed(events) if isinstance(e, RunEndEvent)), last)
    assert isinstance(last, RunEndEvent), f"the last event must be the end event, got {last!r}"
    return last


def types(events: list[Any]) -> list[str]:
    return [e.type for e in events]


def text_of(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == "text_delta")
