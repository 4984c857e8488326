"""W6 and the pages: login required, ownership, forms, CSRF, no secrets in pages."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from studio.models import RegisteredModel, StudioSession

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    "name,args",
    [
        ("studio:session_list", []),
        ("studio:session_detail", ["00000000-0000-0000-0000-000000000000"]),
        ("studio:session_turns", ["00000000-0000-0000-0000-000000000000"]),
        ("studio:session_tasks", ["00000000-0000-0000-0000-000000000000"]),
        ("studio:session_context", ["00000000-0000-0000-0000-000000000000", 1]),
    ],
)
def test_every_page_requires_login(client: Client, name: str, args: list[Any]) -> None:
    """W6: anonymous visitors are sent to the login page."""
    response = client.get(reverse(name, args=args))
    assert response.status_code == 302
    assert response.headers["Location"].startswith(reverse("studio:login"))


def test_commands_require_login(client: Client, user: Any, make_session: Any) -> None:
    session = make_session(user)
    commands = (
        "session_prompt",
        "session_stop",
        "session_plan",
        "session_answer",
        "session_withdraw",
        "session_promote",
        "session_cancel_task",
        "session_fork",
        "session_reset",
        "session_configure",
    )
    for name in commands:
        response = client.post(reverse(f"studio:{name}", args=[session.pk]), {"prompt": "hi"})
        assert response.status_code == 302, name


def test_login_page_renders_and_logs_in(client: Client, user: Any) -> None:
    page = client.get(reverse("studio:login"))
    assert page.status_code == 200
    assert b"Log in" in page.content
    response = client.post(reverse("studio:login"), {"username": "alice", "password": "alice-pass-123"})
    assert response.status_code == 302
    assert client.get(reverse("studio:session_list")).status_code == 200


def test_session_list_shows_only_my_sessions(logged_in: Client, user: Any, other_user: Any, make_session: Any) -> None:
    mine = make_session(user, title="My session")
    theirs = make_session(other_user, title="Secret plans")
    page = logged_in.get(reverse("studio:session_list")).content.decode()
    assert "My session" in page and str(mine.pk) in page
    assert "Secret plans" not in page and str(theirs.pk) not in page
    assert "offline demo model" in page  # the demo is labelled in every UI


def test_new_session_form_creates_a_session(logged_in: Client, demo_model: RegisteredModel, tmp_path: Any) -> None:
    response = logged_in.post(
        reverse("studio:session_create"),
        {
            "registered_model": demo_model.pk,
            "workdir": "",
            "permission_policy": "read-only",
            "effort": "high",
            "mode": "plan",
            "title": "",
        },
    )
    session = StudioSession.objects.get()
    assert response.status_code == 302
    assert response.headers["Location"] == reverse("studio:session_detail", args=[session.pk])
    assert session.permission_policy == "read-only" and session.effort == "high" and session.mode == "plan"
    assert session.store_path.endswith(f"{session.pk}.sqlite")
    assert session.workdir  # a fresh directory under the data dir


def test_new_session_rejects_a_missing_workdir(logged_in: Client, demo_model: RegisteredModel) -> None:
    response = logged_in.post(
        reverse("studio:session_create"),
        {
            "registered_model": demo_model.pk,
            "workdir": "/no/such/dir",
            "permission_policy": "workspace",
            "effort": "medium",
            "mode": "build",
        },
    )
    assert response.status_code == 400
    assert b"No such directory." in response.content
    assert not StudioSession.objects.exists()


def test_another_users_session_answers_exactly_like_an_unknown_id(
    client: Client, user: Any, other_user: Any, make_session: Any
) -> None:
    """W6 / issue #15: someone else's session is a 404 for every page and command, the same
    page an unknown id gets, so a user cannot even learn that an id exists."""
    session = make_session(user)
    unknown = "11111111-1111-1111-1111-111111111111"
    client.force_login(other_user)
    theirs = client.get(reverse("studio:session_detail", args=[session.pk]))
    missing = client.get(reverse("studio:session_detail", args=[unknown]))
    assert theirs.status_code == missing.status_code == 404
    unmasked = [re.sub(rb"[A-Za-z0-9]{64}", b"<csrf>", r.content) for r in (theirs, missing)]  # per-response masks
    assert unmasked[0] == unmasked[1]
    commands = (
        "session_prompt",
        "session_stop",
        "session_plan",
        "session_answer",
        "session_withdraw",
        "session_promote",
        "session_cancel_task",
        "session_fork",
        "session_reset",
        "session_configure",
    )
    for name in commands:
        for target in (session.pk, unknown):
            response = client.post(reverse(f"studio:{name}", args=[target]), {"prompt": "steal", "decision": "approve"})
            assert response.status_code == 404, name
    assert not session.runs.exists()


def test_unknown_session_is_404(logged_in: Client) -> None:
    assert (
        logged_in.get(reverse("studio:session_detail", args=["11111111-1111-1111-1111-111111111111"])).status_code
        == 404
    )


def test_forms_enforce_csrf(user: Any, make_session: Any) -> None:
    """W6: every form is CSRF-protected (htmx sends the token in a header)."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    session = make_session(user)
    response = client.post(reverse("studio:session_prompt", args=[session.pk]), {"prompt": "hi"})
    assert response.status_code == 403
    page = client.get(reverse("studio:session_list"))
    token = page.cookies["csrftoken"].value
    assert "X-CSRFToken" in page.content.decode()  # hx-headers on <body>
    response = client.post(reverse("studio:session_stop", args=[session.pk]), {}, headers={"X-CSRFToken": token})
    assert response.status_code == 302


def test_session_page_renders_with_demo_label_and_csp(
    logged_in: Client, user: Any, make_session: Any, host: Any
) -> None:
    session = make_session(user)
    response = logged_in.get(reverse("studio:session_detail", args=[session.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "offline demo model" in html
    assert f'ws-connect="/ws/sessions/{session.pk}/?epoch=' in html  # the state the page shows
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]
    for tab in ("Tasks", "Plan", "Records", "Usage"):
        assert tab in html


def test_api_keys_never_reach_a_page(logged_in: Client, user: Any, make_session: Any, host: Any) -> None:
    model = RegisteredModel.objects.create(
        name="Claude", provider="anthropic", model_id="claude-sonnet-4-5", api_key="sk-ant-SECRET-123"
    )
    session = make_session(user, registered_model=model)
    pages = [
        logged_in.get(reverse("studio:session_list")).content.decode(),
        logged_in.get(reverse("studio:session_detail", args=[session.pk])).content.decode(),
    ]
    for page in pages:
        assert "SECRET" not in page
    assert "api key" in pages[1].lower()  # the Records tab says whether one is set, nothing more


def _selected_model(client: Client) -> str:
    html = client.get(reverse("studio:session_list")).content.decode()
    select = html[html.index('name="registered_model"') :]
    select = select[: select.index("</select>")]
    match = re.search(r'<option value="(\d+)" selected>', select)
    assert match, select
    return match.group(1)


def test_a_model_added_in_the_admin_does_not_become_the_default(
    logged_in: Client, demo_model: RegisteredModel, user: Any, make_session: Any
) -> None:
    """Issue #15: the offline demo stays the default until a person chooses another model."""
    added = RegisteredModel.objects.create(name="Aardvark", provider="openai", model_id="gpt-5-mini")
    assert _selected_model(logged_in) == str(demo_model.pk)
    make_session(user, registered_model=added)  # the person chose it for a session
    assert _selected_model(logged_in) == str(added.pk)
    added.enabled = False
    added.save()
    assert _selected_model(logged_in) == str(demo_model.pk)
