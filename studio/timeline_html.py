"""The Timeline as HTML: the region, its live patches, one turn on its own, a span's details.

One template per fragment (``templates/studio/_timeline_*.html``): the region a page loads, the
patch a live push carries (rows removed and re-inserted in page order, the head and the axis),
and the details panel a click opens. Bars are placed by ``static/studio/timeline.js`` from each
row's ``data-start`` / ``data-end`` and the axis's ``data-t0`` / ``data-t1`` (the page's CSP
allows no inline style), so a row's HTML does not depend on the axis and stays valid while the
axis grows.
"""

from __future__ import annotations

import json
from typing import Any

from django.template.loader import render_to_string

from agentcore.trace import TraceSpan
from studio.timefmt import duration
from studio.timeline import Patch, Timeline, label

#: A details section longer than this (as JSON text) is cut; the downloads have everything.
DETAIL_CHARS = 100_000


def region_html(timeline: Timeline | None, session_pk: str, *, oob: bool = False) -> str:
    """The Timeline region (``#tab-timeline``); ``None``: the placeholder a page starts with."""
    return render_to_string("studio/_tab_timeline.html", {"timeline": timeline, "session_pk": session_pk, "oob": oob})


def patch_html(patch: Patch, timeline: Timeline, session_pk: str) -> str:
    """A live push's part for the Timeline: changed rows, removed rows, the head and axis."""
    if patch.empty():
        return ""
    return render_to_string(
        "studio/_timeline_patch.html", {"patch": patch, "timeline": timeline, "session_pk": session_pk}
    )


def turn_html(timeline: Timeline, session_pk: str) -> str:
    """One turn on its own axis (an older turn, opened from the turn list)."""
    return render_to_string("studio/_timeline_turn.html", {"timeline": timeline, "session_pk": session_pk})


def _money(value: Any) -> str:
    cost = float(value or 0)
    return "$0" if cost == 0 else f"${cost:.6f}".rstrip("0") if cost < 0.01 else f"${cost:.4f}"


def facts(span: TraceSpan) -> list[tuple[str, str]]:
    """The facts a span's details list first, by kind (all attributes follow as JSON)."""
    a = span.attributes
    out: list[tuple[str, str]] = []

    def add(name: str, value: Any) -> None:
        if value is not None and value != "":
            out.append((name, str(value)))

    if span.kind == "model":
        add("Model", a.get("model"))
        add("Provider", a.get("provider"))
        add("Step · attempt", f"{a.get('step')} · {a.get('attempt')}" if a.get("step") is not None else None)
        add("Time to first token", duration(a.get("time_to_first_token_ms")) or "no content streamed")
        for name, key in (
            ("Input tokens", "input_tokens"),
            ("Output tokens", "output_tokens"),
            ("Cached input tokens", "cached_input_tokens"),
            ("Cache write tokens", "cache_creation_tokens"),
            ("Reasoning tokens", "reasoning_tokens"),
        ):
            add(name, f"{int(a.get(key) or 0):,}")
        add("Cost", _money(a.get("cost")))
        add("Stop reason", a.get("stop_reason"))
        retry = a.get("retry")
        if isinstance(retry, dict):
            add("Retry", f"{retry.get('kind')} (attempt {retry.get('attempt')} of {retry.get('max_attempts')})")
            add("Retry reason", retry.get("reason"))
        error = a.get("error")
        if isinstance(error, dict):
            add("Error", f"{error.get('kind')}: {error.get('message')}")
    elif span.kind in ("tool", "nested_call"):
        add("Tool", a.get("tool"))
        add("Call id", a.get("tool_call_id"))
        add("Replay", a.get("replay"))
        if a.get("recovery") == "rerun":
            add("After the resume", "run again (a safe tool)")
        elif a.get("recovery") == "interrupted":
            add("After the resume", "outcome unknown: answered “interrupted”")
        if a.get("replayed"):
            add("After the resume", "answered from the log (not run again)")
        add("Status", a.get("call_status"))
    elif span.kind == "wait":
        add("Waiting for", a.get("wait_kind"))
        add("Decision", a.get("decision"))
    elif span.kind in ("turn", "subagent"):
        add("Status", a.get("status"))
        add("Error", a.get("error"))
    elif span.kind.startswith("task"):
        add("Task", a.get("name"))
        add("Version", a.get("version"))
        add("Phase", a.get("phase"))
        add("Status", a.get("status"))
    elif span.kind == "gap":
        add("Resumed by", a.get("owner_id"))
        add("Written last by", a.get("previous_owner"))
        add("Phase at the crash", a.get("phase"))
    return out


_SECTIONS = (
    ("prompt", "Prompt"),
    ("messages", "Sent: the context"),
    ("response", "Received: the response"),
    ("usage", "Ledger row"),
    ("arguments", "Arguments"),
    ("result", "Result"),
    ("script", "Script"),
    ("end", "Script end"),
    ("entry", "Entry"),
    ("receipt", "Receipt"),
    ("compaction", "Summary"),
    ("resume", "Resume"),
    ("task", "Task row"),
    ("limits", "Limits"),
)


def _clipped(value: Any) -> Any:
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= DETAIL_CHARS:
        return value
    return text[:DETAIL_CHARS] + f"… ({len(text) - DETAIL_CHARS:,} more characters: download the trace for all of it)"


def span_html(span: TraceSpan, details: dict[str, Any]) -> str:
    """A span's details panel: its facts, then what it sent and received (from the store)."""
    sections = [(title, _clipped(details[key])) for key, title in _SECTIONS if details.get(key) is not None]
    sections.append(("All attributes", span.attributes))
    context = {"span": span, "label": label(span), "facts": facts(span), "sections": sections}
    return render_to_string("studio/_timeline_span.html", context)
