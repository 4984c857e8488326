"""W6: model and tool output can never inject markup (sanitised Markdown, escaped text)."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.host.live import LiveBlock
from studio.rendering import plan_items, render_block, render_inline, render_markdown, transcript_turns

HOSTILE = [
    "<script>alert('x')</script>",
    '<img src=x onerror="alert(1)">',
    "[click](javascript:alert(1))",
    '<a href="javascript:alert(1)">raw link</a>',
    "[data](data:text/html;base64,PHNjcmlwdD4=)",
    '<iframe src="https://evil.example"></iframe>',
    "<svg onload=alert(1)>",
    '<div style="background:url(javascript:alert(1))">x</div>',
    "```html\n<script>alert(1)</script>\n```",
    "![img](https://evil.example/pixel.png)",
]


class _Elements(HTMLParser):
    """Collects the real elements and attributes a browser would build (text is ignored)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend((name, value or "") for name, value in attrs)


def assert_inert(html: str) -> None:
    """No executable element, no event handler, no inline style, no script-capable URL."""
    parser = _Elements()
    parser.feed(html)
    assert not {"script", "iframe", "svg", "img", "object", "embed", "style", "form"} & set(parser.tags), parser.tags
    for name, value in parser.attrs:
        assert not name.startswith("on"), name
        assert name != "style"
        if name in ("href", "src", "action", "formaction"):
            assert value.startswith(("https:", "http:", "mailto:", "#", "/")), value


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_output_is_inert(text: str) -> None:
    """W6: hostile model text renders as text, never as markup or a live link."""
    assert_inert(render_markdown(text))


def test_markdown_keeps_the_useful_parts() -> None:
    html = render_markdown("# Title\n\n**bold** and `code` and [a link](https://example.com)\n\n- one\n- two\n")
    assert "<h1>Title</h1>" in html
    assert "<strong>bold</strong>" in html
    assert "<code>code</code>" in html
    assert 'href="https://example.com"' in html
    assert 'rel="noopener noreferrer nofollow"' in html
    assert "<li>one</li>" in html


def test_code_fences_are_highlighted_with_classes_only() -> None:
    html = render_markdown("```python\ndef f(x):\n    return x\n```")
    assert 'class="hl"' in html
    assert '<span class="k">def</span>' in html
    assert "style=" not in html


def test_half_streamed_markdown_renders() -> None:
    html = render_markdown("Here is code:\n\n```python\nprint('hi')")
    assert "print" in html


@pytest.mark.parametrize("text", HOSTILE)
def test_tool_rows_escape_arguments_and_results(text: str) -> None:
    """W6: raw HTML in tool arguments or output is shown as text."""
    block = LiveBlock(key="b0", kind="tool", name="bash", arguments={"command": text}, status="ok", result=text)
    html = render_block(block, "tx")
    assert_inert(html)
    assert "&lt;" in html or "<" not in text


def test_thinking_is_escaped_text() -> None:
    html = render_block(LiveBlock(key="b0", kind="thinking", text="<script>x</script>"), "tx")
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert "<details" in html


def test_transcript_turns_pair_tool_calls_with_results() -> None:
    transcript = [
        {"role": "user", "content": [{"type": "text", "text": "list files"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "let me look"},
                {"type": "tool_call", "id": "c1", "name": "ls", "arguments": {"path": "."}},
            ],
        },
        {
            "role": "tool_result",
            "tool_call_id": "c1",
            "tool_name": "ls",
            "content": [{"type": "text", "text": "a.txt"}],
            "is_error": False,
        },
        {"role": "assistant", "content": [{"type": "text", "text": "One file."}]},
    ]
    turns = transcript_turns(transcript, tool_timings={"c1": {"status": "ok", "duration_ms": 12.0}})
    assert len(turns) == 1
    kinds = [b.kind for b in turns[0].blocks]
    assert kinds == ["thinking", "tool", "text"]
    tool = turns[0].blocks[1]
    assert tool.result == "a.txt" and tool.status == "ok" and tool.duration_ms == 12.0


