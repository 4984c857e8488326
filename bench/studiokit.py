"""Start a real Studio (daphne) for a benchmark: own data dir, file database, a logged-in user.

``StudioProcess`` migrates a fresh data dir, sets Django up in *this* process (the benchmark
creates models and sessions through the ORM, on the same SQLite file daphne uses), logs a user
in, and runs ``daphne studio.server:application`` on a free loopback port. ``cpu_seconds()``
reads daphne's CPU time from ``/proc``; ``py_spy(out)`` samples it until ``stop_py_spy()``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_cpu_seconds(pid: int) -> float:
    """``pid``'s user + system CPU time, with its reaped children's (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, their children, ...)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: list[int] = []
    pending = [pid]
    while pending:
        for child in parents.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


class StudioProcess:
    """Context manager: a migrated data dir, Django set up here, daphne serving it."""

    def __init__(self, *, debug: bool = False, env: dict[str, str] | None = None, workers: int | None = None) -> None:
        """``workers``: run Studio as ``manage.py studio --workers N`` does (daphne plus N
        supervised session-host workers; 0 = the host inside daphne); None: daphne alone."""
        self.data_dir = Path(tempfile.mkdtemp(prefix="studio-bench-"))
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "STUDIO_DATA_DIR": str(self.data_dir),
            "DJANGO_SETTINGS_MODULE": "studio.settings",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "DJANGO_DEBUG": "1" if debug else "0",
            "DJANGO_SECRET_KEY": "bench-only-secret-key-not-for-production-0123456789",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DJANGO_CSRF_TRUSTED_ORIGINS": self.base,
            "DJANGO_SECURE_COOKIES": "0",
            "STUDIO_LOG_LEVEL": "WARNING",
            **(env or {}),
        }
        self.workers = workers
        self.cookie = ""
        self.csrf = ""
        self.user: Any = None
        self._server: subprocess.Popen[bytes] | None = None
        self._spy: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def __enter__(self) -> StudioProcess:
        keys = [k for k in self.env if k.startswith(("STUDIO_", "DJANGO_"))]
        os.environ.update({k: self.env[k] for k in keys})
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        subprocess.run(
            [sys.executable, "manage.py", "studio", "--no-serve"],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
        )
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.utils.crypto import get_random_string

        self.user = get_user_model().objects.create_user("bench", password="bench-pass-123")
        client = Client()
        client.force_login(self.user)
        self.csrf = get_random_string(32)  # an unmasked secret is valid as both cookie and header
        self.cookie = f"sessionid={client.cookies['sessionid'].value}; csrftoken={self.csrf}"
        self._log = open(self.data_dir / "daphne.log", "wb")
        from studio import daphne_main

        serve = daphne_main.command(self.port)
        if self.workers is not None:
            serve = [sys.executable, "manage.py", "studio", "--port", str(self.port), "--workers", str(self.workers)]
        self._server = subprocess.Popen(
            serve,
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.base + "/login/", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self._server.poll() is not None:
                    raise RuntimeError(f"daphne did not start; see {self.data_dir / 'daphne.log'}") from None
                time.sleep(0.1)  # polling a starting process, not synchronisation
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_py_spy()
        if self._server is not None:
            self._server.terminate()
            self._server.wait(timeout=15)
        if self._log is not None:
            self._log.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def cpu_by_role(self) -> dict[str, float]:
        """CPU seconds so far per role: ``daphne``, ``workers`` (session-host worker processes),
        ``sandboxes`` (the execution-environment workers of sandboxed sessions, with their
        ``bwrap``), ``supervisor`` (``manage.py studio`` with its channel layer hub)."""
        roles: dict[str, float] = {}
        for pid in [self.pid, *descendants(self.pid)]:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"bwrap" in cmdline or b"environment.worker" in cmdline:
                role = "sandboxes"
            elif b"daphne" in cmdline:
                role = "daphne"
            else:
                role = "workers" if b"runworker" in cmdline else "supervisor"
            roles[role] = roles.get(role, 0.0) + process_cpu_seconds(pid)
        return roles

    def daphne_pid(self) -> int:
        """daphne's process (the supervisor's child when Studio runs with workers)."""
        if self.workers is None:
            return self.pid
        for pid in descendants(self.pid):
            try:
                if b"daphne" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return pid
            except OSError:
                continue
        return self.pid

    @property
    def pid(self) -> int:
        assert self._server is not None
        return self._server.pid

    def cpu_seconds(self) -> float:
        """The CPU time (user + system) of Studio's whole process tree so far: daphne, every
        live descendant (session-host workers) and the descendants that already exited."""
        total = 0.0
        for pid in [self.pid, *descendants(self.pid)]:
            total += process_cpu_seconds(pid)
        return total

    def py_spy(self, out: Path, rate: int = 250, *, gil: bool = True) -> None:
        """Start sampling daphne with py-spy (collapsed stacks, ``bench/profile_top.py`` reads them).

        ``--gil``: only the thread holding the GIL is sampled, so the shares are of daphne's
        Python CPU time (threads parked in the executor pools would otherwise dominate);
        ``gil=False`` samples every thread that is on the CPU, named (``--threads``): where time
        goes that does not hold the GIL (SQLite, sanitising in Rust, socket I/O)."""
        exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        if not Path(exe).exists():
            raise RuntimeError("py-spy is not installed: pip install py-spy (it is in the bench extra)")
        self._spy = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(self.pid),
                *(["--gil"] if gil else ["--threads"]),
                "--format",
                "raw",
                "--rate",
                str(rate),
                "-o",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop_py_spy(self) -> None:
        spy, self._spy = self._spy, None
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            spy.wait(timeout=60)
