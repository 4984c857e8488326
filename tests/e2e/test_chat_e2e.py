"""Issue #27 in Chromium against a real daphne: the chat, finished (W13, W14, P2, I1, C3, P3).

One daphne for the module (``chat_server``): the offline demo model (paced, ``tests.e2e.chat_model``)
with Studio's defaults — the example extension, subagents, code mode for demo sessions — plus
models registered on a dead endpoint. Few tests, each a whole story a person lives through:

- a newcomer's first minutes with the demo (suggestions, thinking, Markdown and code, tools in
  a seeded workspace, a visible checklist, a steer joining a long task, a code-mode script, web
  search with sources, a timer's countdown, questions in plan mode);
- failures a person can act on (the endpoint check, "cannot connect" with Stop, Retry on
  another model, the model's settings for staff, a steer that became the next message);
- images, Compact now, edit and resend, copy, shortcuts (desktop);
- the phone: sessions table, the header, the New button; light-mode contrast.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Error as PlaywrightError

from agentcore.demo import DEMO_FILES, DEMO_PROMPTS
from tests.e2e.conftest import Studio, new_page, screenshot, serve_studio, wait_settled
from tests.e2e.test_mobile_e2e import assert_no_horizontal_overflow

pytestmark = pytest.mark.e2e

PNG = base64.b64decode(  # 8 × 8 pixels, copper
    "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEUlEQVR4nGM4EaCBFTEMLQkAaplQAc/OcKAAAAAASUVORK5CYII="
)


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Studio]:
    base = tmp_path_factory.mktemp("studio-chat")
    env = {
        "STUDIO_RUNTIME_FACTORY": "tests.e2e.chat_model.open_runtime",
        "STUDIO_E2E_DELTA_DELAY_MS": "15",
        "AGENTCORE_DEMO_DELAY_MS": "15",  # the demo's own pace: checklist ticks and long-task steps are visible
    }
    with serve_studio(base, env, ("alice", "carol"), staff=("carol",)) as studio:
        yield studio


async def demo_session(page: Any, studio: Studio, *, title: str = "") -> str:
    """A new demo session in a fresh workspace (the form's defaults); its id."""
    await page.goto(studio.url("/"))
    await page.select_option("select[name=registered_model]", label="Offline demo model")
    if title:
        await page.fill("input[name=title]", title)
    await page.click("#new-session-form button[type=submit]")
    await page.wait_for_url("**/sessions/*/")
    await page.wait_for_selector("#conn-state.on")
    return str(page.url.rstrip("/").rsplit("/", 1)[-1])


async def send(page: Any, text: str) -> None:
    await page.fill("#prompt", text)
    await page.press("#prompt", "Enter")


async def suggest(page: Any, prompt: str) -> None:
    await page.click(f".suggestion[data-prompt='{prompt}']")


async def last_answer(page: Any) -> str:
    return str(await page.locator("#conversation .turn >> nth=-1").inner_text())


async def shot(page: Any, name: str, focus: Any) -> None:
    """A picture for the docs with ``focus`` (a locator) in view: the conversation scrolls
    smoothly while it streams, so it is scrolled to the element at once first. A picture is
    no assertion: when a push replaced the element or its turn already ended (a fast machine,
    a slow one), the page is taken as it is."""
    with contextlib.suppress(PlaywrightError):
        await focus.scroll_into_view_if_needed(timeout=3_000)
    await screenshot(page, name)


async def clipboard(page: Any) -> str:
    return str(await page.evaluate("() => navigator.clipboard.readText()"))


def contrast(fg: str, bg: str) -> float:
    """WCAG contrast of two computed CSS colours (``rgb()``/``rgba()``/``color(srgb …)``),
    a translucent background blended over white."""

    def channels(text: str) -> tuple[list[float], float]:
        numbers = [float(n) for n in re.findall(r"[\d.]+", text)]
        if text.startswith("color("):
            rgb, alpha = [n * 255 for n in numbers[:3]], numbers[3] if len(numbers) > 3 else 1.0
        else:
            rgb, alpha = numbers[:3], numbers[3] if len(numbers) > 3 else 1.0
        return rgb, alpha

    def luminance(rgb: list[float]) -> float:
        def linear(c: float) -> float:
            c /= 255
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

        r, g, b = (linear(c) for c in rgb)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    back, alpha = channels(bg)
    back = [alpha * c + (1 - alpha) * 255 for c in back]
    front, _ = channels(fg)
    light, dark = sorted((luminance(front), luminance(back)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


COLOURS = """(selector) => {
  const el = document.querySelector(selector);
  let node = el, bg = "rgb(255, 255, 255)";
  while (node) {
    const c = getComputedStyle(node).backgroundColor;
    if (c && c !== "rgba(0, 0, 0, 0)" && c !== "transparent") { bg = c; break; }
    node = node.parentElement;
  }
  return [getComputedStyle(el).color, bg];
}"""


async def test_a_newcomers_first_minutes_with_the_demo(chat_server: Studio, browser: Any) -> None:
    """P3/W13: an empty demo session lists every demo prompt; clicking them shows thinking,
    Markdown with a table and highlighted code, tools on a seeded workspace, a checklist that
    ticks, a steer joining a long task, a code-mode script, a web search with sources (kept
    after a reload), a timer with a countdown and questions in plan mode — without typing."""
    page = await new_page(browser, chat_server)
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=chat_server.base_url)
    session_id = await demo_session(page, chat_server)
    offered = page.locator(".suggestions button.suggestion")
    assert await offered.count() == len(DEMO_PROMPTS), "code mode, the example extension and search are on"
    assert await page.locator(".suggestion.unavailable").count() == 0
    await screenshot(page, "demo-suggestions")
    workspace = chat_server.data_dir / "workspaces" / session_id
    assert sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*") if p.is_file()) == sorted(DEMO_FILES)

    # Tools on the seeded workspace; the message is on the page once while its turn is live.
    await suggest(page, "What files are here? Read the README.")
    await page.wait_for_selector("#live-turn .tool")
    bubbles = page.locator(".turn .user-text:text-is('What files are here? Read the README.')")
    assert await bubbles.count() == 1, "the placeholder gives way to the live turn"
    assert await page.get_attribute("#live-blocks", "aria-live") == "polite"
    await wait_settled(page)
    answer = await last_answer(page)
    assert "garden.py" in answer and "README.md" in answer and "Copper Tulips" in answer

    # Thinking, Markdown, a table and highlighted code; copy the code and the answer.
    await send(page, "Show me a Markdown sample with a table and some code.")
    await wait_settled(page)
    turn = page.locator("#conversation .turn >> nth=-1")
    assert await turn.locator("details.thinking").count() >= 1
    assert await turn.locator(".md table").count() == 1 and await turn.locator(".md pre.hl .k").count() >= 1
    await turn.locator(".code-copy").click()
    assert (await clipboard(page)).startswith("def plan(beds")
    await turn.locator(".turn-actions .copy-button").click()
    assert "| file | what it holds |" in await clipboard(page), "the answer is copied as its Markdown"
    await shot(page, "demo-markdown", turn.locator(".md table"))

    # A checklist that ticks step by step (each step a visible state of the Plan tab).
    await page.click(".tab[data-tab=plan]")
    await send(page, "Work through the sample files with a checklist.")
    await page.wait_for_selector("#plan-items li.item-in_progress")
    await page.wait_for_selector("#plan-items li.item-completed + li.item-in_progress")
    await wait_settled(page)
    assert await page.locator("#plan-items li.item-completed").count() == 3

    # A long task: a steer joins it at its next tool call and the demo says it heard it.
    await send(page, "Do a long task: review every file, one at a time.")
    await page.wait_for_selector("#live-turn .tool-name:text('read')")
    await page.fill("#prompt", "that's enough, stop after this one")
    await page.click("#steer-button")
    await page.wait_for_selector("#live-turn .steer-msg")
    await shot(page, "demo-steer", page.locator("#live-turn .steer-msg"))
    await wait_settled(page)
    assert "Noted your steer" in await last_answer(page)

    # A code-mode script and its nested calls.
    await send(page, "Run a code-mode script that counts the files.")
    await wait_settled(page)
    script = page.locator("#conversation .turn >> nth=-1 >> .tool:has(.tool-name:text('codemode'))")
    assert await script.count() == 1 and "call" in await script.locator(".cm-count").inner_text()
    assert "The script ran" in await last_answer(page)

    # Web search: running → searched, with the query; the sources with their titles and links.
    await send(page, "Search the web for durable agent runtimes.")
    await page.wait_for_selector("#live-turn .search")
    await wait_settled(page)
    search = page.locator("#conversation .turn >> nth=-1 >> .search")
    assert "Searched the web" in await search.inner_text() and "durable agent runtimes" in await search.inner_text()
    links = page.locator("#conversation .turn >> nth=-1 >> .sources a")
    assert await links.count() == 2
    assert await links.first.inner_text() == "Durable agents: keep the store as the truth"
    assert await links.first.get_attribute("href") == "https://example.org/durable-agents"
    await shot(page, "demo-search", page.locator("#conversation .turn >> nth=-1 >> .sources"))
    await page.reload()
    await page.wait_for_selector("#conn-state.on")
    assert await page.locator("#conversation .turn >> nth=-1 >> .sources a").count() == 2
    assert "durable agent runtimes" in await page.locator("#conversation .turn >> nth=-1 >> .search").inner_text()

    # A durable timer: its countdown in the Trace.
    await send(page, "Start a timer for 30 seconds.")
    await page.click(".tab[data-tab=tasks]")
    await page.wait_for_selector("#tab-tasks .countdown")

    # Questions in plan mode, from a suggestion of a new session.
    await demo_session(page, chat_server)
    await suggest(page, "Plan a todo app, ask me questions first.")
    await page.wait_for_selector("#pending .questions")
    assert await page.is_checked("#composer input[name=agent][value=plan]")
    await page.check("#pending input[type=radio][value=Small]")
    await page.check("#pending input[type=checkbox][value=Tests]")
    await page.click("#answer-submit")
    await page.wait_for_selector("#pending .review .checklist li")


async def test_a_prompt_travels_over_the_pages_socket(chat_server: Studio, browser: Any) -> None:
    """W2/W13: a text prompt goes over the session's WebSocket, not a POST; its answer streams
    back on the same socket. A refused one (too long) says why in ``#composer-error`` and gives
    the text back; while the page's socket is down the same composer posts instead."""
    from studio.forms import MAX_PROMPT_CHARS

    page = await new_page(browser, chat_server)
    sent: list[str] = []
    posts: list[str] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda frame: sent.append(str(frame))))
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    await demo_session(page, chat_server)
    posts.clear()
    await send(page, "What files are here? Read the README.")
    await wait_settled(page)
    assert "garden.py" in await last_answer(page)
    prompts = [json.loads(frame) for frame in sent if '"command"' in frame]
    assert [(p["command"], p["prompt"], p["agent"]) for p in prompts] == [
        ("prompt", "What files are here? Read the README.", "build")
    ]
    assert posts == [], "the prompt did not use the POST"
    assert await page.inner_text("#composer-error") == ""

    too_long = "x" * (MAX_PROMPT_CHARS + 1)
    await page.fill("#prompt", too_long)
    await page.press("#prompt", "Enter")
    error = page.locator("#composer-error .form-error")
    await error.wait_for()
    assert f"at most {MAX_PROMPT_CHARS} characters" in await error.inner_text()
    assert await page.input_value("#prompt") == too_long, "the refused text is given back"
    assert await page.locator("#optimistic-turn").count() == 0 and posts == []

    # While the page knows its socket is down (htmx:wsClose marks the body; set here directly),
    # the same composer posts instead.
    await page.evaluate("() => { document.body.dataset.ws = 'off'; }")
    await page.fill("#prompt", "Show me a Markdown sample with a table and some code.")
    await page.press("#prompt", "Enter")
    await wait_settled(page)
    assert any(url.endswith("/prompt/") for url in posts)
    assert await page.inner_text("#composer-error") == ""
    assert await page.locator("#conversation .user-text").all_inner_texts() == [
        "What files are here? Read the README.",
        "Show me a Markdown sample with a table and some code.",
    ]


