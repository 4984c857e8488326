"""Pages and htmx endpoints. Thin: parse, check ownership, call one function, render.

Commands (prompt, stop, withdraw, promote, plan decision, answers, task cancel, fork, reset,
configure) are CSRF-protected POSTs; their effects reach the page through the session's
WebSocket, so an htmx POST answers with an empty body (or a short error, or a redirect for a
new fork) and a plain form POST redirects back to the page.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django import forms as django_forms
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import escape
from django.views.decorators.http import require_GET, require_POST

from studio import pages, selectors, services
from studio.forms import (
    ConfigureForm,
    ForkForm,
    InputIdForm,
    NewSessionForm,
    PlanDecisionForm,
    PromptForm,
    ResetForm,
    TaskIdForm,
    parse_answers,
)
from studio.host.contract import HostError, HostState
from studio.host.routing import get_host_client
from studio.models import Effort, RegisteredModel, StudioSession
from studio.workspaces import WorkdirError


def _render_list(request: HttpRequest, form: NewSessionForm, status: int = 200) -> HttpResponse:
    from studio.list_views import render_list

    return render_list(request, form, status)


@require_POST
def session_create(request: HttpRequest) -> HttpResponse:
    form = NewSessionForm(request.POST, user=request.user)
    if not form.is_valid():
        return _render_list(request, form, status=400)
    try:
        session = services.session_create(owner=request.user, **form.cleaned_data)
    except WorkdirError as exc:
        form.add_error("workdir", str(exc))
        return _render_list(request, form, status=400)
    return redirect("studio:session_detail", session_id=session.pk)


async def _owned_session(request: HttpRequest, session_id: Any) -> StudioSession:
    # ``request.user`` (not ``auser()``): the login wall has loaded it already, and ``auser()``
    # keeps a cache of its own, so it read the user row a second time.
    return await sync_to_async(selectors.session_for_user)(request.user, session_id)


async def _state(session: StudioSession) -> tuple[HostState, str]:
    try:
        return await get_host_client().state(str(session.pk)), ""
    except HostError as exc:
        return HostState(session_id=str(session.pk), epoch="", seq=0, running=False, transcript=[]), exc.message


@require_GET
async def session_detail(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = await _owned_session(request, session_id)
    state, host_error = await _state(session)
    context = await sync_to_async(pages.session_page_context)(session, state)
    context.update(
        {
            # The socket says which host state the page shows, so a page that is current gets no
            # second render when its socket connects.
            "ws_url": f"/ws/sessions/{session.pk}/?epoch={state.epoch}&seq={state.seq}&term={state.term}",
            "effort_choices": Effort.choices,
            "host_error": host_error,
            "ring": _ring(context),
        }
    )
    return await sync_to_async(render)(request, "studio/session_detail.html", context)


@require_GET
async def session_context(request: HttpRequest, session_id: Any, target_id: int) -> HttpResponse:
    """Open another conversation of a session's store (a fork, a subagent) as its own page."""
    session = await _owned_session(request, session_id)
    root = session.root or session
    view = await sync_to_async(selectors.view_for_target)(root, target_id)
    if view is None:
        state, _error = await _state(root)
        context = next((c for c in (state.snapshot or {}).get("contexts", []) if c["target_id"] == target_id), None)
        if context is None or context.get("kind") != "subagent":
            raise Http404("No such conversation.")
        view = await sync_to_async(services.subagent_view)(root, target_id, str(context.get("label") or ""))
    return redirect("studio:session_detail", session_id=view.pk)


@require_GET
async def session_turns(request: HttpRequest, session_id: Any) -> HttpResponse:
    """Older settled turns ("Show earlier"), ``start``–``end`` by turn number."""
    session = await _owned_session(request, session_id)
    try:
        start = int(request.GET.get("start", "0"))
        end = int(request.GET.get("end", "0"))
    except ValueError:
        return HttpResponse("start and end must be turn numbers", status=400)
    state, host_error = await _state(session)
    if host_error:
        return HttpResponse(escape(host_error), status=503)
    page = await sync_to_async(pages.turns_page)(session, state, start, end)
    html = await sync_to_async(render_to_string)("studio/_turns_page.html", {**page, "session": session})
    return HttpResponse(html)


@require_GET
async def session_tasks(request: HttpRequest, session_id: Any) -> HttpResponse:
    """The next page of finished tasks (the Tasks tab's "Show older")."""
    session = await _owned_session(request, session_id)
    try:
        page = max(1, int(request.GET.get("page", "1")))
    except ValueError:
        return HttpResponse("page must be a number", status=400)
    state, host_error = await _state(session)
    if host_error:
        return HttpResponse(escape(host_error), status=503)
    context = await sync_to_async(pages.task_history_page)(session, state, page)
    html = await sync_to_async(render_to_string)(
        "studio/_task_page.html",
        {**context, "next_page": page + 1, "model": (session.root or session).registered_model},
    )
    return HttpResponse(html)


def _ring(context: dict[str, Any]) -> Any:
    from studio.rendering import ring_geometry

    return ring_geometry(context.get("context_usage"))


def _command_response(request: HttpRequest, session: StudioSession, error: str = "") -> HttpResponse:
    if request.htmx:
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


