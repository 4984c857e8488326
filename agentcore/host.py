"""Host hooks (SPEC H1): how an embedding application takes part in a run.

Every hook is optional; with no host at all nothing ever pauses. Hooks may be plain or
async callables. ``approve_tool_call`` and ``approve_plan`` raise ``UserInputRequired`` to
pause the run; the host resumes later with the same ``request_id`` and the decision.
``report_usage`` is awaited after each settled model response is committed; a resumed run
may send the same ``record_id`` again, so the host upserts.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class AgentHost:
    approve_tool_call: Callable[[dict[str, Any]], Any] | None = None
    approve_plan: Callable[[dict[str, Any]], Any] | None = None
    report_usage: Callable[[dict[str, Any]], Any] | None = None
    abort_signal: asyncio.Event | None = None


async def call_hook(hook: Callable[[dict[str, Any]], Any], payload: dict[str, Any]) -> Any:
    result = hook(payload)
    if inspect.isawaitable(result):
        return await result
    return result
