"""Issue #14 in a real browser: the full Trace and session controls (W3, S2, X1).

Chromium drives a real daphne process whose runtimes run the session protocol with Studio's
example extension; the offline demo model starts timers, the example tasks and subagents on
request. Every wait is on a page condition; a turn that must stay busy waits at a gate the
test opens (``HOLD:<token>``, see ``slow_demo``).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from tests.e2e.conftest import Studio, new_page, wait_settled
from tests.e2e.test_studio_e2e import create_session, send

pytestmark = pytest.mark.e2e

COUNTDOWN = re.compile(r"in (?:(\d+):)?(\d+):(\d\d)")


def _seconds(text: str) -> int:
    match = COUNTDOWN.search(text)
    assert match, text
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


async def mark_page(page: Any) -> None:
    """A marker that a reload would wipe: the checks after it prove the page stayed live."""
    await page.evaluate("() => { window.__sameDocument = true; }")


async def same_document(page: Any) -> bool:
    return bool(await page.evaluate("() => window.__sameDocument === true"))


async def test_a_durable_timer_counts_down_and_fires_live(studio_server: Studio, browser: Any) -> None:
    """W3/X1: the timer task shows its definition, absolute wake time and a ticking countdown,
    then fires and moves to the history as completed — live, without a reload."""
    page = await new_page(browser, studio_server)
    await create_session(page, studio_server, title="A durable timer")
    await mark_page(page)
    await send(page, "start a timer for 8 seconds")
    timer = "#tasks-active .task-node.kind-task[data-status=running]"
    countdown = f"{timer} > details > summary .countdown"
    await page.wait_for_selector(countdown)
    first = _seconds(await page.inner_text(countdown))
    assert 1 <= first <= 8
    await page.wait_for_function(
        """([selector, first]) => {
            const el = document.querySelector(selector);
            const m = el && el.textContent.match(/in (\\d+):(\\d\\d)/);
            return m && Number(m[1]) * 60 + Number(m[2]) < first;
        }""",
        arg=[countdown, first],
    )
    # The detail: definition and version, phase, the absolute wake time, the checkpoint JSON.
    await page.click(f"{timer} > details > summary")
    detail = f"{timer} .task-detail"
    await page.wait_for_selector(f"{detail} dd.mono:text('example.timer v1')")
    wake = page.locator(f"{detail} time.wake-time")
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", await wake.get_attribute("datetime") or "")
    await page.click(f"{detail} details.checkpoint > summary")
    assert '"wake_at"' in await page.inner_text(f"{detail} details.checkpoint pre")
    # It fires: completed, in the history, with its outcome; the page was never reloaded.
    done = "#tasks-history .task-node.kind-task[data-status=completed]"
    await page.wait_for_selector(done, timeout=30_000)
    assert await page.locator("#tasks-active .task-node.kind-task").count() == 0
    assert await same_document(page)
    await page.click(".tab[data-tab=records]")
    await page.wait_for_selector("#records-extensions .record-item:has-text('example.timer v1')")


async def test_a_parent_task_waits_on_two_children_shown_as_a_tree(studio_server: Studio, browser: Any) -> None:
    """W3/X1: run_example_tasks → the parent (waiting) under the call that started it, its two
    timers under it; when both fired the parent collects and the whole tree is history."""
    page = await new_page(browser, studio_server)
    await create_session(page, studio_server, title="Parent and children")
    await send(page, "run the example tasks for 3 seconds")
    parent = "#tasks-active .task-node.kind-tool > .task-children > .task-node.kind-task[data-status=waiting]"
    await page.wait_for_selector(parent)
    assert await page.inner_text(f"{parent} > details > summary .tool-name") == "example.pair"
    children = f"{parent} > .task-children > .task-node.kind-task"
    await page.wait_for_function("(s) => document.querySelectorAll(s).length === 2", arg=children)
    assert await page.locator(f"{children} > details > summary .countdown").count() == 2
    await page.click(f"{parent} > details > summary")
    await page.wait_for_selector(f"{parent} .task-detail dd:has-text('2 child tasks')")
    finished = "#tasks-history .task-node.kind-task[data-status=completed]"
    tree = f"{finished} > .task-children > .task-node.kind-task[data-status=completed]"
    await page.wait_for_function("(s) => document.querySelectorAll(s).length === 2", arg=tree, timeout=30_000)
    assert await page.locator("#tasks-active").count() == 0


async def test_cancelling_a_task_shows_stopping_until_it_ends(studio_server: Studio, browser: Any) -> None:
    """S2 cancel scope task: the row says "stopping" while the task's abort runs, then aborted."""
    page = await new_page(browser, studio_server)
    await create_session(page, studio_server, title="Cancel a task")
    await send(page, "start a timer for 5 minutes")
    timer = "#tasks-active .task-node.kind-task"
    await page.wait_for_selector(f"{timer}[data-status=running]")
    await page.click(f"{timer} > details > summary")
    await page.click(f"{timer} .cancel-task")
    await page.wait_for_selector(f"{timer}[data-status=stopping]")
    assert await page.locator(f"{timer} .cancel-task").count() == 0  # no second cancel
    await page.wait_for_selector("#tasks-history .task-node.kind-task[data-status=aborted]")
    assert await page.locator("#tasks-active .task-node.kind-task").count() == 0
    assert await page.locator("#composer-error .form-error").count() == 0


