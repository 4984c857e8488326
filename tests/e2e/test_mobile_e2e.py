"""Issue #15, mobile: Studio at 390 px (a phone) and 768 px (a portrait tablet).

Every page is checked for horizontal overflow (nothing may make the page scroll sideways),
the session header for overlapping items, the plan review for buttons leaving their card, and
the Trace for being reachable without scrolling to the end of a long page.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Studio, new_page, wait_settled
from tests.e2e.test_studio_e2e import create_session, send

pytestmark = pytest.mark.e2e

WIDTHS = [390, 768]


async def assert_no_horizontal_overflow(page: Any) -> None:
    overflow = await page.evaluate(
        """() => {
        const root = document.scrollingElement;
        const wide = [...document.querySelectorAll('body *')].filter(el => {
          const r = el.getBoundingClientRect();
          return r.width > 0 && r.right > root.clientWidth + 1 && getComputedStyle(el).visibility !== 'hidden'
            && !el.closest('.trace:not(.trace-open .trace)');
        }).slice(0, 5).map(el => el.tagName + '.' + el.className + ' ' + Math.round(el.getBoundingClientRect().right));
        return {scroll: root.scrollWidth, client: root.clientWidth, wide};
      }"""
    )
    assert overflow["scroll"] <= overflow["client"], overflow
    assert overflow["wide"] == [], overflow


async def assert_apart(page: Any, selectors: list[str]) -> None:
    """The header items do not overlap each other. All boxes are read in one layout (a push
    after the turn swaps header items out and in; read one by one, one can be caught
    detached), and the read is redone while one of them is missing or not laid out."""
    for _attempt in range(50):
        rects = await page.evaluate(
            """(selectors) => selectors.map(s => {
                const el = document.querySelector(s);
                if (!el || !el.isConnected) return null;
                const r = el.getBoundingClientRect();
                return r.width > 0 && r.height > 0 ? {x: r.x, y: r.y, width: r.width, height: r.height} : null;
            })""",
            selectors,
        )
        if all(rects):
            break
    assert all(rects), dict(zip(selectors, rects, strict=True))
    boxes = list(zip(selectors, rects, strict=True))
    for i, (a, p) in enumerate(boxes):
        for b, q in boxes[i + 1 :]:
            apart = (
                p["x"] + p["width"] <= q["x"] + 0.5
                or q["x"] + q["width"] <= p["x"] + 0.5
                or p["y"] + p["height"] <= q["y"] + 0.5
                or q["y"] + q["height"] <= p["y"] + 0.5
            )
            assert apart, (a, p, b, q)


async def assert_inside(page: Any, inner: str, outer: str) -> None:
    """``inner`` lies horizontally within ``outer`` (a CSS selector). Both boxes are read in one
    layout (read one after the other, a drawer still sliding in moved between the two reads), and
    only from an element still in the page: a live push may swap it out between Playwright
    finding it and reading it (a detached element measures 0 × 0), so such a read is redone."""
    for _attempt in range(50):
        attached, i, o = await page.locator(inner).first.evaluate(
            """(el, outer) => [el.isConnected, ...[el, document.querySelector(outer)]
                .map(node => node.getBoundingClientRect()).map(r => ({x: r.x, width: r.width}))]""",
            outer,
        )
        if attached:
            break
    assert attached, f"{inner} was swapped out on every read"
    assert i["width"] > 0 and o["width"] > 0, (inner, i, o)
    assert o["x"] - 0.5 <= i["x"] and i["x"] + i["width"] <= o["x"] + o["width"] + 0.5, (inner, i, o)


@pytest.mark.parametrize("width", WIDTHS)
async def test_sessions_and_a_working_session_fit_the_screen(studio_server: Studio, browser: Any, width: int) -> None:
    page = await new_page(browser, studio_server, width=width, height=844 if width < 600 else 1024)
    await page.goto(studio_server.url("/"))
    await assert_no_horizontal_overflow(page)
    await create_session(page, studio_server, title="A title long enough to need trimming on a small phone screen")
    await send(page, "What files are here? Read the README.")
    await wait_settled(page)
    await page.wait_for_selector("#conversation .tool")
    await assert_no_horizontal_overflow(page)
    await assert_apart(
        page, ["#session-title", "#session-status .pill", "#session-stats", "#context-ring", "#conn-state"]
    )
    # The page itself never scrolls: the conversation scrolls inside, the composer stays visible.
    assert await page.evaluate("document.scrollingElement.scrollHeight <= innerHeight + 1")
    composer = await page.locator("#composer").bounding_box()
    assert composer and composer["y"] + composer["height"] <= page.viewport_size["height"] + 1
    # The Trace is a drawer: one tap away, on screen, with its tabs, and closes again.
    assert not await page.locator(".tab[data-tab=tasks]").is_visible()
    await page.click("#trace-toggle")
    await page.wait_for_selector(".tab[data-tab=usage]", state="visible")
    await page.click(".tab[data-tab=usage]")
    await page.wait_for_selector("#tab-usage .usage-chart", state="visible")
    await assert_inside(page, "#trace", "body")
    await assert_no_horizontal_overflow(page)
    await page.click("#trace-close")
    await page.wait_for_selector(".tab[data-tab=usage]", state="hidden")


@pytest.mark.parametrize("width", WIDTHS)
async def test_plan_review_fits_its_card(studio_server: Studio, browser: Any, width: int) -> None:
    page = await new_page(browser, studio_server, width=width, height=844 if width < 600 else 1024)
    await create_session(page, studio_server, mode="plan")
    await send(page, "Plan a small recipe book app with tags and search")
    await page.wait_for_selector("#pending .review .checklist li")
    await assert_inside(page, "#reject-plan", "#pending .review")
    await assert_inside(page, "#approve-plan", "#pending .review")
    await assert_no_horizontal_overflow(page)


@pytest.mark.parametrize("width", WIDTHS)
async def test_queue_controls_and_the_task_tree_fit(studio_server: Studio, browser: Any, width: int) -> None:
    """Issue #14 on a phone and a tablet: the busy composer (Stop, Steer, Queue), queued chips
    and the Trace's task tree with its details stay on screen without sideways scrolling."""
    import uuid

    token = uuid.uuid4().hex[:10]
    page = await new_page(browser, studio_server, width=width, height=844 if width < 600 else 1024)
    await create_session(page, studio_server, title="Tasks on a small screen")
    await send(page, "run the example tasks for 40 seconds")
    await wait_settled(page, "running")  # the turn is done; its tasks run in the background
    await send(page, f"HOLD:{token} keep busy")
    await page.wait_for_selector("#live-turn .tool-name:text('wait_for_release')")
    await page.wait_for_selector("#run-controls[data-busy='1'] #steer-button")
    await send(page, "a follow-up with a rather long text that must be cut to fit the chip on a phone")
    await page.wait_for_selector(".queue-chip .withdraw-button")
    for control in ("#stop-button", "#steer-button", "#send-button", ".queue-chip"):
        await assert_inside(page, control, "#composer")
    await assert_no_horizontal_overflow(page)
    await page.click("#trace-toggle")
    await page.wait_for_selector(".tab[data-tab=tasks]", state="visible")
    children = "#tasks-active .task-children .task-node.kind-task"
    await page.wait_for_selector(children, state="visible")
    await page.click(f"{children} >> nth=0 >> summary")
    await page.wait_for_selector(f"{children} >> nth=0 >> .task-detail", state="visible")
    await assert_inside(page, f"{children} >> nth=0", "#trace")
    await assert_no_horizontal_overflow(page)
    await page.click("#trace-close")
    studio_server.release(token)
    await wait_settled(page, "running")  # the turns are done; the timers still run in the background
