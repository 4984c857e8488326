"""From the ``database_path=`` / ``database_url=`` / ``storage=`` options to an open store (SPEC D8).

Rules: ``database_path`` → ``SqliteStorageFactory`` (deep directories are created);
``database_url`` → ``PostgresStorageFactory`` for the store the URL names
(``postgresql://user@host/db?store=name``; psycopg is loaded only then); ``storage`` → the
user's factory ``{label, open() -> (storage, release)}``; none → a new ``MemoryStorageFactory``;
two of them → ``InputValidationError`` naming both. Only the options' shape is checked here:
nothing connects or opens. A runtime keeps the resolved factory for its whole life, so memory
mode survives its own close/reopen (D9).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from agentcore.errors import InputValidationError
from agentcore.harness.memory_store import MemoryStorageFactory
from agentcore.harness.sqlite_store import SqliteStorageFactory
from agentcore.harness.storage import AgentStorage, StorageFactory


def resolve_storage_factory(
    *,
    database_path: str | os.PathLike[str] | None = None,
    storage: StorageFactory | None = None,
    database_url: str | None = None,
) -> StorageFactory:
    """The factory the options describe; validates their shape, opens nothing."""
    given = [name for name, value in _options(database_path, database_url, storage) if value is not None]
    if len(given) > 1:
        raise InputValidationError(
            f"{' and '.join(given)} cannot be used together: pass one of them", field=given[-1]
        )
    if database_url is not None:
        from agentcore.harness.postgres_target import require_driver

        require_driver("database_url")
        from agentcore.harness.postgres_store import PostgresStorageFactory

        return PostgresStorageFactory.from_url(database_url, option="database_url")
    if storage is not None:
        if not isinstance(getattr(storage, "label", None), str) or not callable(getattr(storage, "open", None)):
            raise InputValidationError(
                "storage must be a factory with a string 'label' and an 'open()' method returning (storage, release)",
                field="storage",
            )
        return storage
    if database_path is None:
        return MemoryStorageFactory()
    if not isinstance(database_path, str | os.PathLike):
        raise InputValidationError("database_path must be a file path", field="database_path")
    text = os.fspath(database_path)
    if not isinstance(text, str) or not text.strip() or text == ":memory:" or text.startswith("file:"):
        raise InputValidationError(
            f"database_path must be a file path (got {text!r}); omit it for an in-memory store", field="database_path"
        )
    if os.path.isdir(text):
        raise InputValidationError(f"database_path {text!r} is a directory, not a file", field="database_path")
    return SqliteStorageFactory(text)


def open_storage(
    *,
    database_path: str | os.PathLike[str] | None = None,
    storage: StorageFactory | None = None,
    database_url: str | None = None,
) -> tuple[AgentStorage, Callable[[], None]]:
    """Resolve the options and take the exclusive owner; return ``(storage, release)``.

    ``release`` is to be called after ``storage.close()``; it is idempotent.
    """
    return open_from_factory(
        resolve_storage_factory(database_path=database_path, storage=storage, database_url=database_url)
    )


def _options(database_path: object, database_url: object, storage: object) -> list[tuple[str, object]]:
    return [("database_path", database_path), ("database_url", database_url), ("storage", storage)]


def open_from_factory(factory: StorageFactory) -> tuple[AgentStorage, Callable[[], None]]:
    """``factory.open()`` with the result checked, so a faulty custom backend fails clearly."""
    result: Any = factory.open()
    if not (isinstance(result, tuple) and len(result) == 2):
        raise InputValidationError(
            f"storage {factory.label!r}: open() must return a (storage, release) tuple", field="storage"
        )
    opened, release = result
    if release is not None and not callable(release):
        raise InputValidationError(f"storage {factory.label!r}: release must be callable or None", field="storage")
    missing = [name for name in ("load", "commit", "close") if not callable(getattr(opened, name, None))]
    if missing:
        if release is not None:
            release()
        raise InputValidationError(
            f"storage {factory.label!r}: the opened storage lacks {', '.join(missing)}", field="storage"
        )
    return opened, _once(release)


def _once(release: Callable[[], object] | None) -> Callable[[], None]:
    lock = threading.Lock()
    done = False

    def run() -> None:
        nonlocal done
        with lock:
            if done:
                return
            done = True
        if release is not None:
            release()

    return run
