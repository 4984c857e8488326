"""Browser tests: a real daphne process (file database, own data dir) and headless Chromium.

Async Playwright only: the sync fixtures of pytest-playwright break the asyncio tests that run
after them in the same pytest session.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = ROOT / "docs" / "screenshots"

pytestmark = pytest.mark.e2e


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests are part of the suite: a missing Chromium is a set-up error, not a skip."""
    if not os.path.exists(CHROMIUM) and any("tests/e2e" in str(item.fspath) for item in items):
        raise pytest.UsageError(f"{CHROMIUM} is not installed: run `python3 dev.py test` (it installs it via apt)")


@dataclass
class Studio:
    base_url: str
    data_dir: Path
    workspace: Path
    users: dict[str, str]

    def url(self, path: str) -> str:
        return self.base_url + path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


CREATE_USERS = """
from django.contrib.auth import get_user_model
User = get_user_model()
for name in ("alice", "bob"):
    if not User.objects.filter(username=name).exists():
        User.objects.create_user(username=name, password=name + "-pass-123")
"""


@pytest.fixture(scope="session")
def studio_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Studio]:
    base = tmp_path_factory.mktemp("studio-e2e")
    data_dir = base / "data"
    workspace = base / "workspace"
    workspace.mkdir()
    (workspace / "README.md").write_text("# Todo app\nA tiny project the demo model can look at.\n")
    (workspace / "app.py").write_text("print('todo')\n")
    (workspace / '<img src=x onerror="window.__pwned=1">.md').write_text("hostile file name\n")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "STUDIO_DATA_DIR": str(data_dir),
        "STUDIO_RUNTIME_FACTORY": "tests.e2e.slow_demo.open_runtime",
        "STUDIO_E2E_DELTA_DELAY_MS": os.environ.get("STUDIO_E2E_DELTA_DELAY_MS", "60"),
        "AGENTCORE_DEMO_DELAY_MS": os.environ.get("AGENTCORE_DEMO_DELAY_MS", "40"),
        "AGENTCORE_DEMO_CHUNK": "8",
        "PYTHONPATH": str(ROOT),
        "DJANGO_DEBUG": "1",
    }
    out = _manage(env, "studio", "--no-serve")
    assert "Log in at" in out
    _manage(env, "shell", "-c", CREATE_USERS)
    port = _free_port()
    log = open(base / "daphne.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "studio.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:  # wait for a real condition: the login page answers
        try:
            with urllib.request.urlopen(base_url + "/login/", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("daphne did not start: " + (base / "daphne.log").read_text()) from None
            time.sleep(0.1)
    try:
        yield Studio(base_url, data_dir, workspace, {"alice": "alice-pass-123", "bob": "bob-pass-123"})
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture
async def browser() -> AsyncIterator[object]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        instance = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            await instance.close()


async def new_page(browser: object, studio: Studio, user: str | None = "alice", *, dark: bool = False) -> object:
    context = await browser.new_context(  # type: ignore[attr-defined]
        viewport={"width": 1440, "height": 900}, color_scheme="dark" if dark else "light"
    )
    page = await context.new_page()
    page.set_default_timeout(15_000)
    if user is not None:
        await page.goto(studio.url("/login/"))
        await page.fill("input[name=username]", user)
        await page.fill("input[name=password]", studio.users[user])
        await page.click("button[type=submit]")
        await page.wait_for_url(studio.url("/"))
    return page


async def screenshot(page: object, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))  # type: ignore[attr-defined]
