"""Offline cancellation of a conversation whose runtime is not running (SPEC D7).

Used by hosts (Studio's admin, scripts) when a session must be stopped for good while no
worker owns it — e.g. after a crash loop. The store is a SQLite file (``agent_store_dir``: a
file, or a directory holding ``<conversation_id>.sqlite``) or a PostgreSQL store
(``database_url``: the store its ``?store=`` names, else the store named ``conversation_id``,
which is Studio's layout); a store that does not exist is an error, never created. It takes
the store's owner lock like any runtime (so it fails with ``store_locked`` while a worker still
holds the session: stop and wait for the worker first), ends every open operation as
``aborted`` exactly as a live cancel would (unsettled tool calls get a "cancelled" result, the
receipt records the outcome) and ends unfinished tasks: a task whose definition the given
registry provides gets its ``abort`` cleanup first; without a definition it can only end as
``orphaned``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentcore.engine.endings import end_operation_aborted
from agentcore.errors import InputValidationError
from agentcore.extensions.tasks.offline import OfflineTasks
from agentcore.harness.projection import StoreView
from agentcore.harness.sqlite_store import SqliteStorageFactory
from agentcore.harness.storage import AgentStorage


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
    agent_store_dir: str | os.PathLike[str] | None = None,
    conversation_id: str,
    registry: Any = None,
    database_url: str | None = None,
) -> dict[str, list[str]]:
    """Cancel every open operation and unfinished task of the store; return what was ended.

    ``registry`` is the project's ``AgentRegistry`` (anything with ``get(name)`` returning a
    task definition): a task it defines gets its ``abort`` cleanup (children first); any other
    unfinished task ends ``orphaned``.
    """
    storage, release = _open_existing(agent_store_dir, conversation_id, database_url)
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


def _open_existing(
    agent_store_dir: str | os.PathLike[str] | None, conversation_id: str, database_url: str | None
) -> tuple[AgentStorage, Callable[[], None]]:
    if (agent_store_dir is None) == (database_url is None):
        raise InputValidationError("pass exactly one of agent_store_dir and database_url", field="database_url")
    if database_url is not None:
        from agentcore.harness.postgres_target import require_driver, target_from_url

        require_driver("database_url")
        from agentcore.harness.postgres_store import PostgresStorage

        target = target_from_url(database_url, option="database_url", default_store=conversation_id)
        storage = PostgresStorage.open(target, create=False)
        return storage, storage.close
    assert agent_store_dir is not None
    return SqliteStorageFactory(str(store_path_for(agent_store_dir, conversation_id))).open()
