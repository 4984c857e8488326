#!/usr/bin/env python3
"""One-command set-up for newcomers and CI: ``python3 dev.py studio`` / ``python3 dev.py test``.

Only the standard library is used here, because this runs before anything is installed.
``studio`` installs the runtime and the ``studio`` extra; ``test`` installs the ``test`` extra
(which includes ``studio``, ``mcp``, ``codemode`` and ``postgres``) and the Debian packages the
suite needs (Chromium for browser tests, redis-server for scale-mode tests, PostgreSQL for the
PostgreSQL store's tests, which start a private server of their own) when they are missing and
we may use apt (root).

Both commands are idempotent: the virtual environment in ``.venv`` is reused, and packages are
reinstalled only when ``pyproject.toml`` changed or a command needs an extra that is not
installed yet. The stamp records the ``pyproject.toml`` hash and the extras installed from it,
so after ``test`` (whose extra includes ``studio``) a ``studio`` run installs nothing, and
switching back and forth never reinstalls. A reinstall keeps every extra installed before.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
STAMP = VENV / ".installed-from"
EXTRAS = {"studio": ("studio",), "test": ("test",)}  # what each command installs besides the runtime
# Debian package -> a path (or glob) that exists once it is installed
APT_PACKAGES = {
    "chromium": "/usr/bin/chromium",
    "redis-server": "/usr/bin/redis-server",
    "postgresql": "/usr/lib/postgresql/*/bin/initdb",  # any major version
    "bubblewrap": "/usr/bin/bwrap",  # the sandbox of Studio sessions (tests run real bwrap)
}


def _run(*cmd: str | os.PathLike[str], env: dict[str, str] | None = None) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=ROOT, check=True, env=env)


def _extras_closure(extras: set[str], optional: dict[str, list[str]], project: str) -> set[str]:
    """``extras`` plus every extra they pull in by naming this project (``project[a,b]``)."""
    own = re.compile(rf"^\s*{re.escape(_normalize(project))}\s*\[([^\]]*)\]")
    closed: set[str] = set()
    pending = list(extras)
    while pending:
        extra = pending.pop()
        if extra in closed:
            continue
        closed.add(extra)
        for requirement in optional.get(extra, []):
            match = own.match(_normalize(requirement))
            if match:
                pending.extend(name.strip() for name in match.group(1).split(",") if name.strip())
    return closed


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pending_install(pyproject: bytes, stamp: str | None, needed: set[str]) -> tuple[set[str], str] | None:
    """What to install so that ``needed`` extras are present: ``None`` when the venv already has
    them (same ``pyproject.toml``, and the installed extras include them, directly or through
    another extra), else the extras to install and the stamp to write after installing them."""
    import tomllib

    project: dict[str, Any] = tomllib.loads(pyproject.decode())["project"]
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    unknown = needed - set(optional)
    if unknown:
        raise ValueError(f"pyproject.toml has no extra {sorted(unknown)}")
    digest = hashlib.sha256(pyproject).hexdigest()
    try:
        recorded = json.loads(stamp) if stamp else {}
    except ValueError:  # a stamp from an older dev.py (a bare hash): reinstall once
        recorded = {}
    if not isinstance(recorded, dict):
        recorded = {}
    installed = {e for e in recorded.get("extras", []) if e in optional}
    if recorded.get("pyproject") == digest and needed <= _extras_closure(installed, optional, project["name"]):
        return None
    extras = needed | installed
    return extras, json.dumps({"pyproject": digest, "extras": sorted(extras)})


def ensure_venv(*needed: str) -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs before any venv exists
        sys.exit(f"Python >= 3.11 is required (this is {sys.version.split()[0]})")
    if not PY.exists():
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
    stamp = STAMP.read_text() if STAMP.exists() else None
    plan = pending_install((ROOT / "pyproject.toml").read_bytes(), stamp, set(needed))
    if plan is None:
        return
    extras, new_stamp = plan
    _run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    target = f".[{','.join(sorted(extras))}]" if extras else "."
    _run(PY, "-m", "pip", "install", "--quiet", "-e", target)
    STAMP.write_text(new_stamp)


def missing_debian_packages() -> list[str]:
    return [name for name, pattern in APT_PACKAGES.items() if not glob.glob(pattern)]


def ensure_debian_packages() -> None:
    missing = missing_debian_packages()
    if not missing:
        return
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        sys.exit(f"missing system packages {missing}: install them (apt-get install -y {' '.join(missing)})")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    _run(apt, "update", "-qq", env=env)
    _run(apt, "install", "-y", "-qq", "--no-install-recommends", *missing, env=env)


def cmd_studio(args: list[str]) -> None:
    ensure_venv(*EXTRAS["studio"])
    os.execv(str(PY), [str(PY), "manage.py", "studio", *args])


def cmd_test(args: list[str]) -> None:
    ensure_venv(*EXTRAS["test"])
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
