"""Child process for durable-task crash tests: a session with the test registry on a file store.

``--task NAME --input JSON`` starts a task at the first session event; the process then serves
until every task has ended and prints ``{"type": "idle"}``. ``--die-when-children-settle``
SIGKILLs the process from a task hook the moment a task's last child ends — after that commit,
before the parent could wake. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from agentcore import agent_hook, create_agent, create_agent_registry, define_agent_extension
from agentcore.extensions.tasks.runner import TERMINAL
from tests.agentcore.task_fixtures import Journal, app
from tests.child_guard import die_with_parent


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--journal", required=True)
    parser.add_argument("--task")
    parser.add_argument("--input", default="{}")
    parser.add_argument("--die-when-children-settle", action="store_true")
    args = parser.parse_args()
    journal = Journal(Path(args.journal))
    registry = create_agent_registry()
    extension = app(journal)
    if args.die_when_children_settle:
        hook = agent_hook("task", lambda event, context: _die_if_siblings_settled(event, runtime))
        extension = define_agent_extension(name="app", tasks=list(extension.tasks), hooks=[hook])
    registry.install(extension)
    runtime = await create_agent(
        provider="fake",
        model="fake-model",
        base_url=args.base_url,
        api_key="k",
        api_kind="openai-completions",
        database_path=args.db,
        session={"registry": registry},
    )
    started = args.task is None
    ready = False
    try:
        async for event in runtime.serve():
            if event.type != "session":
                continue
            if not ready:
                ready = True
                _print({"type": "ready", "ms": int(time.time() * 1000)})
            if not started:
                started = True
                command = {"type": "task", "request_id": "t1", "name": args.task, "input": json.loads(args.input)}
                _print({"type": "receipt", "receipt": await runtime.control(command)})
                continue
            if not event.snapshot["tasks"]:
                _print({"type": "idle", "snapshot": event.snapshot})
                runtime.stop_serving()
    finally:
        await runtime.close()


def _die_if_siblings_settled(event: dict[str, Any], runtime: Any) -> None:
    parent_id = event.get("parent_id")
    if not parent_id or event.get("status") not in TERMINAL:
        return
    tasks = runtime.log.view.tasks
    siblings = tasks[parent_id].payload.get("children") or []
    if all(tasks[s].payload.get("status") in TERMINAL for s in siblings):
        os.kill(os.getpid(), signal.SIGKILL)


def _print(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    die_with_parent()
    asyncio.run(main())
