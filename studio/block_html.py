"""A conversation block's markup in plain Python: what ``_block.html`` and its partials render.

Every block of the conversation — a settled turn's on a page render, the live turn's on every
push of streamed work — is rendered here, not through Django's template engine: a block's
markup is a few string joins, and the engine's per-render setup (a context, the include chain,
the filter lookups) cost several times that on each push. The templates
(``_block.html``, ``_block_parts.html``, ``_thinking_body.html``, ``_tool_summary.html``,
``_tool_body.html``, ``_retry_block.html``, ``_search_block.html``, ``_sources_block.html``,
``_compaction_block.html``) stay the readable reference of this markup, and
``tests/studio/test_block_html.py`` renders both over every block kind and asserts them
byte-identical. A ``codemode`` call (its nested calls, its log) is the exception: it is
rendered by the templates (``studio.rendering.render_block``), being rare and elaborate.

Escaping is Django's own (``conditional_escape`` after ``localize``, as a template variable is
rendered), so what a model or a tool wrote is text here exactly as there; Markdown arrives
already rendered and sanitised (``studio.rendering.render_markdown``) as ``html``.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.template.defaultfilters import linebreaksbr
from django.utils.formats import localize
from django.utils.html import conditional_escape, escape
from django.utils.safestring import SafeString, mark_safe

from studio.host.live import LiveBlock, key_argument
from studio.timefmt import duration

OOB = ' hx-swap-oob="true"'
_COPY = '<button type="button" class="btn-link copy-button" data-copy="pre" aria-label="Copy">Copy</button>'
_THINKING_ICON = (
    '<svg viewBox="0 0 16 16" aria-hidden="true"><path d="M8 2a4.5 4.5 0 0 0-2.5 8.2V12h5v-1.8A4.5 4.5 0 0 0 8 '
    '2ZM6 14h4" fill="none" stroke="currentColor" stroke-width="1.4" stroke-linecap="round"/></svg>'
)
_RETRY_ICON = (
    '<svg viewBox="0 0 16 16" aria-hidden="true"><path d="M13 8a5 5 0 1 1-1.5-3.6M13 2.5v2.8h-2.8" fill="none" '
    'stroke="currentColor" stroke-width="1.5" stroke-linecap="round" stroke-linejoin="round"/></svg>'
)
_SEARCH_ICON = (
    '<svg viewBox="0 0 16 16" aria-hidden="true"><circle cx="7" cy="7" r="4.5" fill="none" stroke="currentColor" '
    'stroke-width="1.5"/><path d="m10.5 10.5 3 3" stroke="currentColor" stroke-width="1.5" '
    'stroke-linecap="round"/></svg>'
)
_RULE = '<span class="rule" aria-hidden="true"></span>'
_TOOL_ICONS = {"running": '<span class="spinner"></span>', "ok": "✓", "error": "!", "interrupted": "■"}
_TOOL_STATUSES = {"running": "running", "ok": "done", "error": "error", "interrupted": "stopped"}
#: The kinds that have a branch of their own in ``_block.html`` (a notice is its last, bare one).
_OWN_LINE = frozenset(("text", "thinking", "tool", "retry", "search", "sources", "compaction", "steer"))
_SEARCHES = {"running": "Searching the web", "failed": "Web search failed"}


def variable(value: Any) -> str:
    """A value as ``{{ value }}`` renders it: localized (numbers), then escaped unless safe."""
    if type(value) is str:  # most values: a plain string is only escaped
        return escape(value)
    if type(value) is int and not settings.USE_THOUSAND_SEPARATOR:
        return str(value)  # what ``localize`` gives an int without grouping, at a tenth of its cost
    return str(conditional_escape(localize(value)))


def seconds(value: Any) -> str:
    """A delay in seconds as a person reads it: ``4 s``, ``0.5 s`` (the ``seconds`` filter)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return ""
    return f"{number:.0f} s" if number >= 1 or number == 0 else f"{number:.1f} s"


