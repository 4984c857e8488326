"""Real processes for worker-mode tests: redis-server, daphne(s), ``runworker studio-host`` workers.

``StudioCluster`` prepares a data dir (``manage.py studio --no-serve`` migrates, registers the
demo model) against whatever database the env names (SQLite by default, PostgreSQL with
``STUDIO_DATABASE_URL``), creates the user ``maria``, and starts the processes; every process
logs to ``<base>/logs/<name>.log``. ``User`` and ``Watcher`` are a browser's worth of HTTP and
WebSocket: the HTMX endpoints the page posts to, and the session socket's frames in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studio import daphne_main
from tests.e2e.conftest import ROOT, _free_port, _manage

REDIS_SERVER = "/usr/bin/redis-server"
PASSWORD = "maria-pass-123"
CREATE_USER = f"""
from django.contrib.auth import get_user_model
get_user_model().objects.create_user(username="maria", password="{PASSWORD}")
"""


def wait_until(condition: Callable[[], bool], what: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll a real condition (a socket accepts, a page answers) with a deadline; fail at once
    if the process died."""
    deadline = time.monotonic() + 60
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start:\n{log.read_text()[-4000:]}")
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=0.05)  # wakes at once if the process dies


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@dataclass
class StudioCluster:
    base: Path
    env: dict[str, str]
    web_urls: list[str] = field(default_factory=list)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def logs(self) -> Path:
        return self.base / "logs"

    @property
    def data_dir(self) -> Path:
        return Path(self.env["STUDIO_DATA_DIR"])

    @property
    def base_url(self) -> str:
        return self.web_urls[0]

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def tails(self, lines: int = 60) -> str:
        """The last ``lines`` of every process's log (static files left out): what a failed
        test leaves behind, since the cluster's folder goes when the module ends."""
        out = []
        for path in sorted(self.logs.glob("*.log")):
            kept = [line for line in path.read_text(errors="replace").splitlines() if "GET /static/" not in line]
            out.append(f"----- {path.name} -----\n" + "\n".join(kept[-lines:]))
        return "\n".join(out)

    def spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        with open(self.logs / f"{name}.log", "ab") as log:
            process = subprocess.Popen(
                [sys.executable, *args], cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        self.processes[name] = process
        return process

    def start_worker(self, name: str) -> subprocess.Popen[bytes]:
        """A ``runworker studio-host`` process; ``wait_registered`` tells when it takes sessions."""
        process = self.spawn(name, ["manage.py", "runworker", "studio-host"])
        self.workers[name] = process
        return process

    def start_web(self, name: str) -> str:
        port = _free_port()
        _interpreter, *args = daphne_main.command(port, options=("--application-close-timeout", "2"))
        process = self.spawn(name, args)  # spawn() puts the interpreter in front again
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: answers(url + "/login/"), name, process, self.logs / f"{name}.log")
        self.web_urls.append(url)
        return url

    def wait_registered(self, name: str) -> None:
        """Until the worker's log says *this* process registered (it then takes sessions). A
        restarted worker appends to its predecessor's log, whose registration line is already
        there: the line names the pid, so an old one never counts. It also names the event loop:
        a worker runs on uvloop, as ``manage.py runworker`` installs it (``studio.event_loop``)."""
        process = self.workers[name]
        line = f"(pid {process.pid}) registered on"
        wait_until(lambda: line in self.log(name), name, process, self.logs / f"{name}.log")
        registered = next(entry for entry in self.log(name).splitlines() if line in entry)
        assert registered.endswith("(uvloop event loop)"), registered

    def close(self) -> None:
        for process in reversed(list(self.processes.values())):
            stop(process)
        if not os.environ.get("STUDIO_KEEP_SCALE_LOGS"):
            shutil.rmtree(self.base, ignore_errors=True)


def start_redis(cluster: StudioCluster) -> str:
    assert os.path.exists(REDIS_SERVER), f"{REDIS_SERVER} is not installed (`python3 dev.py test` installs it)"
    port = _free_port()
    with open(cluster.logs / "redis.log", "wb") as log:
        process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cluster.base,
        )
    cluster.processes["redis"] = process
    wait_until(lambda: accepts(port), "redis-server", process, cluster.logs / "redis.log")
    return f"redis://127.0.0.1:{port}/0"


