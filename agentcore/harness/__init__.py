"""The harness: durable storage behind the runtime (SPEC D1, D4, D6, D8, D9).

Re-exports only. ``storage`` is the contract every backend meets; ``sqlite_store`` and
``memory_store`` are the built-in backends; ``store_check`` is what makes a file a valid store;
``backup`` copies stores; ``lease`` is the owner lock; ``storage_option`` turns
``database_path=`` / ``database_url=`` / ``storage=`` into an open store.

The PostgreSQL backend (``postgres_store``, with its layout in ``postgres_schema``, option
parsing and connections in ``postgres_target``, and SQLite export / import in
``postgres_backup``) is not re-exported here: it needs the optional psycopg driver and is
loaded only when a ``database_url`` or ``agentcore.postgres_storage`` is used.
"""

from agentcore.harness.backup import export_agent_database, import_agent_database
from agentcore.harness.lease import OwnerLease, StoreFileLock, lock_path_for
from agentcore.harness.memory_store import MemoryStorage, MemoryStorageFactory
from agentcore.harness.sqlite_schema import SCHEMA_VERSION
from agentcore.harness.sqlite_store import SqliteStorage, SqliteStorageFactory
from agentcore.harness.storage import (
    AgentStorage,
    Commit,
    Entry,
    Receipt,
    Register,
    RegisterWrite,
    StorageFactory,
    StoreState,
    TaskRow,
    UsageRow,
)
from agentcore.harness.storage_option import open_from_factory, open_storage, resolve_storage_factory

__all__ = [
    "SCHEMA_VERSION",
    "AgentStorage",
    "Commit",
    "Entry",
    "MemoryStorage",
    "MemoryStorageFactory",
    "OwnerLease",
    "Receipt",
    "Register",
    "RegisterWrite",
    "SqliteStorage",
    "SqliteStorageFactory",
    "StorageFactory",
    "StoreFileLock",
    "StoreState",
    "TaskRow",
    "UsageRow",
    "export_agent_database",
    "import_agent_database",
    "lock_path_for",
    "open_from_factory",
    "open_storage",
    "resolve_storage_factory",
]
