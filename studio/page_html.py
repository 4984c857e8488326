"""The session page's own markup (``session_detail.html`` in ``base.html``) in plain Python.

Why: the page is rendered at every opening, and the template engine spent ~2 ms of an opening's
CPU at fifty pages opening at once on these two templates' own nodes alone (issue 25) — a few
dozen variables and conditions each costing what the markup's formatting costs many times over.
The page's regions were already plain Python (``controls_html``, ``usage_html``,
``turn_html``); the partials that only the full page draws (the Trace tabs other than usage,
the settings, the pending review) are still their templates, rendered here in one context
bound once, as ``{% include %}`` renders them. The templates stay the reference: the tests
render both over every state the page shows and compare them byte for byte (csrf tokens aside,
which differ on every render by design).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.http import HttpRequest
from django.middleware.csrf import get_token
from django.template import engines
from django.template.context import make_context
from django.utils.html import escape

from studio.block_html import variable
from studio.links import static_url, studio_url

#: ``base.html``'s stylesheets and scripts, in its order.
_STYLES = ("studio/studio.css", "studio/pygments.css", "studio/operator.css", "studio/chat.css")
_SCRIPTS = (
    "vendor/htmx-2.0.11.min.js",
    "vendor/htmx-ext-ws-2.0.4.min.js",
    "studio/studio.js",
    "studio/timeline.js",
    "studio/operator.js",
    "studio/chat.js",
)
_ATTACH_ICON = (
    '<svg viewBox="0 0 16 16" aria-hidden="true"><path d="M10.5 4.5 5.8 9.2a1.3 1.3 0 0 0 1.8 1.8l4.9-4.9a2.6 '
    '2.6 0 0 0-3.7-3.7L3.9 7.3a3.9 3.9 0 0 0 5.5 5.5L13 9.2" fill="none" stroke="currentColor" '
    'stroke-width="1.4" stroke-linecap="round"/></svg>'
)
_BRAND_MARK = (
    '<svg class="brand-mark" viewBox="0 0 24 24" aria-hidden="true"><path d="M4 12a8 8 0 1 1 8 8" fill="none" '
    'stroke="currentColor" stroke-width="2.4" stroke-linecap="round"/><circle cx="12" cy="12" r="3" '
    'fill="currentColor"/></svg>'
)


class _Partials:
    """The page's template partials, rendered in one ``RequestContext`` whose processors run
    once (``bound``), as the page's ``{% include %}`` tags would render them."""

    def __init__(self, request: HttpRequest, context: dict[str, Any]) -> None:
        self._engine = engines["django"].engine
        self._context = make_context(context, request)

    @contextlib.contextmanager
    def bound(self) -> Iterator[_Partials]:
        # bound to the template this module stands for, as its render would bind it: the context
        # processors run here, once, and every partial then renders in the bound context
        with self._context.bind_template(self._engine.get_template("studio/session_detail.html")):
            yield self

    def render(self, name: str) -> str:
        return str(self._engine.get_template(name).render(self._context))


def _csrf_input(request: HttpRequest) -> str:
    """``{% csrf_token %}``: a hidden field with a freshly masked token."""
    return f'<input type="hidden" name="csrfmiddlewaretoken" value="{escape(get_token(request))}">'


def session_page(request: HttpRequest, context: dict[str, Any]) -> str:
    """``session_detail.html`` for ``context`` (the session page's, with its ``regions``)."""
    with _Partials(request, context).bound() as partials:
        body = "\n" + _content(request, context, partials)
    session = context["session"]
    body_class = "page-session" + (" view-read-only" if session.read_only else "")
    return _base(request, variable(str(session)), body_class, body)


