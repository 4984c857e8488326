"""The real agentcore runtime (demo model) for browser tests: paced, holdable, and failable.

The offline demo answers in one burst; a browser test must *see* text arrive in several steps
and must be able to act while a turn is provably busy. So the runtime talks to a scripted
provider server whose responder is the demo's own, with three additions:

- text is streamed with ``STUDIO_E2E_DELTA_DELAY_MS`` between chunks (pacing inside the
  system under test, not a sleep used to synchronise the test: the tests wait on page
  conditions), and "… a long story …" gets a long answer;
- ``HOLD:<token>`` in a prompt makes the model call ``wait_for_release``, a tool that returns
  once the file ``<STUDIO_DATA_DIR>/release-<token>`` exists — the test creates it (the test
  runs in another process than daphne, so the gate is a file);
- ``FAIL_WITH_400`` gets the provider's real HTTP 400 error: a turn that fails for real.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from pathlib import Path
from typing import Any

from agentcore.demo import _conversation, _tool_names, _usage, demo_responder
from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import HttpError, Step, Stop, Text, ToolCall
from studio.host.contract import SessionConfig
from studio.host.factory import agentcore_runtime_factory

FAIL_MARKER = "FAIL_WITH_400"
HOLD = re.compile(r"HOLD:(\w{1,40})")
STORY = (
    "Once upon a time a very patient robot tended a garden of copper tulips. Every morning it "
    "counted the petals, every evening it polished the stems, and every night it listened to the "
    "wind tell stories about places it would never see. "
) * 3


def _pace() -> float:
    return float(os.environ.get("STUDIO_E2E_DELTA_DELAY_MS", "60")) / 1000


def _say(body: dict[str, Any], text: str) -> list[Step]:
    return [Text(text, chunk_size=8, pace_s=_pace()), _usage(body, text), Stop("stop")]


def responder(request: RecordedRequest) -> list[Step]:
    body = request.json
    user, calls, outputs = _conversation(body)
    if FAIL_MARKER in user:
        return [HttpError(400, "the request was refused by the provider (scripted failure)")]
    hold = HOLD.search(user)
    if hold and "wait_for_release" in _tool_names(body):
        if not any(c.get("name") == "wait_for_release" for c in calls):
            return [ToolCall("wait_for_release", {"token": hold.group(1)}), _usage(body, "hold"), Stop("tool_use")]
        return _say(body, f"Released {hold.group(1)}. {str(outputs[-1].get('output', '')) if outputs else ''}")
    if "long story" in user.lower():
        return _say(body, STORY)
    steps = demo_responder(request)
    for step in steps:
        if isinstance(step, Text):
            step.pace_s = max(step.pace_s, _pace())
    return steps


def release_tool() -> Any:
    """``wait_for_release(token)``: returns once the test created ``release-<token>``."""
    from agentcore import AgentTool, ToolResult

    data_dir = Path(os.environ["STUDIO_DATA_DIR"])

    async def execute(arguments: dict[str, Any], ctx: Any) -> Any:
        flag = data_dir / f"release-{arguments['token']}"
        while not flag.exists():
            if ctx.abort.is_set():
                return ToolResult.text("stopped while waiting", is_error=True)
            await asyncio.sleep(0.05)  # the SUT polls the file system; tests wait on the page
        return ToolResult.text(f"released {arguments['token']}")

    return AgentTool(
        name="wait_for_release",
        description="Wait until the test releases this token.",
        parameters={"type": "object", "properties": {"token": {"type": "string"}}, "required": ["token"]},
        execute=execute,
        read_only=True,
        replay="safe",
    )


_servers: dict[Any, FakeProviderServer] = {}
_lock = threading.Lock()


def served(answer: Any) -> str:
    """The base URL of this process's one provider server answering with ``answer`` (started
    on first use, on a thread of its own)."""
    with _lock:
        if answer not in _servers:
            _servers[answer] = FakeProviderServer(responder=answer).start_in_thread()
        return _servers[answer].base_url


async def open_runtime(config: SessionConfig) -> Any:
    config.model_options["base_url"] = served(responder)
    return await agentcore_runtime_factory(config, extra_tools=[release_tool()])
