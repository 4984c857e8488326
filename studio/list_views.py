"""The sessions list for operators (SPEC W9): search, filter, sort and pages; rename, archive and
delete. Thin: parse, check ownership, call one function, render. Someone else's session answers
404 like an unknown one (staff included: they may list others' sessions, not change them)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from asgiref.sync import async_to_sync
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from studio import selectors, services, session_list
from studio.forms import NewSessionForm
from studio.host.contract import HostError
from studio.host.routing import get_host_client
from studio.models import SessionKind
from studio.stores import location_of


def render_list(request: HttpRequest, form: NewSessionForm, status: int = 200) -> HttpResponse:
    """The list page (also what a refused new-session form renders again, with its errors)."""
    staff = bool(request.user.is_staff)
    query, filters = session_list.ListQuery.parse(request.GET, staff=staff)
    page = session_list.page_of(request.user, query)
    keep = {k: v for k, v in request.GET.items() if k != "page" and v}
    context: dict[str, Any] = {
        "sessions": page.object_list,
        "page": page,
        "query": query,
        "filters": filters,
        "form": form,
        "staff": staff,
        "usernames": session_list.usernames() if staff else [],
        "page_query": urlencode(keep),
        "filtered": bool(query.q or query.status or query.model or query.user),
        "viewer_id": request.user.pk,
    }
    return render(request, "studio/session_list.html", context, status=status)


@require_http_methods(["GET"])
def session_list_page(request: HttpRequest) -> HttpResponse:
    return render_list(request, NewSessionForm(user=request.user))


def _back(request: HttpRequest) -> HttpResponseRedirect:
    target = request.POST.get("next") or ""
    if not target.startswith("/") or target.startswith("//"):
        target = reverse("studio:session_list")
    return HttpResponseRedirect(target)


@require_POST
def session_rename(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = selectors.session_for_user(request.user, session_id)
    title = (request.POST.get("new_title") or "").strip()
    if not title:
        messages.error(request, "A title cannot be empty.")
    else:
        services.session_rename(session, title)
    return _back(request)


@require_POST
def session_archive(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = selectors.session_for_user(request.user, session_id)
    services.session_archive(session, request.POST.get("archived", "1") == "1")
    return _back(request)


@require_http_methods(["GET", "POST"])
def session_delete(request: HttpRequest, session_id: Any) -> HttpResponse:
    """GET: what will be deleted (the store, and the forks and subagents that go with it);
    POST (the confirmation): the runtime is released (refused while a turn writes), the store
    removed, then Studio's rows."""
    session = selectors.session_for_user(request.user, session_id)
    forks = session_list.forks_of(session)
    context = {"session": session, "forks": forks, "store": location_of(session).label, "error": ""}
    if request.method == "GET":
        return render(request, "studio/session_delete.html", context)
    if request.POST.get("confirm") != str(session.pk):
        context["error"] = "Confirm by pressing “Delete for good”."
        return render(request, "studio/session_delete.html", context, status=400)
    try:
        async_to_sync(get_host_client().call)("release", str(session.pk))
    except HostError as exc:
        context["error"] = exc.message
        return render(request, "studio/session_delete.html", context, status=409)
    if session.kind == SessionKind.MAIN:
        location_of(session).delete()
    deleted = services.session_delete(session)
    messages.success(
        request, f"Deleted “{session}”" + (f" and {len(deleted) - 1} more" if len(deleted) > 1 else "") + "."
    )
    return redirect("studio:session_list")
