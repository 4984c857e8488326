#!/usr/bin/env python3
"""One-command set-up for newcomers and CI: ``python3 dev.py studio`` / ``python3 dev.py test``.

Only the standard library is used here, because this runs before anything is installed.
Both commands are idempotent: the virtual environment in ``.venv`` is reused and packages
are reinstalled only when ``pyproject.toml`` changed. ``test`` also installs the Debian
packages the suite needs (Chromium for browser tests, redis-server for scale-mode tests)
when they are missing and we may use apt (root).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
STAMP = VENV / ".installed-from"
APT_PACKAGES = {"chromium": "/usr/bin/chromium", "redis-server": "/usr/bin/redis-server"}


def _run(*cmd: str | os.PathLike[str], env: dict[str, str] | None = None) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=ROOT, check=True, env=env)


def ensure_venv(extras: str) -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs before any venv exists
        sys.exit(f"Python >= 3.11 is required (this is {sys.version.split()[0]})")
    if not PY.exists():
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    _run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    target = f".[{extras}]" if extras else "."
    _run(PY, "-m", "pip", "install", "--quiet", "-e", target)
    STAMP.write_text(wanted)


def ensure_debian_packages() -> None:
    missing = [name for name, path in APT_PACKAGES.items() if not Path(path).exists()]
    if not missing:
        return
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        sys.exit(f"missing system packages {missing}: install them (apt-get install -y {' '.join(missing)})")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    _run(apt, "update", "-qq", env=env)
    _run(apt, "install", "-y", "-qq", "--no-install-recommends", *missing, env=env)


def cmd_studio(args: list[str]) -> None:
    ensure_venv("")
    os.execv(str(PY), [str(PY), "manage.py", "studio", *args])


def cmd_test(args: list[str]) -> None:
    ensure_venv("test")
    ensure_debian_packages()
    _run(PY, "-m", "ruff", "check", ".")
    _run(PY, "-m", "mypy", "--strict", "agentcore")
    result = subprocess.run([str(PY), "-m", "pytest", *args], cwd=ROOT)
    sys.exit(result.returncode)


def main() -> None:
    commands = {"studio": cmd_studio, "test": cmd_test}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit("usage: python3 dev.py studio [--port N] | python3 dev.py test [pytest args]")
    commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
