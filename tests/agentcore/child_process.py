"""Agent child processes for crash tests: start one, read its JSON-lines events, kill it.

Every crash suite (SQLite, PostgreSQL, tasks, code mode, sessions) runs a script in a child
process that prints one JSON event per line, then SIGKILLs it at an observed point and starts
another on the same store. The children die with the test run (``tests.child_guard``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


class Child:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.events: list[dict[str, Any]] = []

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool], limit: float = 30) -> dict[str, Any]:
        async with asyncio.timeout(limit):
            for event in self.events:
                if predicate(event):
                    return event
            assert self.proc.stdout is not None
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    raise AssertionError(f"child ended first; events: {self.events}")
                event = json.loads(line)
                self.events.append(event)
                if predicate(event):
                    return event

    async def finish(self, limit: float = 60) -> dict[str, Any]:
        end = await self.wait_for(lambda e: e["type"] == "end", limit)
        await self.proc.wait()
        return end

    async def run_to_end(self, limit: float = 90) -> list[dict[str, Any]]:
        """Every event until the child exits, which it must do successfully."""
        assert self.proc.stdout is not None
        async with asyncio.timeout(limit):
            async for line in self.proc.stdout:
                self.events.append(json.loads(line))
            await self.proc.wait()
        assert self.proc.returncode == 0, self.events[-3:]
        return self.events

    async def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()


async def spawn(script: Path, *args: str) -> Child:
    """Run ``script`` (a test child) with ``args``, its stdout piped to the returned ``Child``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        *args,
        stdout=asyncio.subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    return Child(proc)


async def until(condition: Callable[[], bool], limit: float = 30) -> None:
    """Wait for an external condition (a file written by the child) by polling it: another
    process writes it, so there is no in-process event to await."""
    async with asyncio.timeout(limit):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for init to reap it is dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")
