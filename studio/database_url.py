"""``STUDIO_DATABASE_URL``: one PostgreSQL URL for Studio's own tables and every session's store.

Settings import this module before Django is set up, so it uses nothing but the standard
library (psycopg is checked for, not imported). The URL is libpq's
(``postgresql://user:password@host:port/dbname?sslmode=require``): Django gets the same server,
database, user and password (and every other query parameter as a connection option), and
agentcore opens each session's store in that database as ``?store=<main session id>`` (see
``studio.stores``). One database for both is what makes one setting enough: the lease table
(``studio.host.leases``) and the stores' advisory locks live side by side.
"""

from __future__ import annotations

import importlib.util
import urllib.parse
from typing import Any

SCHEMES = ("postgresql", "postgres")
#: Query parameters that name agentcore things, not libpq ones: never given to Django.
_OURS = ("store", "schema")


class DatabaseUrlError(ValueError):
    """A ``STUDIO_DATABASE_URL`` Studio cannot use; the message names the setting."""


def django_database(url: str) -> dict[str, Any]:
    """The ``DATABASES["default"]`` entry for ``url`` (a ``postgresql://`` URL)."""
    parts = _split(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    names = [key for key, _ in query if key in _OURS]
    if names:
        raise DatabaseUrlError(
            f"STUDIO_DATABASE_URL must not carry ?{names[0]}=: Studio names each session's store itself"
        )
    if importlib.util.find_spec("psycopg") is None:
        raise DatabaseUrlError(
            "STUDIO_DATABASE_URL needs the psycopg driver: pip install 'agentcore-studio[studio,postgres]'"
        )
    name = urllib.parse.unquote(parts.path.lstrip("/"))
    if not name:
        raise DatabaseUrlError("STUDIO_DATABASE_URL names no database (postgresql://user@host:5432/DBNAME)")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": urllib.parse.unquote(parts.username or ""),
        "PASSWORD": urllib.parse.unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "OPTIONS": dict(query),
        # Workers and web processes run outside a request cycle most of the time: keep their
        # connections (a new one per ORM call would cost a TCP and auth round trip each) and
        # check them before reuse, so a server restart costs one failed check, not an error.
        "CONN_MAX_AGE": 300,
        "CONN_HEALTH_CHECKS": True,
        "TEST": {"NAME": None},
    }


def label(url: str) -> str:
    """The URL without its password (for pages, logs and records)."""
    parts = _split(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    if parts.username:
        netloc = f"{urllib.parse.unquote(parts.username)}@{netloc}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _split(url: str) -> urllib.parse.SplitResult:
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # raises on a port that is not a number
    except ValueError as exc:
        raise DatabaseUrlError(f"STUDIO_DATABASE_URL is not a valid URL ({exc})") from None
    if parts.scheme not in SCHEMES:
        raise DatabaseUrlError("STUDIO_DATABASE_URL must be a postgresql:// URL (postgresql://user@host:5432/dbname)")
    if parts.fragment:
        raise DatabaseUrlError("STUDIO_DATABASE_URL has a '#' fragment")
    return parts
