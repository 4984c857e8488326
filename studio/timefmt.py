"""Time on Studio's pages in one format (SPEC W8 and issue 26's "consistent time").

Pages show local times with the UTC time in a tooltip: the server renders a ``<time>`` element
carrying the instant (``datetime`` and ``data-local-time`` in epoch ms) and its UTC text, and
``static/studio/timeline.js`` replaces the text with the browser's local time, keeping the UTC
text as the tooltip — so a page without script still says an exact time. Durations have one
format everywhere (``duration``: ``850 ms``, ``4.2 s``, ``3 min 5 s``, ``2 h 4 min``), the same
one the browser uses for a bar that is still growing. Long ids (tasks, requests) are shortened to
their first 8 characters with the full id on hover. Pure functions: no Django.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from typing import Any

SHORT_ID = 8


def duration(ms: Any) -> str:
    """A duration in milliseconds as text ("" when unknown)."""
    if ms is None or ms == "":
        return ""
    try:
        value = float(ms)
    except (TypeError, ValueError):
        return ""
    if value < 1000:
        return f"{value:.0f} ms"
    if value < 60_000:
        return f"{value / 1000:.1f} s"
    if value < 3_600_000:
        return f"{int(value // 60_000)} min {int(value % 60_000 // 1000)} s"
    return f"{int(value // 3_600_000)} h {int(value % 3_600_000 // 60_000)} min"


def instant(value: Any) -> datetime | None:
    """An aware UTC datetime from epoch ms (int/float) or a datetime; None when unknown."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if value is None or isinstance(value, bool):
        return None
    try:
        return datetime.fromtimestamp(int(value) / 1000, tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def utc_text(when: datetime, *, seconds: bool = True) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC")


def local_time_html(value: Any, *, style: str = "datetime") -> str:
    """A ``<time>`` the page shows in local time (``style``: ``datetime``, ``time`` or ``date``),
    with the UTC time as its tooltip; "" when the instant is unknown."""
    when = instant(value)
    if when is None:
        return ""
    ms = int(when.timestamp() * 1000)
    text = utc_text(when)
    return (
        f'<time class="local-time" datetime="{when.isoformat(timespec="seconds")}" data-local-time="{ms}" '
        f'data-style="{escape(style)}" title="{text}">{text}</time>'
    )


def relative_time_html(value: Any, text: str) -> str:
    """``text`` ("5 minutes ago") for an instant, with its local and UTC times in the tooltip."""
    when = instant(value)
    if when is None:
        return escape(text)
    ms = int(when.timestamp() * 1000)
    utc = utc_text(when)
    return (
        f'<time class="local-time" datetime="{when.isoformat(timespec="seconds")}" data-local-time="{ms}" '
        f'data-style="relative" title="{utc}">{escape(text)}</time>'
    )


def short_id_html(value: Any) -> str:
    """A long id shortened, with the full id on hover (and for screen readers)."""
    full = str(value or "")
    if len(full) <= SHORT_ID + 1:
        return f'<span class="short-id mono">{escape(full)}</span>'
    quoted = escape(full)
    return f'<span class="short-id mono" title="{quoted}" aria-label="{quoted}">{escape(full[:SHORT_ID])}…</span>'
