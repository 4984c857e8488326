"""Browser tests: a real daphne process (file database, own data dir) and headless Chromium.

Async Playwright only: the sync fixtures of pytest-playwright break the asyncio tests that run
after them in the same pytest session.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from studio import daphne_main
from tests.e2e import reports

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
# The README's screenshots are refreshed only on request (STUDIO_SCREENSHOTS=1); ordinary runs
# still capture every page, into a scratch folder, so tracked files never churn.
SCREENSHOTS = (
    ROOT / "docs" / "screenshots"
    if os.environ.get("STUDIO_SCREENSHOTS") == "1"
    else Path(tempfile.gettempdir()) / "studio-screenshots"
)

pytestmark = pytest.mark.e2e


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests are part of the suite: a missing Chromium is a set-up error, not a skip."""
    if not os.path.exists(CHROMIUM) and any("tests/e2e" in str(item.fspath) for item in items):
        raise pytest.UsageError(f"{CHROMIUM} is not installed: run `python3 dev.py test` (it installs it via apt)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keep each phase's report on the test (``tests.e2e.reports``): a fixture's teardown can
    then tell whether the test failed and leave the evidence a rerun would not reproduce."""
    report = yield
    reports.keep(item, report)
    return report


@dataclass
class Studio:
    base_url: str
    data_dir: Path
    workspace: Path
    users: dict[str, str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return self.base_url + path

    def manage(self, *args: str) -> str:
        """Run ``manage.py`` against this Studio's database (e.g. to register a model)."""
        return _manage(self.env, *args)

    def release(self, token: str) -> None:
        """Let a ``HOLD:<token>`` turn go on (see ``slow_demo``)."""
        (self.data_dir / f"release-{token}").touch()

    def admin_login(self) -> tuple[str, str]:
        """The first user ``manage.py studio`` created (a superuser) and its password."""
        text = (self.data_dir / "initial-login.txt").read_text()
        fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
        return fields["username"], fields["password"]


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
for name in USERS:
    if not User.objects.filter(username=name).exists():
        User.objects.create_user(username=name, password=name + "-pass-123", is_staff=name in STAFF)
"""


@contextlib.contextmanager
def serve_studio(
    base: Path, env_extra: dict[str, str], users: tuple[str, ...], staff: tuple[str, ...] = ()
) -> Iterator[Studio]:
    """Prepare a data dir under ``base``, create ``users`` and run daphne until the block ends.

    Settings are the production defaults (no ``DJANGO_DEBUG``): what a person gets from a plain
    ``manage.py studio`` is what the browser tests see — so the tools of people who are not
    staff run in the bubblewrap sandbox, and ``<base>/workspace`` (when it exists) is shared
    with everyone (``STUDIO_SHARED_WORKDIRS``), as staff would share a project. ``staff`` users
    may open the admin but hold no permission in it."""
    data_dir = base / "data"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "STUDIO_DATA_DIR": str(data_dir),
        "AGENTCORE_DEMO_CHUNK": "8",
        "PYTHONPATH": str(ROOT),
        **env_extra,
    }
    for name in ("STUDIO_REDIS_URL", "STUDIO_HOST_MODE", "STUDIO_DATABASE_PATH", "STUDIO_DATABASE_URL"):
        env.pop(name, None)
    if (base / "workspace").is_dir():  # the tests' sample project: a folder staff share with everyone
        env.setdefault("STUDIO_SHARED_WORKDIRS", str(base / "workspace"))
    for name in ("DJANGO_DEBUG", "STUDIO_HTTPS"):
        env.pop(name, None)
    out = _manage(env, "studio", "--no-serve")
    assert "Log in at" in out
    script = CREATE_USERS.replace("USERS", repr(list(users))).replace("STAFF", repr(list(staff)))
    _manage(env, "shell", "-c", script)
    port = _free_port()
    log_path = base / "daphne.log"
    log = open(log_path, "w")
    process = subprocess.Popen(
        daphne_main.command(port, "studio.asgi:application"),
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    try:
        while True:  # wait for a real condition: the login page answers
            try:
                with urllib.request.urlopen(base_url + "/login/", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("daphne did not start: " + log_path.read_text()) from None
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=0.1)  # wakes at once if daphne dies
        yield Studio(base_url, data_dir, base / "workspace", {u: f"{u}-pass-123" for u in users}, log_path, env)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture(scope="session")
def studio_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Studio]:
    """The Studio the behaviour and security tests use (hostile file names included)."""
    base = tmp_path_factory.mktemp("studio-e2e")
    workspace = base / "workspace"
    workspace.mkdir()
    (workspace / "README.md").write_text("# Todo app\nA tiny project the demo model can look at.\n")
    (workspace / "app.py").write_text("print('todo')\n")
    (workspace / '<img src=x onerror="window.__pwned=1">.md').write_text("hostile file name\n")
    env = {
        "STUDIO_RUNTIME_FACTORY": "tests.e2e.slow_demo.open_runtime",
        "STUDIO_E2E_DELTA_DELAY_MS": os.environ.get("STUDIO_E2E_DELTA_DELAY_MS", "60"),
        "AGENTCORE_DEMO_DELAY_MS": os.environ.get("AGENTCORE_DEMO_DELAY_MS", "40"),
    }
    with serve_studio(base, env, ("alice", "bob", "carol"), staff=("carol",)) as studio:
        yield studio


TOUR_README = """# Todo

A small command-line todo list with due dates.

    python -m src.app add "Buy oat milk" --due 2025-06-03
    python -m src.app list

Run the tests with `pytest`.
"""

TOUR_APP = '''"""A todo list kept in memory, with optional due dates."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date


@dataclass
class Todo:
    id: int
    title: str
    due: date | None = None
    done: bool = False


@dataclass
class TodoList:
    items: dict[int, Todo] = field(default_factory=dict)

    def add(self, title: str, due: str | None = None) -> Todo:
        todo = Todo(len(self.items) + 1, title, date.fromisoformat(due) if due else None)
        self.items[todo.id] = todo
        return todo

    def complete(self, todo_id: int) -> None:
        self.items[todo_id].done = True

    def pending(self) -> list[Todo]:
        open_items = [t for t in self.items.values() if not t.done]
        return sorted(open_items, key=lambda t: (t.due is None, t.due or date.max))
'''

TOUR_TEST = """from src.app import TodoList


def test_add_and_complete() -> None:
    todos = TodoList()
    milk = todos.add("Buy oat milk", due="2025-06-03")
    todos.complete(milk.id)
    assert todos.pending() == []
"""


@pytest.fixture(scope="session")
def tour_server() -> Iterator[Studio]:
    """A clean Studio for the screenshot tour: user maria and a small, realistic project.

    Kept apart from ``studio_server`` so no hostile test data (script titles, ``onerror`` file
    names) and no pytest temp paths can reach the documentation screenshots.
    """
    base = Path(tempfile.mkdtemp(prefix="maria-"))
    project = base / "projects" / "todo-app"
    (project / "src").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "README.md").write_text(TOUR_README)
    (project / "pyproject.toml").write_text('[project]\nname = "todo"\nversion = "0.1.0"\n')
    (project / "src" / "__init__.py").write_text("")
    (project / "src" / "app.py").write_text(TOUR_APP)
    (project / "tests" / "test_app.py").write_text(TOUR_TEST)
    env = {
        "STUDIO_RUNTIME_FACTORY": "tests.e2e.tour_model.open_runtime",
        "AGENTCORE_DEMO_DELAY_MS": "8",
        "STUDIO_SHARED_WORKDIRS": str(project),  # maria is not staff: her project is a shared folder
    }
    try:
        with serve_studio(base, env, ("maria",)) as studio:
            studio.workspace = project
            yield studio
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
async def browser() -> AsyncIterator[object]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        instance = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            await instance.close()


async def new_page(
    browser: object,
    studio: Studio,
    user: str | None = "alice",
    *,
    dark: bool = False,
    width: int = 1440,
    height: int = 900,
    password: str | None = None,
) -> object:
    """A logged-in page; ``width`` × ``height`` is the viewport (390 = a phone, 768 = a tablet)."""
    mobile = width < 600
    context = await browser.new_context(  # type: ignore[attr-defined]
        viewport={"width": width, "height": height},
        color_scheme="dark" if dark else "light",
        is_mobile=mobile,
        has_touch=mobile,
        device_scale_factor=2 if mobile else 1,
    )
    page = await context.new_page()
    page.set_default_timeout(15_000)
    if user is not None:
        await page.goto(studio.url("/login/"))
        await page.fill("input[name=username]", user)
        await page.fill("input[name=password]", password or studio.users[user])
        await page.click("button[type=submit]")
        await page.wait_for_url(studio.url("/"))
    return page


async def screenshot(page: object, name: str) -> None:
    """Save a picture of a page, or of one element (a Playwright locator)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))  # type: ignore[attr-defined]


async def wait_settled(page: Any, status: str = "idle") -> None:
    """Wait until the run a test started has ended and the page shows the store's state.

    The pill alone is not enough: a new session is already idle before its first run starts.
    Sending puts the optimistic turn on the page at once; it gives way to the live turn, which
    gives way to the settled conversation, and only then is the pill the run's outcome.
    """
    await page.wait_for_function(
        """(status) => !document.querySelector('#optimistic-turn') && !document.querySelector('#live-turn')
            && document.querySelector('#session-status .pill-' + status)""",
        arg=status,
    )