def _base(request: HttpRequest, title: str, body_class: str, content: str) -> str:
    """``base.html`` around ``content`` (no navigation block is set on the session page)."""
    styles = "".join(f'  <link rel="stylesheet" href="{escape(static_url(path))}">\n' for path in _STYLES)
    scripts = "".join(f'  <script src="{escape(static_url(path))}" defer></script>\n' for path in _SCRIPTS)
    user = request.user
    header = ""
    if user.is_authenticated:
        name = str(user.get_username())
        admin = f'<a href="{escape(studio_url("admin:index"))}">Admin</a>' if user.is_staff else ""
        sessions = escape(studio_url("studio:session_list"))
        header = (
            '\n  <header class="topbar">\n'
            f'    <a class="brand" href="{sessions}">\n'
            f"      {_BRAND_MARK}\n"
            "      <span>Studio</span>\n"
            "    </a>\n"
            '    <nav class="topnav">\n'
            f'      <a href="{sessions}" class="">Sessions</a>\n'
            f'      <a href="{escape(studio_url("studio:usage"))}" class="">Usage</a>\n'
            f"      {admin}\n"
            "    </nav>\n"
            '    <div class="topbar-user">\n'
            f'      <span class="avatar" aria-hidden="true">{escape(name[:1].upper())}</span>\n'
            f'      <span class="username">{escape(name)}</span>\n'
            '      <button type="button" class="btn-link notify-toggle" id="notify-toggle" hidden>Notify me</button>\n'
            f'      <form method="post" action="{escape(studio_url("studio:logout"))}">{_csrf_input(request)}'
            '<button class="btn-link" type="submit">Log out</button></form>\n'
            "    </div>\n"
            "  </header>\n"
            "  "
        )
    return (
        "<!doctype html>\n"
        '<html lang="en">\n'
        "<head>\n"
        '  <meta charset="utf-8">\n'
        '  <meta name="viewport" content="width=device-width, initial-scale=1">\n'
        "  <meta name=\"htmx-config\" content='{\"includeIndicatorStyles\": false, \"allowEval\": false, "
        '"allowScriptTags": false, "selfRequestsOnly": true}\'>\n'
        '  <meta name="color-scheme" content="light dark">\n'
        f"  <title>{title} · agentcore Studio</title>\n"
        f'  <link rel="icon" href="{escape(static_url("studio/favicon.svg"))}" type="image/svg+xml">\n'
        f"{styles}{scripts}"
        "</head>\n"
        f"<body class=\"{body_class}\" hx-headers='{{\"X-CSRFToken\": \"{escape(get_token(request))}\"}}'>\n"
        f"  {header}\n  {content}\n"
        "</body>\n"
        "</html>\n"
    )


