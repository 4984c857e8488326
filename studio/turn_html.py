"""The conversation's settled turns in plain Python: what ``_conversation.html`` renders for them.

Every turn's end pushes the conversation region again (the turn settles from the store) on every
watched page. Its blocks were already plain Python (``studio.block_html``); each turn around them
— the user's message, the run's notice, Copy / Retry / Regenerate / Fork — went through the
template engine's include chain once per turn shown. Here each is string joins with Django's
escaping. ``_conversation.html``, ``_turn.html``, ``_user_message.html``, ``_run_notice.html`` and
``_turn_actions.html`` still render the full page, and ``tests/studio/test_turn_html.py`` asserts
both byte-identical; ``live_turn`` is ``_live_turn.html``, what a turn's opening pushes. An empty
conversation (its greeting and the demo's prompts) is left to the template: no turn's end
renders it.
"""

from __future__ import annotations

from typing import Any

from django.template.defaultfilters import linebreaksbr, urlencode
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import conditional_escape, escape

from studio.block_html import OOB, plural, variable
from studio.links import studio_url
from studio.rendering import Turn, render_block
from studio.text_stream import live_block_html


def conversation(context: dict[str, Any], *, oob: bool = True) -> str:
    """``_conversation.html`` for ``context`` (``pages.conversation_context`` and the controls')."""
    turns: list[Turn] = context.get("turns") or []
    live = context.get("live")
    if not turns and not live and not context.get("turns_first"):
        return render_to_string("studio/_conversation.html", {**context, "oob": oob})  # the greeting
    shown = [turn_html(turn, context, "tx", last=n == len(turns) - 1) for n, turn in enumerate(turns)]
    live_html = live_turn(live, context.get("live_prefix") or "", context.get("code_mode_runs")) if live else ""
    return (
        f'<div id="conversation" class="conversation"{OOB if oob else ""} '
        f'data-first="{variable(context.get("turns_first"))}" data-total="{variable(context.get("turns_total"))}" '
        f'data-generation="{variable(context.get("turns_generation"))}">\n'
        f"  \n  {''.join(shown)}\n  {live_html}\n</div>\n"
    )


def live_turn(live: dict[str, Any], prefix: str, code_mode_runs: Any) -> str:
    """``_live_turn.html``: the turn still running — its prompt, its blocks so far (a text block
    in its streaming layout at the host's state, ``text_stream``), the typing mark."""
    message = (
        user_message(
            live["prompt"],
            live.get("images") or [],
            live.get("session_id"),
            edit_entry="",
            edit_first=False,
            image_count=live.get("image_count"),
        )
        if live.get("prompt") is not None
        else ""
    )
    streams = live.get("streams")
    blocks = "".join(
        render_block(
            b,
            prefix,
            code_mode_runs,
            live_block_html(b.text, f"{prefix}-{b.key}", streams, b.key) if b.kind == "text" else None,
        )
        for b in live.get("blocks") or []
    )
    working = "Planning…" if live.get("agent") == "plan" else "Working…"
    return (
        f'<section class="turn live" id="live-turn" data-request-id="{variable(live.get("request_id"))}">\n'
        f"  {message}\n"
        '  <div class="reply" id="live-blocks" aria-live="polite" aria-atomic="false" '
        'aria-relevant="additions text">\n'
        f"    {blocks}\n"
        "  </div>\n"
        f'  <div class="typing"><span></span><span></span><span></span><em>{working}</em></div>\n'
        "</section>\n"
    )


def turn_html(turn: Turn, context: dict[str, Any], prefix: str, *, last: bool) -> str:
    """``_turn.html``: ``last`` is whether it is the conversation's last turn shown (Regenerate)."""
    session = context["session"]
    message = (
        user_message(
            turn.prompt,
            turn.images,
            session.pk,
            edit_entry=turn.prompt_entry,
            edit_first=not turn.before_entry,
            image_count=context.get("image_count"),
        )
        if turn.prompt is not None
        else ""
    )
    blocks = "".join(render_block(b, prefix, context.get("code_mode_runs")) for b in turn.blocks)
    notice = run_notice(turn.notice) if turn.notice else ""
    actions = "" if session.read_only else turn_actions(turn, context, prefix, last=last)
    return (
        f'<section class="turn" id="turn-{variable(turn.key)}" data-turn="{variable(turn.index)}">\n'
        f"  {message}\n"
        '  <div class="reply">\n'
        f"    {blocks}\n"
        f"    {notice}\n"
        "  </div>\n"
        f"  {actions}\n"
        "</section>\n"
    )


def user_message(
    text: Any, images: list[Any], session_id: Any, *, edit_entry: Any, edit_first: bool, image_count: Any = None
) -> str:
    """``_user_message.html``: the prompt, its images (or how many), Copy and Edit."""
    body = f'<div class="user-text">{linebreaksbr(text, autoescape=True)}</div>' if text else ""
    if images:
        url = conditional_escape(studio_url("studio:session_image", session_id))
        thumbs = "".join(
            f'<a class="thumb" href="{url}?entry={variable(urlencode(img.entry_id))}&amp;n={variable(img.index)}" '
            'target="_blank" rel="noopener">'
            f'<img src="{url}?entry={variable(urlencode(img.entry_id))}&amp;n={variable(img.index)}" '
            f'alt="Image {n} of your message" loading="lazy"></a>'
            for n, img in enumerate(images, start=1)
        )
        body += f'<div class="thumbs">{thumbs}</div>'
    elif image_count:
        body += f'<span class="attach muted">+ {variable(image_count)} image{plural(image_count)}</span>'
    actions = ""
    if text:
        edit = (
            f'<button type="button" class="btn-link edit-button" data-entry="{variable(edit_entry)}" '
            f'data-first="{"1" if edit_first else ""}" aria-label="Edit and resend this message">Edit</button>'
            if edit_entry
            else ""
        )
        actions = (
            '<div class="msg-actions"><button type="button" class="btn-link copy-button" data-copy="message" '
            f'aria-label="Copy your message">Copy</button>{edit}</div>'
        )
    return f'<div class="user-msg"><div class="bubble">{body}</div>\n{actions}</div>\n'