def test_plan_items_from_numbered_and_task_lists() -> None:
    items = plan_items("Plan\n\n1. Inspect `x`\n2. Change <b>it</b>\n- [x] done already\n")
    assert [str(i.text) for i in items][:1] == ["Inspect <code>x</code>"]
    assert "<b>" not in str(items[1].text)
    assert items[2].done is True


def _user(text: str, *, synthetic: bool = False) -> dict[str, object]:
    message: dict[str, object] = {"role": "user", "content": [{"type": "text", "text": text}]}
    if synthetic:
        message["synthetic"] = True
    return message


def _said(text: str) -> dict[str, object]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def test_only_the_synthetic_flag_turns_a_user_message_into_a_notice() -> None:
    """Runtime-written prompts carry ``synthetic: true``; a user typing the same words is a turn."""
    transcript = [
        _user("Earlier work: set up the project.", synthetic=True),  # a compaction summary
        _said("Summary noted."),
        _user("Plan the todo app"),
        _said("1. Models\n2. Views"),
        _user("The plan was approved. Switch to build mode and carry it out now.", synthetic=True),
        _said("Built it."),
        _user("The reviewer rejected this plan.\n\nReviewer's notes:\nfewer steps\n\nRevise", synthetic=True),
        _user("Your previous reply was interrupted before it finished (network).", synthetic=True),
        _user("The plan was approved. Switch to build mode and carry it out now."),  # typed by the user
    ]
    turns = transcript_turns(transcript)
    assert [t.prompt for t in turns] == [
        None,
        "Plan the todo app",
        "The plan was approved. Switch to build mode and carry it out now.",
    ]
    assert turns[0].blocks[0].kind == "compaction" and "Earlier work" in turns[0].blocks[0].text
    notices = [b.text for b in turns[1].blocks if b.kind == "notice"]
    assert notices == [
        "Plan approved — building it now.",
        "Plan rejected: fewer steps",
        "The agent continued after an interruption.",
    ]


def test_a_lone_surrogate_renders_as_the_replacement_character() -> None:
    """W6: a broken ``\\ud800`` escape in streamed Markdown (a model's, a tool's) renders as U+FFFD
    instead of failing the push (the sanitiser cannot encode a lone surrogate)."""
    html = render_markdown("before \ud800 after **bold**")
    assert html == "<p>before \ufffd after <strong>bold</strong></p>\n"
    assert "\ufffd" in render_inline("a \udfff b")


#: Plain characters (some a block could start with, some the sanitiser must keep) and every one
#: that starts inline Markdown or that the parser or the sanitiser rewrites.
MARKDOWNISH = st.text(
    alphabet=st.sampled_from(
        list("ab  \t\"'.,:;?-+=#%$@^{}()|/09éß✓\x0c\x7f\u2028") + list("*_`[]!<>&\\~\n\r\xa0\x00")
    ),
    max_size=40,
)


@settings(max_examples=3000, deadline=None)
@given(MARKDOWNISH)
def test_plain_inline_text_renders_as_the_parser_and_the_sanitiser_render_it(text: str) -> None:
    """W6: the shortcut for a streamed paragraph's plain words gives exactly what markdown-it and
    nh3 give (and never skips them for text with markup)."""
    from studio.rendering import _MD, sanitize_html

    assert render_inline(text) == (sanitize_html(_MD.renderInline(text)) if text else "")


@settings(max_examples=3000, deadline=None)
@given(MARKDOWNISH)
def test_a_plain_line_renders_as_the_parser_and_the_sanitiser_render_it(text: str) -> None:
    """W6: the shortcut for one line of plain words gives exactly what markdown-it and nh3 give."""
    from studio.rendering import _MD, sanitize_html

    assert render_markdown(text) == (sanitize_html(_MD.render(text)) if text else "")
