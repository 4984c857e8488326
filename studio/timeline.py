"""The Timeline of a session page, laid out from the store's trace (SPEC W8). Pure: no Django.

``lay_out(trace, conversation_id=...)`` turns ``agentcore.trace`` spans into rows on one time
axis: each turn of the conversation with everything under it (model requests, tool calls,
scripts and their nested calls, subagents under their call, compactions, waits for a person,
tasks, crash/resume gaps), depth-first in timeline order, plus the spans that belong to no turn
(a task a command started, a background compaction). A long session is windowed: the newest
``TIMELINE_TURNS`` turns are shown whole, as long as they fit in ``TIMELINE_ROWS`` rows (the
newest turn always does); older turns are listed so one can be opened on its own
(``lay_out(..., request_id=...)``).

``diff(previous, timeline)`` is what a live push sends: the rows whose content changed (or that
are new) with the row each goes after, and the rows that left — or ``None`` when the layout
changed too much for a patch (then the whole region is rendered). A row's *signature* is what
its rendering depends on, so a row is re-rendered exactly when it would render differently.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

from agentcore.trace import Trace, TraceSpan
from studio.timefmt import duration

#: Turns shown whole in the live Timeline (older ones open one at a time).
TIMELINE_TURNS = 10
#: Rows the live Timeline renders at most (the newest turn is always shown whole).
TIMELINE_ROWS = 2000
#: Ticks on the time axis (about).
TICKS = 6
_STEPS = (1, 2, 5)


@dataclass(slots=True)
class Row:
    """One span on the axis: what its line says and where its bar goes."""

    span: TraceSpan
    depth: int
    dom_id: str
    label: str
    summary: str
    badges: tuple[str, ...]
    start_ms: int | None
    end_ms: int | None  # None: still open (it grows to "now")
    turn: str = ""  # the request id of the turn (or root) it is under: what a zoom on a turn shows

    @property
    def signature(self) -> tuple[Any, ...]:
        s = self.span
        return (s.seq, s.status, s.start_ms, s.end_ms, s.parent_id, s.name, self.depth, self.label, self.turn)


@dataclass(slots=True, frozen=True)
class Tick:
    at_ms: int  # absolute (epoch ms)
    label: str  # relative to the axis start


@dataclass(slots=True)
class TurnChoice:
    request_id: str
    number: int
    label: str
    shown: bool  # its rows are in the live window


@dataclass(slots=True)
class Timeline:
    rows: list[Row]
    t0: int | None
    t1: int | None
    now_ms: int
    ticks: list[Tick]
    live: bool  # something is still open: bars of open spans grow
    turns: list[TurnChoice] = field(default_factory=list)
    scope: str | None = None  # the one turn laid out, or None for the live window
    last_seq: int = 0

    @property
    def axis(self) -> tuple[Any, ...]:
        return (self.t0, self.t1, self.live, tuple(t.at_ms for t in self.ticks), len(self.rows))


def dom_id(span_id: str, prefix: str = "tl") -> str:
    """A DOM id for a span (span ids hold ``:`` and ``/``, which selectors would need escaped)."""
    return f"{prefix}-{hashlib.blake2b(span_id.encode(), digest_size=6).hexdigest()}"


def lay_out(
    trace: Trace,
    *,
    now_ms: int,
    conversation_id: str | None = None,
    request_id: str | None = None,
    turns: int = TIMELINE_TURNS,
    max_rows: int = TIMELINE_ROWS,
    prefix: str = "tl",
) -> Timeline:
    """Rows of ``trace`` (one conversation and its subagents: ``builder.trace(conversation_id=)``):
    the live window of its newest turns, or with ``request_id`` that one turn whole."""
    spans = list(trace.spans)
    ids = {s.id for s in spans}
    children: dict[str | None, list[TraceSpan]] = {}
    for span in spans:  # trace order is timeline order: children keep it
        parent = span.parent_id if span.parent_id in ids else None
        children.setdefault(parent, []).append(span)
    roots = children.get(None, [])
    own_turns = [
        s for s in roots if s.kind == "turn" and (conversation_id is None or s.conversation_id == conversation_id)
    ]
    numbers = {s.id: n for n, s in enumerate(own_turns, start=1)}
    sizes = {s.id: _size(s, children) for s in roots}
    if request_id is not None:
        shown_roots = [s for s in own_turns if s.request_id == request_id]
    else:
        chosen: list[TraceSpan] = []
        budget = max_rows
        for turn in reversed(own_turns):
            if chosen and (len(chosen) >= turns or sizes[turn.id] > budget):
                break
            chosen.append(turn)
            budget -= sizes[turn.id]
        chosen_ids = {s.id for s in chosen}
        window_start = min((s.start_ms for s in chosen if s.start_ms is not None), default=None)
        shown_roots = []
        for root in roots:
            if root.id in chosen_ids:
                shown_roots.append(root)
            elif root.kind != "turn" and _overlaps(root, window_start) and sizes[root.id] <= budget:
                shown_roots.append(root)
                budget -= sizes[root.id]
    rows: list[Row] = []
    for root in shown_roots:
        _walk(root, 0, children, numbers, rows, prefix)
    times = [t for r in rows for t in (r.start_ms, r.end_ms) if t is not None]
    live = any(r.end_ms is None and r.start_ms is not None for r in rows)
    t0 = min(times) if times else None
    t1 = max(times) if times else None
    if live and t1 is not None:
        t1 = max(t1, now_ms)
    choices = [
        TurnChoice(
            s.request_id or "",
            numbers[s.id],
            _turn_label(s, numbers[s.id]),
            any(r.span.id == s.id for r in rows) if request_id is None else s.request_id == request_id,
        )
        for s in own_turns
    ]
    return Timeline(
        rows=rows,
        t0=t0,
        t1=t1,
        now_ms=now_ms,
        ticks=ticks(t0, t1),
        live=live,
        turns=choices,
        scope=request_id,
        last_seq=trace.last_seq,
    )


def _overlaps(span: TraceSpan, since: int | None) -> bool:
    if since is None or span.status in ("running", "waiting", "queued"):
        return True
    end = span.end_ms if span.end_ms is not None else span.start_ms
    return end is None or end >= since


def _size(span: TraceSpan, children: dict[str | None, list[TraceSpan]]) -> int:
    count, stack = 0, [span]
    while stack:
        node = stack.pop()
        count += 1
        stack.extend(children.get(node.id, ()))
    return count


def _walk(
    span: TraceSpan,
    depth: int,
    children: dict[str | None, list[TraceSpan]],
    numbers: dict[str, int],
    rows: list[Row],
    prefix: str,
) -> None:
    stack: list[tuple[TraceSpan, int]] = [(span, depth)]
    turn = span.request_id or span.id
    while stack:
        node, level = stack.pop()
        rows.append(_row(node, level, numbers, prefix, turn))
        stack.extend((child, level + 1) for child in reversed(children.get(node.id, ())))


def _row(span: TraceSpan, depth: int, numbers: dict[str, int], prefix: str, turn: str) -> Row:
    start = span.start_ms
    end = span.end_ms
    if end is None and span.status not in ("running", "waiting", "queued") and start is not None:
        end = start  # an interval that will not grow: a point (its end is unknown)
    return Row(
        span=span,
        depth=depth,
        dom_id=dom_id(span.id, prefix),
        label=label(span, numbers.get(span.id)),
        summary=summary(span),
        badges=badges(span),
        start_ms=start,
        end_ms=end,
        turn=turn,
    )


def _turn_label(span: TraceSpan, number: int) -> str:
    prompt = " ".join(str(span.attributes.get("prompt") or "").split())
    if len(prompt) > 60:
        prompt = prompt[:59] + "…"
    return f"Turn {number}" + (f" · {prompt}" if prompt else "")


_WAITS = {"plan": "plan review", "ask_user": "your answer", "tool_approval": "tool approval"}


def label(span: TraceSpan, number: int | None = None) -> str:
    """What a row's line says first."""
    a = span.attributes
    kind = span.kind
    if kind == "turn":
        return _turn_label(span, number) if number is not None else "Turn" + _prompt_suffix(a)
    if kind == "subagent":
        return span.name or "subagent"
    if kind == "model":
        model = a.get("model") or span.name.removeprefix("chat ").strip() or "model"
        text = f"{'summary' if a.get('purpose') == 'compaction' else 'model'} · {model}"
        return text + (f" · attempt {a['attempt']}" if isinstance(a.get("attempt"), int) and a["attempt"] > 1 else "")
    if kind in ("tool", "nested_call"):
        tool = a.get("tool") or span.name.removeprefix("execute_tool ").strip() or "tool"
        return f"tools.{tool}" if kind == "nested_call" else str(tool)
    if kind == "script":
        return "codemode script"
    if kind == "compaction":
        how = "background" if a.get("background") else "automatic" if a.get("auto") else "manual"
        return f"compaction · {how}"
    if kind == "wait":
        what = _WAITS.get(str(a.get("wait_kind")), str(a.get("wait_kind") or "a person"))
        return ("Waiting for you: " if span.status == "waiting" else "waited for ") + what
    if kind == "gap":
        return "not running (crash, close or failover)"
    if kind == "task":
        version = f" v{a['version']}" if a.get("version") is not None else ""
        return f"task {a.get('name') or span.name}{version}"
    if kind == "task_phase":
        return f"phase {a.get('phase') or span.name}"
    if kind == "task_sleep":
        return "sleeping"
    if kind == "task_wait":
        return "waiting on its children"
    return span.name


