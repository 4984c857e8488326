"""W7 for real: Redis channel layer, one daphne and two ``runworker`` session-host processes.

Sessions are sharded over two host channels (``STUDIO_HOST_SHARDS=2``); each worker process
consumes one shard, so a session always lands on the same process, and that process holds the
session store's owner lock (agentcore's ``<store>.lock``, which records the holder's pid). The
tests drive sessions the way a browser does — HTTP commands and the session WebSocket — and
then look at the lock files to see which process owns which store.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ROOT, _free_port, _manage

pytestmark = pytest.mark.e2e

REDIS_SERVER = "/usr/bin/redis-server"
SHARDS = 2
PASSWORD = "maria-pass-123"
CREATE_USER = f"""
from django.contrib.auth import get_user_model
get_user_model().objects.create_user(username="maria", password="{PASSWORD}")
"""


def _wait_until(condition: Callable[[], bool], what: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll a real condition (a socket accepts, a page answers) with a deadline."""
    deadline = time.monotonic() + 30
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start:\n{log.read_text()[-4000:]}")
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=0.05)  # wakes at once if the server process dies


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@dataclass
class Cluster:
    base_url: str
    data_dir: Path
    env: dict[str, str]
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    workers: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)  # shard → process

    def spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "ab")
        process = subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        self.processes.append(process)
        return process

    def start_worker(self, shard: int) -> subprocess.Popen[bytes]:
        process = self.spawn(f"worker-{shard}", ["manage.py", "runworker", f"studio-host-{shard}"])
        self.workers[shard] = process
        return process

    def store(self, session_id: str) -> Path:
        return self.data_dir / "sessions" / f"{session_id}.sqlite"

    def lock_holder(self, session_id: str) -> int | None:
        text = Path(str(self.store(session_id)) + ".lock").read_text().strip()
        return int(text) if text else None