async def test_queue_withdraw_and_promote_a_follow_up_while_busy(studio_server: Studio, browser: Any) -> None:
    """S2 submit/withdraw/promote: while the agent works, sending queues a chip; a chip can be
    taken back, or promoted to a steer that joins the running turn at its next tool boundary."""
    token = uuid.uuid4().hex[:10]
    page = await new_page(browser, studio_server)
    await create_session(page, studio_server, title="Queue while busy")
    await send(page, f"HOLD:{token} first job")
    await page.wait_for_selector("#live-turn .tool-name:text('wait_for_release')")
    await page.wait_for_selector("#run-controls[data-busy='1'] #steer-button")
    await send(page, "second message")
    await page.wait_for_selector(".queue-chip:has-text('second message') .queue-kind:text('queued')")
    await send(page, "third message")
    await page.wait_for_selector(".queue-chip:has-text('third message')")
    assert await page.input_value("#prompt") == ""  # the draft went into the queue
    await page.click(".queue-chip:has-text('third message') .withdraw-button")
    await page.wait_for_selector(".queue-chip:has-text('third message')", state="detached")
    await page.click(".queue-chip:has-text('second message') .promote-button")
    await page.wait_for_selector(".queue-chip.steer:has-text('second message')")
    assert await page.locator("#composer-error .form-error").count() == 0
    studio_server.release(token)
    await page.wait_for_selector("#live-turn .steer-msg:has-text('second message')")  # joined the turn
    await page.wait_for_selector(".queue-chip", state="detached")
    await wait_settled(page)
    conversation = await page.inner_text("#conversation")
    assert "second message" in conversation and "third message" not in conversation
    assert conversation.index("wait_for_release") < conversation.index("second message")


async def test_fork_from_a_message_opens_a_linked_session(studio_server: Studio, browser: Any) -> None:
    """S2 fork: from a committed message, a new session of the same store, linked to its parent."""
    page = await new_page(browser, studio_server)
    await create_session(page, studio_server, title="Before the fork")
    await send(page, "Remember the word lighthouse")
    await wait_settled(page)
    parent_url = page.url
    await page.hover("#conversation .turn")
    await page.click("#conversation .turn .fork-button")
    await page.wait_for_url(lambda url: url != parent_url)
    await page.wait_for_selector("#conn-state.on")
    assert "Fork of Before the fork" in await page.inner_text("#session-title")
    assert "A fork" in await page.inner_text("#view-banner")
    assert "lighthouse" in await page.inner_text("#conversation")  # the history up to the fork
    await send(page, "Only in the fork: seagull")
    await wait_settled(page)
    assert "seagull" in await page.inner_text("#conversation")
    await page.click("#view-banner a")
    await page.wait_for_url(parent_url)
    await page.wait_for_selector("#conn-state.on")
    assert "seagull" not in await page.inner_text("#conversation")
    await page.goto(studio_server.url("/"))
    row = page.locator(".session-row:has-text('Fork of Before the fork')")
    assert "fork of Before the fork" in await row.inner_text()