def _content(request: HttpRequest, context: dict[str, Any], partials: _Partials) -> str:
    """``session_detail.html``'s ``content`` block."""
    session, regions = context["session"], context["regions"]
    pk, read_only = session.pk, session.read_only
    parent = context.get("parent_view")
    back = studio_url("studio:session_detail", parent.pk) if parent else studio_url("studio:session_list")
    back_label = f"Back to {variable(str(parent))}" if parent else "All sessions"
    menu = ""
    if not read_only:
        reset = escape(studio_url("studio:session_reset", pk))
        menu = (
            '\n        <details class="menu" id="session-menu">\n'
            '          <summary class="btn btn-ghost btn-small" aria-label="More actions">⋯</summary>\n'
            '          <div class="menu-body card">\n'
            f'            <form method="post" action="{reset}" hx-post="{reset}" hx-target="#reset-error" '
            'hx-swap="innerHTML" class="stack reset-form" id="reset-form">\n'
            f"              {_csrf_input(request)}\n"
            '              <label class="field"><span>Reset the context</span>\n'
            '                <textarea name="handoff" rows="3" placeholder="Handoff note: what the agent should '
            'know when it starts over" maxlength="200000"></textarea></label>\n'
            '              <small class="muted">The model starts again from this note. Earlier messages stay in '
            "the store; the plan is kept. While the agent works, the reset waits for the next turn.</small>\n"
            '              <div id="reset-error" class="form-error-slot"></div>\n'
            '              <button type="submit" class="btn btn-ghost" id="reset-button">'
            "Reset with this note</button>\n"
            "            </form>\n"
            f"            {partials.render('studio/_compact_form.html')}\n"
            "          </div>\n"
            "        </details>\n"
            "        "
        )
    banner = ""
    if session.kind != "main":
        link = ""
        if parent:
            link = f'<a href="{escape(studio_url("studio:session_detail", parent.pk))}">{variable(str(parent))}</a>'
        words = (
            "A subagent's conversation, read-only: the agent that started it talks to it."
            if read_only
            else "A fork: its own conversation from a message of "
        )
        banner = (
            f'\n    <div class="view-banner{" read-only" if read_only else ""}" id="view-banner">\n'
            f"      {words}\n"
            f"      {link}\n"
            "    </div>\n"
            "    "
        )
    confinement = context.get("tool_confinement")
    tools = ""
    if confinement is not None and confinement.confined:
        summary = variable(confinement.summary)
        tools = (
            f'\n    <div class="view-banner tools-banner tools-{variable(confinement.mode)}" id="tools-banner" '
            f'role="note" title="{summary}">{summary}</div>\n'
            "    "
        )
    hidden = "" if context.get("turns_first") else " hidden"
    composer = "" if read_only else _composer(request, context, partials)
    return (
        f'<main class="session-layout" hx-ext="ws" ws-connect="{variable(context.get("ws_url", ""))}" '
        f'data-session-id="{variable(pk)}" data-turns-url="{escape(studio_url("studio:session_turns", pk))}" '
        f'data-edit-url="{escape(studio_url("studio:session_edit", pk))}">\n'
        '<span id="host-sync" hidden></span>\n'
        '  <section class="chat">\n'
        '    <div class="chat-head">\n'
        '      <div class="chat-title">\n'
        f'        <a href="{escape(back)}" class="back" aria-label="{back_label}">←</a>\n'
        f"        {regions['title']}\n"
        f"        {regions['model']}\n"
        f"        {regions['status']}\n"
        "      </div>\n"
        '      <div class="chat-meta">\n'
        f"        {regions['stats']}\n"
        f"        {partials.render('studio/_context_ring.html')}\n"
        '        <span class="conn" id="conn-state" title="Live connection">live</span>\n'
        f"        {menu}\n"
        '        <button type="button" class="btn btn-ghost trace-toggle" id="trace-toggle" aria-controls="trace" '
        'aria-expanded="false">Trace</button>\n'
        "      </div>\n"
        "    </div>\n"
        f"    {banner}\n"
        f"    {tools}\n"
        '    <div class="conversation-scroll" id="conversation-scroll">\n'
        '      <div id="conversation-older" class="conversation conversation-older" data-start="" data-end="">\n'
        '        <button type="button" class="btn btn-ghost btn-small load-earlier" '
        f'id="load-earlier"{hidden}>Show earlier messages</button>\n'
        "      </div>\n"
        f"      {regions['conversation']}\n"
        f"      {partials.render('studio/_pending.html')}\n"
        "    </div>\n"
        f"    {composer}\n"
        "  </section>\n"
        '  <aside class="trace" id="trace" aria-label="Trace">\n'
        '    <nav class="tabs" role="tablist">\n'
        '      <button type="button" role="tab" class="tab active" data-tab="tasks" aria-selected="true">Tasks '
        f"{partials.render('studio/_tab_counts.html')}</button>\n"
        '      <button type="button" role="tab" class="tab" data-tab="plan" aria-selected="false">Plan</button>\n'
        '      <button type="button" role="tab" class="tab" data-tab="records" aria-selected="false">Records</button>\n'
        '      <button type="button" role="tab" class="tab" data-tab="usage" aria-selected="false">Usage</button>\n'
        '      <button type="button" role="tab" class="tab" data-tab="timeline" aria-selected="false" '
        'id="timeline-tab">Timeline</button>\n'
        '      <button type="button" class="trace-close" id="trace-close" aria-label="Close the trace">×</button>\n'
        "    </nav>\n"
        '    <div class="tab-panel" data-panel="tasks" role="tabpanel">'
        f"{partials.render('studio/_tab_tasks.html')}</div>\n"
        '    <div class="tab-panel" data-panel="plan" role="tabpanel" hidden>'
        f"{partials.render('studio/_tab_plan.html')}</div>\n"
        '    <div class="tab-panel" data-panel="records" role="tabpanel" hidden>'
        f"{partials.render('studio/_tab_records.html')}</div>\n"
        f'    <div class="tab-panel" data-panel="usage" role="tabpanel" hidden>{regions["usage_tab"]}</div>\n'
        f"    {partials.render('studio/_timeline_panel.html')}\n"
        "  </aside>\n"
        "</main>\n"
    )


