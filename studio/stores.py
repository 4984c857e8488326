"""Where a session's agent store lives, and what Studio does with a store directly.

A main session's store is either a SQLite file (the default, ``<data dir>/sessions/<id>.sqlite``)
or — with ``STUDIO_DATABASE_URL`` — the PostgreSQL store named after the main session's id in
that database (agentcore's ``?store=``). Forks and subagents are conversations of their main
session's store. The backend is recorded per session (``StudioSession.store_backend``) when it
is created, so a Studio switched to PostgreSQL still opens older SQLite sessions on the machine
that has their files.

Everything that used to assume a file path goes through ``StoreLocation``: the runtime's
storage option, existence, size and schema version for the admin and the Records tab,
export, import and offline cancel. The connection URL may hold a password: it is never part of
``label`` or ``repr``.
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from studio.database_url import label as url_label
from studio.models import StoreBackend, StudioSession

#: agentcore's default schema for PostgreSQL stores (Studio keeps the default).
STORE_SCHEMA = "agentcore"


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """One main session's store: ``backend`` ``sqlite`` (``path``) or ``postgresql`` (``name``)."""

    backend: str
    path: str = ""
    name: str = ""
    database_url: str = field(default="", repr=False)

    @property
    def is_postgres(self) -> bool:
        return self.backend == str(StoreBackend.POSTGRESQL)

    @property
    def label(self) -> str:
        """What pages show: the file, or the store's URL without a password."""
        if not self.is_postgres:
            return self.path
        return f"{url_label(self.database_url)}?{urllib.parse.urlencode({'store': self.name})}"

    @property
    def store_url(self) -> str:
        """agentcore's ``database_url`` for this store (holds the password: never show it)."""
        separator = "&" if urllib.parse.urlsplit(self.database_url).query else "?"
        return f"{self.database_url}{separator}{urllib.parse.urlencode({'store': self.name})}"

    def runtime_options(self) -> dict[str, Any]:
        """``create_agent`` options that open this store."""
        if not self.is_postgres:
            return {"database_path": self.path}
        from agentcore import postgres_storage

        return {"storage": postgres_storage(self.database_url, self.name)}

    # -- facts (admin, Records tab) -----------------------------------------------------------

    def exists(self) -> bool:
        if not self.is_postgres:
            return Path(self.path).exists()
        return self._pg_row() is not None

    def size(self) -> int | None:
        """Bytes on disk (SQLite file + WAL) or payload bytes (PostgreSQL); None when absent."""
        if not self.is_postgres:
            paths = (self.path, self.path + "-wal")
            try:
                return sum(os.path.getsize(p) for p in paths if os.path.exists(p)) or None
            except OSError:
                return None
        row = self._pg_row()
        return int(row[1]) if row is not None else None

    def schema_version(self) -> int | None:
        if not self.is_postgres:
            from studio.ledger import read_schema_version

            return read_schema_version(self.path)
        if self._pg_row() is None:
            return None
        with store_cursor(self) as cursor:
            cursor.execute(f"SELECT schema_version FROM {STORE_SCHEMA}.meta WHERE id = 1")
            row = cursor.fetchone()
        return int(row[0]) if row else None

    def usage_ledger(self, after: int = 0) -> list[Any]:
        """The store's usage rows after position ``after`` (see ``studio.ledger``)."""
        from studio.ledger import read_postgres_usage_ledger, read_usage_ledger

        if self.is_postgres:
            with store_cursor(self) as cursor:
                return read_postgres_usage_ledger(cursor, STORE_SCHEMA, self.name, after)
        return read_usage_ledger(self.path, after)

    # -- administration ----------------------------------------------------------------------

    def export(self, destination: str | os.PathLike[str]) -> Path:
        """A consistent SQLite copy at ``destination`` (new file); agentcore takes the owner lease."""
        from agentcore import export_agent_database

        if self.is_postgres:
            return export_agent_database(database_url=self.store_url, destination=destination)
        return export_agent_database(database_path=self.path, destination=destination)

    def import_from(self, source: str | os.PathLike[str]) -> None:
        """Install an exported SQLite store here (never over an existing one)."""
        from agentcore import import_agent_database

        if self.is_postgres:
            import_agent_database(source=source, database_url=self.store_url)
        else:
            import_agent_database(source=source, database_path=self.path)

    def delete(self) -> None:
        """Remove the store for good (a deleted session): the SQLite file with its write-ahead
        log and shared memory, or the PostgreSQL store's rows. The caller made sure no runtime
        holds it (``SessionHost.release``)."""
        if not self.is_postgres:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path + suffix)
            return
        if self._pg_row() is None:
            return
        with store_cursor(self) as cursor:
            cursor.execute("BEGIN")
            cursor.execute(f"SELECT store_id FROM {STORE_SCHEMA}.stores WHERE name = %s FOR UPDATE", [self.name])
            row = cursor.fetchone()
            if row is not None:
                for table in ("entries", "registers", "usage", "receipts", "tasks", "stores"):
                    cursor.execute(f"DELETE FROM {STORE_SCHEMA}.{table} WHERE store_id = %s", [row[0]])
            cursor.execute("COMMIT")

    def cancel_options(self, conversation_id: str, sessions_dir: Path) -> dict[str, Any]:
        """``cancel_agent_conversation`` options naming this store."""
        if self.is_postgres:
            return {"database_url": self.store_url, "conversation_id": conversation_id}
        store = Path(self.path)
        # Studio's layout is <sessions dir>/<session id>.sqlite; an unusual path is passed as a file.
        in_layout = store == sessions_dir / f"{conversation_id}.sqlite"
        return {"agent_store_dir": sessions_dir if in_layout else store, "conversation_id": conversation_id}

    def _pg_row(self) -> tuple[Any, ...] | None:
        """``(last_seq, payload bytes)`` of the store, None when it does not exist (read-only)."""
        with store_cursor(self) as cursor:
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [f"{STORE_SCHEMA}.stores"])
            if not cursor.fetchone()[0]:
                return None
            cursor.execute(
                f"""SELECT s.last_seq,
                      coalesce((SELECT sum(octet_length(payload)) FROM {STORE_SCHEMA}.entries e
                                WHERE e.store_id = s.store_id), 0)
                    + coalesce((SELECT sum(octet_length(value)) FROM {STORE_SCHEMA}.registers r
                                WHERE r.store_id = s.store_id), 0)
                    + coalesce((SELECT sum(octet_length(payload)) FROM {STORE_SCHEMA}.usage u
                                WHERE u.store_id = s.store_id), 0)
                    FROM {STORE_SCHEMA}.stores s WHERE s.name = %s""",
                [self.name],
            )
            row = cursor.fetchone()
        return tuple(row) if row is not None else None


