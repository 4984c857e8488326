"""``manage.py studio --workers N`` on one machine: daphne plus session-host workers, supervised.

Why workers: a runtime's work (the provider stream, the store's commits, folding and
rendering its pushes) is CPU-bound Python, and in daphne's own process it all shares one core
with the pages, sockets and every other session. So the supervisor starts daphne (pages,
sockets, relaying pushes) and ``STUDIO_WORKERS`` session-host workers (``runworker
studio-host``, the same workers as scale mode: they lease sessions through Studio's database and
take over a dead worker's sessions), and holds the channel layer they share
(``studio.host.local_layer.LayerHub`` on a Unix socket in the data dir): nothing to install.
Whether that pays depends on spare cores: on a 2-core machine the split costs more CPU per
session (every request and push crosses the layer) than it gains, so ``STUDIO_WORKERS``
defaults to 0 (the host inside daphne); see docs/benchmarks.md for the measurement.

A worker that dies is started again (after a second, so a crash loop does not spin); its
sessions move to the live workers meanwhile. SIGTERM or Ctrl+C stops everything: workers first
get SIGTERM (a clean shutdown releases their leases), then daphne. daphne exiting stops the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from studio.host.local_layer import LayerHub

log = logging.getLogger("studio.supervisor")

RESTART_DELAY_S = 1.0
STOP_GRACE_S = 15.0


def worker_count(raw: str | int | None) -> int:
    """``STUDIO_WORKERS``: a number, or ``auto`` (one per core); 0 runs the host inside daphne."""
    if raw is None or raw == "" or raw == "auto":
        return max(1, os.cpu_count() or 1)
    count = int(raw)
    if count < 0:
        raise ValueError("STUDIO_WORKERS must be 0 or more (or auto)")
    return count


class Supervisor:
    """Runs daphne (``web``) and ``workers`` worker processes until stopped; see the module doc."""

    def __init__(self, web: Sequence[str], worker: Sequence[str], workers: int, data_dir: Path) -> None:
        self.web = list(web)
        self.worker = list(worker)
        self.workers = workers
        self.socket = str(data_dir / "channel-layer.sock")
        self.stopping = asyncio.Event()
        self._children: dict[str, asyncio.subprocess.Process] = {}

    def env(self) -> dict[str, str]:
        return {**os.environ, "STUDIO_LOCAL_LAYER": self.socket, "STUDIO_HOST_MODE": "worker", "STUDIO_WORKERS": "0"}

    async def run(self) -> int:
        hub = LayerHub(self.socket)
        await hub.start()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stopping.set)
        try:
            web = await self._spawn("web", self.web)
            keepers = [loop.create_task(self._keep(f"worker-{n}")) for n in range(self.workers)]
            web_done = loop.create_task(web.wait())
            stop = loop.create_task(self.stopping.wait())
            await asyncio.wait({web_done, stop}, return_when=asyncio.FIRST_COMPLETED)
            self.stopping.set()
            for keeper in keepers:
                keeper.cancel()
            await self._stop([name for name in self._children if name != "web"])
            await self._stop(["web"])
            return web.returncode or 0
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            await hub.close()

    async def _spawn(self, name: str, argv: Sequence[str]) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(*argv, env=self.env())
        self._children[name] = process
        return process

    async def _keep(self, name: str) -> None:
        """Keep one worker running: start it again whenever it exits, until stopping."""
        while not self.stopping.is_set():
            process = await self._spawn(name, self.worker)
            code = await process.wait()
            if self.stopping.is_set():
                return
            log.warning("%s exited with %s; starting it again", name, code)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), RESTART_DELAY_S)

    async def _stop(self, names: list[str]) -> None:
        running = [self._children[n] for n in names if n in self._children and self._children[n].returncode is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        for process in running:
            try:
                await asyncio.wait_for(process.wait(), STOP_GRACE_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()


def supervise(web: Sequence[str], workers: int, data_dir: Path) -> int:
    """Run daphne and ``workers`` workers (``manage.py runworker studio-host``) until stopped."""
    worker = [sys.executable, str(Path(__file__).resolve().parents[2] / "manage.py"), "runworker", "studio-host"]
    return asyncio.run(Supervisor(web, worker, workers, data_dir).run())
