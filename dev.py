#!/usr/bin/env python3
"""One-command set-up for newcomers and CI: ``python3 dev.py studio`` / ``python3 dev.py test``.

Only the standard library is used here, because this runs before anything is installed.
``studio`` installs the runtime and the ``studio`` extra; ``test`` (ruff, ``mypy --strict`` over
agentcore and studio, pytest) installs the ``test`` extra (which includes ``studio``, ``mcp``,
``codemode`` and ``postgres``) and the Debian packages the suite needs (Chromium for browser
tests, redis-server for scale-mode tests, PostgreSQL for the PostgreSQL store's tests, which
start a private server of their own) when they are missing and we may use apt (root).

Both commands are idempotent: the virtual environment in ``.venv`` is reused, and packages are
reinstalled only when ``pyproject.toml`` changed or a command needs an extra that is not
installed yet. The stamp records the ``pyproject.toml`` hash and the extras installed from it,
so after ``test`` (whose extra includes ``studio``) a ``studio`` run installs nothing, and
switching back and forth never reinstalls. A reinstall keeps every extra installed before.

``test`` also installs the third-party programs the interop tests (``tests/interop``) run
against — the LiteLLM proxy, the official MCP reference servers, Arize Phoenix — each into a
virtual environment of its own (``INTEROP_TOOLS``), so none of them pins the project's
dependencies. They live outside the checkout (``AGENTCORE_TOOLS_DIR``, default
``~/.cache/agentcore-studio/tools``), named by a hash of their pins and completed by a stamp, so
each is installed once per machine and reused by every checkout; the tests themselves never
reach the network.
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


# Interop programs: name -> exact pins (one virtual environment each, see the module docstring).
INTEROP_TOOLS: dict[str, tuple[str, ...]] = {
    "litellm": ("litellm[proxy]==1.80.5",),
    "mcp-reference": ("mcp-server-time==2026.10.19", "mcp-server-git==2026.10.19"),
    "phoenix": ("arize-phoenix==20.26.1",),
}
REFUSED_RELEASES = {"litellm": {"1.107.0"}}  # known-compromised releases: never installed
TOOLS_STAMP = ".installed"


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


def tools_dir() -> Path:
    return Path(os.environ.get("AGENTCORE_TOOLS_DIR") or Path.home() / ".cache" / "agentcore-studio" / "tools")


def check_pins(requirements: tuple[str, ...]) -> None:
    """Every requirement is an exact pin (``name[extras]==version``) of no refused release."""
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[A-Za-z0-9_,.-]+\])?==([A-Za-z0-9_.+-]+)", requirement)
        if match is None:
            raise ValueError(f"interop tool requirement {requirement!r} is not an exact pin (name==version)")
        name, version = _normalize(match.group(1)), match.group(3)
        if version in REFUSED_RELEASES.get(name, set()):
            raise ValueError(f"{name} {version} is a known-compromised release and is never installed")


def tool_venv(name: str, root: Path | None = None) -> Path:
    """Where tool ``name``'s virtual environment lives: its name and a hash of its pins."""
    requirements = INTEROP_TOOLS[name]
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:12]
    return (root or tools_dir()) / f"{name}-{digest}"


def tool_program(name: str, program: str, root: Path | None = None) -> Path | None:
    """The executable ``program`` of tool ``name``, or ``None`` when that tool is not installed
    (no completed install stamp)."""
    venv_dir = tool_venv(name, root)
    path = venv_dir / "bin" / program
    return path if (venv_dir / TOOLS_STAMP).exists() and path.exists() else None


def missing_tools(root: Path | None = None) -> list[str]:
    return [name for name in INTEROP_TOOLS if not (tool_venv(name, root) / TOOLS_STAMP).exists()]


def ensure_tools(root: Path | None = None) -> None:
    """Install every missing interop tool, all at once (one pip each, in parallel), under a
    lock so that two set-ups on one machine never build the same environment twice."""
    import fcntl

    base = root or tools_dir()
    for name in INTEROP_TOOLS:
        check_pins(INTEROP_TOOLS[name])
    if not missing_tools(base):
        return
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        running: list[tuple[str, Path, subprocess.Popen[bytes]]] = []
        for name in missing_tools(base):
            venv_dir = tool_venv(name, base)
            venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
            cmd = [str(venv_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", *INTEROP_TOOLS[name]]
            print("+", " ".join(cmd), flush=True)
            running.append((name, venv_dir, subprocess.Popen(cmd, cwd=ROOT)))
        failed = [name for name, _, process in running if process.wait() != 0]
        for name, venv_dir, _ in running:
            if name not in failed:
                (venv_dir / TOOLS_STAMP).write_text(json.dumps(list(INTEROP_TOOLS[name])))
        if failed:
            sys.exit(f"could not install the interop tools {failed}")


def cmd_studio(args: list[str]) -> None:
    ensure_venv(*EXTRAS["studio"])
    os.execv(str(PY), [str(PY), "manage.py", "studio", *args])


def cmd_test(args: list[str]) -> None:
    ensure_venv(*EXTRAS["test"])
    ensure_debian_packages()
    ensure_tools()
    _run(PY, "-m", "ruff", "check", ".")
    _run(PY, "-m", "mypy", "--strict", "agentcore")
    _run(PY, "-m", "mypy", "--strict", "studio")
    result = subprocess.run([str(PY), "-m", "pytest", *args], cwd=ROOT)
    sys.exit(result.returncode)


def main() -> None:
    commands = {"studio": cmd_studio, "test": cmd_test}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit("usage: python3 dev.py studio [--port N] | python3 dev.py test [pytest args]")
    commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
