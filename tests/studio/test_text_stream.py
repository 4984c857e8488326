"""A streaming text block costs what it gained, not the whole answer (W1, W6; issue 25).

Zulip's verify_action, applied to one live block: the pushes applied to the page the block
started on give exactly the page a fresh render at the same state gives, at every step; and
what the pushes send per token stays bounded however long the answer gets.
"""

from __future__ import annotations

import pytest

from studio import text_stream
from studio.rendering import render_markdown
from tests.studio.html_parts import text
from tests.studio.oob import apply, parse

ANSWER = (
    "Here is the plan, with **bold** and `code`.\n\n"
    "- first item\n- second *item*\n\n"
    "```python\nx = 1\n\ny = [2]\n```\n\n"
    "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    + "A long paragraph that goes on with [a link](https://example.com) and _emphasis_ " * 30
    + "\n\nThe end <script>alert(1)</script>."
)


def _stream(answer: str, step: int) -> tuple[list[tuple[str, str]], str]:
    """(page after each push, push) pairs, and the last page; the block starts empty."""
    dom_id = "lv-b0"
    state = text_stream.advance("")
    page = parse(f'<div class="block md" id="{dom_id}">{text_stream.block_html("", dom_id, state)}</div>')
    seen: list[tuple[str, str]] = []
    for end in [*range(step, len(answer), step), len(answer)]:
        now = answer[:end]
        after = text_stream.advance(now, state)
        push = text_stream.patch_html(now, dom_id, state, after)
        apply(page, push)
        fresh = f'<div class="block md" id="{dom_id}">{text_stream.block_html(now, dom_id, after)}</div>'
        seen.append((page.html(), parse(fresh).html()))
        state = after
    return seen, page.html()


@pytest.mark.parametrize("step", [3, 17, 40])
def test_pushes_applied_to_the_page_equal_a_fresh_render_at_every_step(step: int) -> None:
    seen, last = _stream(ANSWER, step)
    for patched, fresh in seen:
        assert patched == fresh
    # What a reader sees at the end is the answer rendered whole (the turn's final render is that).
    assert text(last) == text(str(render_markdown(ANSWER)))
    assert "<script>" not in last  # every part is sanitised


def test_bytes_per_token_stay_flat_as_one_paragraph_grows_to_2000_tokens() -> None:
    """A 2,000-token answer with no paragraph break (the benchmark's): each push sends the new
    words and a bounded tail, so the per-token cost of the last 500 is that of the first 500."""
    tokens = [f"zq001x{i:04d} " for i in range(2000)]
    state = text_stream.advance("")
    answer = ""
    sent: list[int] = []
    for i, token in enumerate(tokens):
        answer += token
        if i % 4 == 3:
            after = text_stream.advance(answer, state)
            sent.append(len(text_stream.patch_html(answer, "lv-b0", state, after)))
            state = after
    first, last = sum(sent[:125]), sum(sent[-125:])
    assert last < 1.5 * first
    assert sum(sent) / len(tokens) < 200  # bytes per token on the socket, markup included
