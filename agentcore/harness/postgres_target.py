"""Which PostgreSQL store an option names, checked without any I/O, and how to connect to it.

A store is named by a libpq connection string (a ``postgresql://`` URL or ``key=value`` pairs)
plus a store name and a schema. In a URL the last two may ride along as the query parameters
``store`` and ``schema`` (libpq does not know them; they are taken out before libpq sees the
string), so one ``database_url`` names one store the way one ``database_path`` names one file:
``postgresql://agent@db.internal/agents?store=session-42``. Without ``store`` the store is
``default``; without ``schema`` it is ``agentcore``.

Everything here is validated before anything connects: a malformed URL, an unknown scheme, a
store name with NUL or control characters, a lone surrogate, or more than 255 characters is an
``InputValidationError`` naming the option. ``label`` never contains the password (it shows up
in snapshots and logs).

Connections are autocommit (every commit is one statement, so one transaction), named
``agentcore pid <pid> on <host>`` in ``pg_stat_activity`` (which is how a refused opener names
the holder), and tuned so a vanished peer is noticed within ``lease_timeout`` seconds on both
sides: server-side TCP keepalives and ``tcp_user_timeout`` end the session of an owner whose
host disappeared (freeing its lease), and the same settings on the client make a partitioned
owner's commit fail instead of hanging.
"""

from __future__ import annotations

import os
import socket
import urllib.parse
from dataclasses import dataclass
from typing import Any

from agentcore.errors import STORE_UNAVAILABLE, InputValidationError, StoreError

DEFAULT_SCHEMA = "agentcore"
DEFAULT_STORE = "default"
MAX_STORE_NAME = 255
_SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True, slots=True)
class PostgresTarget:
    """One store on one server; ``option`` is the name errors point at."""

    conninfo: str  # what libpq gets (may hold a password: never print it)
    store: str
    schema: str
    option: str
    label: str
    connect_timeout: float = 10.0
    lease_timeout: float = 15.0
    lock_timeout: float = 0.0


def target_from_url(url: object, *, option: str = "database_url", default_store: str | None = None) -> PostgresTarget:
    """The store a ``database_url`` names (see the module docstring); ``default_store`` (checked
    as a store name) replaces ``default`` when the URL names none."""
    if not isinstance(url, str) or not url.startswith(_SCHEMES):
        raise InputValidationError(
            f"{option} must be a postgresql:// URL (e.g. postgresql://user@host/dbname?store=name)", field=option
        )
    conninfo, store, schema = _split_url(url, option)
    if store is None and default_store is not None:
        store = check_store_name(default_store, field="conversation_id")
    return make_target(conninfo, store=store, schema=schema, option=option)


def make_target(
    dsn: object,
    *,
    store: object = None,
    schema: object = None,
    option: str = "dsn",
    connect_timeout: float = 10.0,
    lease_timeout: float = 15.0,
    lock_timeout: float = 0.0,
) -> PostgresTarget:
    """Validate a connection string plus store and schema names (``store``/``schema`` may also
    come from the URL's query; naming them twice, differently, is an error)."""
    if not isinstance(dsn, str) or not dsn.strip():
        raise InputValidationError(f"{option} must be a PostgreSQL connection string or URL", field=option)
    conninfo = dsn
    if dsn.startswith(_SCHEMES):
        conninfo, url_store, url_schema = _split_url(dsn, option)
        store = _one_of(store, url_store, "store", option)
        schema = _one_of(schema, url_schema, "schema", option)
    store_field = "store" if option == "dsn" else option
    name = check_store_name(DEFAULT_STORE if store is None else store, field=store_field)
    schema_name = check_schema_name(DEFAULT_SCHEMA if schema is None else schema, field="schema")
    for what, value in (("connect_timeout", connect_timeout), ("lease_timeout", lease_timeout)):
        if not isinstance(value, int | float) or isinstance(value, bool) or not 1 <= value <= 3600:
            raise InputValidationError(f"{what} must be a number of seconds between 1 and 3600", field=what)
    if not isinstance(lock_timeout, int | float) or isinstance(lock_timeout, bool) or not 0 <= lock_timeout <= 3600:
        raise InputValidationError("lock_timeout must be a number of seconds between 0 and 3600", field="lock_timeout")
    params = _parse_conninfo(conninfo, option)
    return PostgresTarget(
        conninfo=conninfo,
        store=name,
        schema=schema_name,
        option=option,
        label=_label(params, name, schema_name),
        connect_timeout=float(connect_timeout),
        lease_timeout=float(lease_timeout),
        lock_timeout=float(lock_timeout),
    )


def check_store_name(name: object, *, field: str = "store") -> str:
    """A store name: 1-255 characters of valid Unicode text without control characters (NUL
    cannot be stored in PostgreSQL text at all; the rest would garble logs and messages)."""
    if not isinstance(name, str) or not name:
        raise InputValidationError("the store name must be a non-empty string", field=field)
    if len(name) > MAX_STORE_NAME:
        raise InputValidationError(
            f"the store name is {len(name)} characters long; at most {MAX_STORE_NAME} are allowed", field=field
        )
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InputValidationError(
            "the store name contains a lone surrogate (not valid Unicode text)", field=field
        ) from None
    bad = next((c for c in name if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0), None)
    if bad is not None:
        raise InputValidationError(f"the store name contains the control character {bad!r}", field=field)
    return name


