"""A streaming text block rendered incrementally: what a push sends grows with the new text, not
with the whole answer.

A live answer is Markdown still being written. Rendering it whole on every push sends the whole
block again each time — quadratic in the answer's length (a 2,000-token answer cost ~3 KB on the
socket per token). Instead the block is laid out in three parts, each sanitised like any
Markdown:

- ``done`` — every *closed* top-level block: the text up to the last blank line outside a code
  fence. Nothing later can change how it renders, so a push only *appends* the newly closed
  blocks (``hx-swap-oob="beforeend"``).
- ``para`` — when the open block is a long paragraph, its settled head as inline Markdown, cut
  at whitespace where no inline construct (code span, emphasis, link) is open: appended too.
- ``open`` — the rest: re-rendered and replaced on each push, bounded by ``OPEN_CHARS`` plus
  what arrived since the last push.

Where the parts end (``StreamState``) is the host's, one per live block of a view: it advances
with each push, and a full render of the live block (a page load, a resync) uses the same state,
so a page rendered now and the pushes that follow agree. The finished turn is rendered from the
store as one Markdown block, exactly as a fresh render.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.safestring import SafeString, mark_safe

from studio.rendering import render_inline, render_markdown

#: An open paragraph longer than this gets its settled head moved into the append-only part.
OPEN_CHARS = 240
_FENCES = ("```", "~~~")


@dataclass(slots=True, frozen=True)
class StreamState:
    """How much of a block's text the page has in its append-only parts."""

    done: int = 0  # text[:done] is in the ``done`` part (closed blocks; never inside a fence)
    para: int = 0  # text[done:para] is in the open paragraph's settled head (``para`` ≥ ``done``)


def advance(text: str, previous: StreamState | None = None) -> StreamState:
    """Where the parts of ``text`` end, given what the page has (``previous``): closed blocks
    only grow, and an open paragraph's head only grows while the paragraph stays open."""
    base = previous or StreamState()
    done = _closed_until(text, base.done)
    para = base.para if done == base.done else done
    if _is_paragraph(text[done:]) and len(text) - para > OPEN_CHARS:
        para = max(para, _safe_cut(text, para, len(text) - OPEN_CHARS // 2))
    return StreamState(done=done, para=para)


def _closed_until(text: str, start: int) -> int:
    """The end of the last closed block: after the last blank line outside a code fence at or
    after ``start`` (itself such a boundary, so no fence is open there)."""
    end = start
    position = start
    fence = ""
    while True:
        newline = text.find("\n", position)
        if newline < 0:
            return end
        line = text[position:newline].strip()
        position = newline + 1
        if fence:
            if line.startswith(fence):
                fence = ""
            continue
        opener = next((f for f in _FENCES if line.startswith(f)), "")
        if opener:
            fence = opener
        elif not line:
            end = position


def _is_paragraph(text: str) -> bool:
    """The open block is a paragraph (inline text), not a list, a heading, a quote, code, a table."""
    head = text.lstrip(" ")
    if not head or head.startswith(("#", ">", "|", "    ", "\t", *_FENCES)):
        return False
    if head[0] in "-*+" and head[1:2] in (" ", ""):
        return False
    number = head.split(".", 1)[0].split(")", 1)[0]
    return not (number.isdigit() and len(number) < 10 and head[len(number) : len(number) + 2] in (". ", ") "))


def _safe_cut(text: str, start: int, limit: int) -> int:
    """The last whitespace position in ``text[start:limit]`` where no inline construct is open
    (``start`` is such a position: the head already sent ends there). ``start`` when none."""
    best = start
    ticks = stars = unders = brackets = 0
    angle = False
    index = start
    while index < limit:
        ch = text[index]
        if ch == "\\":
            index += 2
            continue
        if ch == "`":
            run = index
            while index < limit and text[index] == "`":
                index += 1
            ticks ^= 1 if (index - run) else 0
            continue
        if not ticks:
            if ch == "*":
                stars ^= 1
            elif ch == "_":
                unders ^= 1
            elif ch == "[":
                brackets += 1
            elif ch == "]":
                brackets = max(0, brackets - 1)
            elif ch == "<":
                angle = True
            elif ch == ">":
                angle = False
        if ch in " \n" and not (ticks or stars or unders or brackets or angle):
            best = index
        index += 1
    return best


def block_html(text: str, dom_id: str, state: StreamState | None = None) -> SafeString:
    """A live text block's whole markup (a full render) for the page state ``state`` (the host's,
    so a page rendered now and the pushes that follow agree; fresh from the text without it)."""
    state = state if state is not None else advance(text)
    head, tail, rest = _parts(text, state, state.done, state.done)
    done = render_markdown(text[: state.done])
    return mark_safe(
        f'<div class="md-done" id="{dom_id}-done">{done}</div>'
        f'<p class="md-para" id="{dom_id}-para">{_para_inner(dom_id, head, tail)}</p>'
        f'<div class="md-open" id="{dom_id}-open">{rest}</div>'
    )


def patch_html(text: str, dom_id: str, previous: StreamState, state: StreamState) -> str:
    """What a push sends for a block the page has in state ``previous`` to bring it to ``state``
    (``advance(text, previous)``): appends and small swaps."""
    out: list[str] = []
    if state.done > previous.done:
        closed = render_markdown(text[previous.done : state.done])
        out.append(f'<div hx-swap-oob="beforeend:#{dom_id}-done">{closed}</div>')
    same_paragraph = state.done == previous.done and previous.para > previous.done
    if same_paragraph:
        head, tail, _rest = _parts(text, state, previous.para, state.done)
        if head:
            out.append(f'<span hx-swap-oob="beforeend:#{dom_id}-head">{head}</span>')
        out.append(f'<span class="md-tail" id="{dom_id}-tail" hx-swap-oob="true">{tail}</span>')
        return "".join(out)
    head, tail, rest = _parts(text, state, state.done, state.done)
    inner = _para_inner(dom_id, head, tail)
    if inner or previous.para > previous.done:
        out.append(f'<p class="md-para" id="{dom_id}-para" hx-swap-oob="true">{inner}</p>')
    out.append(f'<div class="md-open" id="{dom_id}-open" hx-swap-oob="true">{rest}</div>')
    return "".join(out)


def to_data(state: StreamState) -> list[Any]:
    """Plain data for ``HostState`` (it crosses the channel layer in worker mode)."""
    return [state.done, state.para]


def from_data(data: list[Any] | None) -> StreamState | None:
    return StreamState(int(data[0]), int(data[1])) if data else None


def _parts(text: str, state: StreamState, head_from: int, done: int) -> tuple[str, str, str]:
    """(head, tail, rest): the open paragraph's settled head from ``head_from`` and its tail as
    inline HTML when it has a head, else the open block as Markdown (``rest``)."""
    if state.para > done:
        return str(render_inline(text[head_from : state.para])), str(render_inline(text[state.para :])), ""
    return "", "", str(render_markdown(text[done:]))


def _para_inner(dom_id: str, head: str, tail: str) -> str:
    if not head and not tail:
        return ""
    return f'<span id="{dom_id}-head">{head}</span><span class="md-tail" id="{dom_id}-tail">{tail}</span>'


def live_block_html(text: str, dom_id: str, streams: dict[str, Any] | None, key: str) -> SafeString:
    """A live text block's markup at the host's state for it (``HostState.live["streams"]``)."""
    return block_html(text, dom_id, from_data((streams or {}).get(key)))