def _prompt_suffix(a: dict[str, Any]) -> str:
    prompt = " ".join(str(a.get("prompt") or "").split())
    return f" · {prompt[:60]}" if prompt else ""


def summary(span: TraceSpan) -> str:
    """The short facts after the label (tokens, cost, time to first token, the outcome)."""
    a = span.attributes
    parts: list[str] = []
    if span.kind == "model":
        parts.append(f"in {a.get('input_tokens', 0):,} · out {a.get('output_tokens', 0):,}")
        if a.get("cached_input_tokens"):
            parts.append(f"cached {a['cached_input_tokens']:,}")
        if a.get("reasoning_tokens"):
            parts.append(f"reasoning {a['reasoning_tokens']:,}")
        if a.get("cost"):
            parts.append(_money(a["cost"]))
        if a.get("time_to_first_token_ms") is not None:
            parts.append(f"first token {duration(a['time_to_first_token_ms'])}")
        retry = a.get("retry")
        if isinstance(retry, dict):
            parts.append(f"then {retry.get('kind')} retry: {str(retry.get('reason') or '')[:80]}".rstrip(": "))
        error = a.get("error")
        if isinstance(error, dict):
            parts.append(f"{error.get('kind') or 'error'}: {str(error.get('message') or '')[:80]}")
    elif span.kind in ("turn", "subagent"):
        usage = a.get("usage")
        if isinstance(usage, dict) and usage.get("calls"):
            parts.append(f"{usage.get('calls')} model calls · {int(usage.get('total_tokens') or 0):,} tokens")
        if a.get("error"):
            parts.append(str(a["error"])[:100])
    elif span.kind in ("tool", "nested_call"):
        if a.get("result_preview"):
            parts.append(" ".join(str(a["result_preview"]).split())[:80])
    elif span.kind == "task":
        parts.append(str(a.get("status") or span.status))
        if a.get("error"):
            parts.append(str(a["error"])[:80])
    elif span.kind == "script":
        if a.get("calls") is not None:
            parts.append(f"{a['calls']} calls")
        if a.get("error"):
            parts.append(str(a["error"])[:80])
    return " · ".join(p for p in parts if p)