def check_schema_name(name: object, *, field: str = "schema") -> str:
    """A schema name we create and quote: lowercase ASCII letters, digits and ``_``, at most 63."""
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= 63
        or not name.isascii()
        or not (name[0].isalpha() or name[0] == "_")
        or not all(c.islower() or c.isdigit() or c == "_" for c in name)
    ):
        raise InputValidationError(
            f"schema must be 1-63 lowercase letters, digits or '_' starting with a letter or '_' (got {name!r})",
            field=field,
        )
    return name


def require_driver(option: str) -> None:
    """psycopg is an optional extra: say how to install it, naming the option that needs it."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise InputValidationError(
            f"{option}: PostgreSQL stores need the psycopg driver: pip install 'agentcore-studio[postgres]'",
            field=option,
        ) from None


def connect(target: PostgresTarget) -> Any:
    """An autocommit connection for one owner (or one export/import); ``store_unavailable``
    naming the option when the server cannot be reached, ``input_validation`` when libpq
    refuses the connection string."""
    import psycopg

    lease = max(1, round(target.lease_timeout))
    idle, interval = max(1, lease // 3), max(1, lease // 6)
    ours = (
        f"-c tcp_keepalives_idle={idle} -c tcp_keepalives_interval={interval} -c tcp_keepalives_count=4 "
        f"-c tcp_user_timeout={lease * 1000}"
    )
    theirs = _parse_conninfo(target.conninfo, target.option).get("options") or ""
    try:
        return psycopg.connect(
            target.conninfo,
            autocommit=True,
            connect_timeout=max(2, round(target.connect_timeout)),
            application_name=f"agentcore pid {os.getpid()} on {socket.gethostname()}"[:63],
            keepalives=1,
            keepalives_idle=idle,
            keepalives_interval=interval,
            keepalives_count=4,
            tcp_user_timeout=lease * 1000,
            options=f"{theirs} {ours}".strip(),
        )
    except psycopg.ProgrammingError as exc:
        raise InputValidationError(f"{target.option}: {_first_line(exc)}", field=target.option) from None
    except psycopg.Error as exc:
        raise StoreError(
            STORE_UNAVAILABLE,
            f"{target.option}: cannot connect to {target.label}: {_first_line(exc)}",
            field=target.option,
            details={"label": target.label},
        ) from None


def unavailable(target: PostgresTarget, exc: BaseException, doing: str) -> StoreError:
    """The connection broke or the server refused work mid-way: the owner lease (the server
    session) may be gone, so this owner must be reopened."""
    return StoreError(
        STORE_UNAVAILABLE,
        f"{target.label}: {doing} failed: the database connection was lost or refused ({_first_line(exc)}); "
        "reopen the store",
        field=target.option,
        details={"label": target.label},
    )


def _split_url(url: str, option: str) -> tuple[str, str | None, str | None]:
    try:
        parts = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False, errors="strict")
    except ValueError as exc:
        raise InputValidationError(f"{option} is not a valid URL ({exc})", field=option) from None
    ours: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    for key, value in query:
        if key in ("store", "schema"):
            if key in ours:
                raise InputValidationError(f"{option} names its {key} twice", field=option)
            ours[key] = value
        else:
            rest.append((key, value))
    if parts.fragment:
        raise InputValidationError(f"{option} has a '#' fragment; name the store with ?store=<name>", field=option)
    # libpq decodes %XX in a URL but not '+': spaces must be %20
    query_text = urllib.parse.urlencode(rest, quote_via=urllib.parse.quote)
    conninfo = urllib.parse.urlunsplit(parts._replace(query=query_text))
    return conninfo, ours.get("store"), ours.get("schema")


def _one_of(given: object, from_url: str | None, what: str, option: str) -> object:
    if given is not None and from_url is not None and given != from_url:
        raise InputValidationError(f"the {what} is named twice, differently ({what}= and in the URL)", field=what)
    return given if given is not None else from_url


def _parse_conninfo(conninfo: str, option: str) -> dict[str, Any]:
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        return conninfo_to_dict(conninfo)
    except ProgrammingError as exc:
        raise InputValidationError(
            f"{option} is not a valid connection string ({_first_line(exc)})", field=option
        ) from None


def _label(params: dict[str, Any], store: str, schema: str) -> str:
    user = params.get("user")
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port")
    where = f"{user}@{host}" if user else str(host)
    if port:
        where += f":{port}"
    query = {"store": store, **({"schema": schema} if schema != DEFAULT_SCHEMA else {})}
    return f"postgresql://{where}/{params.get('dbname') or ''}?{urllib.parse.urlencode(query)}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