async def test_failures_a_person_can_act_on(chat_server: Studio, browser: Any) -> None:
    """W14: the new-session form checks a dead endpoint at once; a turn on it says "cannot
    connect to 127.0.0.1:9 — retrying in N s, attempt n of 5" with Stop beside it, then fails
    with Retry (on another of the session's models) and, for staff, the model's settings; a
    steer the turn ended before says it was sent as the next message; a failed demo turn's
    Retry succeeds."""
    script = """
from studio.models import RegisteredModel
for name, model_id in (("Dead endpoint (e2e)", "dead-a"), ("Dead twin (e2e)", "dead-b")):
    RegisteredModel.objects.get_or_create(name=name, defaults=dict(
        provider="custom", model_id=model_id, base_url="http://127.0.0.1:9/v1",
        api_kind="openai-completions", api_key="sk-e2e-dead", attributes={"input": ["text"], "reasoning": False}))
print(RegisteredModel.objects.get(name="Dead endpoint (e2e)").pk)
"""
    dead_pk = int(chat_server.manage("shell", "-c", script).strip().splitlines()[-1])
    page = await new_page(browser, chat_server, user="carol")
    await page.goto(chat_server.url("/"))
    started = time.monotonic()
    await page.select_option("select[name=registered_model]", label="Dead endpoint (e2e)")
    await page.wait_for_selector("#endpoint-check .error:has-text('Cannot connect to 127.0.0.1:9: connection refused')")
    assert time.monotonic() - started < 5
    await page.select_option("select[name=registered_model]", label="Offline demo model")
    await page.wait_for_selector("#endpoint-check .ok")
    await page.select_option("select[name=registered_model]", label="Dead endpoint (e2e)")
    await page.click("#new-session-form button[type=submit]")
    await page.wait_for_url("**/sessions/*/")
    await page.wait_for_selector("#conn-state.on")

    # Before sending: no effect of effort, no web search (the runtime's reason), no images.
    assert "no effect" in await page.inner_text("#effort-note")
    note = await page.inner_text("#web-search-note")
    assert "web_search is not available with the openai-completions api_kind" in note
    await page.set_input_files("#image-input", files=[{"name": "a.png", "mimeType": "image/png", "buffer": PNG}])
    assert "does not accept images" in await page.inner_text("#composer-error")
    assert await page.locator("#attachments .attachment").count() == 0

    # Cannot connect: said with host and port, the attempt of 5 and the delay; Stop beside it.
    await send(page, "hello dead endpoint")
    retry = page.locator("#live-turn .retry-connect >> nth=-1")
    await retry.wait_for()
    assert re.search(r"Cannot connect to 127\.0\.0\.1:9 — retrying in \d+ s, attempt 1 of 5", await retry.inner_text())
    await shot(page, "failure-connect", retry)
    await retry.locator(".retry-stop").click()
    await wait_settled(page)
    assert "Stopped" in await last_answer(page)

    # Regenerate (the same prompt, a new request) runs into the budget: failed, with Retry.
    page.set_default_timeout(40_000)  # five connect attempts back off for 15.5 s
    await page.click("#conversation .turn >> nth=-1 >> .regenerate-button")
    await page.wait_for_selector("#live-turn .retry-connect:has-text('attempt 2 of 5')")
    await wait_settled(page, "failed")
    failed = page.locator("#conversation .turn >> nth=-1")
    assert "could not connect to 127.0.0.1:9 5 times in a row" in await failed.inner_text()
    options = failed.locator(".retry-form select option")
    assert await options.all_inner_texts() == ["Dead endpoint (e2e)", "Dead twin (e2e)"]
    link = failed.locator(".retry-form .model-settings")
    assert await link.get_attribute("href") == f"/admin/studio/registeredmodel/{dead_pk}/change/"
    await shot(page, "failure-retry", failed.locator(".retry-form"))
    await failed.locator(".retry-form select").select_option(label="Dead twin (e2e)")
    await failed.locator(".retry-button").click()
    await page.wait_for_selector("#session-model:has-text('Dead twin (e2e)')")
    await page.wait_for_selector("#live-turn .retry-connect")
    assert await page.locator("#live-turn .user-text").inner_text() == "hello dead endpoint"
    await page.keyboard.press("Alt+s")  # the Stop shortcut
    await wait_settled(page)

    # A steer the turn ended before: the chip said "next tool call"; the next turn says what happened.
    token = uuid.uuid4().hex[:10]
    await demo_session(page, chat_server)
    await send(page, f"STREAM_THEN_WAIT:{token} tell me a story")
    await page.wait_for_selector("#live-turn .md")
    await page.fill("#prompt", "and add a moral")
    await page.click("#steer-button")
    await page.wait_for_selector(".queue-chip.steer")
    chat_server.release(token)
    await page.wait_for_selector("#live-turn .notice:has-text('ended before a tool call')")
    await wait_settled(page)
    steered = page.locator("#conversation .turn:has(.user-text:text-is('and add a moral'))")
    assert "Sent as the next message" in await steered.inner_text()

    # A failed demo turn's Retry: a new request with the same prompt, which succeeds.
    await send(page, f"FAIL_ONCE:{token} what files are here?")
    await wait_settled(page, "failed")
    await page.click("#conversation .turn >> nth=-1 >> .retry-button")
    await wait_settled(page)
    assert "I listed the workspace" in await last_answer(page)


