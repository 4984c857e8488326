"""Pages and htmx endpoints. Thin: parse, check ownership, call one function, render.

Commands (prompt, stop, withdraw, promote, plan decision, answers, task cancel, fork, reset,
configure) are CSRF-protected POSTs (the page sends a text prompt over its socket instead:
``studio.composer``); their effects reach the page through the session's
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
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET, require_POST

from studio import controls_html, page_html, pages, selectors, services, turn_html, usage_html
from studio.composer import PromptRefused, parse_prompt, submit_prompt
from studio.forms import (
    CompactForm,
    ConfigureForm,
    EditForm,
    ForkForm,
    InputIdForm,
    NewSessionForm,
    PlanDecisionForm,
    ResendForm,
    ResetForm,
    TaskIdForm,
    form_error,
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


async def _state(session: StudioSession | str) -> tuple[HostState, str]:
    session_id = session if isinstance(session, str) else str(session.pk)
    try:
        return await get_host_client().state(session_id), ""
    except HostError as exc:
        return HostState(session_id=session_id, epoch="", seq=0, running=False, transcript=[]), exc.message


@require_GET
async def session_detail(request: HttpRequest, session_id: Any) -> HttpResponse:
    # Ownership first (the host opens the runtime for the state), with no row read: the page
    # reads the view's row after the opening, as the opening left it.
    await sync_to_async(selectors.require_owned)(request.user, session_id)
    state, host_error = await _state(str(session_id))
    return await sync_to_async(_detail_page)(request, str(session_id), state, host_error)


def _detail_page(request: HttpRequest, session_id: str, state: HostState, host_error: str) -> HttpResponse:
    """The page at ``state``: the view's row read again, its context and its render, in one hop
    to the request's thread instead of three (a thread handoff each, at every opening)."""
    # The row again, as opening the session in the host left it (its status, reconciled totals).
    session = selectors.session_view(session_id)
    context = pages.session_page_context(session, state)
    context.update(
        {
            # The socket says which host state the page shows, so a page that is current gets no
            # second render when its socket connects.
            "ws_url": f"/ws/sessions/{session.pk}/?epoch={state.epoch}&seq={state.seq}&term={state.term}",
            "effort_choices": Effort.choices,
            "host_error": host_error,
            "ring": _ring(context),
            **_composer_limits(),
        }
    )
    context["regions"] = _python_regions(context)
    return HttpResponse(page_html.session_page(request, context))


def _python_regions(context: dict[str, Any]) -> dict[str, SafeString]:
    """The page's partials that pushes render in plain Python (``controls_html``, ``usage_html``,
    ``turn_html``: byte-equal to their templates, which their tests prove), rendered the same
    way here, in place (not out of band): a fraction of the template engine's cost per opening."""
    tab, stats = usage_html.render(context, oob=False)
    parts = {**controls_html.render(context, oob=False), "usage_tab": tab, "stats": stats}
    parts["conversation"] = turn_html.conversation(context, oob=False)
    return {name: mark_safe(html) for name, html in parts.items()}


def _composer_limits() -> dict[str, Any]:
    """What the composer says and checks before sending images (the runtime's limits, I1)."""
    from agentcore.inputs import MAX_IMAGE_BYTES
    from studio.forms import IMAGE_ACCEPT, MAX_IMAGES

    return {
        "image_accept": IMAGE_ACCEPT,
        "max_images": MAX_IMAGES,
        "max_image_bytes": MAX_IMAGE_BYTES,
        "max_image_mb": MAX_IMAGE_BYTES // 1024 // 1024,
    }


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
    return form_error(form)[1]


@require_POST
async def session_prompt(request: HttpRequest, session_id: Any) -> HttpResponse:
    """A prompt with images (multipart), or from a client without the session's socket; a
    text prompt from the page goes over the socket (``studio.composer``, the same parsing)."""
    session = await _owned_session(request, session_id)
    try:
        prompt = parse_prompt(request.POST, request.FILES, default_agent=session.mode)
        await submit_prompt(session, prompt)
    except (PromptRefused, HostError) as exc:
        return _command_response(request, session, exc.message)
    return _command_response(request, session)


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
    return _go_to(request, fork_id)


