"""Studio's own links come from a memo of one ``reverse`` per route (``studio.links``, issue 25).

Every route of the ``studio`` namespace that takes nothing or a session's UUID gives the link
Django's ``reverse`` gives, through the function and through the ``{% studio_url %}`` tag; a
request under another script prefix gets its own prefix in the link, not the memo of the first;
an id that is no UUID is refused as ``reverse`` refuses it. (W1: the pages' links.)
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.template import engines
from django.urls import NoReverseMatch, URLPattern, get_script_prefix, reverse, set_script_prefix

from studio.links import studio_url
from studio.urls import app_patterns

SESSION_ID = uuid.UUID("3f1e4c2a-9b7d-4e61-8a0f-5c2d7e9b1a34")


def _routes(converters: list[str]) -> list[str]:
    """The ``studio:`` route names whose arguments are exactly ``converters``."""
    names = []
    for pattern in app_patterns[0]:
        assert isinstance(pattern, URLPattern)
        if [type(c).__name__ for c in pattern.pattern.converters.values()] == converters:
            names.append(f"studio:{pattern.name}")
    return names


SESSION_ROUTES = _routes(["UUIDConverter"])
PLAIN_ROUTES = _routes([])


@pytest.fixture
def prefix() -> object:
    """Restores the script prefix a test changes (Django keeps it per thread)."""
    before = get_script_prefix()
    yield
    set_script_prefix(before)


def test_the_session_routes_and_the_plain_ones_are_all_found() -> None:
    # the lists below are read off the URLconf: a rename there must not leave them empty
    assert {"studio:session_detail", "studio:session_stop", "studio:session_configure"} <= set(SESSION_ROUTES)
    assert {"studio:session_list", "studio:usage", "studio:logout"} <= set(PLAIN_ROUTES)


@pytest.mark.parametrize("name", SESSION_ROUTES)
def test_a_session_routes_link_is_the_one_reverse_gives(name: str) -> None:
    expected = reverse(name, args=[SESSION_ID])
    assert studio_url(name, SESSION_ID) == expected
    assert studio_url(name, str(SESSION_ID)) == expected  # a pk as a string, as templates may hold it
    other = uuid.uuid4()
    assert studio_url(name, other) == reverse(name, args=[other])  # the memo holds the route, not the id


@pytest.mark.parametrize("name", PLAIN_ROUTES)
def test_a_plain_routes_link_is_the_one_reverse_gives(name: str) -> None:
    assert studio_url(name) == reverse(name)


def test_the_template_tag_gives_the_same_links_escaped_like_url() -> None:
    template = engines["django"].from_string(
        "{% load studio_tags %}{% studio_url 'studio:session_reset' pk %}|{% studio_url 'studio:session_list' %}"
    )
    reference = engines["django"].from_string("{% url 'studio:session_reset' pk %}|{% url 'studio:session_list' %}")
    assert template.render({"pk": SESSION_ID}) == reference.render({"pk": SESSION_ID})


@pytest.mark.usefixtures("prefix")
def test_a_link_under_another_script_prefix_carries_that_prefix() -> None:
    plain = studio_url("studio:session_stop", SESSION_ID)
    set_script_prefix("/studio/")
    mounted = studio_url("studio:session_stop", SESSION_ID)
    assert mounted == reverse("studio:session_stop", args=[SESSION_ID]) == "/studio" + plain
    assert studio_url("studio:session_list") == "/studio/"
    set_script_prefix("/")
    assert studio_url("studio:session_stop", SESSION_ID) == plain


@pytest.mark.parametrize("bad", ["not-a-uuid", "", "3f1e4c2a-9b7d-4e61-8a0f-5c2d7e9b1a3\ud800", 42])
def test_an_id_that_is_no_uuid_is_refused_like_reverse_refuses_it(bad: object) -> None:
    with pytest.raises(NoReverseMatch):
        reverse("studio:session_stop", args=[bad])
    with pytest.raises(ValueError, match=r"studio:session_stop: the session id .* is not a UUID"):
        studio_url("studio:session_stop", bad)


@pytest.mark.usefixtures("prefix")
@pytest.mark.parametrize("path", ["studio/studio.css", "vendor/htmx-2.0.11.min.js", "studio/favicon.svg"])
def test_a_static_link_is_the_one_static_gives(path: str, settings: Any) -> None:
    from django.templatetags.static import static

    from studio.links import static_url

    assert static_url(path) == static(path)
    settings.STATIC_URL = "/assets/"  # a new key: the memo does not keep the old base
    assert static_url(path) == static(path) == f"/assets/{path}"
    set_script_prefix("/studio/")
    assert static_url(path) == static(path)  # the storage keeps its first base URL; so does the memo
