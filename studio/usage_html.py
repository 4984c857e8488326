"""The Usage tab and the header's spend in plain Python: what the ``usage`` region's partials
render on a push.

Every turn's end re-renders the Usage tab (a new model call was priced) on every watched page;
through the template engine its table of token classes, chart and per-turn rows cost more than
the ledger read behind them. Here each is string joins with Django's escaping and its display
filters (``money``, ``tokens``, ``thousands``, ``pluralize``). ``_tab_usage.html`` and
``_session_stats.html`` still render the full page, and ``tests/studio/test_usage_html.py``
asserts both byte-identical.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.utils.html import conditional_escape

from studio.block_html import OOB, plural, variable
from studio.rendering import thousands, tokens
from studio.templatetags.studio_tags import money

_LEGEND = (
    '<div class="legend small"><span class="lg seg-input"></span>input <span class="lg seg-cached"></span>cached '
    '<span class="lg seg-write"></span>cache write <span class="lg seg-output"></span>output</div>'
)
_CLASSES = (
    ("seg-input", "Input", "input_tokens", "input"),
    ("seg-cached", "Cached input", "cached_input_tokens", "cached"),
    ("seg-write", "Cache write", "cache_creation_tokens", "cache_write"),
    ("seg-output", "Output", "output_tokens", "output"),
)


def render(context: dict[str, Any], *, oob: bool = True) -> list[str]:
    """The ``usage`` region's partials (``REGION_TEMPLATES["usage"]``): the tab, the header."""
    swap = OOB if oob else ""
    return [tab(context, swap), stats(context.get("usage") or {}, swap)]


def stats(usage: dict[str, Any], swap: str) -> str:
    """``_session_stats.html``: the tokens and money this conversation and its subagents spent."""
    total = usage.get("total") or {}
    return (
        f'<span id="session-stats" class="stats"{swap} title="Spent: every token this conversation and its '
        'subagents sent and received, and what they cost">\n'
        f"  <span><b>{variable(tokens(total.get('total_tokens')))}</b> tokens spent</span>"
        f'<span class="sep">·</span><span><b>{variable(money(total.get("cost")))}</b></span>\n</span>\n'
    )


def tab(context: dict[str, Any], swap: str) -> str:
    """``_tab_usage.html``: totals, the chart, the token classes, subagents, the newest turns."""
    session = context["session"]
    usage = context.get("usage") or {}
    total = usage.get("total") or {}
    totals = context.get("usage_totals") or {}
    costs = totals.get("class_costs")
    rows = context.get("usage_rows") or []
    chart = _chart(context.get("usage_chart") or {})
    what = "session" if session.kind == "main" else "conversation"
    classes = "".join(
        f'      <tr><td><span class="lg {css}"></span> {label}</td>'
        f'<td class="num">{variable(thousands(totals.get(field)))}</td>'
        f'<td class="num">{variable(money(costs.get(cost))) if costs else "—"}</td></tr>\n'
        for css, label, field, cost in _CLASSES
    )
    prices = "" if costs else " Per-class prices appear when the model's attributes declare a cost."
    return (
        f'<div id="tab-usage" class="tab-body"{swap}>\n'
        '  <div class="usage-total">\n'
        f'    <div class="metric"><span class="metric-v">{variable(money(total.get("cost")))}</span>'
        '<span class="metric-l">cost</span></div>\n'
        f'    <div class="metric"><span class="metric-v">{variable(total.get("calls") or 0)}</span>'
        '<span class="metric-l">model calls</span></div>\n'
        f'    <div class="metric"><span class="metric-v">{variable(tokens(total.get("total_tokens")))}</span>'
        '<span class="metric-l">tokens</span></div>\n'
        f"  </div>\n  {chart}\n"
        f'  <h3 class="tab-h">This {what}</h3>\n'
        '  <table class="table usage-table small" id="usage-classes">\n'
        '    <thead><tr><th>Token class</th><th class="num">Tokens</th><th class="num">Cost</th></tr></thead>\n'
        "    <tbody>\n"
        f"{classes}"
        '      <tr class="sub"><td>&nbsp;&nbsp;of which reasoning</td>'
        f'<td class="num">{variable(thousands(totals.get("reasoning_tokens")))}</td>'
        '<td class="num muted">in output</td></tr>\n'
        "    </tbody>\n"
        f"    <tfoot><tr><th>Total · {variable(totals.get('calls'))} call{plural(totals.get('calls'))}</th>"
        f'<th class="num">{variable(thousands(totals.get("tokens")))}</th>'
        f'<th class="num">{variable(money(totals.get("cost")))}</th></tr></tfoot>\n'
        f"  </table>\n  {_children(session, usage)}\n"
        f"  {_turns(session, rows, context.get('usage_rows_total'))}\n"
        '  <p class="muted small">Each token class is counted and priced once: input excludes cached input and '
        "cache writes; reasoning is part of output. A subagent's calls count for the subagent; the total adds "
        f"them once.{prices}</p>\n"
        "</div>\n"
    )


