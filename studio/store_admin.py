"""Store administration (the admin's Session stores page): export, import, offline cancel.

Above the session host, because an export goes *through* the host that owns the store (its
owner lock): ``studio.host.routing`` reaches that host in this process or in its worker. The
writes to Studio's own rows are ``studio.services``'.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agentcore import cancel_agent_conversation
from studio.extensions import build_registry
from studio.host.contract import HostError
from studio.host.routing import get_host_client
from studio.ledger import read_first_prompt
from studio.models import RegisteredModel, Run, RunStatus, SessionStatus, StudioSession, ToolCall
from studio.services import session_create, title_from, usage_sync
from studio.stores import StoreConfigError, location_of, require_reachable, sessions_dir
from studio.workspaces import WorkdirError


class StoreAdminError(Exception):
    """An import or offline cancel that could not be done; the message is for the admin."""


_STORE_MESSAGES = {
    "store_exists": "The target store already exists; an import never overwrites a store.",
    "store_invalid": "The source is not an agentcore session store (export one with “Export a consistent copy”).",
    "store_locked": "A session host still has this store open. Stop the run (or wait until the host "
    "releases it) and try again.",
    "store_version_unsupported": "The source store was written by a newer agentcore than this one.",
}


def _store_error(exc: Exception) -> StoreAdminError:
    code = str(getattr(exc, "code", "") or exc.__class__.__name__)
    detail = str(getattr(exc, "message", None) or exc)
    message = _STORE_MESSAGES.get(code)
    return StoreAdminError(f"{message} ({code}: {detail})" if message else f"{code}: {detail}")


def store_export(session_id: str, destination: Path) -> Path:
    """Export the session's store through the session host, which owns it (see
    ``SessionHost.export``). With no host answering (worker mode, no worker running) nobody
    holds the store and agentcore exports it directly; its owner lock still decides."""
    try:
        async_to_sync(get_host_client().call)("export", session_id, destination=str(destination))
    except HostError as exc:
        if exc.code == "busy":
            raise StoreAdminError(exc.message) from exc
        if exc.code != "unavailable":
            raise _store_error(exc) from exc
        session = StudioSession.objects.get(pk=session_id)
        try:
            location_of(session).export(destination)
        except Exception as direct:
            raise _store_error(direct) from direct
    return destination


def store_import(
    *,
    source: str | os.PathLike[str],
    session: StudioSession | None = None,
    owner: AbstractBaseUser | None = None,
    registered_model: RegisteredModel | None = None,
    title: str = "",
    workdir: str = "",
) -> StudioSession:
    """Install a copy of an exported store (``agentcore.import_agent_database``).

    Into ``session`` when given (a session whose store was lost: the target must not exist),
    else into a new session of ``owner``; a SQLite file or a PostgreSQL store, wherever the
    session's store lives. The source is validated by agentcore.
    """
    source_path = Path(source)
    if not source_path.is_absolute():
        raise StoreAdminError("Give the source as an absolute path on the server.")
    if not source_path.is_file():
        raise StoreAdminError(f"No file at {source_path}.")
    created = session is None
    if session is None:
        registered_model = registered_model or model_of_store(source_path)
        if owner is None or registered_model is None:
            raise StoreAdminError("Choose the owner and the model of the new session.")
        try:
            session = session_create(
                owner=owner,
                registered_model=registered_model,
                workdir=workdir,
                permission_policy="workspace",
                effort="medium",
                mode="build",
                title=title or title_from(read_first_prompt(source_path)) or f"Imported {source_path.stem}"[:200],
            )
        except WorkdirError as exc:
            raise StoreAdminError(f"Working directory: {exc}") from exc
    location = location_of(session)
    try:
        require_reachable(location)
        if not created and location.exists():
            raise StoreAdminError(
                f"“{session}” already has a store at {location.label}; an import never overwrites a store."
            )
        location.import_from(source_path)
    except Exception as exc:
        if created:
            session.delete()
        if isinstance(exc, StoreAdminError):
            raise
        raise (StoreAdminError(str(exc)) if isinstance(exc, StoreConfigError) else _store_error(exc)) from exc
    StudioSession.objects.filter(pk=session.pk).update(
        status=SessionStatus.IDLE, last_activity=timezone.now(), ledger_pos=0
    )
    # Its tokens and cost show on the sessions list before anyone opens it: Studio's usage is
    # a projection of the store's ledger, copied now as a host would when it opens the store.
    usage_sync(str(session.pk), location.usage_ledger(0))
    return session


def model_of_store(source: Path) -> RegisteredModel | None:
    """The registered model a store was used with (its newest usage row's model id), else the
    offline demo: what an import preselects when the admin names no model."""
    from studio.ledger import read_usage_ledger
    from studio.selectors import registered_models

    models = registered_models()
    try:
        ledger = read_usage_ledger(str(source))
    except sqlite3.DatabaseError:  # not a store: agentcore's import says so
        ledger = []
    for row in reversed(ledger):
        model_id = str(row.payload.get("model") or "")
        found = models.filter(provider="demo").first() if model_id == "demo" else None
        found = found or (models.filter(model_id=model_id).first() if model_id else None)
        if found is not None:
            return found
    return models.filter(provider="demo").first()


def store_cancel_offline(session: StudioSession) -> dict[str, list[str]]:
    """End the session's unfinished work with ``agentcore.cancel_agent_conversation``.

    Needs the store's owner lock (no host may hold it: ``store_locked`` otherwise). Studio's
    own records follow: every run still running or waiting ends as stopped.
    """
    location = location_of(session)
    try:
        require_reachable(location)
    except StoreConfigError as exc:
        raise StoreAdminError(str(exc)) from exc
    if not location.exists():
        raise StoreAdminError("This session has no store yet: nothing to cancel.")
    try:
        result: dict[str, list[str]] = async_to_sync(cancel_agent_conversation)(
            **location.cancel_options(str(session.pk), sessions_dir()),
            registry=build_registry(settings.STUDIO_EXTENSIONS),  # so extension tasks run their abort
        )
    except Exception as exc:
        raise _store_error(exc) from exc
    now = timezone.now()
    with transaction.atomic():
        views = Q(session=session) | Q(session__root=session)
        open_runs = Run.objects.filter(views, status__in=(RunStatus.RUNNING, RunStatus.PAUSED))
        request_ids = list(open_runs.values_list("request_id", flat=True))
        open_runs.update(
            status=RunStatus.ABORTED,
            pending=None,
            error_code="cancelled_offline",
            error="Cancelled offline.",
            ended_at=now,
        )
        ToolCall.objects.filter(session=session, request_id__in=request_ids, status="running").update(
            status="interrupted"
        )
        StudioSession.objects.filter(Q(pk=session.pk) | Q(root=session)).update(
            status=SessionStatus.IDLE, last_activity=now
        )
    return result
