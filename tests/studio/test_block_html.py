"""The blocks' plain-Python markup (``studio.block_html``) is byte-identical to the templates'.

Every conversation block is rendered in Python (issue 25: a push of streamed work no longer goes
through Django's template engine); the partial templates stay the reference. Both are rendered
here over every block kind and state, with hostile text (markup, quotes, ampersands, a lone
surrogate, newlines), and compared byte for byte (W1, W2, W6).
"""

from __future__ import annotations

import itertools

import pytest
from django.template.loader import render_to_string

from studio import rendering, text_stream
from studio.host.live import LiveBlock

HOSTILE = [
    "",
    "plain words",
    "<script>alert('x')</script>",
    '" onmouseover="alert(1)" \' & &amp; <b>',
    "line one\nline two\r\nline three",
    "a lone \ud800 surrogate",
    "**bold** `code` [link](javascript:alert(1))\n\n- item\n- item",
    "unicode ✓ ■ · —",
]


def _blocks() -> list[LiveBlock]:
    blocks: list[LiveBlock] = []
    for n, text in enumerate(HOSTILE):
        blocks += [
            LiveBlock(key=f"t{n}", kind="text", text=text),
            LiveBlock(key=f"th{n}", kind="thinking", text=text),
            LiveBlock(key=f"st{n}", kind="steer", text=text),
            LiveBlock(key=f"n{n}", kind="notice", status="", text=text),
            LiveBlock(key=f"c{n}", kind="compaction", status="done", text=text),
        ]
    for n, (status, text) in enumerate(itertools.product(["info", "error", "warning"], HOSTILE[:3])):
        blocks.append(LiveBlock(key=f"nn{n}", kind="notice", status=status, text=text))
    for n, status in enumerate(["running", "auto", "manual"]):
        blocks.append(LiveBlock(key=f"cc{n}", kind="compaction", status=status, text="the **summary**"))
    statuses = ["running", "ok", "error", "interrupted", "pending", ""]
    arguments: list[dict[str, object] | None] = [
        None,
        {},
        {"command": "ls -la <dir> && echo \"done\" 'x'"},
        {"path": "/tmp/" + "x" * 200},
        {"questions": [{"question": "q?"}]},
        {"weird": ["\ud800", 1.5, None, {"nested": "<i>"}]},
    ]
    for n, (status, args) in enumerate(itertools.product(statuses, arguments)):
        name = "ask_user" if args and "questions" in args else "bash"
        blocks.append(LiveBlock(key=f"tool{n}", kind="tool", name=name, arguments=args, status=status))
    for n, (text, duration) in enumerate(itertools.product(HOSTILE, [None, 0.0, 12.4, 4200, 190_000, 8_000_000])):
        blocks.append(
            LiveBlock(
                key=f"tr{n}",
                kind="tool",
                name="read<file>",
                arguments={"path": text},
                status="error" if n % 2 else "ok",
                partial=text if n % 3 else "",
                result=text,
                duration_ms=duration,
            )
        )
    for n, (status, delay, text) in enumerate(
        itertools.product(["dropped", "connect", ""], [0.0, 0.5, 4.0, 1e-05, 1234.5], HOSTILE[:4])
    ):
        blocks.append(
            LiveBlock(
                key=f"r{n}",
                kind="retry",
                status=status,
                delay_s=delay,
                attempt=n,
                max_attempts=1000 + n,
                endpoint="host<1>:443",
                text=text,
            )
        )
    sources: list[list[dict[str, object]]] = [
        [],
        [{"url": "https://example.com/a?b=1&c=2", "title": 'A <title> & "quotes"'}],
        [{"url": "javascript:alert(1)", "title": ""}, {"url": "http://x.test"}, {"url": "not a url", "title": None}],
        [{"url": "https://[bad"}],
    ]
    for n, (status, found, text) in enumerate(
        itertools.product(["running", "success", "failed", ""], sources, HOSTILE[:4])
    ):
        blocks.append(LiveBlock(key=f"s{n}", kind="search", status=status, text=text, sources=found, result=text))
        blocks.append(LiveBlock(key=f"src{n}", kind="sources", sources=found))
    return blocks


BLOCKS = _blocks()


def _template_block(block: LiveBlock, prefix: str, html: object = None) -> str:
    return render_to_string("studio/_block.html", rendering.block_context(block, prefix, None, html))  # type: ignore[arg-type]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.key for b in BLOCKS])
def test_a_block_renders_as_its_template(block: LiveBlock) -> None:
    """W1: ``render_block`` (Python) gives the bytes ``_block.html`` gives, for every kind."""
    assert rendering.render_block(block, "lv-abc") == _template_block(block, "lv-abc")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind in ("tool", "thinking")], ids=lambda b: b.key)
def test_a_blocks_parts_render_as_their_template(block: LiveBlock) -> None:
    """W2: the out-of-band parts that update a tool or thinking block in place are the template's."""
    context = rendering.block_context(block, "lv-abc")
    assert rendering.render_block_parts(block, "lv-abc") == render_to_string("studio/_block_parts.html", context)


def test_a_streaming_text_block_renders_as_its_template() -> None:
    """W2: a live text block in its streaming layout (``text_stream``) sits in the same markup."""
    text = "# Title\n\nA closed paragraph with <b>tags</b>.\n\n" + "an open paragraph " * 30
    block = LiveBlock(key="b1", kind="text", text=text)
    html = text_stream.block_html(text, "lv-abc-b1")
    assert rendering.render_block(block, "lv-abc", None, html) == _template_block(block, "lv-abc", html)
    assert 'id="lv-abc-b1-open"' in rendering.render_block(block, "lv-abc", None, html)


def test_hostile_text_stays_text() -> None:
    """W6: what a tool or a model wrote is escaped in the Python markup too."""
    block = LiveBlock(key="x", kind="tool", name="<i>", arguments={"command": "<script>"}, status="ok", result="<img>")
    html = rendering.render_block(block, "tx")
    assert "<script>" not in html and "<img>" not in html and "<i>" not in html
    assert "&lt;script&gt;" in html and "&lt;img&gt;" in html


def test_a_block_is_safe_markup_for_the_templates_that_include_it() -> None:
    """W1: the turn templates include a block through a tag (``studio_block``): it must come back
    marked safe, or the page would show its markup as text."""
    from django.template import Context, Template

    block = LiveBlock(key="t", kind="text", text="**hi**")
    page = Template("{% load studio_tags %}{% studio_block b 'tx' %}").render(Context({"b": block}))
    assert page == '<div class="block md" id="tx-t"><p><strong>hi</strong></p>\n</div>\n\n'
