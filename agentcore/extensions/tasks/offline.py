"""Cancelling durable tasks with no session running (SPEC D7).

Used by ``cancel_agent_conversation`` on a closed store: every unfinished task is ended the way
a live ``cancel`` would end it — owned children first, then the task's own ``abort`` cleanup
from the project's registry. A task whose definition the registry does not provide can only
end as ``orphaned``: project code that is not there cannot run. An ``abort`` here may only
commit a terminal outcome (no children, no sleeping): there is no session to run more work.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentcore.errors import InputValidationError
from agentcore.extensions.tasks.history import TERMINAL, with_history
from agentcore.extensions.tasks.phase_state import read_terminal
from agentcore.extensions.tasks.runner import PhaseContext, TaskChild, TaskHandle
from agentcore.harness.projection import StoreView
from agentcore.harness.storage import Commit, TaskRow


class _OfflineRuntime:
    def __init__(self, tasks: OfflineTasks, task_id: str) -> None:
        self._tasks = tasks
        self.task_id = task_id

    def now_ms(self) -> int:
        return self._tasks.view.clock()

    async def commit(self, fn: Any, context: PhaseContext) -> None:
        """Only a terminal outcome, checked like a live one (``phase_state``)."""
        state = fn(_NoChildren())
        if not isinstance(state, dict) or state.get("status") != "terminal":
            raise InputValidationError("offline, abort may only commit a terminal outcome", field="state")
        outcome = read_terminal(state)
        self._tasks.end(self.task_id, outcome.status, result=outcome.result, error=outcome.error)
        context.committed = True

    async def sleep(self, wake_at_ms: int, context: PhaseContext) -> None:
        raise InputValidationError("offline, abort cannot sleep", field="sleep")


class _NoChildren:
    def create_task(self, name: str, input: Any = None, **_: Any) -> str:
        raise InputValidationError("offline, abort cannot create tasks", field="create_task")


class OfflineTasks:
    """Ends the unfinished tasks of one store."""

    def __init__(self, view: StoreView, registry: Any) -> None:
        self.view = view
        self.registry = registry
        self.aborted: list[str] = []
        self.orphaned: list[str] = []

    async def cancel_all(self) -> None:
        for row in list(self.view.tasks.values()):
            if self._open(row) and not row.payload.get("parent_id"):
                await self._cancel(row.task_id)
        for row in list(self.view.tasks.values()):  # rows of an older shape, children of ended parents
            if self._open(row):
                await self._cancel(row.task_id)

    def end(self, task_id: str, status: str, *, result: Any = None, error: str | None = None) -> None:
        row = self.view.tasks[task_id]
        at = self.view.clock()
        after = {
            **row.payload,
            "status": status,
            "outcome": {"status": status, "result": result},
            "error": error,
            "stopping": False,
            "wake_at": None,
            "updated_ms": at,
        }
        payload = with_history(row.payload, after, at)
        self.view.commit(Commit(tasks=[TaskRow(task_id, row.conversation_id, payload)]))

    @staticmethod
    def _open(row: TaskRow) -> bool:
        return row.payload.get("kind", "task") in ("task", "compaction") and row.payload.get("status") not in TERMINAL

    async def _cancel(self, task_id: str) -> None:
        row = self.view.tasks[task_id]
        for child_id in row.payload.get("children") or []:
            child = self.view.tasks.get(child_id)
            if child is not None and self._open(child):
                await self._cancel(child_id)
        row = self.view.tasks[task_id]
        if row.payload.get("kind") == "compaction":
            self.end(task_id, "aborted", error="cancelled offline")
            self.aborted.append(task_id)
            return
        definition = _definition(self.registry, row.payload.get("name"))
        if definition is None:
            self.end(task_id, "orphaned", error="cancelled offline; its definition was not available")
            self.orphaned.append(task_id)
            return
        abort = getattr(definition, "abort", None)
        if callable(abort):
            context = PhaseContext(task_id, "abort", aborting=True)
            result = abort(self._handle(row), _OfflineRuntime(self, task_id), context)
            if asyncio.iscoroutine(result):
                await result
        if self._open(self.view.tasks[task_id]):
            self.end(task_id, "aborted", error="cancelled offline")
        self.aborted.append(task_id)

    def _handle(self, row: TaskRow) -> TaskHandle:
        payload = row.payload
        children = tuple(
            TaskChild(child_id, c.payload.get("name", ""), c.payload.get("status", ""), c.payload.get("outcome"))
            for child_id in payload.get("children") or []
            if (c := self.view.tasks.get(child_id)) is not None
        )
        return TaskHandle(
            id=row.task_id,
            name=str(payload.get("name", "")),
            version=int(payload.get("version", 0) or 0),
            input=payload.get("input"),
            phase=payload.get("phase"),
            checkpoint=payload.get("checkpoint"),
            parent_id=payload.get("parent_id"),
            children=children,
            wake_at=payload.get("wake_at"),
        )


def _definition(registry: Any, name: Any) -> Any:
    if registry is None or not isinstance(name, str):
        return None
    lookup = getattr(registry, "get", None)
    return lookup(name) if callable(lookup) else None