def _composer(request: HttpRequest, context: dict[str, Any], partials: _Partials) -> str:
    """The composer form (not on a read-only view)."""
    session, regions = context["session"], context["regions"]
    model = context.get("model")
    images = getattr(context.get("capabilities"), "images", False)
    in_use = context.get("model_in_use")
    host_error = context.get("host_error")
    error = f'<div class="form-error">{variable(host_error)}</div>' if host_error else ""
    placeholder = (
        "Ask the offline demo model anything — try “start a timer for 10 seconds” or “plan a todo app” in plan mode"
        if model is not None and model.is_demo
        else "Message the agent…"
    )
    max_images, max_mb = variable(context.get("max_images", "")), variable(context.get("max_image_mb", ""))
    max_bytes, accept = variable(context.get("max_image_bytes", "")), variable(context.get("image_accept", ""))

    def agent(value: str, label: str) -> str:
        checked = " checked" if session.mode == value else ""
        radio = f'<input type="radio" name="agent" value="{value}"{checked}>'
        return f'<label class="seg">{radio}<span>{label}</span></label>'

    return (
        "\n    \n"  # the template's comment line: a text prompt goes over the socket, one with images is posted
        f'    <form class="composer" id="composer" method="post" '
        f'action="{escape(studio_url("studio:session_prompt", session.pk))}" enctype="multipart/form-data"\n'
        '          ws-send hx-encoding="multipart/form-data"\n'
        f'          data-accepts-images="{"1" if images else "0"}" '
        f'data-model-name="{variable(getattr(in_use, "display_name", ""))}"\n'
        f'          data-max-images="{max_images}" data-max-image-bytes="{max_bytes}">\n'
        f"      {_csrf_input(request)}\n"
        '      <input type="hidden" name="command" value="prompt">\n'
        f"      {regions['queue']}\n"
        f'      <div id="composer-error" class="composer-error" role="status">{error}</div>\n'
        '      <div id="config-error" class="composer-error" role="alert"></div>\n'
        '      <div class="attachments" id="attachments" aria-label="Images to send" hidden></div>\n'
        f'      <textarea name="prompt" id="prompt" rows="2" placeholder="{placeholder}" aria-label="Message" '
        'aria-keyshortcuts="/"></textarea>\n'
        '      <div class="composer-bar">\n'
        '        <div class="composer-options">\n'
        '          <div class="segmented small" role="radiogroup" aria-label="Agent">\n'
        f"            {agent('build', 'Build')}\n"
        f"            {agent('plan', 'Plan')}\n"
        "          </div>\n"
        f"          {partials.render('studio/_session_config.html')}\n"
        '          <label class="btn btn-ghost btn-small attach-button" title="Attach images (PNG, JPEG, GIF or '
        f'WebP, up to {max_images} of {max_mb} MB each) — or paste or drop them here">\n'
        f"            {_ATTACH_ICON}Image\n"
        f'            <input type="file" name="images" id="image-input" accept="{accept}" '
        'multiple class="visually-hidden"></label>\n'
        '          <span class="hint muted" id="shortcut-hint">Enter to send · Shift+Enter new line · <kbd>/</kbd> '
        "message · <kbd>Alt</kbd>+<kbd>S</kbd> stop · <kbd>Alt</kbd>+<kbd>N</kbd> new session</span>\n"
        "        </div>\n"
        f"        {regions['run_controls']}\n"
        "      </div>\n"
        "    </form>\n"
        "    "
    )