def badges(span: TraceSpan) -> tuple[str, ...]:
    """Short marks: retries, replays from the log, a wait, a crash's interruption."""
    a = span.attributes
    out: list[str] = []
    if span.kind == "model":
        if isinstance(a.get("retry"), dict):
            out.append(f"retry: {a['retry'].get('kind')}")
        if a.get("purpose") == "compaction":
            out.append("summary")
    if span.kind == "tool" and a.get("recovery") == "rerun":
        out.append("run again after resume")
    if span.kind == "tool" and a.get("recovery") == "interrupted":
        out.append("outcome unknown")
    if span.kind == "nested_call" and a.get("replayed"):
        out.append("from the log")
    if span.kind == "script" and a.get("replayed"):
        out.append(f"{len(a['replayed'])} from the log")
    if span.kind == "tool" and a.get("not_run"):
        out.append("not run")
    if span.status == "waiting" and span.kind in ("wait", "tool"):
        out.append("waiting for you")
    if span.status in ("interrupted", "cancelled", "error"):
        out.append(span.status)
    return tuple(out)


def _money(value: Any) -> str:
    cost = float(value or 0)
    return f"${cost:.4f}" if cost < 0.01 else f"${cost:.2f}"


def ticks(t0: int | None, t1: int | None, count: int = TICKS) -> list[Tick]:
    """Round steps (1, 2, 5 × a power of ten ms) from the axis start, about ``count`` of them."""
    if t0 is None or t1 is None:
        return []
    total = max(1, t1 - t0)
    raw = total / count
    power = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next((s * power for s in _STEPS if s * power >= raw), 10 * power)
    step = max(1, int(step))
    return [Tick(t0 + at, "0" if at == 0 else "+" + duration(at)) for at in range(0, total + 1, step)]


