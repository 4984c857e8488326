"""The Usage tab's plain-Python markup (``studio.usage_html``) is byte-identical to the templates'.

A turn's end pushes the ``usage`` region on every watched page (issue 25: rendered without the
template engine); the full page still includes ``_tab_usage.html`` and ``_session_stats.html``.
Both are rendered here over empty and full ledgers, priced and unpriced models, subagents, long
sessions (more turns than shown), hostile prompts and odd numbers, and compared (W1, W2, W6).
"""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

import pytest
from django.template.loader import render_to_string

from studio import selectors, usage_html
from studio.models import SessionKind, StudioSession

HOSTILE = "<script>alert('x')</script> & \"quotes\""


def _row(n: int, *, priced: bool, target: int, prompt: str) -> dict[str, Any]:
    costs = {
        "input": Decimal("0.0012") * n,
        "cached": Decimal("0"),
        "cache_write": Decimal("0.5"),
        "output": Decimal("12.3456"),
    }
    return {
        "request_id": f"r{n}",
        "prompt": prompt,
        "calls": n % 3,
        "cost": Decimal("0.00734") * n,
        "model": "gpt <x>" if n % 2 else "",
        "target_id": target,
        "input_tokens": 1000 * n + 7,
        "cached_input_tokens": 0,
        "cache_creation_tokens": 12 * n,
        "output_tokens": 999_999 * n,
        "reasoning_tokens": n % 2 * 4321,
        "class_costs": costs if priced else None,
    }


def _contexts() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    sessions = [
        StudioSession(kind=SessionKind.MAIN, target_id=0),
        StudioSession(kind=SessionKind.SUBAGENT, target_id=3),
    ]
    usages: list[dict[str, Any]] = [
        {},
        {"own": {}, "total": {}, "children": []},
        {
            "own": {"calls": 2, "total_tokens": 1234, "cost": 0.0042},
            "total": {"calls": 5, "total_tokens": 2_345_678, "cost": Decimal("3.5")},
            "children": [
                {"target_id": 3, "label": HOSTILE, "own": {"calls": 3, "total_tokens": 99, "cost": 0}},
                {"target_id": 4, "label": "subagent 4", "own": {}},
            ],
        },
    ]
    for session, usage, priced, count, extra in itertools.product(
        sessions, usages, [False, True], [0, 1, 3], [None, 0, 2000]
    ):
        rows = [
            _row(n, priced=priced, target=n % 2 * 3, prompt=[HOSTILE, "", "hello"][n % 3]) for n in range(1, count + 1)
        ]
        totals = {
            "calls": count,
            "cost": Decimal("1.25") * count,
            "input_tokens": 10 * count,
            "cached_input_tokens": 0,
            "cache_creation_tokens": 3,
            "output_tokens": 1_000_001,
            "reasoning_tokens": 0,
            "tokens": 1_000_014 + count,
            "class_costs": (
                {"input": Decimal("0.001"), "cached": 0, "cache_write": 0, "output": 2} if priced else None
            ),
        }
        out.append(
            {
                "session": session,
                "usage": usage,
                "usage_rows": rows,
                "usage_rows_total": extra if extra is None else extra + count,
                "usage_totals": totals,
                "usage_chart": selectors._usage_chart(rows),
            }
        )
    return out


CONTEXTS = _contexts()


@pytest.mark.parametrize(("context", "oob"), list(itertools.product(CONTEXTS, [False, True])))
def test_the_usage_tab_renders_as_its_templates(context: dict[str, Any], oob: bool) -> None:
    """W1: the tab and the header's spend in Python give the bytes their templates give."""
    tab, stats = usage_html.render(context, oob=oob)
    assert tab == render_to_string("studio/_tab_usage.html", {**context, "oob": oob})
    assert stats == render_to_string("studio/_session_stats.html", {**context, "oob": oob})


def test_a_hostile_prompt_in_the_usage_tab_stays_text() -> None:
    """W6: a prompt or a subagent's label with markup is escaped."""
    html = usage_html.tab(CONTEXTS[-1], "")
    assert "<script>" not in html and "&lt;script&gt;" in html
