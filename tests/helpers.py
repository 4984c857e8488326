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


class FakeClock:
    """An injectable wall clock (``create_agent(clock=...)``, epoch ms): time moves only when a
    test says so (``advance``), plus ``tick`` ms on every read when given, so records written one
    after another get increasing times without any real waiting."""

    def __init__(self, start: int = 1_700_000_000_000, tick: int = 0) -> None:
        self.now = start
        self.tick = tick

    def __call__(self) -> int:
        now = self.now
        self.now += self.tick
        return now

    def advance(self, ms: int) -> None:
        self.now += ms