def _stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    assert os.path.exists(REDIS_SERVER), f"{REDIS_SERVER} is not installed (`python3 dev.py test` installs it)"
    base = Path(tempfile.mkdtemp(prefix="studio-scale-"))
    logs = base / "logs"
    logs.mkdir()
    redis_port, web_port = _free_port(), _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "STUDIO_DATA_DIR": str(base / "data"),
        "STUDIO_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "STUDIO_HOST_MODE": "worker",
        "STUDIO_HOST_SHARDS": str(SHARDS),
        "AGENTCORE_DEMO_DELAY_MS": "25",
        "AGENTCORE_DEMO_CHUNK": "6",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("STUDIO_RUNTIME_FACTORY", None)
    env.pop("STUDIO_DATABASE_PATH", None)
    cluster = Cluster(f"http://127.0.0.1:{web_port}", base / "data", env, logs)
    redis = subprocess.Popen(
        [REDIS_SERVER, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=open(logs / "redis.log", "wb"),
        stderr=subprocess.STDOUT,
        cwd=base,
    )
    try:
        _wait_until(lambda: _accepts(redis_port), "redis-server", redis, logs / "redis.log")
        _manage(env, "studio", "--no-serve")
        _manage(env, "shell", "-c", CREATE_USER)
        daphne = cluster.spawn(
            "daphne",
            [
                "-m",
                "daphne",
                "--application-close-timeout",
                "2",
                "-b",
                "127.0.0.1",
                "-p",
                str(web_port),
                "studio.asgi:application",
            ],
        )
        for shard in range(SHARDS):
            cluster.start_worker(shard)
        _wait_until(lambda: _answers(cluster.base_url + "/login/"), "daphne", daphne, logs / "daphne.log")
        yield cluster
    finally:
        for process in reversed(cluster.processes):
            _stop(process)
        _stop(redis)
        import shutil

        if not os.environ.get("STUDIO_KEEP_SCALE_LOGS"):
            shutil.rmtree(base, ignore_errors=True)


# --- a browser's worth of HTTP and WebSocket -------------------------------------------------


class User:
    def __init__(self, cluster: Cluster, http: Any) -> None:
        self.cluster = cluster
        self.http = http

    @classmethod
    async def login(cls, cluster: Cluster) -> User:
        import httpx

        http = httpx.AsyncClient(base_url=cluster.base_url, timeout=30)
        page = await http.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, page.text
        done = await http.post(
            "/login/", data={"username": "maria", "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)}
        )
        assert done.status_code == 302 and "sessionid" in http.cookies
        return cls(cluster, http)

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

    async def new_session(self, *, mode: str, shard: int) -> str:
        """Create sessions until one lands on ``shard`` (ids are random UUIDs)."""
        listing = await self.http.get("/")
        model = re.search(r'<option value="(\d+)"[^>]*>Offline demo model', listing.text)
        assert model, listing.text
        for _ in range(64):
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
            session_id = response.headers["Location"].rstrip("/").rsplit("/", 1)[-1]
            if uuid.UUID(session_id).int % SHARDS == shard:
                return session_id
        raise AssertionError(f"no session landed on shard {shard}")

    async def prompt(self, session_id: str, text: str, agent: str = "build") -> None:
        await self.post(f"/sessions/{session_id}/prompt/", {"prompt": text, "agent": agent})

    async def approve(self, session_id: str) -> None:
        await self.post(f"/sessions/{session_id}/plan/", {"decision": "approve", "notes": ""})


class Watcher:
    """One session page's WebSocket: every frame it receives, in order."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.frames: list[str] = []

    async def until(self, predicate: Callable[[str], bool], limit: float = 45) -> str:
        async def wait() -> str:
            while True:
                frame = await self.ws.recv()
                self.frames.append(frame)
                if predicate(frame):
                    return str(frame)

        return await asyncio.wait_for(wait(), limit)


@pytest.fixture
async def watch(cluster: Cluster) -> AsyncIterator[Callable[[User, str], Any]]:
    import contextlib

    import websockets

    stack = contextlib.AsyncExitStack()

    async def open_watcher(user: User, session_id: str) -> Watcher:
        url = cluster.base_url.replace("http", "ws") + f"/ws/sessions/{session_id}/"
        ws = await stack.enter_async_context(
            websockets.connect(
                url,
                additional_headers={"Cookie": user.cookie, "Origin": cluster.base_url},
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


def finished(text: str) -> Callable[[str], bool]:
    return lambda f: "pill-idle" in f and 'id="live-turn"' not in f and text in f


async def ping(cluster: Cluster, session_id: str) -> int:
    """The pid of the worker serving this session's shard (asked over Redis)."""
    from channels_redis.core import RedisChannelLayer

    from studio.hosts import ChannelHostClient

    layer = RedisChannelLayer(hosts=[{"address": cluster.env["STUDIO_REDIS_URL"], "socket_timeout": 30}])
    try:
        reply = await ChannelHostClient(layer, shards=SHARDS, timeout=20).call("ping", session_id)
    finally:
        await layer.close_pools()
    return int(reply["pid"])


# --- tests -------------------------------------------------------------------------------------


async def test_two_sessions_stream_from_two_worker_processes(cluster: Cluster, watch: Any) -> None:
    """Both sessions stream to completion, and each store is held by exactly one worker."""
    from agentcore.errors import StoreError
    from agentcore.harness.lease import OwnerLease, lock_path_for

    maria = await User.login(cluster)
    sessions = [await maria.new_session(mode="build", shard=shard) for shard in range(SHARDS)]
    watchers = [await watch(maria, sid) for sid in sessions]
    prompts = [f"Tell me about shard {shard} of the " + "patient redis cluster " * 3 for shard in range(SHARDS)]
    for sid, text in zip(sessions, prompts, strict=True):
        await maria.prompt(sid, text)
    finals = await asyncio.gather(
        *(w.until(finished("patient redis cluster")) for w in watchers)  # both stream at once
    )
    for watcher, final in zip(watchers, finals, strict=True):
        assert "offline demo model" in final
        texts = [f for f in watcher.frames if 'class="block md"' in f]
        assert len(texts) >= 3, "the answer arrived in one piece instead of streaming"

    worker_pids = {shard: p.pid for shard, p in cluster.workers.items()}
    holders = [cluster.lock_holder(sid) for sid in sessions]
    assert holders == [worker_pids[0], worker_pids[1]]  # shard k's store is held by worker k
    assert [await ping(cluster, sid) for sid in sessions] == holders
    for sid in sessions:  # and nobody else can open it while that worker has it
        with pytest.raises(StoreError) as err:
            OwnerLease.acquire(lock_path_for(cluster.store(sid)))
        assert err.value.code == "store_locked"
    # A second prompt to the same session goes to the same worker (never a second owner).
    await maria.prompt(sessions[0], "One more answer, please")
    await watchers[0].until(finished("One more answer, please"))
    assert cluster.lock_holder(sessions[0]) == worker_pids[0]
    await maria.http.aclose()


async def test_plan_approved_after_the_worker_restarted_builds(cluster: Cluster, watch: Any) -> None:
    """A run paused for plan review survives its host: a new worker resumes it on approve."""
    maria = await User.login(cluster)
    session_id = await maria.new_session(mode="plan", shard=0)
    watcher = await watch(maria, session_id)
    await maria.prompt(session_id, "Plan a todo app with due dates", agent="plan")
    await watcher.until(lambda f: 'id="approve-plan"' in f and "pill-waiting" in f)
    old = cluster.workers[0]
    assert cluster.lock_holder(session_id) == old.pid
    _stop(old, signal.SIGKILL)  # a crash: no clean shutdown, the lock goes with the process
    new = cluster.start_worker(0)
    await maria.approve(session_id)  # reaches the new worker (it may still be starting: it queues)
    final = await watcher.until(finished("approved plan"))
    assert "Plan approved" in final
    assert cluster.lock_holder(session_id) == new.pid
    page = await maria.http.get(f"/sessions/{session_id}/")
    assert "approved plan" in page.text and 'id="approve-plan"' not in page.text
    await maria.http.aclose()


async def test_a_run_killed_mid_stream_is_resumed_by_the_new_worker(cluster: Cluster, watch: Any) -> None:
    """A worker dies mid-answer; the page reconnects, the new worker resumes the same run."""
    maria = await User.login(cluster)
    session_id = await maria.new_session(mode="build", shard=1)
    watcher = await watch(maria, session_id)
    await maria.prompt(session_id, "Write a long note about " + "resilient session hosts " * 12)
    await watcher.until(lambda f: 'class="block md"' in f)  # text is streaming from worker 1
    _stop(cluster.workers[1], signal.SIGKILL)
    new = cluster.start_worker(1)
    # Reloading the page asks the host for the session: the new worker opens the store and
    # resumes the unfinished run under the same request id.
    again = await watch(maria, session_id)
    final = await again.until(finished("offline demo model"))
    assert "continued after an interruption" in final
    assert final.count('class="bubble') == 1  # still one prompt: the run resumed, not restarted
    assert cluster.lock_holder(session_id) == new.pid
    await maria.http.aclose()
