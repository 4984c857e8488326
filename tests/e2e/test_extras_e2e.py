"""Issue 14's last parts in a real browser: code-mode scripts with their nested calls, a real MCP
tool catalog (declared, connected, drift) and a remote execution environment (connected, its
worker killed) — all turned on by Studio's settings (W3, X3, X4, X5).

One daphne process is started with ``STUDIO_CODE_MODE=on``, ``STUDIO_CATALOGS`` naming the stdio
catalog fixture server (through ``mcp_variant.py``, so a test can make the next server process
drift) and ``STUDIO_ENVIRONMENT=remote``; its model is ``extras_model`` (scripted, on loopback).
Every wait is on a page condition; a script that must stay running waits at a gate the test
opens (``HOLD:<token>``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ROOT, Studio, new_page, screenshot, serve_studio, wait_settled
from tests.e2e.test_studio_e2e import send

pytestmark = pytest.mark.e2e

MCP_SECRET = "tok-mcp-e2e-5150"


@pytest.fixture(scope="module")
def extras_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Studio]:
    base = tmp_path_factory.mktemp("studio-extras")
    (base / "workspace").mkdir()
    catalogs = [
        {
            "id": "fx",
            "command": sys.executable,
            "args": [str(ROOT / "tests" / "e2e" / "mcp_variant.py"), str(base / "variant")],
            "env": {"FIXTURE_START_LOG": str(base / "mcp-starts.log"), "API_TOKEN": MCP_SECRET},
            "allowed_tools": ["add", "lookup", "crash"],
        }
    ]
    env = {
        "STUDIO_RUNTIME_FACTORY": "tests.e2e.extras_model.open_runtime",
        "STUDIO_CODE_MODE": '{"timeout_ms": 120000}',
        "STUDIO_CATALOGS": json.dumps(catalogs),
        "STUDIO_ENVIRONMENT": "remote",
        "AGENTCORE_DEMO_DELAY_MS": "5",
    }
    # erin is staff: her sessions run on the server, where STUDIO_ENVIRONMENT applies (the
    # sessions of people who are not staff run in the sandbox instead).
    with serve_studio(base, env, ("erin",), staff=("erin",)) as studio:
        yield studio


async def open_session(page: Any, studio: Studio, title: str) -> Path:
    """A new session on a workdir of its own (the remote worker is confined to it)."""
    workdir = studio.workspace / uuid.uuid4().hex[:8]
    workdir.mkdir(parents=True)
    (workdir / "README.md").write_text("# Extras\nA workspace for the code-mode test.\n")
    await page.goto(studio.url("/"))
    await page.select_option("select[name=registered_model]", label="Offline demo model")
    await page.fill("input[name=workdir]", str(workdir))
    await page.fill("input[name=title]", title)
    await page.click("#new-session-form button[type=submit]")
    await page.wait_for_url("**/sessions/*/")
    await page.wait_for_selector("#conn-state.on")
    return workdir


async def calls(page: Any, panel: str) -> list[tuple[str, str]]:
    """(tool name, status) of the nested calls a code-mode panel lists, in order."""
    return [
        (str(c["name"]), str(c["status"]))
        for c in await page.eval_on_selector_all(
            f"{panel} .cm-call", "els => els.map(e => ({name: e.dataset.name, status: e.dataset.status}))"
        )
    ]


async def test_a_code_mode_script_shows_its_nested_calls_live_and_after_a_reload(
    extras_server: Studio, browser: Any
) -> None:
    """X4/W3: the script (highlighted, hostile text inert) and its nested calls appear in the
    conversation while it runs — the first two done while the third waits — and in the Tasks tab;
    when it ends, all three calls, the text() output and the return value; the same after a
    reload."""
    token = uuid.uuid4().hex[:10]
    page = await new_page(browser, extras_server, "erin")
    await open_session(page, extras_server, "Code mode")
    await send(page, f"CODEMODE HOLD:{token} count the lines")
    live_tool = "#live-turn details.tool:has(.tool-name:text-is('codemode'))"
    await page.click(f"{live_tool} > summary")
    panel = f"{live_tool} .codemode[data-status=running]"
    await page.wait_for_selector(f"{panel} .cm-call[data-name=read][data-status=completed]")
    first_two = [("ls", "completed"), ("read", "completed")]
    shown = await calls(page, panel)
    assert shown[:2] == first_two and shown[2:] in ([], [("wait_for_release", "in_flight")])
    assert "README.md" in await page.inner_text(f"{panel} .cm-call[data-name=ls] .cm-result")
    assert await page.inner_text(f"{panel} .cm-call[data-name=read] .cm-args") == '{"path": "README.md"}'
    script = f"{panel} .cm-script"
    assert await page.locator(f"{script} span.k, {script} span.kd").count() > 0  # highlighted
    assert 'onerror="window.__pwned=1"' in await page.inner_text(script)
    assert await page.locator(f"{script} img").count() == 0
    # The Tasks tab has the same execution under the codemode call.
    task = "#tasks-active .task-node.kind-tool[data-status=running]"
    await page.click(f"{task} > details > summary")
    await page.wait_for_selector(f"{task} .codemode .cm-call[data-name=read][data-status=completed]")

    extras_server.release(token)
    await wait_settled(page)
    settled = "#conversation details.tool:has(.tool-name:text-is('codemode'))"
    await page.click(f"{settled} > summary")
    done = f"{settled} .codemode[data-status=completed]"
    await page.wait_for_selector(done)
    expected = [*first_two, ("wait_for_release", "completed")]
    assert await calls(page, done) == expected
    assert "README has 2 lines" in await page.inner_text(f"{done} .cm-output")
    assert "window.__pwned = 2" in await page.inner_text(f"{done} .cm-return")
    assert "3 calls" in await page.inner_text(f"{settled} > summary .cm-count")
    assert await page.evaluate("() => window.__pwned") is None
    await page.set_viewport_size({"width": 1280, "height": 1500})  # the whole panel above the composer
    await screenshot(page.locator(settled), "session-codemode")

    await page.reload()
    await page.wait_for_selector("#conn-state.on")
    await page.click(f"{settled} > summary")
    await page.wait_for_selector(done)
    assert await calls(page, done) == expected
    assert "README has 2 lines" in await page.inner_text(f"{done} .cm-output")
    await page.click(f"{done} .cm-log > summary")
    assert "quickjs" in (await page.inner_text(f"{done} .cm-log")).lower()


async def test_records_show_the_remote_environment_and_an_mcp_catalog_until_it_drifts(
    extras_server: Studio, browser: Any
) -> None:
    """X3/X5/W3: the worker environment is remote, not connected until a built-in tool needs it
    (a session that only talks holds no worker process), then connected; the MCP catalog is
    declared (nothing started), then connected with its discovered tools, then — after the
    server restarts as a changed version — in drift, shown in red; no credential is on the page."""
    (extras_server.data_dir.parent / "variant").write_text("a")
    page = await new_page(browser, extras_server, "erin")
    workdir = await open_session(page, extras_server, "Catalogs and environment")
    await page.click(".tab[data-tab=records]")
    environment = "#records-environment .environment[data-environment=studio-worker]"
    await page.wait_for_selector(environment)
    assert str(workdir) in await page.inner_text(environment)
    catalog = "#records-catalogs .catalog[data-catalog=fx]"
    assert await page.get_attribute(catalog, "data-status") == "declared"
    assert "not saved yet" in await page.inner_text(catalog)

    await send(page, "SEARCH ADD please")
    await wait_settled(page)
    await page.wait_for_selector(f"{catalog}[data-status=connected]")
    assert await page.get_attribute(environment, "data-status") == "not_connected"  # no built-in tool ran
    await send(page, "BASH echo environment")
    await wait_settled(page)
    await page.wait_for_selector(f"{environment}[data-status=connected]")
    assert await page.inner_text(f"{environment} .env-kind-badge") == "remote"
    assert "3 allowed · 0 declared · 3 saved" in await page.inner_text(f"{catalog} .catalog-counts")
    assert "discovered from the server" in await page.inner_text(catalog)
    assert "fx_add said" in await page.inner_text("#conversation")

    # The server is upgraded under the running Studio: the next process Studio starts drifts.
    (extras_server.data_dir.parent / "variant").write_text("b")
    await send(page, "CRASH the server")  # the live connection dies; the next call reconnects
    await wait_settled(page)
    assert "fx_crash said" in await page.inner_text("#conversation")
    await send(page, "ADD AGAIN")
    await wait_settled(page)
    # The crash left an error on the record already; the drift replaces it with the snapshot
    # that follows the call (it may land after the turn's end), so wait for the drift itself.
    await page.wait_for_selector(f"{catalog}[data-status=error] .catalog-status:text-is('drift')")
    assert "differs from the definition" in await page.inner_text(f"{catalog} .record-error")
    assert await page.locator(f"{catalog}.state-error").count() == 1
    await screenshot(page.locator("#records-catalogs"), "records-catalog-drift")
    content = await page.content()
    assert MCP_SECRET not in content


async def test_a_worker_killed_during_a_call_shows_the_environment_error(extras_server: Studio, browser: Any) -> None:
    """X5/W3: bash runs in the remote worker; SIGKILL of that worker mid-call ends the call with
    an error and the Records tab shows the environment in error, with the reason, in red."""
    page = await new_page(browser, extras_server, "erin")
    await open_session(page, extras_server, "Killed worker")
    await send(page, "BASH echo worker=$PPID; sleep 600")
    tool = "#live-turn details.tool:has(.tool-name:text-is('bash'))"
    await page.click(f"{tool} > summary")
    output = page.locator(f"{tool} .tool-body", has_text=re.compile(r"worker=\d+"))
    await output.wait_for()
    pid = int(re.search(r"worker=(\d+)", await output.inner_text()).group(1))  # type: ignore[union-attr]
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")  # noqa: ASYNC240 - one tiny read
    assert b"agentcore.extensions.environment.worker" in cmdline, cmdline  # the worker, nothing else
    os.kill(pid, signal.SIGKILL)
    await wait_settled(page)
    assert "bash said" in await page.inner_text("#conversation")
    await page.click(".tab[data-tab=records]")
    environment = "#records-environment .environment[data-status=error]"
    await page.wait_for_selector(environment)
    assert "killed by signal 9" in await page.inner_text(f"{environment} .record-error")
