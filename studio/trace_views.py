"""The Timeline and the downloads of a session (SPEC W8, W11). Thin: parse, check ownership,
call one function, answer.

The Timeline is the session host's (``SessionHost.timeline``: it keeps the store's trace live
once a page asked for it); downloads read the store directly (read-only, never its owner lock)
except the store itself, a consistent copy the owner makes (``SessionHost.export``). Someone
else's session answers like an unknown one (404), as everywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.utils.html import escape
from django.views.decorators.http import require_GET

from studio import selectors
from studio.host.contract import HostError
from studio.host.routing import get_host_client
from studio.models import StudioSession
from studio.stores import location_of
from studio.timeline_store import studio_redactor
from studio.trace_export import ExportError, trace_download

DOWNLOADS = {
    "trace.json": "application/json",
    "trace.otlp.json": "application/json",
    "store.sqlite": "application/vnd.sqlite3",
}


async def _owned_session(request: HttpRequest, session_id: Any) -> StudioSession:
    user = await request.auser()
    return await sync_to_async(selectors.session_for_user)(user, session_id)


def _refusal(exc: HostError) -> HttpResponse:
    return HttpResponse(f'<p class="form-error" role="alert">{escape(exc.message)}</p>', status=503)


@require_GET
async def session_timeline(request: HttpRequest, session_id: Any) -> HttpResponse:
    """The Timeline region (``?turn=<request id>``: that turn on its own axis)."""
    session = await _owned_session(request, session_id)
    turn = request.GET.get("turn") or None
    try:
        html = await get_host_client().call("timeline", str(session.pk), turn=turn)
    except HostError as exc:
        return _refusal(exc)
    return HttpResponse(html)


@require_GET
async def session_timeline_span(request: HttpRequest, session_id: Any) -> HttpResponse:
    """One span's details: what it sent and received, from the store (no credentials)."""
    session = await _owned_session(request, session_id)
    span_id = request.GET.get("span", "")
    if not span_id:
        return HttpResponse("span is required", status=400)
    try:
        html = await get_host_client().call("timeline_span", str(session.pk), span_id=span_id)
    except HostError as exc:
        return _refusal(exc)
    if html is None:
        raise Http404("No such span.")
    return HttpResponse(html)


def _download_name(session: StudioSession, name: str) -> str:
    stem = f"session-{str(session.pk)[:8]}"
    return f"{stem}.sqlite" if name == "store.sqlite" else f"{stem}.{name}"


@require_GET
async def session_download(request: HttpRequest, session_id: Any, name: str) -> HttpResponse:
    """``trace.json`` (the ``agentcore.trace`` v1 document), ``trace.otlp.json`` (one OTLP/JSON
    ``ExportTraceServiceRequest``) or ``store.sqlite`` (a consistent copy of the whole store)."""
    session = await _owned_session(request, session_id)
    if name not in DOWNLOADS:
        raise Http404("No such download.")
    headers = {"Content-Disposition": f'attachment; filename="{_download_name(session, name)}"'}
    if name == "store.sqlite":
        return await _store_download(session, _download_name(session, name))
    turn = request.GET.get("turn") or None
    redactor = await sync_to_async(studio_redactor)()
    try:
        document = await asyncio.to_thread(
            trace_download, location_of(session), session.target_id, name, redactor=redactor, request_id=turn
        )
    except ExportError as exc:
        return HttpResponse(escape(str(exc)), status=409)
    body = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    return HttpResponse(body, content_type=DOWNLOADS[name], headers=headers)


async def _store_download(session: StudioSession, filename: str) -> HttpResponse:
    """The owner (the session host) copies the store with SQLite's backup API; the copy is sent
    and deleted. A store that a turn is writing to is refused (409), as the admin's export."""
    exports = Path(settings.STUDIO_DATA_DIR) / "exports"
    exports.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="download-", dir=exports))
    destination = folder / "store.sqlite"
    try:
        await get_host_client().call("export", str(session.pk), destination=str(destination))
    except HostError as exc:
        _remove(folder)
        status = 409 if exc.code == "busy" else 503
        return HttpResponse(escape(exc.message), status=status)
    handle = await asyncio.to_thread(_open_and_forget, destination)
    _remove(folder)
    return FileResponse(handle, content_type=DOWNLOADS["store.sqlite"], as_attachment=True, filename=filename)


def _open_and_forget(path: Path) -> Any:
    """The copy, open; its name is gone at once (the open handle keeps the data until the
    response, which closes it, has sent it)."""
    handle = path.open("rb")
    os.unlink(path)
    return handle


def _remove(folder: Path) -> None:
    for child in folder.glob("*"):
        with contextlib.suppress(OSError):
            child.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()
