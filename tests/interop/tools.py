"""Finding the third-party programs the interop tests run, and running them on loopback.

``python3 dev.py test`` installs each into a virtual environment of its own (``dev.INTEROP_TOOLS``);
the tests only look them up here and never reach the network. A missing program fails the test
with the command that installs it — never a skip.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _load_dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev_for_interop", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dev = _load_dev()


def program(tool: str, name: str) -> Path:
    """The installed executable ``name`` of interop tool ``tool`` (see ``dev.INTEROP_TOOLS``)."""
    path = dev.tool_program(tool, name)
    if path is None:
        raise RuntimeError(
            f"the interop tool {tool!r} ({', '.join(dev.INTEROP_TOOLS[tool])}) is not installed in "
            f"{dev.tool_venv(tool)}: run `python3 dev.py test` (it installs it once per machine)"
        )
    return Path(path)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def wait_until(
    condition: Callable[[], bool], what: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 120
) -> float:
    """Poll a real condition (a page answers) until it holds; fail at once if the process died.
    Returns the seconds it took."""
    started = time.monotonic()
    while not condition():
        if process.poll() is not None or time.monotonic() - started > timeout:
            raise RuntimeError(f"{what} did not start (exit {process.poll()}):\n{log.read_text()[-6000:]}")
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=0.1)  # wakes at once if the process dies
    return time.monotonic() - started


@contextlib.contextmanager
def serving(command: list[str], *, what: str, health_url: str, root: Path, env: dict[str, str]) -> Iterator[float]:
    """Run a server (in its own process group, output to ``root``/server.log) until it answers
    ``health_url``; yield the seconds that took; stop it (and its children) afterwards."""
    log = root / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, cwd=root, env=env, start_new_session=True
        )
    try:
        yield wait_until(lambda: answers(health_url), what, process, log)
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    """Stop a server this test started (its own process group: the proxy's workers too)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
