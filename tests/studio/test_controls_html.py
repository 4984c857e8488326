"""The controls' plain-Python markup (``studio.controls_html``) is byte-identical to the templates'.

A push of the ``controls`` region renders the five partials in Python (issue 25: a turn's end
no longer goes through the template engine for them); the full page still includes the
templates. Both are rendered here over every state the controls show — idle, busy, paused for
a review, read-only, queued follow-ups, steers and plans with hostile prompts, a demo and a real
model — with and without the out-of-band mark, and compared byte for byte (W1, W2, W6).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.template.loader import render_to_string

from studio import controls_html
from studio.models import RegisteredModel, StudioSession

TEMPLATES = {
    "title": "studio/_session_title.html",
    "model": "studio/_session_model.html",
    "status": "studio/_status.html",
    "run_controls": "studio/_run_controls.html",
    "queue": "studio/_queue.html",
}
HOSTILE = "<script>alert('x')</script> & \"quotes\" \ud800"
QUEUES: list[list[dict[str, Any]]] = [
    [],
    [{"input_id": "in-1", "mode": "follow_up", "agent": "build", "prompt": "next, please"}],
    [
        {"input_id": "in-'2\"", "mode": "steer", "agent": "build", "prompt": HOSTILE},
        {"input_id": "in-3</script>", "mode": "follow_up", "agent": "plan", "prompt": "plan it\nthen"},
        {"input_id": "in-4", "prompt": ""},
    ],
]
MODELS = [
    RegisteredModel(name="GPT <5>", provider="openai", model_id="gpt-5 & co"),
    RegisteredModel(name="demo", provider="demo", model_id=""),
]
SESSIONS = [StudioSession(title=""), StudioSession(title=HOSTILE)]
STATES = list(
    itertools.product(
        SESSIONS,
        MODELS,
        [("running", "Running"), ("idle", "Idle"), ("waiting", "Waiting for <you>")],
        [False, True],  # busy
        [None, {"kind": "plan"}],  # pending
        [False, True],  # read only
        QUEUES,
        [False, True],  # oob
    )
)


@pytest.mark.parametrize("state", STATES)
def test_the_controls_render_as_their_templates(state: tuple[Any, ...]) -> None:
    """W1: each control partial in Python gives the bytes its template gives."""
    session, model, view_status, busy, pending, read_only, queue, oob = state
    context = {
        "session": session,
        "model_in_use": model,
        "view_status": view_status,
        "busy": busy,
        "pending": pending,
        "read_only": read_only,
        "queue": queue,
        "oob": oob,
    }
    rendered = controls_html.render(context, oob=oob)
    assert list(rendered) == list(controls_html.NAMES)
    for name, template in TEMPLATES.items():
        assert rendered[name] == render_to_string(template, context), name


def test_a_hostile_prompt_in_the_queue_stays_text() -> None:
    """W6: a queued prompt with markup is escaped in the chip and its tooltip."""
    context = {"session": SESSIONS[0], "queue": QUEUES[2]}
    html = controls_html.queue(SESSIONS[0], context["queue"], "")
    assert "<script>" not in html and "&lt;script&gt;" in html
