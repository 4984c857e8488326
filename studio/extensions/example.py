"""Studio's example extension: a durable timer, and a parent task waiting on two children.

It exists so a new user sees the Trace's Tasks tab working without an API key: the offline demo
model calls ``start_timer`` when asked to "start a timer" and ``run_example_tasks`` when asked
to "run the example tasks" (``agentcore/demo.py``). Both tools start tasks *in the background*:
the tool call returns the task id at once and the task lives on in the store.

- ``example.timer`` — the seed's durable timer: its checkpoint holds the absolute ``wake_at``
  (what the Trace shows as a time and a countdown); the ``wait`` phase sleeps until then and
  completes. A crash or a restart of Studio resumes it and it fires at the same wall time.
  Its ``abort`` takes ``cleanup_seconds`` (default 1) to wind down, like a task that must
  release something first, so the Trace's ``stopping`` state is visible before it ends.
- ``example.pair`` — two levels: ``spawn`` creates two timers in one commit and waits for both
  (``all_settled``); ``collect`` then completes with their results. Cancelling it cancels the
  two children first (each runs its own ``abort``), then the parent.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentcore import define_agent_doc, define_agent_extension, define_agent_task, define_task_tool

MAX_SECONDS = 24 * 3600
DEFAULT_SECONDS = 10
DEFAULT_CLEANUP_SECONDS = 1


def _now_ms() -> int:
    return int(time.time() * 1000)


def _seconds(value: Any) -> int:
    seconds = DEFAULT_SECONDS if value is None else int(value)
    return max(1, min(MAX_SECONDS, seconds))


# --- the timer ------------------------------------------------------------------------------


def _timer_initial(task_input: Any) -> dict[str, Any]:
    data = task_input if isinstance(task_input, dict) else {}
    seconds = _seconds(data.get("seconds"))
    label = str(data.get("label") or f"{seconds} s timer")
    cleanup = int(data.get("cleanup_seconds", DEFAULT_CLEANUP_SECONDS))
    return {
        "phase": "wait",
        "seconds": seconds,
        "label": label,
        "cleanup_seconds": cleanup,
        "wake_at": _now_ms() + seconds * 1000,
    }


async def _timer_wait(task: Any, runtime: Any, context: Any) -> None:
    wake_at = int(task.checkpoint["wake_at"])
    await runtime.sleep(wake_at, context)
    fired = runtime.now_ms()
    result = {"label": task.checkpoint.get("label"), "fired_at": fired, "late_ms": max(0, fired - wake_at)}
    await runtime.commit(
        lambda tx: {"status": "terminal", "outcome": {"status": "completed", "result": result}}, context
    )


async def _abort(task: Any, runtime: Any, context: Any) -> None:
    """Wind down for ``cleanup_seconds`` (standing in for releasing a resource), then commit
    the cancellation. Runs again after a crash: the task stays ``stopping`` until it commits."""
    checkpoint = task.checkpoint if isinstance(task.checkpoint, dict) else {}
    await asyncio.sleep(float(checkpoint.get("cleanup_seconds", 0)))
    outcome = {"status": "aborted", "result": {"label": checkpoint.get("label")}}
    await runtime.commit(lambda tx: {"status": "terminal", "outcome": outcome}, context)


TIMER_INPUT = {
    "type": "object",
    "properties": {
        "seconds": {"type": "integer", "minimum": 1, "maximum": MAX_SECONDS},
        "label": {"type": "string", "maxLength": 80},
        "cleanup_seconds": {"type": "integer", "minimum": 0, "maximum": 60},
    },
    "additionalProperties": False,
}

TIMER = define_agent_task(
    name="example.timer",
    version=1,
    initial=_timer_initial,
    phases={"wait": _timer_wait},
    abort=_abort,
    input_schema=TIMER_INPUT,
)


# --- a parent waiting on two children -------------------------------------------------------


def _pair_initial(task_input: Any) -> dict[str, Any]:
    data = task_input if isinstance(task_input, dict) else {}
    return {"phase": "spawn", "seconds": _seconds(data.get("seconds"))}


async def _pair_spawn(task: Any, runtime: Any, context: Any) -> None:
    seconds = int(task.checkpoint["seconds"])

    def start_children(tx: Any) -> dict[str, Any]:
        first = tx.create_task("example.timer", {"seconds": seconds, "label": "first child"})
        second = tx.create_task("example.timer", {"seconds": seconds + 3, "label": "second child"})
        return {
            "status": "waiting",
            "on": [first, second],
            "policy": "all_settled",
            "phase": "collect",
            "checkpoint": {"seconds": seconds, "children": [first, second]},
        }

    await runtime.commit(start_children, context)


async def _pair_collect(task: Any, runtime: Any, context: Any) -> None:
    results = [{"task_id": child.task_id, "status": child.status, "outcome": child.outcome} for child in task.children]
    outcome = {"status": "completed", "result": {"children": results}}
    await runtime.commit(lambda tx: {"status": "terminal", "outcome": outcome}, context)


PAIR = define_agent_task(
    name="example.pair",
    version=1,
    initial=_pair_initial,
    phases={"spawn": _pair_spawn, "collect": _pair_collect},
    abort=_abort,
    input_schema={
        "type": "object",
        "properties": {"seconds": {"type": "integer", "minimum": 1, "maximum": MAX_SECONDS}},
        "additionalProperties": False,
    },
)


# --- tools the model calls, and the extension ---------------------------------------------------

START_TIMER = define_task_tool(
    name="start_timer",
    description="Start a durable timer that fires after `seconds` (it survives restarts). Returns its task id.",
    parameters={
        "type": "object",
        "properties": {
            "seconds": {"type": "integer", "minimum": 1, "maximum": MAX_SECONDS, "description": "Delay in seconds."},
            "label": {"type": "string", "maxLength": 80, "description": "What the timer is for."},
        },
        "required": ["seconds"],
        "additionalProperties": False,
    },
    task="example.timer",
    input=lambda arguments: {k: v for k, v in arguments.items() if k in ("seconds", "label")},
    background=True,
)

RUN_EXAMPLE_TASKS = define_task_tool(
    name="run_example_tasks",
    description="Start the example parent task: it starts two timers and waits for both. Returns its task id.",
    parameters={
        "type": "object",
        "properties": {"seconds": {"type": "integer", "minimum": 1, "maximum": MAX_SECONDS}},
        "additionalProperties": False,
    },
    task="example.pair",
    input=lambda arguments: {k: v for k, v in arguments.items() if k == "seconds"},
    background=True,
)

EXTENSIONS = [
    define_agent_extension(
        name="example",
        version="1.0",
        tasks=[TIMER, PAIR],
        tools=[START_TIMER, RUN_EXAMPLE_TASKS],
        docs=[
            define_agent_doc(
                "example-tasks",
                "Durable tasks: `start_timer(seconds, label?)` starts a timer that fires later, and "
                "`run_example_tasks(seconds?)` starts a parent task that waits on two timers. Both run "
                "in the background; the person watches them in the Trace's Tasks tab.",
            )
        ],
    )
]
