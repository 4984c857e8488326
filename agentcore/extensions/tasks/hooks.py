"""Extension hooks (SPEC X1): project functions that observe the session's events.

A hook sees events of its type (an ``AgentEvent`` type such as ``tool`` or ``end``, ``task`` for
task transitions, ``*`` for all), as plain JSON, with the context they belong to. It cannot
change or stop them, and a hook that fails never fails the run: the failure is logged and
counted in ``records["registry"]["hook_errors"]``. Async hooks run as session activities, so a
programmatic ``run()`` still waits for them. Hooks come from the registry snapshot current when
the event happens.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from agentcore.events import AgentEvent
from agentcore.extensions.tasks.definitions import AgentHook
from agentcore.extensions.tasks.registry import AgentRegistry, RegistrySnapshot
from agentcore.harness.storage import TaskRow
from agentcore.session.contexts import Context

Spawn = Callable[[str, Callable[[], Awaitable[None]]], object]

log = logging.getLogger("agentcore.tasks.hooks")


class HookRunner:
    def __init__(self, spawn: Spawn, registry: AgentRegistry) -> None:
        self._spawn = spawn  # async hooks run as session activities
        self.registry = registry
        self.errors = 0
        # Hooks by event type, for the snapshot they were read from: every event of the session
        # asks, and a snapshot never changes once published.
        self._indexed: RegistrySnapshot | None = None
        self._by_type: dict[str, list[AgentHook]] = {}

    def event(self, event: AgentEvent, context: Context) -> None:
        hooks = self._matching(event.type)
        if hooks:
            self._call(hooks, event.model_dump(mode="json"), context)

    def task_changed(self, row: TaskRow, context: Context) -> None:
        hooks = self._matching("task")
        if hooks:
            self._call(hooks, {"type": "task", "task_id": row.task_id, **row.payload}, context)

    def _matching(self, event_type: str) -> list[AgentHook]:
        snapshot = self.registry.snapshot
        if snapshot is not self._indexed:
            self._indexed, self._by_type = snapshot, {}
        hooks = self._by_type.get(event_type)
        if hooks is None:
            hooks = self._by_type[event_type] = [h for h in snapshot.hooks if h.event in (event_type, "*")]
        return hooks

    def _call(self, hooks: list[AgentHook], event: dict[str, Any], context: Context) -> None:
        for hook in hooks:
            try:
                result = hook.fn(event, context)
            except Exception:
                self.errors += 1
                log.exception("hook for %r failed", hook.event)
                continue
            if asyncio.iscoroutine(result):
                self._spawn(f"hook:{uuid.uuid4().hex}", functools.partial(self._await, result))

    async def _await(self, awaitable: Any) -> None:
        try:
            await awaitable
        except Exception:
            self.errors += 1
            log.exception("an async hook failed")
