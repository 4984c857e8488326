"""``manage.py studio`` supervises daphne and its session-host workers (issue 25).

Real child processes stand in for daphne and a worker: a worker that dies is started again, a
stop ends every child (workers first), and daphne ending stops the workers. The children write
to files in ``tmp_path``, which the test waits on (never on time).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from studio.host.supervisor import Supervisor, worker_count

WEB = """
import os, signal, sys, time, pathlib
out = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *a: (out.joinpath("web-stopped").write_text("1"), sys.exit(0)))
out.joinpath("web-started").write_text(os.environ["STUDIO_LOCAL_LAYER"] + "\\n" + os.environ["STUDIO_HOST_MODE"])
while True:
    signal.pause()
"""
WORKER = """
import os, sys, pathlib, signal
out = pathlib.Path(sys.argv[1])
runs = out / "worker-runs"
n = len(runs.read_text()) if runs.exists() else 0
runs.write_text("x" * (n + 1))
if n == 0:
    sys.exit(3)  # the first run dies: the supervisor must start it again
signal.signal(signal.SIGTERM, lambda *a: (out.joinpath("worker-stopped").write_text("1"), sys.exit(0)))
while True:
    signal.pause()
"""


def _has(path: Path, content: str | None = None) -> bool:
    return path.exists() and (content is None or path.read_text() == content)


async def _until(path: Path, content: str | None = None) -> None:
    """Wait for ``path`` (with ``content``), polling the file: the children's only signal."""
    for _ in range(1000):
        if _has(path, content):
            return
        await asyncio.sleep(0.01)  # polling a file another process writes, not synchronisation
    raise AssertionError(f"{path.name} never appeared")


async def test_a_dead_worker_is_started_again_and_a_stop_ends_every_child(tmp_path: Path) -> None:
    web = [sys.executable, "-c", WEB, str(tmp_path)]
    worker = [sys.executable, "-c", WORKER, str(tmp_path)]
    supervisor = Supervisor(web, worker, 1, tmp_path)
    running = asyncio.ensure_future(supervisor.run())
    await _until(tmp_path / "web-started")
    assert _has(tmp_path / "web-started", f"{tmp_path / 'channel-layer.sock'}\nworker")
    assert _has(tmp_path / "channel-layer.sock")  # the hub serves the layer the children share
    await _until(tmp_path / "worker-runs", "xx")  # died once, started again
    os.kill(os.getpid(), signal.SIGTERM)  # what Ctrl+C or a service manager sends
    assert await asyncio.wait_for(running, 30) == 0
    assert _has(tmp_path / "worker-stopped") and _has(tmp_path / "web-stopped")
    assert not _has(tmp_path / "channel-layer.sock")


def test_workers_are_one_per_core_by_default() -> None:
    assert worker_count("auto") == worker_count(None) == max(1, os.cpu_count() or 1)
    assert worker_count("0") == 0 and worker_count(3) == 3
