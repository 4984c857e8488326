"""The real agentcore runtime (demo model), paced for browser tests, with one failure switch.

The offline demo answers in one burst; a browser test must *see* text arrive in several
steps. This factory opens the real runtime and spaces its text deltas by
``STUDIO_E2E_DELTA_DELAY_MS`` — pacing inside the system under test, not a sleep used to
synchronise the test (the tests wait on page conditions).

The runtime talks to a scripted provider server whose responder is the demo's own, except
that a prompt containing ``FAIL_WITH_400`` gets the provider's real HTTP 400 error: a run
that fails for real (a non-retryable model error, the prompt kept in the store).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator
from typing import Any

from agentcore.demo import _conversation, demo_responder
from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import HttpError, Step
from studio.hosts import SessionConfig, agentcore_runtime_factory

FAIL_MARKER = "FAIL_WITH_400"


def responder(request: RecordedRequest) -> list[Step]:
    user, _calls, _outputs = _conversation(request.json)
    if FAIL_MARKER in user:
        return [HttpError(400, "the request was refused by the provider (scripted failure)")]
    return demo_responder(request)


_server: FakeProviderServer | None = None
_lock = threading.Lock()


def _base_url() -> str:
    global _server
    with _lock:
        if _server is None:
            _server = FakeProviderServer(responder=responder).start_in_thread()
        return _server.base_url


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
    config.model_options["base_url"] = _base_url()
    return PacedRuntime(await agentcore_runtime_factory(config), delay)