def safe_href(url: Any) -> str:
    """``url`` if it is an http(s) link (a model's source may say anything), else "" (the
    ``safe_href`` filter)."""
    text = str(url or "").strip()
    try:
        scheme = urlsplit(text).scheme.lower()
    except ValueError:
        return ""
    return text if scheme in ("http", "https") else ""


def url_host(url: Any) -> str:
    """The host a link goes to, shown beside a source's title (the ``url_host`` filter)."""
    try:
        return urlsplit(str(url or "")).hostname or ""
    except ValueError:
        return ""


def pretty_json(value: Any) -> str:
    if value is None:
        return ""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        return str(value)


def plural(value: Any) -> str:
    """Django's ``pluralize``: "s" unless the number (or the length) is one."""
    try:
        return "" if float(value) == 1 else "s"
    except (TypeError, ValueError):
        pass
    try:
        return "" if len(value) == 1 else "s"
    except TypeError:
        return ""


def block(block: LiveBlock, dom_id: str, *, html: str = "") -> SafeString:
    """One block (``_block.html``): ``html`` is a text or compaction block's rendered Markdown,
    a tool call shows its headline argument and its arguments as JSON."""
    markup = _block(block, escape(dom_id), dom_id, html)
    return mark_safe(markup + "\n" if block.kind in _OWN_LINE else markup)  # each branch ends its own line


def _block(block: LiveBlock, i: str, dom_id: str, html: str) -> str:
    kind = block.kind
    if kind == "text":
        return f'<div class="block md" id="{i}">{conditional_escape(html)}</div>\n'
    if kind == "thinking":
        return (
            f'<details class="block thinking" id="{i}"><summary>{_THINKING_ICON}Thinking</summary>'
            f"{thinking_body(block, dom_id)}</details>\n"
        )
    if kind == "tool":
        return (
            f'<details class="block tool" id="{i}">{tool_summary(block, dom_id)}{tool_body(block, dom_id)}</details>\n'
        )
    if kind == "retry":
        return _retry(block, i) + "\n"
    if kind == "search":
        return _search(block, i) + "\n"
    if kind == "sources":
        return _sources(block, i) + "\n"
    if kind == "compaction":
        return _compaction(block, i, html) + "\n"
    if kind == "steer":
        return (
            f'<div class="user-msg steer-msg" id="{i}"><div class="bubble"><span class="steer-tag">steer</span> '
            f"{linebreaksbr(block.text, autoescape=True)}</div></div>\n"
        )
    notice = variable(block.status or "info")
    return f'<div class="block notice notice-{notice}" id="{i}" role="status">{variable(block.text)}</div>\n'


def parts(block: LiveBlock, dom_id: str) -> SafeString:
    """A thinking or tool block's inner parts as out-of-band swaps (``_block_parts.html``): an
    update that keeps an open ``<details>`` open."""
    if block.kind == "tool":
        return mark_safe(tool_summary(block, dom_id, oob=True) + tool_body(block, dom_id, oob=True) + "\n")
    return mark_safe(thinking_body(block, dom_id, oob=True) + "\n")


def thinking_body(block: LiveBlock, dom_id: str, *, oob: bool = False) -> str:
    swap = OOB if oob else ""
    return f'<div class="thinking-body" id="{escape(dom_id)}-body"{swap}>{variable(block.text)}</div>\n'


def tool_summary(block: LiveBlock, dom_id: str, *, oob: bool = False) -> str:
    """``_tool_summary.html`` for a call that is not a ``codemode`` script."""
    swap = OOB if oob else ""
    status = block.status
    arg = variable(key_argument(block.name, block.arguments))
    return (
        f'<summary class="tool-sum status-{variable(status)}" id="{escape(dom_id)}-sum"{swap}>\n'
        f'  <span class="tool-icon" aria-hidden="true">{_TOOL_ICONS.get(status, "·")}</span>\n'
        f'  <span class="tool-name">{variable(block.name)}</span>\n'
        f'  <span class="tool-arg" title="{arg}">{arg}</span>\n'
        f'  <span class="tool-status">{_TOOL_STATUSES.get(status, "")}</span>\n'
        f'  <span class="tool-time">{variable(duration(block.duration_ms))}</span>\n'
        "</summary>\n"
    )


