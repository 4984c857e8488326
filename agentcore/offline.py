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

import os
from pathlib import Path
from typing import Any

from agentcore.engine.endings import end_operation_aborted
from agentcore.errors import InputValidationError
from agentcore.extensions.tasks.offline import OfflineTasks
from agentcore.harness.projection import StoreView
from agentcore.harness.sqlite_store import SqliteStorageFactory


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


async def cancel_agent_conversation(
    *,
    agent_store_dir: str | os.PathLike[str],
    conversation_id: str,
    registry: Any = None,
) -> dict[str, list[str]]:
    """Cancel every open operation and unfinished task of the store; return what was ended.

    ``registry`` is the project's ``AgentRegistry`` (anything with ``get(name)`` returning a
    task definition): a task it defines gets its ``abort`` cleanup (children first); any other
    unfinished task ends ``orphaned``.
    """
    path = store_path_for(agent_store_dir, conversation_id)
    storage, release = SqliteStorageFactory(str(path)).open()
    try:
        state = storage.load()
        conversations = sorted({key.split(":", 1)[1] for key in state.registers if key.startswith("op:")})
        view = StoreView.open(storage, state, conversations)
        cancelled: list[str] = []
        for conversation in conversations:
            log = view.log(conversation)
            op = log.op
            if op is None:
                continue
            end_operation_aborted(log, op, "cancelled offline")
            cancelled.append(op["request_id"])
        tasks = OfflineTasks(view, registry)
        await tasks.cancel_all()
        return {"cancelled_requests": cancelled, "aborted_tasks": tasks.aborted, "orphaned_tasks": tasks.orphaned}
    finally:
        storage.close()
        release()
