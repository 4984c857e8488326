"""The settled turns' plain-Python markup (``studio.turn_html``) is byte-identical to the templates'.

A turn's end pushes the conversation region (issue 25: its turns rendered without the template
engine); the full page still includes ``_conversation.html`` and ``_turn.html`` with its partials.
Both are rendered here over transcripts with text, tools, errors, images, synthetic notices and
hostile prompts, for a staff and a plain owner, one and several model choices, while a turn is
live or a review waits, and compared byte for byte (W1, W2, W6).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string

from studio import rendering, turn_html
from studio.models import RegisteredModel, SessionKind, StudioSession

HOSTILE = "<script>alert('x')</script> & \"quotes\"\nsecond line"


def _transcript() -> list[dict[str, Any]]:
    return [
        {"role": "user", "entry_id": "e1", "content": [{"type": "text", "text": HOSTILE}]},
        {
            "role": "assistant",
            "entry_id": "e2",
            "content": [
                {"type": "thinking", "thinking": "hmm <b>"},
                {"type": "text", "text": "Let me look **now**."},
                {"type": "tool_call", "id": "c1", "name": "bash", "arguments": {"command": "ls <x>"}},
            ],
        },
        {"role": "tool_result", "entry_id": "e3", "tool_call_id": "c1", "content": [{"type": "text", "text": "a\nb"}]},
        {"role": "assistant", "entry_id": "e4", "content": [{"type": "text", "text": "Done & dusted."}]},
        {
            "role": "user",
            "entry_id": "e5",
            "content": [
                {"type": "text", "text": "with images"},
                {"type": "image", "mime_type": "image/png"},
                {"type": "image", "mime_type": "image/jpeg"},
            ],
        },
        {
            "role": "assistant",
            "entry_id": "e6",
            "content": [],
            "error_message": "upstream <500>",
            "stop_reason": "error",
        },
        {"role": "user", "entry_id": "e7", "content": [{"type": "image", "mime_type": "image/png"}]},
        {"role": "assistant", "entry_id": "e8", "content": [{"type": "text", "text": "An image."}]},
        {"role": "user", "content": [{"type": "text", "text": "not committed yet"}]},
        {"role": "assistant", "content": [{"type": "text", "text": ""}]},
    ]


NOTICES: list[dict[str, str] | None] = [
    None,
    {"level": "error", "title": "The model failed <x>", "code": "rate_limited", "text": "Try again & later"},
    {"level": "info", "title": "Stopped", "code": "", "text": ""},
    {"level": "warning", "title": "Recovered after 2 retries"},
]


def _contexts() -> list[dict[str, Any]]:
    staff, plain = User(username="s", is_staff=True), User(username="p")
    models = [RegisteredModel(pk=7, name="GPT <5>", provider="openai", model_id="m")]
    models.append(RegisteredModel(pk=8, name="Other & co", provider="openai", model_id="n"))
    demo = RegisteredModel(pk=9, name="demo", provider="demo", model_id="")
    out: list[dict[str, Any]] = []
    for owner, choices, in_use, kind, live, pending, notices, image_count, tail in itertools.product(
        [staff, plain],
        [models[:1], models],
        [models[0], demo, None],
        [SessionKind.MAIN, SessionKind.SUBAGENT],
        [None, {"request_id": "r1", "blocks": [], "prompt": "live one", "images": [], "session_id": "x"}],
        [None, {"kind": "plan"}],
        [NOTICES[:1], NOTICES],
        [None, 3],
        [False, True],  # the transcript ends with a message not committed yet
    ):
        session = StudioSession(kind=kind, owner=owner, title="t")
        turns = rendering.transcript_turns(_transcript() if tail else _transcript()[:-2])
        for turn, notice in zip(turns, itertools.cycle(notices), strict=False):
            turn.notice = notice
        out.append(
            {
                "session": session,
                "root": session,
                "turns": turns,
                "turns_first": 3,
                "turns_total": 1234,
                "turns_generation": "e1<",
                "live": live,
                "live_prefix": "lv-r1",
                "pending": pending,
                "model_choices": choices,
                "config": {"model_pk": 8},
                "model_in_use": in_use,
                "code_mode_runs": {},
                "image_count": image_count,
            }
        )
    return out


CONTEXTS = _contexts()


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("oob", [False, True])
def test_the_conversation_renders_as_its_templates(context: dict[str, Any], oob: bool) -> None:
    """W1: the settled turns in Python give the bytes ``_conversation.html`` gives."""
    expected = render_to_string("studio/_conversation.html", {**context, "oob": oob})
    assert turn_html.conversation(context, oob=oob) == expected


@pytest.mark.parametrize("context", CONTEXTS[:8])
def test_an_empty_conversation_renders_as_its_template(context: dict[str, Any]) -> None:
    """W1: the greeting (no turn yet) is the template's."""
    empty = {**context, "turns": [], "turns_first": 0, "live": None, "suggestions": []}
    assert turn_html.conversation(empty) == render_to_string("studio/_conversation.html", {**empty, "oob": True})


def test_a_hostile_prompt_stays_text() -> None:
    """W6: a prompt with markup is escaped in the bubble and in the Copy source."""
    html = turn_html.conversation(CONTEXTS[0])
    assert "<script>" not in html and "&lt;script&gt;" in html


def _lives() -> list[dict[str, Any]]:
    from studio import text_stream
    from studio.host.live import LiveBlock
    from studio.rendering import ImageRef

    long_text = "## Plan\n\n- one\n\n" + "an open paragraph with `code` " * 20
    blocks = [
        LiveBlock(key="b0", kind="thinking", text="hm <i>"),
        LiveBlock(key="b1", kind="text", text=long_text),
        LiveBlock(key="b2", kind="tool", name="bash", arguments={"command": "ls"}, status="running"),
        LiveBlock(key="b3", kind="text", text=HOSTILE),
        LiveBlock(key="b4", kind="retry", status="connect", endpoint="h:1", attempt=1, max_attempts=3, delay_s=2.0),
        LiveBlock(key="b5", kind="steer", text="also <this>"),
    ]
    streams = {"b1": text_stream.to_data(text_stream.advance(long_text))}
    out = []
    for prompt, images, count, agent, with_streams in itertools.product(
        [None, "", HOSTILE],
        [[], [ImageRef("e&1", 0, "image/png"), ImageRef("e 2", 1, "image/jpeg")]],
        [None, 0, 1, 2],
        ["build", "plan"],
        [False, True],
    ):
        out.append(
            {
                "request_id": "req-1<",
                "blocks": blocks,
                "prompt": prompt,
                "images": images,
                "image_count": count,
                "session_id": "0b7e6b7e-0000-4000-8000-000000000001",
                "agent": agent,
                "streams": streams if with_streams else {},
            }
        )
    return out


@pytest.mark.parametrize("live", _lives())
def test_a_live_turn_renders_as_its_template(live: dict[str, Any]) -> None:
    """W1/W2: a turn's opening (and a page's live turn) in Python gives ``_live_turn.html``'s bytes."""
    context = {"live": live, "live_prefix": "lv-req1", "code_mode_runs": {}}
    expected = render_to_string("studio/_live_turn.html", context)
    assert turn_html.live_turn(live, "lv-req1", {}) == expected
