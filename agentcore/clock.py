"""The wall clock the store's timing fields are read from (epoch milliseconds).

Every time a committed record carries (a model request's start and first token, a tool call's
start and end, a pause, a task's phases, a resume) is read from one clock, the store view's, so
a trace built from the store puts them all on one axis. ``create_agent(clock=...)`` injects it:
tests pass a fake clock and assert exact times without sleeping. Durations the engine only uses
for itself (the fragment flush window, throttling) keep the monotonic clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

WallClock = Callable[[], int]
"""Returns the current time in epoch milliseconds."""


def system_clock() -> int:
    """The real wall clock in epoch milliseconds."""
    return time.time_ns() // 1_000_000
