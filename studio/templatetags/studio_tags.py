"""Small display filters for Studio templates (numbers, durations, money)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template

register = template.Library()


@register.simple_tag(takes_context=True)
def studio_live_block(context: Any, block: Any, prefix: str) -> str:
    """A block of the live turn: a text block in its streaming layout (``studio.text_stream``),
    at the state the host's pushes continue from."""
    from studio.rendering import render_block
    from studio.text_stream import live_block_html

    html = None
    if block.kind == "text":
        live = context.get("live") or {}
        html = live_block_html(block.text, f"{prefix}-{block.key}", live.get("streams"), block.key)
    return render_block(block, prefix, context.get("code_mode_runs"), html)


@register.filter
def duration(ms: Any) -> str:
    """A duration in ms, in the one format every page uses (``studio.timefmt.duration``)."""
    from studio.timefmt import duration as format_duration

    return format_duration(ms)


@register.filter
def seconds(value: Any) -> str:
    """A delay in seconds as a person reads it: ``4 s``, ``0.5 s``."""
    from studio.block_html import seconds as seconds_of

    return seconds_of(value)


@register.filter
def safe_href(url: Any) -> str:
    """``url`` if it is an http(s) link (a model's source may say anything), else ""."""
    from studio.block_html import safe_href as safe_href_of

    return safe_href_of(url)


@register.filter
def url_host(url: Any) -> str:
    """The host a link goes to (shown beside a source's title)."""
    from studio.block_html import url_host as url_host_of

    return url_host_of(url)


@register.filter
def tokens(value: Any) -> str:
    from studio.rendering import tokens as label

    return label(value)


@register.filter
def thousands(value: Any) -> str:
    from studio.rendering import thousands as label

    return label(value)


@register.simple_tag
def context_ring(usage: Any, oob: Any = False) -> Any:
    """The context ring (``studio.rendering.render_context_ring``: also what a push sends)."""
    from django.utils.safestring import mark_safe

    from studio.rendering import render_context_ring

    return mark_safe(render_context_ring(usage, oob=bool(oob)))


@register.filter
def money(value: Any) -> str:
    """US dollars, one rule everywhere: two significant digits under a dollar ($0.0070,
    $0.010, $0.46), cents above — so a cost never changes precision as it grows past a cent."""
    value = Decimal(str(value or 0))
    if value == 0:
        return "$0"
    if value >= 1:
        return f"${value:,.2f}"
    places = max(2, 1 - value.adjusted())  # the decimals that show two significant digits
    return f"${value:.{places}f}"


@register.filter
def ago(value: Any) -> str:
    """'just now', '5 minutes ago', '2 days ago' (the largest unit only)."""
    from django.utils import timezone
    from django.utils.timesince import timesince

    if not value:
        return ""
    if (timezone.now() - value).total_seconds() < 60:
        return "just now"
    return timesince(value, depth=1) + " ago"


@register.filter
def get(mapping: Any, key: Any) -> Any:
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.simple_tag(takes_context=True)
def studio_block(context: Any, block: Any, prefix: str) -> str:
    """One conversation block through the same code path the live pushes use (with the
    snapshot's code-mode executions, ``code_mode_runs``, when the page context has them)."""
    from studio.rendering import render_block

    return render_block(block, prefix, context.get("code_mode_runs"))


@register.filter
def js_hl(value: Any) -> str:
    """A code-mode script as highlighted, escaped HTML."""
    from studio.rendering import highlight_code

    return highlight_code(str(value or ""), "javascript")


@register.filter
def json_hl(value: Any) -> str:
    """JSON (a checkpoint, an input, an outcome) as highlighted, escaped HTML."""
    from studio.rendering import highlight_json

    return highlight_json(value)


@register.filter
def is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _when(ms: Any) -> Any:
    from datetime import UTC, datetime

    try:
        return datetime.fromtimestamp(int(ms) / 1000, tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


@register.filter
def ms_iso(ms: Any) -> str:
    """A store timestamp (ms since the epoch) as ISO 8601, for ``<time datetime>``."""
    when = _when(ms)
    return when.isoformat(timespec="seconds") if when else ""


@register.filter
def ms_time(ms: Any) -> str:
    """A store timestamp as an absolute time (UTC; the page shows it in the browser's zone)."""
    when = _when(ms)
    return when.strftime("%H:%M:%S UTC") if when else ""


@register.filter
def wake_in(ms: Any) -> str:
    """The countdown to a wake time as rendered by the server (the page keeps it ticking)."""
    import time

    try:
        left = int(ms) - int(time.time() * 1000)
    except (TypeError, ValueError):
        return ""
    if left <= 0:
        return "firing…"
    seconds = (left + 999) // 1000
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"in {hours}:{minutes:02d}:{seconds:02d}" if hours else f"in {minutes}:{seconds:02d}"


@register.filter
def task_css(status: Any) -> str:
    """A task status as the row's colour class (the same palette as tool rows)."""
    return {
        "completed": "ok",
        "failed": "error",
        "error": "error",
        "aborted": "interrupted",
        "cancelled": "interrupted",
        "orphaned": "interrupted",
        "running": "running",
        "pending": "running",
        "waiting": "waiting",
        "blocked": "blocked",
        "paused": "waiting",
    }.get(str(status), str(status))


# --- time, in one format (studio.timefmt) and the Timeline ---------------------------------------


@register.simple_tag
def local_time(value: Any, style: str = "datetime") -> str:
    """A local time with the UTC time as its tooltip (``studio.timefmt.local_time_html``)."""
    from django.utils.safestring import mark_safe

    from studio.timefmt import local_time_html

    return mark_safe(local_time_html(value, style=style))


@register.simple_tag
def ago_time(value: Any) -> str:
    """"5 minutes ago", with the local and UTC times on hover."""
    from django.utils.safestring import mark_safe

    from studio.timefmt import relative_time_html

    return mark_safe(relative_time_html(value, ago(value)))


@register.simple_tag
def short_id(value: Any) -> str:
    """A long id (a task's, a request's) shortened, with the full id on hover."""
    from django.utils.safestring import mark_safe

    from studio.timefmt import short_id_html

    return mark_safe(short_id_html(value))


@register.filter
def sub(value: Any, other: Any) -> Any:
    try:
        return int(value) - int(other)
    except (TypeError, ValueError):
        return None


@register.filter
def depth_class(depth: Any) -> int:
    """Rows indent up to 8 levels (deeper ones stay at 8)."""
    return min(int(depth or 0), 8)


@register.filter
def one(value: Any) -> list[Any]:
    return [value]


_KIND_NAMES = {
    "turn": "turn",
    "subagent": "subagent run",
    "model": "model request",
    "tool": "tool call",
    "script": "code-mode script",
    "nested_call": "nested tool call",
    "compaction": "compaction",
    "wait": "wait for a person",
    "gap": "crash/resume gap",
    "task": "durable task",
    "task_phase": "task phase",
    "task_sleep": "task sleep",
    "task_wait": "task waiting on children",
}


@register.filter
def kind_name(kind: Any) -> str:
    return _KIND_NAMES.get(str(kind), str(kind))


@register.simple_tag
def studio_url(name: str, session_id: Any = None) -> str:
    """``{% url name session_id %}`` for Studio's own routes (no argument, or a session's UUID),
    from ``studio.links``' memo instead of a ``reverse`` per link."""
    from studio.links import studio_url as link

    return link(name, session_id)