async def test_images_compaction_edit_copy_and_shortcuts(chat_server: Studio, browser: Any, tmp_path: Path) -> None:
    """I1: pick, paste or drop images (a wrong type or a too big one is refused with the
    runtime's limits); a message of images alone is a turn whose thumbnails come from the store
    after a reload. C3: Compact now makes a divider holding the summary and moves the ring.
    W13: edit and resend forks from before the prompt; copy a message and a tool's arguments;
    W6 accessibility: "Fork from here" is always visible, shortcuts for the composer, Stop, New."""
    page = await new_page(browser, chat_server)
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=chat_server.base_url)
    await demo_session(page, chat_server, title="Pictures")
    await send(page, "What files are here? Read the README.")
    await wait_settled(page)
    await send(page, "Show me a Markdown sample with a table and some code.")
    await wait_settled(page)

    # Images: picked, pasted, dropped; refused when not an image or over 20 MB.
    picked = tmp_path / "picked.png"
    picked.write_bytes(PNG)
    await page.set_input_files("#image-input", str(picked))
    encoded = base64.b64encode(PNG).decode()
    for kind in ("paste", "drop"):
        await page.evaluate(
            """([kind, data]) => {
              const bytes = Uint8Array.from(atob(data), c => c.charCodeAt(0));
              const transfer = new DataTransfer();
              transfer.items.add(new File([bytes], kind + ".png", {type: "image/png"}));
              const target = document.querySelector("#prompt");
              const event = kind === "paste"
                ? new ClipboardEvent("paste", {clipboardData: transfer, bubbles: true, cancelable: true})
                : new DragEvent("drop", {dataTransfer: transfer, bubbles: true, cancelable: true});
              target.dispatchEvent(event);
            }""",
            [kind, encoded],
        )
    assert await page.locator("#attachments .attachment").count() == 3
    await page.evaluate(
        """() => {
          const transfer = new DataTransfer();
          transfer.items.add(new File(["text"], "notes.txt", {type: "text/plain"}));
          transfer.items.add(new File([new Uint8Array(21 * 1024 * 1024)], "huge.png", {type: "image/png"}));
          const drop = new DragEvent("drop", {dataTransfer: transfer, bubbles: true});
          document.querySelector("#prompt").dispatchEvent(drop);
        }"""
    )
    error = await page.inner_text("#composer-error")
    assert "notes.txt is not a PNG, JPEG, GIF or WebP image." in error and "the limit is 20 MB per image" in error
    await page.click("#attachments .attachment-remove >> nth=0")
    assert await page.locator("#attachments .attachment").count() == 2
    await page.click("#send-button")  # no text: the images alone are the message
    await wait_settled(page)
    thumbs = page.locator("#conversation .turn >> nth=-1 >> .thumbs img")
    assert await thumbs.count() == 2
    await page.reload()
    await page.wait_for_selector("#conn-state.on")
    await page.wait_for_function(
        "() => [...document.querySelectorAll('#conversation .thumbs img')]"
        ".every(i => i.complete && i.naturalWidth === 8)"
    )
    await shot(page, "chat-images", page.locator("#conversation .thumbs >> nth=-1"))

    # Copy a message and a tool call's arguments; "Fork from here" needs no hover.
    first = page.locator("#conversation .turn >> nth=0")
    await first.locator(".msg-actions .copy-button").click()
    assert await clipboard(page) == "What files are here? Read the README."
    await first.locator(".tool >> nth=0 >> summary").click()
    await first.locator(".tool >> nth=0 >> .kv-label .copy-button >> nth=0").click()
    assert '"path"' in await clipboard(page)
    fork = first.locator(".fork-button")
    assert await fork.evaluate("(el) => getComputedStyle(el.closest('.turn-actions')).opacity") == "1"
    await fork.focus()
    assert await page.evaluate("() => document.activeElement.classList.contains('fork-button')")

    # Edit and resend the second prompt: a fork from before it runs the new text.
    second = page.locator("#conversation .turn >> nth=1")
    await second.locator(".edit-button").click()
    await second.locator(".edit-form textarea").fill("Show me a Markdown sample, just the table.")
    await second.locator(".edit-send").click()
    await page.wait_for_selector("#view-banner:has-text('A fork')")
    await page.wait_for_selector("#conn-state.on")
    await wait_settled(page)
    prompts = await page.locator("#conversation .user-text").all_inner_texts()
    assert prompts == ["What files are here? Read the README.", "Show me a Markdown sample, just the table."]

    # Compact now (with instructions): a divider holding the summary; the ring follows.
    ring = await page.inner_text("#context-ring .ring-label")
    await page.click("#session-menu > summary")
    await page.fill("#compact-form textarea", "Keep the garden's file names.")
    await page.click("#compact-button")
    divider = page.locator("#conversation .compaction:not(.running)")
    await divider.wait_for()
    assert await divider.get_attribute("open") is None, "collapsed"
    await divider.locator("summary").click()
    assert (await divider.locator(".compaction-summary").inner_text()).strip()
    await page.wait_for_function(
        "(before) => document.querySelector('#context-ring .ring-label').innerText !== before", arg=ring
    )
    await screenshot(page, "chat-compaction")

    # Shortcuts: "/" focuses the message box, Alt+N opens the new-session form.
    await page.click("#conversation-scroll")
    await page.keyboard.press("/")
    assert await page.evaluate("() => document.activeElement.id") == "prompt"
    assert "Alt" in await page.inner_text("#shortcut-hint")
    await page.click("#conversation-scroll")
    await page.keyboard.press("Alt+n")
    await page.wait_for_url(chat_server.url("/#new-session"))
    await page.wait_for_function("() => document.activeElement && document.activeElement.name === 'registered_model'")


