"""The real agentcore runtime (demo model), paced for browser tests.

The offline demo answers in one burst; a browser test must *see* text arrive in several
steps. This factory opens the real runtime and spaces its text deltas by
``STUDIO_E2E_DELTA_DELAY_MS`` — pacing inside the system under test, not a sleep used to
synchronise the test (the tests wait on page conditions).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

from studio.hosts import SessionConfig, agentcore_runtime_factory


class PacedRuntime:
    def __init__(self, runtime: Any, delay: float) -> None:
        self._runtime = runtime
        self._delay = delay

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)

    async def run(self, agent_input: Any, host: Any = None) -> AsyncIterator[Any]:
        async for event in self._runtime.run(agent_input, host=host):
            if event.type == "text_delta" and self._delay:
                await asyncio.sleep(self._delay)
            yield event


async def open_runtime(config: SessionConfig) -> PacedRuntime:
    delay = float(os.environ.get("STUDIO_E2E_DELTA_DELAY_MS", "60")) / 1000
    return PacedRuntime(await agentcore_runtime_factory(config), delay)
