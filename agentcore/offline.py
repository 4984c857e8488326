"""Offline cancellation of a conversation whose runtime is not running (SPEC D7).

Used by hosts (Studio's admin, scripts) when a session must be stopped for good while no
worker owns it — e.g. after a crash loop. It takes the store's owner lock like any runtime
(so it fails with ``store_locked`` while a worker still holds the session: stop and wait for
the worker first), ends every open operation as ``aborted`` exactly as a live cancel would
(unsettled tool calls get a "cancelled" result, the receipt records the outcome) and ends
unfinished tasks: a task whose definition the given registry provides gets its ``abort``
cleanup first; without a definition it can only end as ``orphaned``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from pathlib import Path
from typing import Any

from agentcore.engine.turn import TurnConfig, TurnEngine
from agentcore.errors import InputValidationError
from agentcore.harness.projection import ConversationLog
from agentcore.harness.sqlite_store import SqliteStorageFactory
from agentcore.harness.storage import Commit, TaskRow

TERMINAL_TASK_STATES = frozenset({"completed", "failed", "aborted", "orphaned", "cancelled"})


def store_path_for(agent_store_dir: str | os.PathLike[str], conversation_id: str) -> Path:
    """A store file given directly, or ``<dir>/<conversation_id>.sqlite`` (Studio's layout)."""
    base = Path(agent_store_dir)
    if base.is_file():
        return base
    if not conversation_id or "/" in conversation_id or conversation_id.startswith("."):
        raise InputValidationError(f"invalid conversation_id {conversation_id!r}", field="conversation_id")
    path = base / f"{conversation_id}.sqlite"
    if not path.is_file():
        raise InputValidationError(f"no agent store at {str(path)!r}", field="conversation_id")
    return path


def _no_config(op: dict[str, Any]) -> TurnConfig:
    raise RuntimeError("offline cancellation never configures a model")


async def cancel_agent_conversation(
    *,
    agent_store_dir: str | os.PathLike[str],
    conversation_id: str,
    registry: Any = None,
) -> dict[str, list[str]]:
    """Cancel every open operation and unfinished task of the store; return what was ended."""
    path = store_path_for(agent_store_dir, conversation_id)
    storage, release = SqliteStorageFactory(str(path)).open()
    try:
        state = storage.load()
        conversations = sorted({key.split(":", 1)[1] for key in state.registers if key.startswith("op:")})
        cancelled: list[str] = []
        for conversation in conversations:
            log = ConversationLog.load(storage, storage.load(), conversation)
            op = log.op
            if op is None:
                continue
            engine = TurnEngine(log, op["request_id"], _no_config, None, asyncio.Event())
            engine.finish_aborted(op, "cancelled offline")
            cancelled.append(op["request_id"])
        orphaned: list[str] = []
        aborted_tasks: list[str] = []
        ended: list[TaskRow] = []
        for task in state.tasks.values():
            if task.payload.get("status") in TERMINAL_TASK_STATES:
                continue
            definition = _definition(registry, task.payload.get("name"))
            if definition is not None and callable(getattr(definition, "abort", None)):
                result = definition.abort(task.payload)
                if inspect.isawaitable(result):
                    await result
                status = "aborted"
                aborted_tasks.append(task.task_id)
            else:
                status = "orphaned"
                orphaned.append(task.task_id)
            ended.append(TaskRow(task.task_id, task.conversation_id, dict(task.payload, status=status)))
        if ended:
            storage.commit(Commit(tasks=ended))
        return {"cancelled_requests": cancelled, "aborted_tasks": aborted_tasks, "orphaned_tasks": orphaned}
    finally:
        storage.close()
        release()


def _definition(registry: Any, name: Any) -> Any:
    if registry is None or not isinstance(name, str):
        return None
    lookup = getattr(registry, "get", None)
    return lookup(name) if callable(lookup) else None