def tool_body(block: LiveBlock, dom_id: str, *, oob: bool = False) -> str:
    """``_tool_body.html`` for a call that is not a ``codemode`` script."""
    swap = OOB if oob else ""
    partial = (
        f'<div class="kv-label">Output so far</div><pre class="code">{variable(block.partial)}</pre>'
        if block.partial
        else ""
    )
    return (
        f'<div class="tool-body" id="{escape(dom_id)}-body"{swap}>\n  \n'
        f'  <div class="kv-label">Arguments {_COPY}</div>\n'
        f'  <pre class="code">{variable(pretty_json(block.arguments) or "{}")}</pre>\n'
        f"  {partial}\n"
        f"  {_result(block)}\n"
        "  \n</div>\n"
    )


def _result(block: LiveBlock) -> str:
    if not block.result:
        return ""
    error = block.status == "error"
    return (
        f'<div class="kv-label">{"Error" if error else "Result"} {_COPY}</div>'
        f'<pre class="code{" code-error" if error else ""}">{variable(block.result)}</pre>'
    )


def _retry(block: LiveBlock, i: str) -> str:
    what = (
        f'Cannot connect to <b class="mono">{variable(block.endpoint)}</b>'
        if block.status == "connect"
        else "Connection dropped"
    )
    delay = f' <span class="retry-in">in {variable(seconds(block.delay_s))}</span>' if block.delay_s else ""
    reason = f'<span class="muted retry-reason"> · {variable(block.text)}</span>' if block.text else ""
    return (
        f'<div class="block retry retry-{variable(block.status or "dropped")}" id="{i}" role="status" '
        f'data-retry-delay="{variable(block.delay_s)}">{_RETRY_ICON}<span class="retry-what">{what} — retrying{delay}, '
        f"attempt {variable(block.attempt)} of {variable(block.max_attempts)}</span>{reason}"
        '<button type="button" class="btn btn-stop btn-small retry-stop" '
        'title="Stop the turn (the same as the composer\'s Stop)">Stop</button></div>\n'
    )


def _search(block: LiveBlock, i: str) -> str:
    what = _SEARCHES.get(block.status, "Searched the web")
    query = f' <q class="search-query">{variable(block.text)}</q>' if block.text else ""
    found = (
        f' <span class="muted">· {variable(len(block.sources))} result{plural(block.sources)}</span>'
        if block.sources
        else ""
    )
    result = f' <span class="muted">· {variable(block.result)}</span>' if block.result else ""
    return (
        f'<div class="block search search-{variable(block.status)}" id="{i}" role="status">{_SEARCH_ICON}'
        f'<span class="search-what">{what}</span>{query}{found}{result}</div>\n'
    )


def _sources(block: LiveBlock, i: str) -> str:
    items: list[str] = []
    for source in block.sources:
        url = source.get("url", "")
        href = safe_href(url)
        title = variable(source.get("title") or url)
        link = (
            f'<a href="{variable(href)}" target="_blank" rel="noopener noreferrer nofollow">{title}</a>'
            if href
            else f"<span>{title}</span>"
        )
        items.append(f'<li>{link} <span class="source-host muted">{variable(url_host(url))}</span></li>')
    return (
        f'<div class="block sources" id="{i}"><div class="kv-label">Sources</div>'
        f'<ol class="source-list">{"".join(items)}</ol></div>\n'
    )


def _compaction(block: LiveBlock, i: str, html: str) -> str:
    if block.status == "running":
        return (
            f'<div class="block compaction running" id="{i}" role="status">{_RULE}<span class="compaction-label">'
            f'<span class="spinner" aria-hidden="true"></span> Compacting the context…</span>{_RULE}</div>\n\n'
        )
    how = " automatically" if block.status == "auto" else ""
    return (
        f'<details class="block compaction" id="{i}"><summary>{_RULE}<span class="compaction-label">'
        f"Context compacted{how} — the summary</span>{_RULE}</summary>"
        f'<div class="md compaction-summary">{conditional_escape(html)}</div></details>\n'
    )
