"""Task definitions shared by the durable-task tests and their child process.

``Journal`` counts phase executions and abort calls in a file, so a test can tell what ran —
also across a SIGKILL — without trusting the process that died.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agentcore import define_agent_extension, define_agent_task
from agentcore.extensions.tasks import AgentExtension, AgentTaskDefinition


def done(result: Any = None, status: str = "completed") -> Any:
    """``runtime.commit(done(x), context)``: end the task with this outcome."""
    return lambda tx: {"status": "terminal", "outcome": {"status": status, "result": result}}


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def note(self, what: str) -> None:
        with self.path.open("a") as handle:
            handle.write(what + "\n")

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []


def timer(journal: Journal, version: int = 1, accepts: tuple[int, ...] = ()) -> AgentTaskDefinition:
    async def wait(task: Any, runtime: Any, context: Any) -> None:
        journal.note(f"{task.id} wait v{version}")
        await runtime.sleep(task.checkpoint["wake_at"], context)
        result = f"awake v{version}"
        await runtime.commit(done(result), context)

    async def abort(task: Any, runtime: Any, context: Any) -> None:
        journal.note(f"{task.id} abort")
        await runtime.commit(done(status="aborted"), context)

    return define_agent_task(
        name="app.timer",
        version=version,
        initial=lambda input: {"phase": "wait", "wake_at": input["wake_at"]},
        phases={"wait": wait},
        abort=abort,
        accepts_versions=accepts,
    )


def parent(journal: Journal, child_delay_ms: int = 0) -> AgentTaskDefinition:
    async def spawn(task: Any, runtime: Any, context: Any) -> None:
        journal.note(f"{task.id} spawn")
        now = runtime.now_ms()

        def start_children(tx: Any) -> dict[str, Any]:
            first = tx.create_task("app.timer", {"wake_at": now + child_delay_ms})
            second = tx.create_task("app.timer", {"wake_at": now + child_delay_ms})
            return {
                "status": "waiting",
                "on": [first, second],
                "policy": "all_settled",
                "phase": "collect",
                "checkpoint": {"children": [first, second]},
            }

        await runtime.commit(start_children, context)

    async def collect(task: Any, runtime: Any, context: Any) -> None:
        journal.note(f"{task.id} collect")
        results = sorted(str(child.outcome.get("result")) for child in task.children)
        await runtime.commit(done(results), context)

    async def abort(task: Any, runtime: Any, context: Any) -> None:
        journal.note(f"{task.id} abort parent")

    return define_agent_task(
        name="app.parent", version=1, initial=lambda input: {}, phases={"spawn": spawn, "collect": collect}, abort=abort
    )


def steps(journal: Journal, entered: asyncio.Event | None = None) -> AgentTaskDefinition:
    """Three phases. The first execution of the second one never ends (as if it did long work):
    the process is closed or killed there, and the next execution goes on. ``entered`` is set
    when that first execution has begun."""

    async def first(task: Any, runtime: Any, context: Any) -> None:
        journal.note(f"{task.id} first")
        await runtime.commit(lambda tx: {"status": "running", "phase": "second", "checkpoint": {"n": 1}}, context)

    async def second(task: Any, runtime: Any, context: Any) -> None:
        journal.note(f"{task.id} second {json.dumps(task.checkpoint)}")
        if sum(1 for line in journal.lines() if line.startswith(f"{task.id} second")) == 1:
            if entered is not None:
                entered.set()
            await asyncio.Event().wait()
        await runtime.commit(lambda tx: {"status": "running", "phase": "third", "checkpoint": {"n": 2}}, context)

    async def third(task: Any, runtime: Any, context: Any) -> None:
        journal.note(f"{task.id} third {json.dumps(task.checkpoint)}")
        await runtime.commit(done(3), context)

    phases = {"first": first, "second": second, "third": third}
    return define_agent_task(name="app.steps", version=1, initial=lambda input: {"n": 0}, phases=phases)


def app(journal: Journal, entered: asyncio.Event | None = None) -> AgentExtension:
    return define_agent_extension(name="app", tasks=[timer(journal), parent(journal), steps(journal, entered)])
