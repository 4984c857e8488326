"""A synchronous convenience wrapper for scripts (SPEC R5)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agentcore.events import AgentEvent, RunEndEvent
from agentcore.inputs import AgentInput
from agentcore.runtime import create_agent


def run_sync(
    input: AgentInput | dict[str, Any] | str,
    *,
    on_event: Callable[[AgentEvent], None] | None = None,
    **options: Any,
) -> RunEndEvent:
    """Create a runtime, run one input to its end, close it, and return the final event."""

    async def main() -> RunEndEvent:
        runtime = await create_agent(**options)
        final: RunEndEvent | None = None
        try:
            async for event in runtime.run(input):
                if on_event is not None:
                    on_event(event)
                if isinstance(event, RunEndEvent):
                    final = event
        finally:
            await runtime.close()
        assert final is not None, "a run always ends with an end event"
        return final

    return asyncio.run(main())
