"""Issue #15, honest states: what the session page says matches what happened.

Each test renders the page (or reads the host's push) the way the browser gets it; the
browser-level checks of the same bullets are in ``tests/e2e/test_honest_states_e2e.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.test import Client
from django.urls import reverse

from studio import pages
from studio.host.session_host import SessionHost
from studio.models import Run, StudioSession
from studio.rendering import transcript_turns

pytestmark = pytest.mark.django_db(transaction=True)


async def _page_context(host: SessionHost, session: StudioSession) -> dict[str, Any]:
    state = await host.state(str(session.pk))
    fresh = await StudioSession.objects.select_related("registered_model", "owner").aget(pk=session.pk)
    return await sync_to_async(pages.session_page_context)(fresh, state)


async def test_the_first_prompt_renames_the_open_page_without_a_reload(
    user: Any, make_session: Any, gated_host: Any
) -> None:
    host, gate, _server = gated_host
    session = await sync_to_async(make_session)(user)
    layer = get_channel_layer()
    watcher = await layer.new_channel()
    await layer.group_add(f"session-{session.pk}", watcher)
    sent = await host.prompt(str(session.pk), prompt="HOLD: sketch a reading list app", agent="build")
    title = '<h1 id="session-title" title="HOLD: sketch a reading list app" hx-swap-oob="true">'
    while title not in (await layer.receive(watcher))["html"]:
        pass  # pushes until the one that names the page
    run = await Run.objects.aget(request_id=sent["request_id"])
    assert run.status == "running"  # it came while the turn runs, not with its end
    gate.release()
    await host.wait_idle(str(session.pk))


async def test_an_earlier_failure_stays_on_screen_while_a_new_run_goes(
    user: Any, make_session: Any, gated_host: Any
) -> None:
    host, gate, _server = gated_host
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    await host.prompt(sid, prompt="first FAIL_WITH_400", agent="build")
    await host.wait_idle(sid)
    await host.prompt(sid, prompt="HOLD second", agent="build")
    await gate.entered.wait()  # the second turn is going
    await host.wait_live(sid)  # and the page shows it live
    context = await _page_context(host, session)
    assert context["running"] and context["live"] is not None
    notices = [t.notice for t in context["turns"] if t.notice]
    assert [n["code"] for n in notices] == ["model_error"], notices
    assert context["turns"][0].prompt == "first FAIL_WITH_400" and context["turns"][0].notice is not None
    gate.release()
    await host.wait_idle(sid)


def test_a_stop_is_one_neutral_stopped_line_not_an_error() -> None:
    """The store's aborted reply carries an error message; a stop the person asked for is
    shown once, neutral, never as a red error."""
    transcript = [
        {"role": "user", "content": [{"type": "text", "text": "tell me a story"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Once upon"}],
            "stop_reason": "aborted",
            "error_message": "the run was cancelled",
        },
    ]
    stopped = {"level": "stopped", "title": "Stopped", "code": "", "text": ""}
    [turn] = transcript_turns(transcript, run_notices=[stopped])
    assert [b.kind for b in turn.blocks] == ["text"]
    assert turn.notice == stopped


async def test_a_stopped_run_gets_the_neutral_notice(user: Any, make_session: Any, gated_host: Any) -> None:
    host, gate, _server = gated_host
    session = await sync_to_async(make_session)(user)
    await host.prompt(str(session.pk), prompt="HOLD a long job", agent="build")
    await gate.entered.wait()
    await host.stop(str(session.pk))
    await host.wait_idle(str(session.pk))
    context = await _page_context(host, session)
    stopped = {"level": "stopped", "title": "Stopped", "code": "", "text": ""}
    assert [t.notice for t in context["turns"]] == [stopped]
    assert not any(b.kind == "notice" and b.status == "error" for t in context["turns"] for b in t.blocks)


async def test_a_plan_waiting_for_review_is_shown_once(user: Any, make_session: Any, host: SessionHost) -> None:
    session = await sync_to_async(make_session)(user, mode="plan")
    await host.prompt(str(session.pk), prompt="add a todo list", agent="plan")
    await host.wait_idle(str(session.pk))
    context = await _page_context(host, session)
    assert context["pending"]["kind"] == "plan"
    assert "Inspect the workspace" in context["pending"]["plan"]
    texts = [b.text for t in context["turns"] for b in t.blocks if b.kind == "text"]
    assert not any("Inspect the workspace" in text for text in texts), texts
    assert any("Inspect the workspace" in str(item.text) for item in context["pending_plan_items"])


async def test_approve_and_build_switches_the_composer_to_build(
    user: Any, make_session: Any, host: SessionHost
) -> None:
    session = await sync_to_async(make_session)(user, mode="plan")
    await host.prompt(str(session.pk), prompt="add a todo list", agent="plan")
    await host.wait_idle(str(session.pk))
    client = Client()
    await sync_to_async(client.force_login)(user)
    response = await sync_to_async(client.post)(
        reverse("studio:session_plan", args=[session.pk]), {"decision": "approve"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200 and response.content == b""
    await host.wait_idle(str(session.pk))
    assert (await StudioSession.objects.aget(pk=session.pk)).mode == "build"  # a reload shows Build
    page = await sync_to_async(client.get)(reverse("studio:session_detail", args=[session.pk]))
    assert 'name="agent" value="build" checked' in page.content.decode()