async def test_a_phone_and_light_mode_contrast(chat_server: Studio, browser: Any) -> None:
    """390 px: the sessions table keeps Tokens and Cost on screen, "Log out" stays on one line,
    a New button sits at the top; the session header is two short rows. Light mode: "LIVE",
    "Fork from here" and the task-kind badge meet WCAG AA (≥ 4.5:1)."""
    page = await new_page(browser, chat_server, width=390, height=844)
    await demo_session(page, chat_server, title="A title long enough to need trimming on a small phone screen")
    await send(page, "What files are here? Read the README.")
    await wait_settled(page)
    head = await page.locator(".chat-head").bounding_box()
    banner = await page.locator("#tools-banner").bounding_box()
    assert head and head["height"] <= 110, head  # was 370 of 844 px with the banner
    assert banner and banner["height"] <= 32, banner
    await assert_no_horizontal_overflow(page)
    await screenshot(page, "mobile-session")
    await page.goto(chat_server.url("/"))
    width = await page.evaluate("() => document.documentElement.clientWidth")
    for column in ("tr.session-row >> nth=0 >> td.num", "th.num"):
        for nth in (0, 1):
            box = await page.locator(f".sessions-table {column} >> nth={nth}").bounding_box()
            assert box and box["x"] + box["width"] <= width, (column, nth, box)
    headers = await page.evaluate(
        """() => [...document.querySelectorAll('.sessions-table th.num')].map(th => th.scrollWidth <= th.clientWidth)"""
    )
    assert headers == [True, True], "Tokens and Cost fit their columns"
    lines = await page.evaluate(
        """() => { const r = document.createRange();
                   r.selectNodeContents(document.querySelector('.topbar-user form .btn-link'));
                   return r.getClientRects().length; }"""
    )
    assert lines == 1, "Log out on one line"
    new = await page.locator("#new-session-link").bounding_box()
    assert new and new["y"] < 160
    await page.click("#new-session-link")
    await page.wait_for_function("() => document.activeElement && document.activeElement.name === 'registered_model'")
    await assert_no_horizontal_overflow(page)

    desk = await new_page(browser, chat_server)
    await desk.goto(page.url.split("#")[0])
    await desk.click(".session-row >> nth=0 >> td.session-title > a")
    await desk.wait_for_selector("#conn-state.on")
    await desk.click(".tab[data-tab=tasks]")
    await desk.wait_for_selector("#tab-tasks .task-kind")
    ratios = {}
    for name, selector in (("LIVE", "#conn-state"), ("Fork from here", ".fork-button"), ("task kind", ".task-kind")):
        fg, bg = await desk.evaluate(COLOURS, selector)
        ratios[name] = round(contrast(fg, bg), 2)
    assert all(ratio >= 4.5 for ratio in ratios.values()), ratios
