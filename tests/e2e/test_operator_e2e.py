"""Studio for operators in Chromium (W8–W12): the Timeline live and after a reload, a span's
details, the keyboard, the downloads, "waiting for you" in the title, the favicon and a
notification, the sessions list (search, sort, rename, live pills, delete), usage over time —
on a desktop and on a 390 px phone. One daphne for the module, a few rich page loads.

The model is the screenshot tour's (``tests.e2e.tour_model``: the offline demo plus a richer
answer, and ``HOLD:<token>`` turns that wait until the test releases them), so the pictures it
takes for the docs show a clean, realistic project.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import (
    TOUR_APP,
    TOUR_README,
    TOUR_TEST,
    Studio,
    new_page,
    screenshot,
    serve_studio,
    wait_settled,
)
from tests.e2e.test_tour import ask, start

pytestmark = pytest.mark.e2e

NOTIFICATIONS = """
window.__notes = [];
class RecordedNotification { constructor(title, options) { window.__notes.push([title, (options || {}).body || ""]); } }
RecordedNotification.permission = "granted";
RecordedNotification.requestPermission = () => Promise.resolve("granted");
window.Notification = RecordedNotification;
"""


@pytest.fixture(scope="module")
def operator_server() -> Iterator[Studio]:
    base = Path(tempfile.mkdtemp(prefix="olga-"))
    project = base / "projects" / "todo-app"
    (project / "src").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "README.md").write_text(TOUR_README)
    (project / "src" / "app.py").write_text(TOUR_APP)
    (project / "tests" / "test_app.py").write_text(TOUR_TEST)
    env = {
        "STUDIO_RUNTIME_FACTORY": "tests.e2e.tour_model.open_runtime",
        "AGENTCORE_DEMO_DELAY_MS": "8",
        "STUDIO_SHARED_WORKDIRS": str(project),
    }
    try:
        with serve_studio(base, env, ("olga", "bob")) as studio:
            studio.workspace = project
            yield studio
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def open_timeline(page: Any) -> None:
    await page.click(".tab[data-tab=timeline]")
    await page.wait_for_selector("#tab-timeline[data-loaded='1'] .tl-row")


async def spans(page: Any) -> list[str]:
    return list(await page.eval_on_selector_all("#timeline-rows .tl-row", "rows => rows.map(r => r.dataset.span)"))


async def no_overflow(page: Any) -> None:
    width = await page.evaluate("() => document.documentElement.scrollWidth")
    wide = await page.evaluate(
        "() => [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > 391)"
        ".slice(0, 3).map(e => e.tagName + '.' + e.className + '#' + e.id)"
    )
    assert width <= 390, f"{page.url} scrolls sideways ({width}px): {wide}"


async def test_the_operator_views(operator_server: Studio, browser: Any) -> None:
    studio = operator_server
    page = await new_page(browser, studio, user="olga", width=1440, height=900)
    await page.add_init_script(NOTIFICATIONS)

    # 1. A turn with tool calls, then one held in a tool call: the Timeline while it runs.
    url = await start(page, studio, mode="build", title="How does app.py work?")
    for width in (1440, 1024):  # the Trace column is 400 px wide, 340 px under 1100 px: every tab shows
        await page.set_viewport_size({"width": width, "height": 900})
        clipped = await page.evaluate(
            """() => { const edge = document.querySelector('#trace').getBoundingClientRect().right;
                return [...document.querySelectorAll('#trace .tabs .tab')]
                    .filter(t => t.getBoundingClientRect().right > edge + 0.5).map(t => t.textContent.trim()); }"""
        )
        assert clipped == [], f"Trace tabs cut off at {width} px: {clipped}"
    await page.set_viewport_size({"width": 1440, "height": 900})
    await ask(page, "Explain how src/app.py works, with a short usage example.")
    await wait_settled(page)
    token = uuid.uuid4().hex[:10]
    await ask(page, f"HOLD:{token} Run the database migration")
    await page.wait_for_selector("#run-controls[data-busy='1']")
    await open_timeline(page)
    await page.wait_for_selector("#timeline-rows .tl-row.k-tool.s-running")  # the held call, still open
    assert await page.get_attribute("#timeline-axis", "data-live") == "1"
    assert await page.locator("#timeline-axis .tl-tick").count() >= 2
    width = await page.eval_on_selector("#timeline-rows .tl-row.k-turn .tl-bar", "b => b.getBoundingClientRect().width")
    assert width > 20, "bars are drawn to scale"
    overlap = await page.evaluate(
        """() => { const a = document.querySelector('#timeline-axis .tl-axis-start').getBoundingClientRect();
            const h = document.querySelector('#tab-timeline .tl-head').getBoundingClientRect();
            return a.top < h.bottom && h.top < a.bottom && a.left < h.right && h.left < a.right; }"""
    )
    assert not overlap, "the axis's start time sits above the axis, not over the Show menu"
    await screenshot(page, "session-timeline")
    tools_before = await page.locator("#timeline-rows .tl-row.k-tool.s-ok").count()
    studio.release(token)
    await wait_settled(page)
    # Live, without a reload: the held call ended and the answer's request was added.
    await page.wait_for_function(
        "(n) => document.querySelectorAll('#timeline-rows .tl-row.k-tool.s-ok').length === n + 1"
        " && !document.querySelector('#timeline-rows .tl-row.s-running')",
        arg=tools_before,
    )
    live = await spans(page)

    # 2. A span's details (from the store), local times with UTC on hover, the keyboard.
    await page.click("#timeline-rows .tl-row.k-model >> nth=0 >> .tl-name")
    await page.wait_for_selector("#timeline-detail :text('Time to first token')")
    assert await page.locator("#timeline-detail :text('Sent: the context')").count() == 1
    when = page.locator("#timeline-detail time.local-time").first
    assert "UTC" in (await when.get_attribute("title") or "") and "UTC" not in await when.inner_text()
    await page.focus("#timeline-rows .tl-row >> nth=0 >> .tl-name")
    await page.keyboard.press("ArrowDown")
    focused = await page.evaluate("document.activeElement.closest('.tl-row').dataset.span")
    assert focused == live[1]
    await page.keyboard.press("Enter")
    await page.wait_for_selector(f"#timeline-detail[data-span='{live[1]}']")

    # 3. The same Timeline after a reload (from the store), and the downloads.
    await page.reload()
    await page.wait_for_selector("#conn-state.on")
    await open_timeline(page)
    assert await spans(page) == live
    await page.click("#downloads-menu summary")
    async with page.expect_download() as info:
        await page.click("#downloads-menu a[href$='trace.json']")
    document = json.loads(await asyncio.to_thread(Path(await (await info.value).path()).read_text))
    assert document["schema"] == "agentcore.trace" and len(document["spans"]) == len(live)
    async with page.expect_download() as info:
        await page.click("#downloads-menu a[href$='store.sqlite']")
    head = (await asyncio.to_thread(Path(await (await info.value).path()).read_bytes))[:16]
    assert head == b"SQLite format 3\x00"

    # 4. Waiting for you: the title, the favicon and (turned on) a notification.
    await page.click("#notify-toggle")
    await page.wait_for_selector("#notify-toggle[aria-pressed=true]")
    review_url = await start(page, studio, mode="plan", title="Due-date reminders")
    await ask(page, "Plan e-mail reminders for todos that are due tomorrow")
    await page.wait_for_selector("#pending .review .checklist li")
    await page.wait_for_function("() => document.title.startsWith('⏸ Waiting for you · ')")
    assert "favicon-waiting.svg" in (await page.get_attribute("link[rel=icon]", "href") or "")
    notes = await page.evaluate("window.__notes")
    assert notes and notes[0][0] == "Waiting for you" and "plan waits for your review" in notes[0][1]

    # 5. The sessions list: waiting shows there too and follows live; search, sort, rename.
    listing = await new_page(browser, studio, user="olga")
    await listing.goto(studio.url("/"))
    await listing.wait_for_selector(".session-row .pill-waiting")
    await listing.wait_for_function("() => document.title.startsWith('⏸ Waiting for you · ')")
    assert await listing.locator("#waiting-count").inner_text() == "1 waiting for you"
    await page.click("#approve-plan")  # in the other tab: the list's pill follows without a reload
    await listing.wait_for_function("() => !document.querySelector('.session-row .pill-waiting')")
    await listing.wait_for_function("() => !document.title.startsWith('⏸')")
    await wait_settled(page)
    await listing.fill("#list-filters input[name=q]", "database migration")  # a prompt, not a title
    await listing.press("#list-filters input[name=q]", "Enter")
    await listing.wait_for_url("**/?q=database+migration*")
    assert await listing.locator(".session-row").count() == 1
    await listing.goto(studio.url("/?sort=tokens"))
    assert "How does app.py work?" in await listing.locator(".session-row >> nth=0").inner_text()
    row = listing.locator(".session-row:has-text('Due-date reminders')")
    await row.locator("details.menu summary").click()
    await row.locator("input[name=new_title]").fill("Reminders, approved")
    await row.locator(".rename-form button").click()
    await listing.wait_for_selector(".session-row:has-text('Reminders, approved')")
    await screenshot(listing, "sessions-operator")

    # 6. Delete a session after the confirmation.
    await start(page, studio, mode="build", title="Scratch")
    await listing.goto(studio.url("/"))
    row = listing.locator(".session-row:has-text('Scratch')")
    await row.locator("details.menu summary").click()
    await row.locator(".delete-link").click()
    await listing.wait_for_selector("#delete-confirm")
    await listing.click("#confirm-delete")
    await listing.wait_for_url(studio.url("/"))
    assert await listing.locator(".session-row:has-text('Scratch')").count() == 0

    # 7. Usage over time: charts with axes and the table.
    await listing.goto(studio.url("/usage/"))
    assert await listing.locator("svg.chart .bars rect").count() >= 1  # today, the demo model (it costs $0)
    assert await listing.locator("svg.chart .y-labels text").count() == 10
    assert await listing.locator("#usage-days tbody tr").count() >= 1
    await screenshot(listing, "usage")

    # 8. Someone else gets 404 from every new URL of this session.
    bob = await new_page(browser, studio, user="bob")
    session_id = url.rstrip("/").rsplit("/", 1)[1]
    for path in ("timeline/", f"timeline/span/?span={live[0]}", "download/trace.json", "download/store.sqlite"):
        response = await bob.request.get(studio.url(f"/sessions/{session_id}/{path}"))
        assert response.status == 404, path

    # 9. On a phone: the Timeline in the Trace drawer, the list and the usage page fit.
    phone = await new_page(browser, studio, user="olga", width=390, height=844)
    await phone.goto(url)
    await phone.wait_for_selector("#conn-state.on")
    await phone.click("#trace-toggle")
    await open_timeline(phone)
    assert await spans(phone) == live
    await phone.click("#timeline-rows .tl-row.k-tool >> nth=0 >> .tl-name")
    await phone.wait_for_selector("#timeline-detail :text('Arguments')")
    await no_overflow(phone)
    await screenshot(phone, "mobile-timeline")
    for path in ("/", "/usage/", review_url.replace(studio.base_url, "")):
        await phone.goto(studio.url(path))
        await no_overflow(phone)
