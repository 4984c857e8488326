"""Studio streaming under load: N browsers watching N sessions stream from the demo model.

Starts a real daphne (own data dir, file database), opens N WebSocket clients (the
``websockets`` package) on N sessions, submits one prompt per session over HTTP (as the
composer does) and measures, per session:

- time to first token: prompt POST → first frame carrying answer text of the live turn,
- last-token delay: prompt POST → the frame that renders the finished answer from the store.

Prints median and p95 for N = 1, 10, 50 (override with ``--sizes``). Loopback only, bounded in
count and time. The demo model streams paced (``AGENTCORE_DEMO_DELAY_MS``, default 15 ms per
chunk), so "last" includes that pacing; set it to 0 to measure Studio's own overhead.
Usage: ``python bench/studio_stream.py [--sizes 1,10,50]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


async def _one(base: str, cookie: str, csrf: str, session_id: str, limit: float) -> tuple[float, float]:
    import httpx
    import websockets

    ws_url = base.replace("http", "ws") + f"/ws/sessions/{session_id}/"
    headers = {"Cookie": cookie, "Origin": base}
    async with websockets.connect(ws_url, additional_headers=headers, max_size=None) as ws:
        await asyncio.wait_for(ws.recv(), limit)  # the initial full render
        async with httpx.AsyncClient(base_url=base, headers={"Cookie": cookie, "X-CSRFToken": csrf}) as http:
            start = time.perf_counter()
            response = await http.post(
                f"/sessions/{session_id}/prompt/",
                data={"prompt": "Say hello", "agent": "build"},
                headers={"HX-Request": "true"},
            )
            response.raise_for_status()
        first = last = None
        while last is None:
            frame = await asyncio.wait_for(ws.recv(), limit)
            now = time.perf_counter() - start
            live = 'id="live-turn"' in frame or "#live-blocks" in frame or 'id="lv-' in frame
            if first is None and live and 'class="block md"' in frame:
                first = now
            if 'id="conversation"' in frame and "You said" in frame and 'id="live-turn"' not in frame:
                last = now  # the settled turn, rendered from the store
        return first if first is not None else last, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,50")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]

    data_dir = Path(tempfile.mkdtemp(prefix="studio-bench-"))
    env = {
        **os.environ,
        "STUDIO_DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "PYTHONPATH": str(ROOT),
        "DJANGO_DEBUG": "1",
    }
    os.environ.update({k: env[k] for k in ("STUDIO_DATA_DIR", "DJANGO_SETTINGS_MODULE", "DJANGO_DEBUG")})
    sys.path.insert(0, str(ROOT))
    subprocess.run(
        [sys.executable, "manage.py", "studio", "--no-serve"], cwd=ROOT, env=env, check=True, capture_output=True
    )

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.utils.crypto import get_random_string

    from studio import daphne_main, services
    from studio.models import RegisteredModel

    user = get_user_model().objects.create_user("bench", password="bench-pass-123")
    client = Client()
    client.force_login(user)
    csrf = get_random_string(32)  # an unmasked secret is valid as both cookie and header
    cookie = f"sessionid={client.cookies['sessionid'].value}; csrftoken={csrf}"
    demo = RegisteredModel.objects.get(provider="demo")

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(data_dir / "daphne.log", "w")
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
        pacing = os.environ.get("AGENTCORE_DEMO_DELAY_MS", "15")
        print(f"demo model pacing: {pacing} ms per chunk (AGENTCORE_DEMO_DELAY_MS); one shared demo server per host")
        print(f"{'N':>4} {'TTFT median':>12} {'TTFT p95':>10} {'last median':>12} {'last p95':>10}  (seconds)")
        for n in sizes:
            sessions = [
                services.session_create(
                    owner=user,
                    registered_model=demo,
                    workdir="",
                    permission_policy="read-only",
                    effort="low",
                    mode="build",
                )
                for _ in range(n)
            ]

            async def run_all(batch: list[str]) -> list[tuple[float, float]]:
                return await asyncio.gather(*(_one(base, cookie, csrf, sid, args.timeout) for sid in batch))

            results = asyncio.run(run_all([str(s.pk) for s in sessions]))
            ttft = [r[0] for r in results]
            last = [r[1] for r in results]
            print(
                f"{n:>4} {statistics.median(ttft):>12.3f} {_p95(ttft):>10.3f} "
                f"{statistics.median(last):>12.3f} {_p95(last):>10.3f}"
            )
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


if __name__ == "__main__":
    main()
