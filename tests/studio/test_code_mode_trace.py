"""W3/X4 in Studio: a ``codemode`` call shows its script and its nested calls — live while the
script runs (the pushes a watching page gets) and after a reload and a restart (rendered from
the store's snapshot).

A real session host, real runtimes with ``STUDIO_CODE_MODE`` on (QuickJS in its worker
process), the scripted model of ``tests.e2e.extras_model`` on loopback; the script waits in
its second nested call until the test releases it, so "while it runs" is a state the test
holds, not a race.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from studio import pages
from studio.host.contract import Regions, live_prefix
from studio.host.session_host import SessionHost, set_session_host
from studio.trace import code_mode_runs
from tests.e2e import extras_model
from tests.studio.html_parts import element, elements, text

pytestmark = pytest.mark.django_db(transaction=True)


def _calls(panel: str) -> list[tuple[str, str, str]]:
    """(index, name, status) of each nested call a code-mode panel lists, in order."""
    return [
        (
            re.search(r'data-index="(\d+)"', call).group(1),  # type: ignore[union-attr]
            re.search(r'data-name="([^"]+)"', call).group(1),  # type: ignore[union-attr]
            re.search(r'data-status="([^"]+)"', call).group(1),  # type: ignore[union-attr]
        )
        for call in elements(panel, css="cm-call")
    ]


def _conversation_panel(html: str, prefix: str) -> str:
    """The code-mode panel inside the conversation's tool block (not the Tasks tab's)."""
    for body in re.finditer(r'id="(' + re.escape(prefix) + r'-[^"]+)-body"', html):
        panel = element(element(html, id=body.group(1) + "-body"), css="codemode")
        if panel:
            return panel
    return ""


async def test_a_script_and_its_nested_calls_show_live_then_after_reload_and_restart(
    user: Any, make_session: Any, code_host: SessionHost, studio_data_dir: Path
) -> None:
    """X4/W3: while the script waits in its third call, the pushes show the first two (ls, read)
    completed with their arguments and results under the highlighted script, the script still
    running; when it ends, every call, the text() output and the return value — the same after
    a reload and after the host (and the runtime) were restarted. Hostile text stays text."""
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    layer = get_channel_layer()
    watcher = await layer.new_channel()
    await layer.group_add(f"session-{session.pk}", watcher)
    sent = await code_host.prompt(sid, prompt="CODEMODE HOLD:cm1 please", agent="build")
    prefix = live_prefix(sent["request_id"])

    first_two = [("0", "ls", "completed"), ("1", "read", "completed")]
    live = ""
    async with asyncio.timeout(30):  # the pushes come fast; failing here is clearer than the test timeout
        while _calls(live)[:2] != first_two:
            push = await layer.receive(watcher)
            live = _conversation_panel(push["html"], prefix) or live
    # Each settled nested call publishes a snapshot; the one in flight shows once a snapshot has
    # it (agentcore publishes none for a call's start), so it may or may not be listed yet.
    assert _calls(live)[2:] in ([], [("2", "wait_for_release", "in_flight")])
    assert 'data-status="running"' in live
    ls_call = element(live, css="cm-call")
    assert "README.md" in text(element(ls_call, css="cm-result"))  # the listing, a preview
    assert text(element(live, css="cm-args", start=live.index('data-index="1"'))) == '{"path": "README.md"}'
    script = element(live, css="cm-script")
    assert '<span class="k' in script, "the script is highlighted (Pygments token classes)"
    assert "tools.ls" in text(script)
    assert "<img" not in script and "&lt;img src=x onerror=" in script

    # A push for a new snapshot alone (no tool event of the script) brings the conversation's
    # block up to date too, not only the Tasks tab.
    held = await code_host.state(sid)
    patch = await sync_to_async(pages.render_regions)(sid, held, Regions(tasks=True))
    execution = next(iter(code_mode_runs(held.snapshot).values()))
    assert _calls(_conversation_panel(patch, prefix)) == [
        (str(c["index"]), c["name"], c["status"]) for c in execution["calls"]
    ]

    (studio_data_dir / "release-cm1").touch()
    await code_host.wait_idle(sid)

    def settled_panel(page: str) -> str:
        conversation = element(page, id="conversation")
        return element(conversation, css="codemode")

    state = await code_host.state(sid)
    page = await sync_to_async(pages.render_full_regions)(sid, state)
    done = settled_panel(page)
    assert 'data-status="completed"' in done and 'data-calls="3"' in done
    assert _calls(done) == [*first_two, ("2", "wait_for_release", "completed")]
    assert "README has 2 lines" in text(element(done, css="cm-output"))
    returned = text(element(done, css="cm-return"))
    assert '"entries"' in returned and "window.__pwned = 2" in returned
    assert "<script>" not in done and "&lt;/pre&gt;&lt;script&gt;" in done.replace("&quot;", '"')
    # The Tasks tab shows the same execution under the codemode call.
    tasks = element(page, id="tab-tasks")
    assert _calls(element(tasks, css="codemode")) == _calls(done)

    # A restart: a new host opens the store again; the page renders the same from the snapshot.
    await code_host.close()
    again = SessionHost(runtime_factory=extras_model.open_runtime, flush_interval=0.01)
    set_session_host(again)
    try:
        state = await again.state(sid)
        page = await sync_to_async(pages.render_full_regions)(sid, state)
    finally:
        await again.close()
    assert _calls(settled_panel(page)) == _calls(done)
    assert "README has 2 lines" in text(element(settled_panel(page), css="cm-output"))


async def test_without_code_mode_there_is_no_codemode_tool(
    user: Any, make_session: Any, host: SessionHost, settings: Any
) -> None:
    """Code mode is off with ``STUDIO_CODE_MODE`` off (the default, ``demo``, turns it on for
    demo sessions only: ``test_runtime_options``)."""
    settings.STUDIO_CODE_MODE = "off"
    session = await sync_to_async(make_session)(user)
    state = await host.state(str(session.pk))
    assert state.snapshot is not None and state.snapshot["records"].get("code_mode") is None
    page = await sync_to_async(pages.render_full_regions)(str(session.pk), state)
    assert "Off for this session" in text(element(page, id="records-code-mode"))
