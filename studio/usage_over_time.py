"""Usage over time (SPEC W10): tokens and cost per day and per model (and per user, for staff),
read from Studio's copy of the stores' usage ledgers — the rows the Usage tabs sum too, each a
ledger row (``UsageRecord``, reconciled with the store by ``record_id``), so the page, the tabs
and the stores agree. Days are UTC days of the call's end (``UsageRecord.at``). The charts are
plain SVG geometry (no script, no library, nothing fetched): stacked bars per day with a value
axis and day labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import TruncDate

from studio.models import UsageRecord

RANGES = (7, 30, 90)
SERIES = 6  # models drawn apart; the rest are "other models"
TOKEN_FIELDS = ("input_tokens", "cached_input_tokens", "cache_creation_tokens", "output_tokens", "reasoning_tokens")
EVERYONE = "*"


def records_for(viewer: Any, user: str = "") -> QuerySet[UsageRecord]:
    """The ledger rows of ``viewer``'s sessions; staff: of ``user`` (a username) or everyone."""
    rows = UsageRecord.objects.all()
    if viewer.is_staff and user == EVERYONE:
        return rows
    if viewer.is_staff and user:
        return rows.filter(session__owner__username=user)
    return rows.filter(session__owner=viewer)


def _sums(rows: QuerySet[UsageRecord]) -> dict[str, Any]:
    return {"calls": Count("id"), "cost": Sum("cost"), **{f: Sum(f) for f in TOKEN_FIELDS}}


def _clean(values: dict[str, Any]) -> dict[str, Any]:
    out = dict(values)
    out["calls"] = int(out.get("calls") or 0)
    out["cost"] = out.get("cost") or Decimal(0)
    for f in TOKEN_FIELDS:
        out[f] = int(out.get(f) or 0)
    out["tokens"] = sum(out[f] for f in TOKEN_FIELDS[:4])  # reasoning is part of output
    return out


def totals(rows: QuerySet[UsageRecord]) -> dict[str, Any]:
    """Calls, tokens by class and cost of ``rows`` (sums in the database)."""
    return _clean(rows.aggregate(**_sums(rows)))


@dataclass(slots=True)
class Bar:
    x: float
    w: float
    segments: list[dict[str, Any]]
    title: str


@dataclass(slots=True)
class Chart:
    """A stacked bar chart as SVG geometry: bars, value ticks and day labels."""

    title: str
    width: int
    height: int
    left: int
    bottom: int
    bars: list[Bar] = field(default_factory=list)
    y_ticks: list[dict[str, Any]] = field(default_factory=list)
    x_labels: list[dict[str, Any]] = field(default_factory=list)

    @property
    def plot_right(self) -> int:
        return self.width - 8

    @property
    def plot_bottom(self) -> int:
        return self.height - self.bottom


def _nice_max(peak: float) -> tuple[float, float]:
    """An axis top at or above ``peak`` and its step (1, 2 or 5 × a power of ten), 4 steps."""
    if peak <= 0:
        return 1.0, 0.25
    raw = peak / 4
    power = 10 ** math.floor(math.log10(raw))
    step = next(s * power for s in (1, 2, 2.5, 5, 10) if s * power >= raw)
    return step * 4, step


def _label(value: float, money: bool) -> str:
    if money:
        return f"${value:.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 1000:
        return f"{value / 1000:.0f}k" if value >= 10_000 else f"{value / 1000:.1f}k"
    return f"{value:.0f}"


def chart(
    title: str, days: list[date], series: list[str], values: dict[tuple[date, str], float], *, money: bool
) -> Chart:
    """Bars per day, stacked by series (``values[(day, series)]``)."""
    c = Chart(title=title, width=640, height=220, left=52, bottom=26)
    plot_w = c.plot_right - c.left
    plot_h = c.plot_bottom - 10
    peak = max((sum(values.get((d, s), 0.0) for s in series) for d in days), default=0.0)
    top, step = _nice_max(peak)
    slot = plot_w / max(1, len(days))
    bar_w = max(2.0, min(28.0, slot * 0.7))
    for index in range(5):
        value = step * index
        y = c.plot_bottom - value / top * plot_h
        c.y_ticks.append({"y": round(y, 2), "label": _label(value, money)})
    every = max(1, math.ceil(len(days) / 8))
    for i, day in enumerate(days):
        x = c.left + i * slot + (slot - bar_w) / 2
        y = float(c.plot_bottom)
        segments = []
        parts = []
        for n, name in enumerate(series):
            value = values.get((day, name), 0.0)
            if value <= 0:
                continue
            h = value / top * plot_h
            y -= h
            segments.append({"y": round(y, 2), "h": round(h, 2), "css": f"series-{n}"})
            parts.append(f"{name}: {_label(value, money) if not money else f'${value:.4f}'}")
        c.bars.append(
            Bar(round(x, 2), round(bar_w, 2), segments, f"{day.isoformat()}: " + ("; ".join(parts) or "none"))
        )
        if i % every == 0:
            c.x_labels.append({"x": round(x + bar_w / 2, 2), "label": day.strftime("%b %d")})
    return c


def usage_page(viewer: Any, *, days: int = 30, user: str = "", today: date | None = None) -> dict[str, Any]:
    """Everything the page shows: the charts, the table by day and model (and user), totals."""
    days = days if days in RANGES else 30
    today = today or datetime.now(tz=UTC).date()
    first = today - timedelta(days=days - 1)
    everyone = viewer.is_staff and user == EVERYONE
    rows = records_for(viewer, user)
    in_range = rows.filter(at__gte=datetime.combine(first, datetime.min.time(), tzinfo=UTC))
    group = ["day", "model"] + (["session__owner__username"] if everyone else [])
    table = [
        _clean(r)
        for r in in_range.annotate(day=TruncDate("at", tzinfo=UTC))
        .values(*group)
        .annotate(**_sums(in_range))
        .order_by("-day", "model", *group[2:])
    ]
    by_model: dict[str, int] = {}
    for r in table:
        by_model[r["model"] or "unknown"] = by_model.get(r["model"] or "unknown", 0) + r["tokens"]
    names = sorted(by_model, key=lambda m: -by_model[m])
    drawn = names[: SERIES - 1] if len(names) > SERIES else names
    series = drawn + (["other models"] if len(names) > len(drawn) else [])
    tokens: dict[tuple[date, str], float] = {}
    cost: dict[tuple[date, str], float] = {}
    for r in table:
        name = r["model"] or "unknown"
        key = (r["day"], name if name in drawn else "other models")
        tokens[key] = tokens.get(key, 0.0) + r["tokens"]
        cost[key] = cost.get(key, 0.0) + float(r["cost"])
    day_list = [first + timedelta(days=n) for n in range(days)]
    per_user = (
        [_clean(r) for r in in_range.values("session__owner__username").annotate(**_sums(in_range)).order_by("-cost")]
        if everyone
        else []
    )
    return {
        "days": days,
        "ranges": RANGES,
        "first_day": first,
        "last_day": today,
        "table": table,
        "series": [{"name": name, "css": f"series-{n}"} for n, name in enumerate(series)],
        "tokens_chart": chart("Tokens per day", day_list, series, tokens, money=False),
        "cost_chart": chart("Cost per day", day_list, series, cost, money=True),
        "range_totals": totals(in_range),
        "all_totals": totals(rows),
        "per_user": per_user,
        "everyone": everyone,
    }