def run_notice(notice: dict[str, Any]) -> str:
    """``_run_notice.html``: how the run ended, when it did not simply answer."""
    level = notice.get("level", "")
    code = f' <code class="code-chip">{variable(notice.get("code"))}</code>' if notice.get("code") else ""
    text = f'<div class="notice-text">{variable(notice.get("text"))}</div>' if notice.get("text") else ""
    return (
        f'<div class="notice notice-{variable(level)}" role="{"alert" if level == "error" else "status"}">\n'
        f"  <strong>{variable(notice.get('title', ''))}</strong>{code}\n"
        f"  {text}\n"
        "</div>\n"
    )


def turn_actions(turn: Turn, context: dict[str, Any], prefix: str, *, last: bool) -> str:
    """``_turn_actions.html``: Copy answer; Retry (after an error) or Regenerate (the last turn);
    Fork from here."""
    session = context["session"]
    answer = turn.answer
    copy = (
        f'<template class="copy-source">{escape(answer)}</template><button type="button" class="btn-link '
        'copy-button" data-copy="answer" aria-label="Copy the answer">Copy answer</button>'
        if answer
        else ""
    )
    notice = turn.notice or {}
    resend = ""
    if notice.get("level") == "error" and turn.prompt_entry:
        resend = _retry(turn, context)
    elif prefix == "tx" and last and turn.prompt_entry and not context.get("live") and not context.get("pending"):
        url = _url(context, "studio:session_resend", session.pk)
        resend = (
            f'\n  <form class="regenerate-form" method="post" action="{url}" hx-post="{url}" '
            'hx-target="#composer-error" hx-swap="innerHTML">\n'
            f'    <input type="hidden" name="entry_id" value="{variable(turn.prompt_entry)}">\n'
            '    <button type="submit" class="btn-link regenerate-button" title="Send the same prompt again as a new '
            'request (the answer above stays)">Regenerate</button>\n'
            "  </form>\n  "
        )
    fork = ""
    if turn.fork_entry:
        url = _url(context, "studio:session_fork", session.pk)
        fork = (
            f'\n  <form method="post" action="{url}" hx-post="{url}" hx-swap="none">\n'
            f'    <input type="hidden" name="entry_id" value="{variable(turn.fork_entry)}">\n'
            '    <button type="submit" class="btn-link fork-button" title="Start a new conversation that keeps '
            'everything up to here">Fork from here</button>\n'
            "  </form>\n  "
        )
    return f'<div class="turn-actions">\n  {copy}\n  {resend}\n  {fork}\n</div>\n'


def _retry(turn: Turn, context: dict[str, Any]) -> str:
    session = context["session"]
    url = _url(context, "studio:session_resend", session.pk)
    choices = context.get("model_choices") or []
    selected = (context.get("config") or {}).get("model_pk")
    select = (
        '<select name="model" aria-label="Retry on model">'
        + "".join(
            f'<option value="{variable(m.pk)}"{" selected" if m.pk == selected else ""}>'
            f"{variable(m.display_name)}</option>"
            for m in choices
        )
        + "</select>"
        if len(choices) > 1
        else ""
    )
    root, model = context.get("root"), context.get("model_in_use")
    settings = ""
    if root is not None and root.owner.is_staff and model and not model.is_demo:
        change = _url(context, "admin:studio_registeredmodel_change", model.pk)
        settings = f'<a class="btn-link model-settings" href="{change}">Model settings</a>'
    return (
        f'\n  <form class="retry-form" method="post" action="{url}" hx-post="{url}" hx-target="#composer-error" '
        'hx-swap="innerHTML">\n'
        f'    <input type="hidden" name="entry_id" value="{variable(turn.prompt_entry)}">\n'
        f"    {select}\n"
        '    <button type="submit" class="btn btn-small btn-primary retry-button">Retry</button>\n'
        f"    {settings}\n"
        "  </form>\n  "
    )


def _url(context: dict[str, Any], name: str, *args: Any) -> str:
    """``reverse(name, args)``, escaped, once per render (kept in ``context``): a conversation of
    forty turns names the same few URLs forty times, and each ``reverse`` costs ~50 µs (a
    session's own routes come from ``studio.links``' memo)."""
    urls: dict[tuple[str, tuple[Any, ...]], str] = context.setdefault("_urls", {})
    key = (name, args)
    if key not in urls:
        session_route = name.startswith("studio:") and len(args) == 1
        url = studio_url(name, args[0]) if session_route else reverse(name, args=list(args))
        urls[key] = str(conditional_escape(url))
    return urls[key]
