"""Pages and htmx endpoints. Thin: parse, check ownership, call one function, render.

Commands (prompt, stop, plan decision, answers) are CSRF-protected POSTs; their effects reach
the page through the session's WebSocket, so an htmx POST answers with an empty body (or a
short error) and a plain form POST redirects back to the page.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django import forms as django_forms
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import escape
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from studio import selectors, services
from studio.forms import NewSessionForm, PlanDecisionForm, PromptForm, parse_answers
from studio.hosts import HostError, get_host_client
from studio.models import Effort, StudioSession


@require_http_methods(["GET"])
def session_list(request: HttpRequest) -> HttpResponse:
    return _render_list(request, NewSessionForm(user=request.user))


def _render_list(request: HttpRequest, form: NewSessionForm, status: int = 200) -> HttpResponse:
    sessions = selectors.session_list_for_user(request.user)
    return render(request, "studio/session_list.html", {"sessions": sessions, "form": form}, status=status)


@require_POST
def session_create(request: HttpRequest) -> HttpResponse:
    form = NewSessionForm(request.POST, user=request.user)
    if not form.is_valid():
        return _render_list(request, form, status=400)
    try:
        session = services.session_create(owner=request.user, **form.cleaned_data)  # type: ignore[arg-type]
    except services.WorkdirError as exc:
        form.add_error("workdir", str(exc))
        return _render_list(request, form, status=400)
    return redirect("studio:session_detail", session_id=session.pk)


async def _owned_session(request: HttpRequest, session_id: Any) -> StudioSession:
    user = await request.auser()
    return await sync_to_async(selectors.session_for_user)(user, session_id)


@require_GET
async def session_detail(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = await _owned_session(request, session_id)
    host_error = ""
    try:
        state = await get_host_client().state(str(session.pk))
    except HostError as exc:
        from studio.hosts import HostState

        state = HostState(session_id=str(session.pk), epoch="", seq=0, running=False, transcript=[])
        host_error = exc.message
    context = await sync_to_async(selectors.session_page_context)(session, state)
    context.update(
        {
            "ws_url": f"/ws/sessions/{session.pk}/",
            "effort_choices": Effort.choices,
            "host_error": host_error,
            "ring": _ring(context),
        }
    )
    return await sync_to_async(render)(request, "studio/session_detail.html", context)


def _ring(context: dict[str, Any]) -> Any:
    from studio.rendering import ring_geometry

    return ring_geometry(context.get("context_usage"))


def _command_response(request: HttpRequest, session: StudioSession, error: str = "") -> HttpResponse:
    if request.htmx:  # type: ignore[attr-defined]
        if error:
            return HttpResponse(f'<div class="form-error" role="alert">{escape(error)}</div>')
        return HttpResponse("", headers={"HX-Trigger": "studio:accepted"})
    return HttpResponseRedirect(reverse("studio:session_detail", args=[session.pk]))


async def _host_command(request: HttpRequest, session: StudioSession, operation: str, **arguments: Any) -> HttpResponse:
    """Send one command to the session host; its refusal becomes the form error shown inline."""
    try:
        await get_host_client().call(operation, str(session.pk), **arguments)
    except HostError as exc:
        return _command_response(request, session, exc.message)
    return _command_response(request, session)


@require_POST
async def session_prompt(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = await _owned_session(request, session_id)
    form = PromptForm(request.POST)
    if not form.is_valid():
        return _command_response(request, session, " ".join(e for errs in form.errors.values() for e in errs))
    agent = form.cleaned_data["agent"] or session.mode
    effort = form.cleaned_data["effort"] or session.effort
    await sync_to_async(services.session_preferences_update)(session, mode=agent, effort=effort)
    return await _host_command(
        request, session, "prompt", prompt=form.cleaned_data["prompt"], agent=agent, effort=effort
    )


@require_POST
async def session_stop(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = await _owned_session(request, session_id)
    return await _host_command(request, session, "stop")


@require_POST
async def session_plan(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = await _owned_session(request, session_id)
    form = PlanDecisionForm(request.POST)
    if not form.is_valid():
        return _command_response(request, session, "Choose Approve or Reject.")
    approved = form.cleaned_data["decision"] == "approve"
    return await _host_command(
        request,
        session,
        "resume_plan",
        approved=approved,
        notes=form.cleaned_data["notes"].strip(),
    )


@require_POST
async def session_answer(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = await _owned_session(request, session_id)
    pending = await sync_to_async(selectors.pending_run)(str(session.pk))
    questions = selectors.normalize_questions(((pending or {}).get("pending") or {}).get("questions") or [])
    if not questions:
        return _command_response(request, session, "Nothing is waiting for an answer.")
    try:
        answers = parse_answers(request.POST, questions)
    except django_forms.ValidationError as exc:
        return _command_response(request, session, " ".join(exc.messages))
    return await _host_command(request, session, "answer", answers=answers)


@login_not_required
def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A refused form post (missing or stale CSRF token) gets the styled 403 page."""
    return render(request, "403.html", {"reason": reason}, status=403)
