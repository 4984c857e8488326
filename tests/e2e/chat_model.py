"""The runtime of the chat's browser tests: the offline demo model, paced, plus two markers.

Demo sessions talk to a scripted provider server whose responder is ``slow_demo``'s (the demo's
own rules, text paced by ``STUDIO_E2E_DELTA_DELAY_MS``, ``HOLD:<token>``, "a long story"), plus:

- ``FAIL_ONCE:<token>``: the first request of a turn with that marker gets the provider's real
  HTTP 400 (a failed turn), every later one the ordinary answer — so Retry can succeed;
- ``STREAM_THEN_WAIT:<token>``: a line of text, then the stream waits until the test creates
  ``<STUDIO_DATA_DIR>/release-<token>``, then the answer ends — without a tool call, so a steer
  sent meanwhile finds no tool boundary to join.

Sessions on any other registered model keep the model's own endpoint (a dead one stays dead).
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from agentcore.demo import _conversation, _usage
from agentcore.testing.fake_server import RecordedRequest
from agentcore.testing.steps import Hang, HttpError, Step, Stop, Text
from studio.host.contract import SessionConfig
from studio.host.factory import agentcore_runtime_factory
from tests.e2e import slow_demo

FAIL_ONCE = re.compile(r"FAIL_ONCE:(\w{1,40})")
STREAM_THEN_WAIT = re.compile(r"STREAM_THEN_WAIT:(\w{1,40})")
_failed: set[str] = set()
_lock = threading.Lock()


def responder(request: RecordedRequest) -> list[Step]:
    user, calls, _outputs = _conversation(request.json)
    marker = FAIL_ONCE.search(user)
    if marker and not calls:
        with _lock:
            first = marker.group(1) not in _failed
            _failed.add(marker.group(1))
        if first:
            return [HttpError(400, "the request was refused by the provider (scripted failure, once)")]
    waiting = STREAM_THEN_WAIT.search(user)
    if waiting and not calls:
        released = _released(waiting.group(1))
        return [
            Text("Once upon a time, a robot tended a garden. ", chunk_size=8, pace_s=0.02),
            Hang(event=released),
            Text("The end.", chunk_size=8),
            _usage(request.json, "story"),
            Stop("stop"),
        ]
    return slow_demo.responder(request)


def _released(token: str) -> threading.Event:
    """Set once the test created ``release-<token>`` (the test runs in another process than the
    server, so the gate is a file; a thread of the system under test watches for it)."""
    flag = Path(os.environ["STUDIO_DATA_DIR"]) / f"release-{token}"
    released = threading.Event()

    def watch() -> None:
        while not flag.exists():
            time.sleep(0.05)  # the SUT polls the file system; the test waits on the page
        released.set()

    threading.Thread(target=watch, daemon=True).start()
    return released


async def open_runtime(config: SessionConfig) -> Any:
    if config.model_options.get("provider") == "demo":
        config.model_options["base_url"] = slow_demo.served(responder)
    return await agentcore_runtime_factory(config, extra_tools=[slow_demo.release_tool()])
