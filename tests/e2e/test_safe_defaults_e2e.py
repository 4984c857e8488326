"""Issue #15, safe defaults, as a person and an operator meet them: daphne runs with the
production defaults (no DJANGO_DEBUG), so these are the pages and logs anyone gets."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.e2e.conftest import Studio, new_page

pytestmark = pytest.mark.e2e


async def test_error_pages_are_styled_and_list_no_urls(studio_server: Studio, browser: Any) -> None:
    page = await new_page(browser, studio_server)
    response = await page.goto(studio_server.url("/no/such/page/"))
    assert response.status == 404
    text = await page.inner_text("body")
    assert "Nothing here" in text and "URLconf" not in text and "sessions/<uuid" not in text
    # The stylesheet is served without DEBUG (WhiteNoise) and applied: a card, the brand colour.
    assert await page.evaluate("getComputedStyle(document.querySelector('.error-card')).borderRadius") == "12px"
    assert await page.locator(".topbar").count() == 1  # the person is still in Studio, logged in
    await page.click("text=Back to your sessions")
    await page.wait_for_url(studio_server.url("/"))


def _log_lines(studio: Studio, start: int) -> list[str]:
    """What the server logged since ``start``, less daphne's access log (one line per request,
    and per socket opened or closed: the sessions list a page leaves holds one)."""
    lines = studio.log_path.read_text()[start:].splitlines()
    return [line for line in lines if not re.search(r'\] "(GET|POST|WS[A-Z]+) ', line)]


async def test_a_denied_request_is_one_log_line(studio_server: Studio, browser: Any) -> None:
    """A refusal is logged once, one line, no traceback (it was logged twice with one)."""
    carol = await new_page(browser, studio_server, user="carol")  # staff, no admin permission
    start = len(studio_server.log_path.read_text())
    response = await carol.goto(studio_server.url("/admin/studio/sessionstore/import/"))
    assert response.status == 403
    assert "Not allowed" in await carol.inner_text("body")
    lines = _log_lines(studio_server, start)  # logged before the response was sent
    assert len(lines) == 1 and "Forbidden" in lines[0] and "/admin/studio/sessionstore/import/" in lines[0], lines
    assert not any("Traceback" in line or "PermissionDenied" in line for line in lines), lines
    # A form post without its CSRF token: the styled 403, and again one line.
    start = len(studio_server.log_path.read_text())
    refused = await carol.request.post(studio_server.url("/sessions/new/"), form={"title": "x"})
    assert refused.status == 403 and "Not allowed" in await refused.text()
    lines = _log_lines(studio_server, start)
    assert len(lines) == 1 and "/sessions/new/" in lines[0], lines


async def test_the_store_import_form_is_laid_out_like_every_admin_form(studio_server: Studio, browser: Any) -> None:
    username, password = studio_server.admin_login()
    page = await new_page(browser, studio_server, user=username, password=password)
    await page.goto(studio_server.url("/admin/studio/sessionstore/import/"))
    label = page.locator(".field-source_path label")
    assert await label.evaluate("el => getComputedStyle(el).minWidth") == "160px"  # admin forms.css
    row = await page.locator(".field-source_path").bounding_box()
    field = await page.locator("#id_source_path").bounding_box()
    label_box = await label.bounding_box()
    assert row and field and label_box
    assert abs(field["y"] - label_box["y"]) < 12  # label beside its field, not stacked above it


async def test_an_admin_sees_every_bad_attribute_and_a_bounded_connection_test(
    studio_server: Studio, browser: Any
) -> None:
    """Issue #15 in the browser: a model with three bad attributes shows three errors, each
    naming its field, and is not saved; the model saved instead (an endpoint nothing listens
    on) does not become the default for new sessions, and "Test connection" answers with a
    clear failure instead of holding the page through ten retries."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    username, password = studio_server.admin_login()
    page = await new_page(browser, studio_server, user=username, password=password)
    await page.goto(studio_server.url("/admin/studio/registeredmodel/add/"))
    await page.fill("#id_name", "Nowhere e2e")
    await page.select_option("#id_provider", "custom")
    await page.fill("#id_model_id", "m")
    await page.select_option("#id_api_kind", "openai-completions")
    await page.fill("#id_base_url", f"http://127.0.0.1:{port}/v1")
    await page.fill("#id_api_key", "sk-e2e-key")
    await page.fill("#id_attributes", '{"context_window": -5, "cost": {"input": "free"}, "reasoningg": true}')
    await page.click("input[name=_save]")
    await page.wait_for_selector(".field-attributes .errorlist li")  # the answer page, not the form sent
    errors = await page.locator(".field-attributes .errorlist li").all_inner_texts()
    assert len(errors) == 3, errors
    for field in ("attributes.context_window", "attributes.cost.input", "attributes.reasoningg"):
        assert any(e.startswith(field) for e in errors), (field, errors)
    assert await page.locator("#id_api_key").input_value() == "", "the key is never shown back"

    await page.fill("#id_api_key", "sk-e2e-key")
    await page.fill("#id_attributes", "")
    await page.click("input[name=_save]")
    await page.wait_for_selector(".messagelist .success")
    await page.goto(studio_server.url("/"))
    default = await page.locator("select[name=registered_model] option:checked").inner_text()
    assert "Nowhere e2e" not in default, "a model added in the admin is not the default by itself"

    await page.goto(studio_server.url("/admin/studio/registeredmodel/"))
    row = page.locator("#result_list tr", has_text="Nowhere e2e")
    await row.locator("input.action-select").check()
    await page.select_option("select[name=action]", "test_connection")
    await page.click("button[name=index]")
    message = await page.locator(".messagelist li", has_text="connection failed").inner_text(timeout=15_000)
    assert "connection failed after" in message and "did not answer" in message, message
