"""Studio with a big session: does a session of 10,000 records open fast and stay live?

Builds session stores with real records through the real runtime (session protocol, the
example extension's registry) and measures three sessions against each other:

- *small*: 10 turns — the baseline measured in the same run;
- *big*: ``--turns`` turns, each with one tool call (``ls``), and ``--tasks`` durable timer
  tasks — 4,500 + 4,500 + 1,000 = 10,000 records by default. Like a real long session, the
  model's context is reset every 50 turns (a real model's window would compact it), so the
  store holds every record while the conversation shows the current context; Studio's own
  rows (one per turn and per tool call, 9,000 usage rows) are there too;
- *long*: one context of ``--messages`` transcript messages (default 10,000), the case where the
  conversation itself is long (the page shows the newest turns; older ones load on request).

Then it starts a real daphne and measures, for each session:

- first open: the very first page load of the store (Studio copies the store's usage ledger
  into its own rows — thousands for a store it never watched, e.g. an imported one);
- cold open: the first page load after daphne restarted (the host opens the store: agentcore
  loads it, then Studio reads the snapshot and the transcript, reconciles only new ledger rows,
  renders);
- warm open: later page loads (median of 5), and the page's size;
- socket: WebSocket connect → the first frame (the full render), median of 5;
- older turns and older tasks: one "Show earlier" page and one "Show older" Tasks page;
- live: a prompt POST → first streamed text on the socket (TTFT) and → the settled frame.

Prints the times and the ratio big / small. Loopback only. The generated stores are cached in
``--cache`` (default: a folder in the temp dir), so a re-run measures without rebuilding.
Usage: ``python bench/studio_scale.py [--turns 4500 --tasks 1000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _responder(request: Any) -> list[Any]:
    """Each turn: one ``ls`` call, then a short answer (the demo's brain, minus its pacing)."""
    from agentcore.demo import _conversation, _usage
    from agentcore.testing.steps import Stop, Text, ToolCall

    body = request.json
    user, calls, _outputs = _conversation(body)
    if not calls:
        return [ToolCall("ls", {"path": "."}), _usage(body, "ls"), Stop("tool_use")]
    text = f"Answer to “{user[:40]}”: the workspace has a README and some code."
    return [Text(text, chunk_size=64), _usage(body, text), Stop("stop")]


async def build_store(path: Path, workdir: Path, turns: int, tasks: int, messages: int = 0) -> float:
    """A store with ``turns`` turns (one tool call each, the context reset every 50 turns) and
    ``tasks`` finished timer tasks; or, with ``messages``, one context of that many messages."""
    from agentcore import create_agent
    from agentcore.testing.fake_server import FakeProviderServer
    from studio.extensions import build_registry

    started = time.perf_counter()
    server = FakeProviderServer(responder=_responder).start_in_thread()
    registry = build_registry(["studio.extensions.example"])
    agent = await create_agent(
        database_path=str(path),
        workdir=str(workdir),
        provider="demo",
        base_url=server.base_url,
        permission_policy="read-only",
        session={"registry": registry},
    )
    try:
        if messages:
            restored: list[dict[str, Any]] = []
            for n in range(messages // 4):
                call = {"type": "tool_call", "id": f"c{n}", "name": "ls", "arguments": {"path": "."}}
                answer = {"type": "text", "text": f"**Answer {n}**: a README and `src/`."}
                listing = [{"type": "text", "text": "README.md\nsrc/"}]
                restored += [
                    {"role": "user", "content": [{"type": "text", "text": f"question {n}"}]},
                    {"role": "assistant", "content": [call]},
                    {"role": "tool_result", "tool_call_id": f"c{n}", "tool_name": "ls", "content": listing},
                    {"role": "assistant", "content": [answer]},
                ]
            agent.restore_transcript(restored)
        for n in range(turns):
            if n and n % 50 == 0:
                agent.reset()
            async for _event in agent.run({"prompt": f"question {n}", "request_id": f"q{n}"}):
                pass
        if tasks:
            sent = False
            async for event in agent.run({"prompt": "start the timers", "request_id": "timers"}):
                if event.type == "session" and not sent:
                    sent = True
                    for n in range(tasks):
                        command = {
                            "type": "task",
                            "request_id": f"t{n}",
                            "name": "example.timer",
                            "input": {"seconds": 1, "cleanup_seconds": 0, "label": f"timer {n}"},
                            "background": True,
                        }
                        await agent.control(command)
    finally:
        await agent.close()
        server.stop_in_thread()
    return time.perf_counter() - started


def studio_rows(session: Any, turns: int) -> None:
    """Studio's own rows of a session that ran ``turns`` turns (one per turn and tool call)."""
    from studio.models import Run, ToolCall

    Run.objects.bulk_create(
        [Run(session=session, request_id=f"q{n}", prompt=f"question {n}", status="completed") for n in range(turns)],
        batch_size=500,
    )
    ToolCall.objects.bulk_create(
        [
            ToolCall(session=session, request_id=f"q{n}", tool_call_id=f"x{n}:c", name="ls", status="ok", duration_ms=1)
            for n in range(turns)
        ],
        batch_size=500,
    )


def _get(url: str, cookie: str) -> tuple[float, int]:
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        body = response.read()
    return time.perf_counter() - start, len(body)


async def _socket_first_frame(base: str, cookie: str, session_id: str) -> float:
    import websockets

    url = base.replace("http", "ws") + f"/ws/sessions/{session_id}/"
    start = time.perf_counter()
    async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": base}, max_size=None) as ws:
        await asyncio.wait_for(ws.recv(), 60)
        return time.perf_counter() - start


async def _live(base: str, cookie: str, csrf: str, session_id: str) -> tuple[float, float, int]:
    import httpx
    import websockets

    url = base.replace("http", "ws") + f"/ws/sessions/{session_id}/"
    async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": base}, max_size=None) as ws:
        await asyncio.wait_for(ws.recv(), 60)
        async with httpx.AsyncClient(base_url=base, headers={"Cookie": cookie, "X-CSRFToken": csrf}) as http:
            start = time.perf_counter()
            response = await http.post(
                f"/sessions/{session_id}/prompt/",
                data={"prompt": "What is in the README?", "agent": "build"},
                headers={"HX-Request": "true"},
            )
            response.raise_for_status()
        first = None
        frames = 0
        while True:
            frame = await asyncio.wait_for(ws.recv(), 60)
            frames += 1
            now = time.perf_counter() - start
            if first is None and 'class="block md"' in frame and 'id="live-turn"' in frame:
                first = now
            if 'id="conversation"' in frame and 'id="live-turn"' not in frame and "What is in the README?" in frame:
                return first if first is not None else now, now, frames


@contextlib.contextmanager
def _daphne(env: dict[str, str], log_path: Path) -> Iterator[str]:
    from studio import daphne_main

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            daphne_main.command(port),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(base + "/login/", timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
            yield base
        finally:
            server.terminate()
            server.wait(timeout=10)


def _warm_up(base: str, cookie: str, user: Any, demo: Any) -> None:
    """The process's first request pays for imports and the demo server: not a store's cost."""
    from studio import services

    warmup = services.session_create(
        owner=user, registered_model=demo, workdir="", permission_policy="read-only", effort="low", mode="build"
    )
    _get(f"{base}/sessions/{warmup.pk}/", cookie)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=4500)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "studio-scale-cache"))
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="studio-scale-"))
    env = {
        **os.environ,
        "STUDIO_DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "PYTHONPATH": str(ROOT),
        "AGENTCORE_DEMO_DELAY_MS": "0",
    }
    os.environ.update({k: env[k] for k in ("STUDIO_DATA_DIR", "DJANGO_SETTINGS_MODULE", "AGENTCORE_DEMO_DELAY_MS")})
    sys.path.insert(0, str(ROOT))
    subprocess.run(
        [sys.executable, "manage.py", "studio", "--no-serve"], cwd=ROOT, env=env, check=True, capture_output=True
    )

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.utils.crypto import get_random_string

    from studio import services
    from studio.models import RegisteredModel

    user = get_user_model().objects.create_user("bench", password="bench-pass-123")
    client = Client()
    client.force_login(user)
    csrf = get_random_string(32)  # an unmasked secret is valid as both cookie and header
    cookie = f"sessionid={client.cookies['sessionid'].value}; csrftoken={csrf}"
    demo = RegisteredModel.objects.get(provider="demo")

    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    sizes = {"small": (10, 0, 0), "big": (args.turns, args.tasks, 0), "long": (0, 0, args.messages)}
    sessions: dict[str, str] = {}
    for name, (turns, tasks, messages) in sizes.items():
        session = services.session_create(
            owner=user, registered_model=demo, workdir="", permission_policy="read-only", effort="low", mode="build"
        )
        cached = cache / f"store-{turns}-{tasks}-{messages}.sqlite"
        if not cached.exists():
            building = cache / f"building-{os.getpid()}.sqlite"
            seconds = asyncio.run(build_store(building, Path(session.workdir), turns, tasks, messages))
            building.rename(cached)  # only a finished store is cached
            print(f"built {name}: {turns} turns, {tasks} tasks, {messages} restored messages in {seconds:.1f} s")
        shutil.copyfile(cached, session.store_path)
        studio_rows(session, turns)
        sessions[name] = str(session.pk)

    results: dict[str, dict[str, float]] = {name: {} for name in sessions}
    with _daphne(env, data_dir / "daphne-1.log") as base:
        _warm_up(base, cookie, user, demo)
        for name, session_id in sessions.items():
            results[name]["first open"], _ = _get(f"{base}/sessions/{session_id}/", cookie)
    with _daphne(env, data_dir / "daphne-2.log") as base:
        _warm_up(base, cookie, user, demo)
        for name, session_id in sessions.items():
            page = f"{base}/sessions/{session_id}/"
            cold, _size = _get(page, cookie)
            warm_runs = [_get(page, cookie) for _ in range(5)]
            sockets = [asyncio.run(_socket_first_frame(base, cookie, session_id)) for _ in range(5)]
            older, _ = _get(f"{page}turns/?start=0&end=40", cookie)
            tasks_page, _ = _get(f"{page}tasks/?page=1", cookie)
            ttft, settled, frames = asyncio.run(_live(base, cookie, csrf, session_id))
            results[name].update(
                {
                    "cold open": cold,
                    "warm open": statistics.median(t for t, _ in warm_runs),
                    "page KB": warm_runs[0][1] / 1024,
                    "socket first frame": statistics.median(sockets),
                    "older turns page": older,
                    "older tasks page": tasks_page,
                    "live TTFT": ttft,
                    "live settled": settled,
                    "live frames": float(frames),
                }
            )

    turns, tasks, _ = sizes["big"]
    print(f"big: {turns} turns + {turns} tool calls + {tasks} tasks = {2 * turns + tasks:,} records")
    print(f"long: one context of {sizes['long'][2]:,} messages; small: 10 turns")
    print(f"{'measure':<20} {'small':>9}   {'big':>9}   {'long':>9}   {'big/small':>9} {'long/small':>10}")
    for key in results["small"]:
        small, big, long = results["small"][key], results["big"][key], results["long"][key]
        unit = "  " if key in ("page KB", "live frames") else " s"
        print(
            f"{key:<20} {small:>8.3f}{unit} {big:>8.3f}{unit} {long:>8.3f}{unit} "
            f"{big / small if small else float('nan'):>8.2f}× {long / small if small else float('nan'):>9.2f}×"
        )


if __name__ == "__main__":
    main()