@contextlib.contextmanager
def store_cursor(location: StoreLocation) -> Iterator[Any]:
    """A cursor on the database that holds ``location``'s store, for reads only: Django's own
    connection when Studio's tables live there too (``STUDIO_DATABASE_URL``), else a short
    connection of its own (a test host pointing stores at another server)."""
    from django.db import connection

    if connection.vendor == "postgresql" and location.database_url == getattr(settings, "STUDIO_DATABASE_URL", ""):
        with connection.cursor() as cursor:
            yield cursor
        return
    import psycopg

    with psycopg.connect(location.database_url, autocommit=True) as conn, conn.cursor() as cursor:
        yield cursor


def sessions_dir() -> Path:
    """Where the SQLite stores of new sessions go (``<data dir>/sessions``, created on use)."""
    path = Path(settings.STUDIO_DATA_DIR) / "sessions"
    path.mkdir(parents=True, exist_ok=True)
    return path


def new_store_location(session_id: str) -> StoreLocation:
    """Where a new main session's store goes: PostgreSQL when configured, else a SQLite file."""
    url = getattr(settings, "STUDIO_DATABASE_URL", "")
    if url:
        return StoreLocation(str(StoreBackend.POSTGRESQL), name=session_id, database_url=url)
    return StoreLocation(str(StoreBackend.SQLITE), path=str(sessions_dir() / f"{session_id}.sqlite"))


def location_of(session: StudioSession) -> StoreLocation:
    """The store behind ``session`` (its main session's)."""
    root = session.root or session
    if root.store_backend == str(StoreBackend.POSTGRESQL):
        url = getattr(settings, "STUDIO_DATABASE_URL", "")
        return StoreLocation(str(StoreBackend.POSTGRESQL), name=str(root.pk), database_url=url)
    return StoreLocation(str(StoreBackend.SQLITE), path=root.store_path)


class StoreConfigError(Exception):
    """A PostgreSQL session in a Studio that has no ``STUDIO_DATABASE_URL`` (it cannot be reached)."""


def require_reachable(location: StoreLocation) -> None:
    if location.is_postgres and not location.database_url:
        raise StoreConfigError(
            "This session's store is in PostgreSQL, but STUDIO_DATABASE_URL is not set in this Studio process."
        )
