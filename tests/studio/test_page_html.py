"""The session page's plain-Python markup (``studio.page_html``) is byte-identical to its templates.

Every session page a test here opens is rendered twice from the same context and request: by
``page_html.session_page`` (what the page serves, issue 25) and by ``session_detail.html`` in
``base.html`` (the reference). They must be equal byte for byte once the csrf tokens, masked
afresh on every render by design, are set aside. The pages cover each branch the templates
have: a person and a staff member (the Admin link), the demo and a real model (the composer's
placeholder and images), a hostile title, tools on the server and confined (the tools banner),
a fork (its banner and the way back) and a subagent's read-only view (no menu, no composer)
(W1, W2, W6).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.test import AsyncClient
from django.urls import reverse

from studio import page_html
from studio.models import RegisteredModel, SessionKind, StudioSession

pytestmark = pytest.mark.django_db(transaction=True)

CSRF = re.compile(r'(name="csrfmiddlewaretoken" value="|"X-CSRFToken": ")[A-Za-z0-9]+')


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every served session page, after checking it against the templates' rendering."""
    served: list[str] = []
    python = page_html.session_page

    def both(request: HttpRequest, context: dict[str, Any]) -> str:
        html = python(request, context)
        reference = render_to_string("studio/session_detail.html", context, request)
        assert CSRF.sub(r"\1TOKEN", html) == CSRF.sub(r"\1TOKEN", reference)
        assert len(CSRF.findall(html)) == len(CSRF.findall(reference)) >= 2
        served.append(html)
        return html

    monkeypatch.setattr(page_html, "session_page", both)
    yield served


async def _page(user: Any, session: StudioSession) -> str:
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    response = await client.get(reverse("studio:session_detail", args=[session.pk]))
    assert response.status_code == 200
    return str(response.content.decode())


async def test_a_persons_page_on_the_demo_model_is_the_templates(
    user: Any, make_session: Any, host: Any, compared: list[str]
) -> None:
    session = await sync_to_async(make_session)(user, title="<script>alert('t')</script> & co")
    page = await _page(user, session)
    assert compared == [page]
    assert "&lt;script&gt;alert(&#x27;t&#x27;)&lt;/script&gt; &amp; co · agentcore Studio" in page
    assert "Ask the offline demo model anything" in page and ">Admin<" not in page


async def test_a_staff_members_page_on_a_real_model_with_a_turn_is_the_templates(
    django_user_model: Any, make_session: Any, host: Any, compared: list[str]
) -> None:
    staff = await sync_to_async(django_user_model.objects.create_user)("root", password="root-pass-123", is_staff=True)
    model = await RegisteredModel.objects.acreate(
        name="Claude <4>", provider="anthropic", model_id="claude-sonnet-4-5", api_key="sk-ant-x"
    )
    session = await sync_to_async(make_session)(staff, registered_model=model)
    page = await _page(staff, session)
    assert ">Admin<" in page and 'placeholder="Message the agent…"' in page and 'data-accepts-images="1"' in page
    demo = await sync_to_async(make_session)(staff)
    await host.prompt(str(demo.pk), prompt="hello there", agent="plan")
    await host.wait_idle(str(demo.pk))
    assert "hello there" in await _page(staff, demo)
    assert len(compared) == 2


async def test_a_confined_sessions_page_shows_the_tools_banner_as_the_templates_do(
    user: Any, demo_model: Any, host: Any, compared: list[str]
) -> None:
    from studio import services

    session = await sync_to_async(services.session_create)(
        owner=user, registered_model=demo_model, workdir="", permission_policy="workspace", effort="low", mode="build"
    )
    page = await _page(user, session)
    assert 'id="tools-banner"' in page and compared == [page]


async def test_a_fork_and_a_subagents_read_only_view_are_the_templates(
    user: Any, make_session: Any, host: Any, compared: list[str]
) -> None:
    session = await sync_to_async(make_session)(user, title="Original")
    sid = str(session.pk)
    await host.prompt(sid, prompt="Delegate to a subagent: what files are here?", agent="build")
    await host.wait_idle(sid)
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    [child] = [c for c in (await host.state(sid)).snapshot["contexts"] if c["kind"] == "subagent"]
    await client.get(reverse("studio:session_context", args=[session.pk, child["target_id"]]))
    subagent = await StudioSession.objects.aget(root=session, kind=SessionKind.SUBAGENT)
    read_only = await _page(user, subagent)
    assert "read-only" in read_only and 'id="composer"' not in read_only and 'id="session-menu"' not in read_only
    entry = (await host.state(sid)).transcript[-1]["entry_id"]
    fork_url = reverse("studio:session_fork", args=[session.pk])
    await client.post(fork_url, {"entry_id": entry}, headers={"HX-Request": "true"})
    fork = await StudioSession.objects.aget(root=session, kind=SessionKind.FORK)
    forked = await _page(user, fork)
    assert "A fork: its own conversation" in forked and f'href="/sessions/{session.pk}/"' in forked
    assert len(compared) == 2


async def test_a_session_the_host_refuses_says_why_as_the_templates_do(
    user: Any, demo_model: Any, host: Any, compared: list[str], settings: Any
) -> None:
    from studio import services

    session = await sync_to_async(services.session_create)(
        owner=user, registered_model=demo_model, workdir="", permission_policy="workspace", effort="low", mode="build"
    )
    # its workdir moved into Studio's data since: the host will not open it, and the page says so
    await StudioSession.objects.filter(pk=session.pk).aupdate(workdir=str(settings.STUDIO_DATA_DIR))
    page = await _page(user, session)
    assert '<div id="composer-error" class="composer-error" role="status"><div class="form-error">' in page
    assert "cannot be used any more" in page and compared == [page]
