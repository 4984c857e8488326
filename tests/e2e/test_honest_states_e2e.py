"""Issue #15, honest states, in the browser: the page says what happened, as it happens."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.conftest import Studio, new_page, wait_settled
from tests.e2e.slow_demo import FAIL_MARKER
from tests.e2e.test_studio_e2e import create_session, send

pytestmark = pytest.mark.e2e


async def test_the_first_prompt_names_the_session_without_a_reload(studio_server: Studio, browser: Any) -> None:
    page = await new_page(browser, studio_server)
    session_id = await create_session(page, studio_server)
    assert await page.inner_text("#session-title") == f"Session {session_id[:8]}"
    await send(page, "Compare three note-taking apps")
    await page.wait_for_selector("#session-title:text('Compare three note-taking apps')")
    await page.wait_for_function("() => document.title.startsWith('Compare three note-taking apps')")
    await wait_settled(page)


async def test_sending_shows_the_message_at_once_then_reconciles(studio_server: Studio, browser: Any) -> None:
    """The person's message and a pending state appear before the server has even received
    the prompt (its socket frame is held here), then the store's turn replaces them: one
    bubble, no dupes."""
    page = await new_page(browser, studio_server)
    held: asyncio.Future[Callable[[], None]] = asyncio.get_running_loop().create_future()

    def relay(ws: Any) -> None:
        server = ws.connect_to_server()

        def from_page(message: str | bytes) -> None:
            if not held.done() and isinstance(message, str) and '"command":"prompt"' in message:
                held.set_result(lambda: server.send(message))  # the prompt waits for the test
                return
            server.send(message)

        ws.on_message(from_page)

    await page.route_web_socket(re.compile(r"/ws/sessions/"), relay)
    await create_session(page, studio_server)
    await send(page, "Optimism <b>is</b> a plan")
    release = await held  # the prompt is in flight, not yet at the server
    bubble = page.locator("#conversation .bubble")
    assert await bubble.count() == 1 and await bubble.inner_text() == "Optimism <b>is</b> a plan"
    assert await page.locator("#optimistic-turn .typing").is_visible()
    assert await page.input_value("#prompt") == "" and await page.is_disabled("#send-button")
    release()
    await wait_settled(page)
    assert await page.locator("#optimistic-turn").count() == 0
    assert await bubble.count() == 1 and await bubble.inner_text() == "Optimism <b>is</b> a plan"


async def test_a_refused_send_gives_the_text_back(studio_server: Studio, browser: Any) -> None:
    page = await new_page(browser, studio_server)
    await create_session(page, studio_server, mode="plan")
    await send(page, "Plan a garden")
    await page.wait_for_selector("#pending .review")
    # Someone re-enables Send (e.g. an old tab): the host refuses, the draft comes back.
    await page.evaluate("document.querySelector('#send-button').disabled = false")
    await send(page, "Something else")
    await page.wait_for_selector("#composer-error .form-error")
    assert await page.input_value("#prompt") == "Something else"
    assert await page.locator("#optimistic-turn").count() == 0


async def test_an_earlier_failure_stays_while_the_next_run_goes(studio_server: Studio, browser: Any) -> None:
    page = await new_page(browser, studio_server)
    await create_session(page, studio_server)
    await send(page, f"Please {FAIL_MARKER} now")
    await wait_settled(page, "failed")
    await page.wait_for_selector("#conversation .notice-error:has-text('The run failed')")
    # Watch the notice for the whole next run: it must never leave the page.
    await page.evaluate(
        """() => {
        window.__noticeGone = false;
        new MutationObserver(() => {
          if (!document.querySelector('#conversation .notice-error')) window.__noticeGone = true;
        }).observe(document.body, {subtree: true, childList: true});
      }"""
    )
    await send(page, "Tell me about " + "a calm lighthouse keeper " * 6)
    await page.wait_for_selector("#live-turn .md")
    await wait_settled(page)
    assert await page.evaluate("window.__noticeGone") is False
    assert await page.locator("#conversation .notice-error").count() == 1
