"""The session page's controls in plain Python: what the ``controls`` and ``config`` regions' small
partials render on a push.

A turn's start and end and most snapshots re-render the controls (the status pill, the run
buttons, the queue chips, the title, the model badge): five partials, each a line or two of
markup, which through Django's template engine cost ~80 µs apiece — most of a turn's end. Here
each is a string join with Django's escaping. The partial templates (``_session_title.html``,
``_session_model.html`` with ``_model_badge.html``, ``_status.html`` with ``_status_pill.html``,
``_run_controls.html``, ``_queue.html``) still render the full page, and
``tests/studio/test_controls_html.py`` asserts both byte-identical over every state.

``render`` returns each partial by name, so the caller can leave out what the page already shows
(``studio.pages.render_regions``: a partial identical to the one pushed last is not sent again).
"""

from __future__ import annotations

from typing import Any

from django.utils.html import conditional_escape, escape, escapejs

from studio.block_html import OOB
from studio.links import studio_url

_SEND_ICON = (
    '<svg viewBox="0 0 16 16" aria-hidden="true"><path d="M2 8h10M8 3.5 12.5 8 8 12.5" fill="none" '
    'stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round"/></svg>'
)
_STOP_ICON = (
    '<svg viewBox="0 0 16 16" aria-hidden="true"><rect x="3.5" y="3.5" width="9" height="9" rx="2" '
    'fill="currentColor"/></svg>'
)

#: The controls' partials by name, in page order (``studio.rendering.CONTROL_REGIONS``).
NAMES = ("title", "model", "status", "run_controls", "queue")


def render(context: dict[str, Any], *, oob: bool = True) -> dict[str, str]:
    """Each control partial's markup for ``context`` (``studio.pages.controls_context`` with
    ``base_context``; ``pending`` when the push has it), by name."""
    swap = OOB if oob else ""
    return {
        "title": title(context["session"], swap),
        "model": model(context["model_in_use"], swap),
        "status": status(context["view_status"], swap),
        "run_controls": run_controls(context, swap),
        "queue": queue(context["session"], context.get("queue") or [], swap),
    }


def title(session: Any, swap: str) -> str:
    name = escape(str(session))
    return f'<h1 id="session-title" title="{name}"{swap}>{name}</h1>\n'


def model(model: Any, swap: str) -> str:
    """``_session_model.html``: the badge of the model the next request runs on."""
    if model.is_demo:
        badge = (
            '<span class="badge badge-demo" title="Runs offline with canned answers — no API key, no cost">'
            "offline demo model</span>"
        )
    else:
        badge = (
            f'<span class="badge badge-model" title="{escape(model.provider)} {escape(model.model_id)}">'
            f"{escape(model.name)}</span>"
        )
    return f'<span id="session-model"{swap}>{badge}\n</span>\n'


def status(view_status: tuple[str, str], swap: str) -> str:
    css, label = view_status
    pill = f'<span class="pill pill-{escape(css)}"><span class="dot" aria-hidden="true"></span>{escape(label)}</span>\n'
    return f'<span id="session-status"{swap}>{pill}</span>\n'


def run_controls(context: dict[str, Any], swap: str) -> str:
    """``_run_controls.html``: Send; Stop, Steer and Queue while busy; nothing when read-only."""
    busy = bool(context.get("busy"))
    if context.get("read_only"):
        buttons = "\n  "
    elif context.get("pending"):
        buttons = (
            '\n    <button type="submit" class="btn btn-primary" id="send-button" disabled '
            'title="Answer the review above first">Send</button>\n  '
        )
    elif busy:
        stop = conditional_escape(studio_url("studio:session_stop", context["session"].pk))
        buttons = (
            f'\n    <button type="button" class="btn btn-stop" id="stop-button" hx-post="{stop}" hx-swap="none" '
            'title="Stop the running turn; queued messages then run">\n'
            f"      {_STOP_ICON}Stop</button>\n"
            '    <button type="submit" name="mode" value="steer" class="btn btn-ghost" id="steer-button" '
            'title="Join the running turn at its next tool call">Steer</button>\n'
            '    <button type="submit" name="mode" value="follow_up" class="btn btn-primary" id="send-button" '
            'title="Queue it: it runs when the current turn is done">Queue</button>\n  '
        )
    else:
        buttons = (
            '\n    <button type="submit" class="btn btn-primary" id="send-button">Send\n'
            f"      {_SEND_ICON}</button>\n  "
        )
    return f'<div id="run-controls" class="run-controls" data-busy="{1 if busy else 0}"{swap}>\n  {buttons}\n</div>\n'


def queue(session: Any, items: list[dict[str, Any]], swap: str) -> str:
    """``_queue.html``: a chip per queued message, with Steer now (a follow-up) and Withdraw."""
    chips: list[str] = []
    if items:
        promote = conditional_escape(studio_url("studio:session_promote", session.pk))
        withdraw = conditional_escape(studio_url("studio:session_withdraw", session.pk))
    for q in items:
        mode, agent, input_id = q.get("mode", ""), q.get("agent", ""), q.get("input_id", "")
        steer = mode == "steer"
        kind = "steer · next tool call" if steer else "plan · queued" if agent == "plan" else "queued"
        vals = f'{{"input_id": "{escapejs(str(input_id))}"}}'
        steer_now = (
            f'<button type="button" class="btn-link promote-button" hx-post="{promote}" hx-vals=\'{vals}\' '
            'hx-target="#composer-error" hx-swap="innerHTML" '
            'title="Send it into the running turn at its next tool call">Steer now</button>'
            if not steer and agent != "plan"
            else ""
        )
        prompt = conditional_escape(q.get("prompt", ""))
        chips.append(
            f'\n  <div class="queue-chip{" steer" if steer else ""}" data-input-id="{conditional_escape(input_id)}">\n'
            f'    <span class="queue-kind">{kind}</span>\n'
            f'    <span class="queue-text" title="{prompt}">{prompt}</span>\n'
            '    <span class="queue-actions">\n'
            f"      {steer_now}\n"
            f'      <button type="button" class="btn-link withdraw-button" hx-post="{withdraw}" hx-vals=\'{vals}\' '
            'hx-target="#composer-error" hx-swap="innerHTML" title="Take it back">Withdraw</button>\n'
            "    </span>\n"
            "  </div>\n  "
        )
    return f'<div id="queue" class="queue"{swap} aria-label="Queued messages">\n  {"".join(chips)}\n</div>\n'