async def test_switch_model_and_effort_for_the_next_request(studio_server: Studio, browser: Any) -> None:
    """S2 configure: the next request runs on the chosen model (the Usage tab names it), and a
    stale settings form gets a clear version-conflict message instead of a silent overwrite."""
    script = """
from studio.models import RegisteredModel
for name, model_id in (("Alpha (e2e)", "alpha-1"), ("Beta (e2e)", "beta-2")):
    RegisteredModel.objects.get_or_create(name=name, defaults=dict(
        provider="custom", model_id=model_id, base_url="http://127.0.0.1:9/v1",
        api_kind="openai-responses", api_key="sk-e2e-not-shown"))
"""
    studio_server.manage("shell", "-c", script)
    page = await new_page(browser, studio_server)
    await page.goto(studio_server.url("/"))
    await page.select_option("select[name=registered_model]", label="Alpha (e2e)")
    await page.fill("input[name=workdir]", str(studio_server.workspace))
    await page.fill("input[name=title]", "Switch models")
    await page.click("#new-session-form button[type=submit]")
    await page.wait_for_url("**/sessions/*/")
    await page.wait_for_selector("#conn-state.on")
    await send(page, "hello from alpha")
    await wait_settled(page)
    await page.click(".tab[data-tab=usage]")
    await page.wait_for_selector("#tab-usage .tu-model:text('alpha-1')")
    await page.select_option("#config-model", label="Beta (e2e)")
    await page.wait_for_selector("#session-config input[name=expected_version][value='1']", state="attached")
    await send(page, "hello from beta")
    await wait_settled(page)
    await page.wait_for_selector("#tab-usage .tu-model:text('beta-2')")
    await page.click(".tab[data-tab=records]")
    await page.wait_for_selector("#tab-records dd.mono:text('beta-2')")
    assert "sk-e2e-not-shown" not in await page.content()
    # An old tab still shows version 1; someone else moved the settings on (version 2).
    await page.select_option("#config-effort", "high")
    await page.wait_for_selector("#session-config input[name=expected_version][value='2']", state="attached")
    await page.evaluate("() => { document.querySelector('#session-config input[name=expected_version]').value = '1'; }")
    await page.select_option("#config-effort", "low")
    await page.wait_for_selector("#config-error .form-error:has-text('changed elsewhere')")
    assert await page.input_value("#config-effort") == "high"  # the form shows what is in force


async def test_a_subagent_tree_and_its_read_only_view(studio_server: Studio, browser: Any) -> None:
    """S5/W3: a subagent sits under the call that made it with its own tool calls below; its
    conversation opens as a read-only page linked from the parent's tree."""
    page = await new_page(browser, studio_server)
    await create_session(page, studio_server, title="Delegation")
    await send(page, "Delegate to a subagent: what files are here? Read the README.")
    await wait_settled(page)
    subagent = "#tab-tasks .task-node.kind-tool > .task-children > .task-node.kind-subagent"
    await page.wait_for_selector(subagent)
    child_tools = f"{subagent} > .task-children > .task-node.kind-tool .tool-name"
    assert await page.locator(child_tools).all_inner_texts() == ["ls", "read"]
    parent_url = page.url
    await page.click(f"{subagent} > details > summary")
    await page.click(f"{subagent} .open-subagent")
    await page.wait_for_url(lambda url: url != parent_url)
    await page.wait_for_selector("#conn-state.on")
    assert "read-only" in await page.inner_text("#view-banner")
    assert await page.locator("#composer").count() == 0
    assert await page.locator(".fork-button").count() == 0
    assert "README" in await page.inner_text("#conversation")
    await page.click("#view-banner a")
    await page.wait_for_url(parent_url)


LONG_SESSION = """
import asyncio
from django.contrib.auth import get_user_model
from agentcore import create_agent
from studio import services
from studio.models import RegisteredModel

owner = get_user_model().objects.get(username="alice")
session = services.session_create(owner=owner, registered_model=RegisteredModel.objects.get(provider="demo"),
    workdir=WORKDIR, permission_policy="read-only", effort="low", mode="build", title="A long conversation")
messages = []
for n in range(90):
    messages.append({"role": "user", "content": [{"type": "text", "text": f"question {n}"}]})
    messages.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {n}"}]})

async def seed():
    agent = await create_agent(database_path=session.store_path, provider="demo", session={})
    agent.restore_transcript(messages)
    await agent.close()

asyncio.run(seed())
print("SESSION", session.pk)
"""


async def test_a_long_conversation_loads_earlier_turns_and_stays_continuous(
    studio_server: Studio, browser: Any
) -> None:
    """Scale: 90 turns → the page shows the newest 40; "Show earlier messages" loads older pages
    above them, and when a new turn moves the window on, the gap is filled, never lost."""
    script = LONG_SESSION.replace("WORKDIR", repr(str(studio_server.workspace)))
    session_id = studio_server.manage("shell", "-c", script).split("SESSION ")[-1].strip()
    page = await new_page(browser, studio_server)
    await page.goto(studio_server.url(f"/sessions/{session_id}/"))
    await page.wait_for_selector("#conn-state.on")
    assert await page.locator("#conversation .turn").count() == 40
    assert await page.locator("#conversation-older .turn").count() == 0
    await page.click("#load-earlier")
    await page.wait_for_function("() => document.querySelectorAll('#conversation-older .turn').length === 40")
    await page.click("#load-earlier")
    await page.wait_for_function("() => document.querySelectorAll('#conversation-older .turn').length === 50")
    assert await page.is_hidden("#load-earlier")  # nothing older is left
    await send(page, "one more question")
    await wait_settled(page)
    # The window now starts one turn later: the turn that left it is fetched into the older part.
    await page.wait_for_function("() => document.querySelectorAll('#conversation-older .turn').length === 51")
    questions = await page.locator("#conversation-scroll .bubble").all_inner_texts()
    assert questions == [f"question {n}" for n in range(90)] + ["one more question"]
