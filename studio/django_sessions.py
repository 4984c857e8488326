"""Studio's session engine (``SESSION_ENGINE``): Django's database sessions, read with one
plain statement.

Every page, htmx request and WebSocket reads its Django session first (the login wall, the
socket's ``studio.authentication``), and the ORM's filtered ``get`` that does it cost ~0.5 ms to
build on this project's machines against ~0.05 ms to run (``studio.sql`` says why). This store
reads the same row — unexpired, by key — through ``studio.sql``, the one column ``load`` decodes;
writing, expiry, ``exists`` and the signed encoding are Django's own, unchanged (same class
name, so existing sessions decode with the same salt).
"""

from __future__ import annotations

from typing import Any

from django.contrib.sessions.backends import db
from django.contrib.sessions.models import Session
from django.utils import timezone

from studio import sql


class SessionStore(db.SessionStore):
    """``django.contrib.sessions.backends.db.SessionStore`` with a plain-statement read."""

    def _get_session_from_db(self) -> Any:
        """The unexpired row of this key with its data (None, and no key, when there is none),
        as the database backend returns it to ``load``."""
        data = session_data(self.session_key)
        if data is None:
            self._session_key = None
            return None
        return self.model(session_key=self.session_key, session_data=data)


def session_data(key: str | None) -> str | None:
    """The encoded data of the unexpired session ``key``, or None (one plain statement)."""
    if not key:
        return None
    data, ends, name = (sql.column(Session, n) for n in ("session_data", "expire_date", "session_key"))
    statement = f"SELECT {data} FROM {sql.table(Session)} WHERE {name} = %s AND {ends} > %s"
    params = [sql.param(Session, "session_key", key), sql.param(Session, "expire_date", timezone.now())]
    rows = sql.fetch(statement, params, [(Session, "session_data")])
    return str(rows[0][0]) if rows else None