def _chart(chart: dict[str, Any]) -> str:
    bars = chart.get("bars")
    if not bars:
        return ""
    drawn = "".join(
        f"<g><title>{variable(bar.get('label'))}</title>"
        + "".join(
            f'<rect class="{variable(s.get("css"))}" x="{variable(bar.get("x"))}" y="{variable(s.get("y"))}" '
            f'width="{variable(bar.get("w"))}" height="{variable(s.get("h"))}" rx="1.5"/>'
            for s in bar.get("segments") or []
        )
        + "</g>"
        for bar in bars
    )
    return (
        f'\n  <svg class="usage-chart" viewBox="0 0 {variable(chart.get("width"))} {variable(chart.get("height"))}" '
        'preserveAspectRatio="xMinYMax meet" role="img" aria-label="Tokens per turn">\n'
        f"    {drawn}\n  </svg>\n  {_LEGEND}\n  "
    )


def _children(session: Any, usage: dict[str, Any]) -> str:
    children = usage.get("children")
    if not children:
        return ""
    own, total = usage.get("own") or {}, usage.get("total") or {}
    rows = "".join(
        '<tr class="child-usage"><td>↳ <a href="'
        f"{conditional_escape(reverse('studio:session_context', args=[session.root_id_str, child.get('target_id')]))}"
        f'">{variable(child.get("label"))}</a></td>{_calls(child.get("own") or {})}</tr>'
        for child in children
    )
    return (
        '\n  <h3 class="tab-h">Own and subagents</h3>\n'
        '  <table class="table usage-table small" id="usage-contexts">\n'
        '    <thead><tr><th>Conversation</th><th class="num">Calls</th><th class="num">Tokens</th>'
        '<th class="num">Cost</th></tr></thead>\n'
        "    <tbody>\n"
        f"      <tr><td>This conversation (own calls)</td>{_calls(own)}</tr>\n"
        f"      {rows}\n"
        "    </tbody>\n"
        "    <tfoot><tr><th>Total (each call counted once)</th>"
        f'<th class="num">{variable(total.get("calls") or 0)}</th>'
        f'<th class="num">{variable(thousands(total.get("total_tokens")))}</th>'
        f'<th class="num">{variable(money(total.get("cost")))}</th></tr></tfoot>\n'
        "  </table>\n  "
    )


def _calls(own: dict[str, Any]) -> str:
    return (
        f'<td class="num">{variable(own.get("calls") or 0)}</td>'
        f'<td class="num">{variable(thousands(own.get("total_tokens")))}</td>'
        f'<td class="num">{variable(money(own.get("cost")))}</td>'
    )


def _turns(session: Any, rows: list[dict[str, Any]], total: Any) -> str:
    if not rows:
        return ""
    newest = (
        f' <span class="muted small">newest {variable(len(rows))} of {variable(thousands(total))}</span>'
        if total is not None and total > len(rows)
        else ""
    )
    items = "".join(_turn(session, row) for row in rows)
    return f'\n  <h3 class="tab-h">Per turn{newest}</h3>\n  <ol class="turn-usage">\n    {items}\n  </ol>\n  '


def _turn(session: Any, row: dict[str, Any]) -> str:
    who = "Turn" if row.get("target_id") == session.target_id else "Subagent"
    prompt = row.get("prompt")
    reasoning = (
        f"<span>{variable(thousands(row.get('reasoning_tokens')))} reasoning</span>"
        if row.get("reasoning_tokens")
        else ""
    )
    model = f'<span class="tu-model mono">{variable(row.get("model"))}</span>' if row.get("model") else ""
    return (
        "\n    <li>\n"
        f'      <div class="tu-head"><b>{who}</b><span class="tu-prompt muted" title="{variable(prompt)}">'
        f'{variable(prompt or "(resumed)")}</span><span class="num">{variable(money(row.get("cost")))}</span></div>\n'
        '      <div class="tu-line muted small">\n'
        f"        <span>{variable(thousands(row.get('input_tokens')))} in</span>\n"
        f"        <span>{variable(thousands(row.get('cached_input_tokens')))} cached</span>\n"
        f"        <span>{variable(thousands(row.get('cache_creation_tokens')))} write</span>\n"
        f"        <span>{variable(thousands(row.get('output_tokens')))} out</span>\n"
        f"        {reasoning}\n"
        f"        <span>{variable(row.get('calls'))} call{plural(row.get('calls'))}</span>\n"
        f"        {model}\n"
        "      </div>\n"
        "    </li>\n    "
    )
