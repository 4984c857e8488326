"""The screenshot tour: a clean user (maria) and a small real project, one story end to end.

It drives Studio the way a person would — log in, ask about the code, plan a feature, answer
the agent's questions — and writes the documentation screenshots in ``docs/screenshots`` on
the way. Every step also asserts what the picture is meant to show, so a broken screen fails
the test instead of ending up in the docs. Only this test writes whole-page screenshots
(``test_extras_e2e`` adds two pictures of single elements that show no paths).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Studio, new_page, screenshot, wait_settled

pytestmark = pytest.mark.e2e


async def start(page: Any, studio: Studio, *, mode: str, title: str) -> str:
    await page.goto(studio.url("/"))
    await page.select_option("select[name=registered_model]", label="Offline demo model")
    await page.fill("input[name=workdir]", str(studio.workspace))
    await page.fill("input[name=title]", title)
    await page.check(f"input[name=mode][value={mode}]", force=True)
    await page.click("#new-session-form button[type=submit]")
    await page.wait_for_url("**/sessions/*/")
    await page.wait_for_selector("#conn-state.on")
    return str(page.url)


async def ask(page: Any, text: str) -> None:
    await page.fill("#prompt", text)
    await page.press("#prompt", "Enter")


async def tab(page: Any, name: str) -> None:
    await page.click(f".tab[data-tab={name}]")
    await page.wait_for_selector(f".tab-panel[data-panel={name}]:not([hidden])")


async def test_product_tour(tour_server: Studio, browser: Any) -> None:
    studio = tour_server
    login = await new_page(browser, studio, user=None)
    await login.goto(studio.url("/login/"))
    await login.fill("input[name=username]", "maria")
    await screenshot(login, "login")

    page = await new_page(browser, studio, user="maria")

    # 1. A quick look around (the demo lists the project and reads its README).
    await start(page, studio, mode="build", title="Get to know the project")
    await ask(page, "What files are here? Read the README.")
    await wait_settled(page)
    await page.wait_for_selector("#conversation .md:has-text('The README starts with')")

    # 2. Explain the code: two tool rows, then a Markdown answer with a table and code.
    tools_url = await start(page, studio, mode="build", title="How does app.py work?")
    await ask(page, "Explain how src/app.py works, with a short usage example.")
    await wait_settled(page)
    await page.wait_for_selector("#conversation .md pre.hl .k")  # a highlighted code block
    assert await page.locator("#conversation .tool").count() == 2
    assert await page.locator("#conversation .md table tr").count() == 4
    await screenshot(page, "session-tools")
    await ask(page, "Which todos come first in pending()?")
    await page.wait_for_selector("#conversation .md:has-text('Completed todos are never returned')")
    await wait_settled(page)
    await tab(page, "usage")
    await page.wait_for_selector("#tab-usage .usage-chart")
    assert await page.locator("#tab-usage .usage-chart g").count() == 2  # one bar per turn
    await screenshot(page, "session-usage")
    await tab(page, "records")
    await page.wait_for_selector("#tab-records :text('Offline demo model')")

    # 3. Plan a feature: the plan waits for review as a checklist.
    review_url = await start(page, studio, mode="plan", title="Due-date reminders")
    await ask(page, "Plan e-mail reminders for todos that are due tomorrow")
    await page.wait_for_selector("#pending .review .checklist li")
    await page.wait_for_selector("#session-status .pill-waiting")
    await tab(page, "plan")
    await page.fill("#pending textarea[name=notes]", "Keep it to the standard library")
    await screenshot(page, "plan-review")

    # 4. The agent asks before planning: the question form (choice, multi-select, free text).
    await start(page, studio, mode="plan", title="Sharing lists with family")
    await ask(page, "Plan shared todo lists for a family. Ask me questions first.")
    await page.wait_for_selector("#pending .question-form fieldset.question")
    await page.check("#pending input[name=q-scope][value=Small]")
    await page.check("#pending input[name=q-extras][value=Tests]")
    await page.check("#pending input[name=q-extras][value=Docs]")
    await page.fill("#pending input[name=q-extras-text]", "Works offline")
    await screenshot(page, "ask-user")
    await page.click("#answer-submit")
    await page.wait_for_selector("#pending .review .checklist li")
    await page.click("#approve-plan")
    await wait_settled(page)
    await page.wait_for_selector("#conversation .md:has-text('approved plan')")
    await tab(page, "plan")
    await page.wait_for_selector("#tab-plan .tl-approved")
    await screenshot(page, "plan-approved")

    # 5. The overview: four sessions, one still waiting for a review.
    await page.goto(studio.url("/"))
    await page.wait_for_selector(".session-row")
    assert await page.locator(".session-row").count() == 4
    assert await page.locator(".session-row .pill-waiting").count() == 1
    await screenshot(page, "sessions")

    # 6. Dark mode follows the system setting.
    dark = await new_page(browser, studio, user="maria", dark=True)
    await dark.goto(review_url)
    await dark.wait_for_selector("#conn-state.on")
    await dark.wait_for_selector("#pending .review .checklist li")
    await tab(dark, "plan")
    await screenshot(dark, "session-dark")

    # 7. On a phone: one screen, the plan review fits, the Trace is a drawer.
    phone = await new_page(browser, studio, user="maria", width=390, height=844)
    await phone.goto(review_url)
    await phone.wait_for_selector("#conn-state.on")
    # The page opens scrolled to the end of the conversation (smoothly): wait until it got there.
    await phone.wait_for_function(  # a function, not an expression: the page's CSP refuses eval()
        "() => { const r = document.querySelector('#approve-plan').getBoundingClientRect();"
        " return r.top >= 0 && r.bottom <= innerHeight; }"
    )
    await screenshot(phone, "mobile-plan-review")
    await phone.goto(tools_url)
    await phone.wait_for_selector("#conn-state.on")
    await phone.click("#trace-toggle")
    await tab(phone, "tasks")
    await phone.click("#tab-tasks .task >> nth=1 >> summary")
    await phone.wait_for_selector("#tab-tasks .task[open] pre")
    await screenshot(phone, "mobile-trace")

    # Nothing from the security tests can be in these pictures.
    for shot in (page, dark, phone):
        html = await shot.content()
        assert "onerror" not in html and "pytest-of" not in html and "__pwned" not in html


async def test_tour_of_the_trace_and_the_session_controls(tour_server: Studio, browser: Any) -> None:
    """Issue #14's screenshots: durable tasks as a tree, the Records tab, the ticking checklist,
    messages queued while the agent works, and a subagent under the call that made it."""
    import uuid

    studio = tour_server
    page = await new_page(browser, studio, user="maria")

    # 1. Durable tasks: a parent waiting on two timers, with countdowns, under the tool call.
    await start(page, studio, mode="build", title="Nightly clean-up")
    await ask(page, "Run the example tasks for 90 seconds")
    await wait_settled(page, "running")
    parent = "#tasks-active .task-node.kind-task[data-status=waiting]"
    await page.wait_for_selector(f"{parent} > .task-children .countdown")
    await page.click(f"{parent} > details > summary")
    await page.click(f"{parent} details.checkpoint > summary")
    await page.wait_for_selector(f"{parent} details.checkpoint pre .s2")  # highlighted JSON
    await screenshot(page, "session-tasks")
    await tab(page, "records")
    await page.wait_for_selector("#records-extensions :text('example.pair v1')")
    await screenshot(page, "session-records")

    # 2. The agent's checklist ticks in the Plan tab.
    await start(page, studio, mode="build", title="Release checklist")
    await ask(page, "Work through a checklist for the release")
    await wait_settled(page)
    await tab(page, "plan")
    await page.wait_for_selector("#plan-items li.done >> nth=2")
    await screenshot(page, "session-plan")

    # 3. While the agent works, messages queue as chips: withdraw one, steer with another.
    token = uuid.uuid4().hex[:10]
    await start(page, studio, mode="build", title="Database migration")
    await ask(page, f"HOLD:{token} Run the database migration")
    await page.wait_for_selector("#run-controls[data-busy='1'] #steer-button")
    await ask(page, "Then update the changelog")
    await ask(page, "Also tell me how long it took")
    await page.wait_for_selector(".queue-chip:has-text('how long it took')")
    await page.click(".queue-chip:has-text('how long it took') .promote-button")
    await page.wait_for_selector(".queue-chip.steer")
    await tab(page, "tasks")
    await screenshot(page, "session-queue")
    studio.release(token)
    await wait_settled(page)

    # 4. A subagent: under the subagent call, with its own tool calls; its page is read-only.
    await start(page, studio, mode="build", title="Delegate a review")
    await ask(page, "Delegate to a subagent: what files are here? Read the README.")
    await wait_settled(page)
    subagent = "#tab-tasks .task-node.kind-subagent"
    await page.wait_for_selector(f"{subagent} > .task-children .task-node.kind-tool")
    await page.click(f"{subagent} > details > summary")
    await screenshot(page, "session-subagent")

    # 5. On a phone: the task tree in the Trace drawer.
    phone = await new_page(browser, studio, user="maria", width=390, height=844)
    await phone.goto(studio.url("/"))
    await phone.click(".session-row a:has-text('Nightly clean-up')")
    await phone.wait_for_selector("#conn-state.on")
    await phone.click("#trace-toggle")
    await tab(phone, "tasks")
    await phone.wait_for_selector("#tab-tasks .task-children .task-node", state="visible")
    await screenshot(phone, "mobile-tasks")

    for shot in (page, phone):
        html = await shot.content()
        assert "onerror" not in html and "pytest-of" not in html and "__pwned" not in html