def make_cluster(base: Path, env_extra: dict[str, str]) -> StudioCluster:
    """Redis up, the database migrated, user ``maria`` created; no web or worker process yet."""
    (base / "logs").mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "STUDIO_DATA_DIR": str(base / "data"),
        "STUDIO_HOST_MODE": "worker",
        "PYTHONPATH": str(ROOT),
    }
    for name in ("STUDIO_RUNTIME_FACTORY", "STUDIO_DATABASE_PATH", "STUDIO_DATABASE_URL", "DJANGO_DEBUG"):
        env.pop(name, None)
    cluster = StudioCluster(base, env)
    try:
        env["STUDIO_REDIS_URL"] = start_redis(cluster)
        env.update(env_extra)
        _manage(env, "studio", "--no-serve")
        _manage(env, "shell", "-c", CREATE_USER)
    except BaseException:
        cluster.close()
        raise
    return cluster


# --- a browser's worth of HTTP and WebSocket -------------------------------------------------


class User:
    def __init__(self, base_url: str, http: Any) -> None:
        self.base_url = base_url
        self.http = http

    @classmethod
    async def login(cls, base_url: str) -> User:
        import httpx

        http = httpx.AsyncClient(base_url=base_url, timeout=60)
        page = await http.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, page.text
        done = await http.post(
            "/login/", data={"username": "maria", "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)}
        )
        assert done.status_code == 302 and "sessionid" in http.cookies
        return cls(base_url, http)

    @property
    def cookie(self) -> str:
        return "; ".join(f"{k}={v}" for k, v in self.http.cookies.items())

    async def post(self, path: str, data: dict[str, str]) -> Any:
        response = await self.http.post(
            path, data=data, headers={"X-CSRFToken": self.http.cookies["csrftoken"], "HX-Request": "true"}
        )
        assert response.status_code in (200, 302), response.text
        assert "form-error" not in response.text, response.text
        return response

    async def new_session(self, *, mode: str = "build") -> str:
        listing = await self.http.get("/")
        model = re.search(r'<option value="(\d+)"[^>]*>Offline demo model', listing.text)
        assert model, listing.text
        response = await self.http.post(
            "/sessions/new/",
            data={
                "registered_model": model.group(1),
                "workdir": "",
                "permission_policy": "workspace",
                "effort": "low",
                "mode": mode,
            },
            headers={"X-CSRFToken": self.http.cookies["csrftoken"]},
        )
        assert response.status_code == 302, response.text
        return str(response.headers["Location"].rstrip("/").rsplit("/", 1)[-1])

    async def prompt(self, session_id: str, text: str, agent: str = "build") -> None:
        await self.post(f"/sessions/{session_id}/prompt/", {"prompt": text, "agent": agent})

    async def approve(self, session_id: str) -> None:
        await self.post(f"/sessions/{session_id}/plan/", {"decision": "approve", "notes": ""})

    async def close(self) -> None:
        await self.http.aclose()


class Watcher:
    """One session page's WebSocket: every frame it receives, in order."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.frames: list[str] = []

    async def until(self, predicate: Callable[[str], bool], limit: float = 60) -> str:
        async def wait() -> str:
            while True:
                frame = await self.ws.recv()
                self.frames.append(frame)
                if predicate(frame):
                    return str(frame)

        try:
            return await asyncio.wait_for(wait(), limit)
        except TimeoutError:
            last = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", self.frames[-1]))[-600:] if self.frames else ""
            raise AssertionError(
                f"no frame matched in {limit:.0f} s; {len(self.frames)} frame(s) so far, the last showing: {last}"
            ) from None


@contextlib.asynccontextmanager
async def watchers() -> AsyncIterator[Callable[[User, str, str], Any]]:
    """``open(user, web_url, session_id)`` → a ``Watcher`` that saw the page's first full render."""
    import websockets

    stack = contextlib.AsyncExitStack()

    async def open_watcher(user: User, web_url: str, session_id: str) -> Watcher:
        url = web_url.replace("http", "ws") + f"/ws/sessions/{session_id}/"
        ws = await stack.enter_async_context(
            websockets.connect(
                url,
                additional_headers={"Cookie": user.cookie, "Origin": web_url},
                max_size=None,
                close_timeout=2,
            )
        )
        watcher = Watcher(ws)
        await watcher.until(lambda f: 'id="conversation"' in f)  # the initial full render
        return watcher

    try:
        yield open_watcher
    finally:
        await stack.aclose()


def shown(frame: str) -> str:
    """A frame less its ``<template>`` elements, which a page never displays (an answer's copy
    button keeps the answer's Markdown in one): what counting text on the page should see."""
    return re.sub(r"<template\b[^>]*>.*?</template>", "", frame, flags=re.S)


def finished(text: str) -> Callable[[str], bool]:
    """A full render that shows the turn settled (idle, no live turn) with ``text`` in it: a
    turn's end is always pushed as a full render from the store's transcript."""
    return lambda f: 'id="conversation"' in f and "pill-idle" in f and 'id="live-turn"' not in f and text in f