def _go_to(request: HttpRequest, view_id: str) -> HttpResponse:
    """The page moves to another view (a fork, a new session): htmx follows ``HX-Redirect``."""
    url = reverse("studio:session_detail", args=[view_id])
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
    if form.cleaned_data["web_search"]:
        arguments["web_search"] = form.cleaned_data["web_search"]
    if form.cleaned_data["model"]:
        chosen = await _switchable_model(session, form.cleaned_data["model"])
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


async def _switchable_model(session: StudioSession, pk: int) -> RegisteredModel | None:
    """One of the models this session may switch to (``selectors.model_choices``), by id."""
    root = session.root or session
    choices = await sync_to_async(selectors.model_choices)(
        await RegisteredModel.objects.aget(pk=root.registered_model_id)
    )
    return next((m for m in choices if m.pk == pk), None)


@require_POST
async def session_compact(request: HttpRequest, session_id: Any) -> HttpResponse:
    """Compact now: the session's ``compact`` command, with the person's instructions."""
    session = await _owned_session(request, session_id)
    form = CompactForm(request.POST)
    if not form.is_valid():
        return _command_response(request, session, _form_error(form))
    return await _host_command(request, session, "compact", instructions=form.cleaned_data["instructions"])


@require_POST
async def session_resend(request: HttpRequest, session_id: Any) -> HttpResponse:
    """Retry a failed turn / regenerate the last answer: the same prompt as a new request,
    on another of the session's models when the form names one."""
    session = await _owned_session(request, session_id)
    form = ResendForm(request.POST)
    if not form.is_valid():
        return _command_response(request, session, _form_error(form))
    arguments: dict[str, Any] = {"entry_id": form.cleaned_data["entry_id"]}
    if form.cleaned_data["model"]:
        chosen = await _switchable_model(session, form.cleaned_data["model"])
        if chosen is None:
            return _command_response(request, session, "That model cannot be used in this session.")
        arguments.update(provider=selectors.provider_name(chosen), model_id=chosen.model_id or "demo")
    return await _host_command(request, session, "resend", **arguments)


@require_POST
async def session_edit(request: HttpRequest, session_id: Any) -> HttpResponse:
    """Edit and resend a past prompt: a fork from before it (or, for the first message, a new
    session with the same settings) runs the new text; the page moves there."""
    session = await _owned_session(request, session_id)
    form = EditForm(request.POST)
    if not form.is_valid():
        return _command_response(request, session, _form_error(form))
    into = None
    if form.cleaned_data["first"]:
        copy = await sync_to_async(services.session_copy)(session, title=f"Edit of {session}")
        into = str(copy.pk)
    try:
        view_id = await get_host_client().call(
            "edit",
            str(session.pk),
            entry_id=form.cleaned_data["entry_id"],
            prompt=form.cleaned_data["prompt"],
            into=into,
        )
    except HostError as exc:
        return _command_response(request, session, exc.message)
    return _go_to(request, view_id)


@require_GET
async def session_image(request: HttpRequest, session_id: Any) -> HttpResponse:
    """An image of a person's message, from the store (``?entry=<entry id>&n=<index>``)."""
    import base64

    from agentcore.inputs import IMAGE_MIME_TYPES

    session = await _owned_session(request, session_id)
    try:
        index = int(request.GET.get("n", "0"))
    except ValueError:
        return HttpResponse("n must be a number", status=400)
    try:
        image = await get_host_client().call(
            "image", str(session.pk), entry_id=str(request.GET.get("entry", "")), index=index
        )
    except HostError as exc:
        raise Http404(exc.message) from None
    if image.get("mime_type") not in IMAGE_MIME_TYPES:
        raise Http404("No such image.")
    response = HttpResponse(base64.b64decode(image["data"]), content_type=image["mime_type"])
    response["Cache-Control"] = "private, max-age=86400, immutable"  # entries are written once
    return response


@require_GET
async def model_check(request: HttpRequest) -> HttpResponse:
    """The new-session form's endpoint check for the model it names (``?registered_model=``)."""
    from studio.endpoint_check import check_endpoint

    try:
        model = await selectors.registered_models().aget(pk=int(request.GET.get("registered_model", "")))
    except (ValueError, RegisteredModel.DoesNotExist):
        return HttpResponse("")
    check = await check_endpoint(model)
    css = "ok" if check.ok else "error"
    return HttpResponse(f'<small class="endpoint-check-result {css}">{escape(check.message)}</small>')


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