# --- live patches --------------------------------------------------------------------------------


@dataclass(slots=True)
class Picture:
    """What a view's pages were last sent: each row's signature, in page order."""

    order: list[str]
    signatures: dict[str, tuple[Any, ...]]
    axis: tuple[Any, ...]
    seq: int = 0  # the store position it shows

    @classmethod
    def of(cls, timeline: Timeline, seq: int = 0) -> Picture:
        rows = timeline.rows
        return cls([r.dom_id for r in rows], {r.dom_id: r.signature for r in rows}, timeline.axis, seq)


@dataclass(slots=True)
class Patch:
    """Rows to (re)insert, each after the row named (None: first), and rows to remove."""

    changed: list[tuple[Row, str | None]]
    removed: list[str]
    axis_changed: bool

    def empty(self) -> bool:
        return not (self.changed or self.removed or self.axis_changed)


def diff(previous: Picture | None, timeline: Timeline) -> Patch | None:
    """The patch from ``previous`` to ``timeline``; None when only a whole render will do (no
    picture yet, rows that did not change moved relative to each other, or most rows changed).

    Each changed row is sent as "remove it, then insert it after its predecessor", in page
    order: a page that already has a row (it loaded after the last push) ends the same."""
    if previous is None:
        return None
    order = [r.dom_id for r in timeline.rows]
    current = set(order)
    changed_ids = {r.dom_id for r in timeline.rows if previous.signatures.get(r.dom_id) != r.signature}
    kept_before = [i for i in previous.order if i in current and i not in changed_ids]
    kept_now = [i for i in order if i not in changed_ids]
    if kept_before != kept_now:
        return None
    removed = [i for i in previous.order if i not in current]
    if len(changed_ids) + len(removed) > max(50, len(order) // 2):
        return None
    changed: list[tuple[Row, str | None]] = []
    before: str | None = None
    for row in timeline.rows:
        if row.dom_id in changed_ids:
            changed.append((row, before))
        before = row.dom_id
    return Patch(changed, removed, previous.axis != timeline.axis)
