"""Small display filters for Studio templates (numbers, durations, money)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template

register = template.Library()


@register.filter
def duration(ms: Any) -> str:
    if ms is None or ms == "":
        return ""
    ms = float(ms)
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{int(ms // 60_000)} min {int(ms % 60_000 // 1000)} s"


@register.filter
def tokens(value: Any) -> str:
    value = int(value or 0)
    if value < 1000:
        return str(value)
    if value < 1_000_000:
        return f"{value / 1000:.1f}k".replace(".0k", "k")
    return f"{value / 1_000_000:.2f}M"


@register.filter
def thousands(value: Any) -> str:
    return f"{int(value or 0):,}"


@register.filter
def money(value: Any) -> str:
    value = Decimal(str(value or 0))
    if value == 0:
        return "$0"
    if value < Decimal("0.01"):
        return f"${value:.4f}"
    return f"${value:.2f}"


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


@register.simple_tag
def studio_block(block: Any, prefix: str) -> str:
    """One conversation block through the same code path the live pushes use."""
    from studio.rendering import render_block

    return render_block(block, prefix)