def _form_error(form: django_forms.Form) -> str:
    return " ".join(e for errs in form.errors.values() for e in errs)


@require_POST
async def session_prompt(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = await _owned_session(request, session_id)
    form = PromptForm(request.POST)
    if not form.is_valid():
        return _command_response(request, session, _form_error(form))
    agent = form.cleaned_data["agent"] or session.mode
    await sync_to_async(services.session_preferences_update)(session, mode=agent)
    return await _host_command(
        request,
        session,
        "prompt",
        prompt=form.cleaned_data["prompt"],
        agent=agent,
        mode=form.cleaned_data["mode"] or "follow_up",
    )


@require_POST
async def session_stop(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = await _owned_session(request, session_id)
    return await _host_command(request, session, "stop")


@require_POST
async def session_withdraw(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = await _owned_session(request, session_id)
    form = InputIdForm(request.POST)
    if not form.is_valid():
        return _command_response(request, session, _form_error(form))
    return await _queued_command(request, session, "withdraw", form.cleaned_data["input_id"], "withdrawn")


@require_POST
async def session_promote(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = await _owned_session(request, session_id)
    form = InputIdForm(request.POST)
    if not form.is_valid():
        return _command_response(request, session, _form_error(form))
    return await _queued_command(request, session, "promote", form.cleaned_data["input_id"], "promoted")


_TOO_LATE = {
    "already_placed": "Too late: that message is already part of the running turn.",
    "settled": "Too late: that message was already answered.",
}


async def _queued_command(
    request: HttpRequest, session: StudioSession, operation: str, input_id: str, done: str
) -> HttpResponse:
    """Withdraw / promote: a message that left the queue in the meantime says so plainly."""
    try:
        status = await get_host_client().call(operation, str(session.pk), input_id=input_id)
    except HostError as exc:
        return _command_response(request, session, exc.message)
    if status != done:
        return _command_response(request, session, _TOO_LATE.get(str(status), f"Not done: {status}."))
    return _command_response(request, session)


@require_POST
async def session_cancel_task(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = await _owned_session(request, session_id)
    form = TaskIdForm(request.POST)
    if not form.is_valid():
        return _command_response(request, session, _form_error(form))
    return await _host_command(request, session, "cancel_task", task_id=form.cleaned_data["task_id"])


@require_POST
async def session_fork(request: HttpRequest, session_id: Any) -> HttpResponse:
    """Fork from a committed message; the fork opens as its own session."""
    session = await _owned_session(request, session_id)
    form = ForkForm(request.POST)
    if not form.is_valid():
        return _command_response(request, session, _form_error(form))
    try:
        fork_id = await get_host_client().call("fork", str(session.pk), entry_id=form.cleaned_data["entry_id"])
    except HostError as exc:
        return _command_response(request, session, exc.message)
    url = reverse("studio:session_detail", args=[fork_id])
    if request.htmx:
        return HttpResponse("", headers={"HX-Redirect": url})
    return HttpResponseRedirect(url)


@require_POST
async def session_reset(request: HttpRequest, session_id: Any) -> HttpResponse:
    session = await _owned_session(request, session_id)
    form = ResetForm(request.POST)
    if not form.is_valid():
        return _command_response(request, session, _form_error(form))
    return await _host_command(request, session, "reset", handoff=form.cleaned_data["handoff"])


@require_POST
async def session_configure(request: HttpRequest, session_id: Any) -> HttpResponse:
    """Model and effort for the next request. A stale form (someone changed the settings in
    another tab) gets a clear message and the current settings."""
    session = await _owned_session(request, session_id)
    form = ConfigureForm(request.POST)
    if not form.is_valid():
        return _command_response(request, session, _form_error(form))
    arguments: dict[str, Any] = {"expected_version": form.cleaned_data["expected_version"]}
    if form.cleaned_data["effort"]:
        arguments["effort"] = form.cleaned_data["effort"]
    if form.cleaned_data["model"]:
        root = session.root or session
        choices = await sync_to_async(selectors.model_choices)(
            await RegisteredModel.objects.aget(pk=root.registered_model_id)
        )
        chosen = next((m for m in choices if m.pk == form.cleaned_data["model"]), None)
        if chosen is None:
            return _command_response(request, session, "That model cannot be used in this session.")
        arguments["provider"] = selectors.provider_name(chosen)
        arguments["model_id"] = chosen.model_id or "demo"
    try:
        await get_host_client().call("configure", str(session.pk), **arguments)
    except HostError as exc:
        if not request.htmx:
            return _command_response(request, session, exc.message)
        return HttpResponse(
            f'<div class="form-error" role="alert">{escape(exc.message)}</div>' + await _fresh_config(session)
        )
    return _command_response(request, session)


async def _fresh_config(session: StudioSession) -> str:
    """The model/effort form as the store has it now (out of band), after a refused change."""
    state, _error = await _state(session)

    def build() -> str:
        context = {"session": session, "effort_choices": Effort.choices, "oob": True}
        context.update(pages.controls_context(session, state))
        return render_to_string("studio/_session_config.html", context)

    return await sync_to_async(build)()


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
    questions = pages.normalize_questions(((pending or {}).get("pending") or {}).get("questions") or [])
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
