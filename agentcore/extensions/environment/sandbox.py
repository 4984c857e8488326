"""A bubblewrap sandbox for a session's tools: the remote worker in namespaces of its own (SPEC X5).

``BubblewrapSandbox(...).option(id=..., label=...)`` is a ``session.environment`` option whose
``open`` starts the worker of ``remote`` (the same JSON-lines protocol, the same target-side
code for read, write, edit, ls, grep, find and bash) under Debian's ``bwrap``:

* **What it sees.** An empty root with, read-only, the system (``/usr``, ``/bin``, ``/lib``,
  ``/lib64``, ``/sbin`` where present) and what the worker needs to run (this Python's prefixes
  and the ``agentcore`` package directory, at their own paths); a private ``/tmp``, a minimal
  ``/dev`` and a ``/proc`` of its own process namespace; and, writable, **the session's
  working directory only**, at its own path (so paths agree on both sides). Nothing else of the
  host file system exists in there: no ``/etc`` (DNS and TLS files only with ``network``), no
  home directories, no other workspace, no data directory. A symlink in the workspace that points
  outside leads nowhere, for bash as for the file tools.
* **What it may do.** Every namespace is unshared (mount, PID, IPC, UTS, user, cgroup, network
  unless ``network=True``), every capability is dropped, the environment is cleared (the host's
  variables, secrets included, never reach it), it runs in a new session (no terminal
  injection) and dies with the process that started it. Processes started by bash live in the
  sandbox's PID namespace and end with it.
* **Hidden paths.** ``hidden`` names paths that must never be visible (a host's database, its
  keys, its data directory, other people's workspaces): opening refuses, with a ``ToolError``
  naming the workspace, when the workspace or any read-only bind is or contains one of them —
  the sandbox never starts with them in view. The workspace may lie *inside* a hidden directory
  (``<data dir>/workspaces/<id>``): only that subtree is bound.

Not covered: the kernel's attack surface (bubblewrap is namespaces, not a VM); what the host
binds read-only (the system and Python directories are readable); the CPU, memory and disk a
command may use (no limits are set); with ``network=True``, anything the host's network reaches.
Extra tools and MCP servers are the host's own and do not run in here.

``problem()`` says why no sandbox can be made on this machine (``bwrap`` missing, or unable to
create namespaces here), or ``None``: a host asks before it offers sandboxed sessions and says
the reason to people instead of running their tools unconfined.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from agentcore.errors import ToolError
from agentcore.tools.display import display_name

if TYPE_CHECKING:
    from agentcore.extensions.environment.remote import RemoteExecutionEnv
    from agentcore.extensions.environment.target import EnvironmentContext, ExecutionTarget

AGENTCORE_DIR: Final = Path(__file__).resolve().parents[2]  # the package the worker imports
SYSTEM_DIRS: Final = ("/usr", "/bin", "/lib", "/lib32", "/lib64", "/sbin")
#: With ``network``: what name resolution and TLS need (read-only, where present).
NETWORK_FILES: Final = (
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
)
SANDBOX_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PROBE_TIMEOUT: Final = 15.0
_ISOLATION: Final = ("--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv")


@dataclass(frozen=True, slots=True)
class BubblewrapSandbox:
    """How to build the sandbox (see the module docstring).

    ``bwrap``: the executable (a name looked up on ``PATH``, or a path). ``network``: share the
    host's network (off: only a loopback of its own). ``hidden``: paths that must never be
    visible. ``read_only``: further directories to show read-only. ``python``: the interpreter
    that runs the worker (default: this one; it must be inside a shown directory).
    """

    bwrap: str = "bwrap"
    network: bool = False
    hidden: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()
    python: str | None = None

    def executable(self) -> str | None:
        """The ``bwrap`` this sandbox runs, or None when there is none."""
        return shutil.which(self.bwrap)

    def problem(self) -> str | None:
        """Why no sandbox can be made here, or None: ``bwrap`` is found and starts a process
        in the same namespaces a session gets (checked by running ``true`` in them)."""
        executable = self.executable()
        if executable is None:
            return f"bubblewrap ({self.bwrap}) is not installed on this machine"
        true = next((p for p in ("/usr/bin/true", "/bin/true") if os.path.exists(p)), "true")
        try:
            probe = subprocess.run(
                [executable, *self._base_args(), "--", true],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_TIMEOUT,
                env={"PATH": SANDBOX_PATH},
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap ({executable}) could not be started: {exc}"
        if probe.returncode != 0:
            reason = probe.stderr.decode("utf-8", "backslashreplace").strip()[-300:] or f"exit {probe.returncode}"
            return f"bubblewrap ({executable}) cannot create a sandbox on this machine: {reason}"
        return None

    def command(self, workspace: str | os.PathLike[str], *, scratch: str | os.PathLike[str] | None = None) -> list[str]:
        """The full command line: ``bwrap`` with the binds for ``workspace``, then the worker.

        The worker keeps full bash output in a private ``/tmp`` directory, or in ``scratch``,
        which must lie inside the workspace (the host can then read it too). ``ToolError`` when
        there is no ``bwrap``, or when the workspace or a read-only bind would show a hidden
        path (or the workspace would hold the system directories)."""
        from agentcore.extensions.environment.remote import worker_command

        executable = self.executable()
        if executable is None:
            raise ToolError(f"bubblewrap ({self.bwrap}) is not installed on this machine")
        root = Path(os.path.realpath(workspace))
        if not root.is_dir():
            raise ToolError(f"the workspace {display_name(root)} is not a directory")
        python = self.python or sys.executable
        shown = [*self._runtime_dirs(python), *(Path(os.path.realpath(p)) for p in self.read_only)]
        self._refuse_exposure(root, shown)
        args = [executable, *self._base_args(), "--bind", str(root), str(root)]
        for directory in shown:
            args += ["--ro-bind", str(directory), str(directory)]
        if scratch is not None and not _contains(root, Path(os.path.realpath(scratch))):
            raise ToolError(f"the scratch directory {display_name(scratch)} is not inside the workspace")
        args += ["--remount-ro", "/", "--chdir", str(root), *self._environment(root), "--"]
        return [*args, *worker_command(root, scratch=scratch, python=python)]

    def option(self, *, id: str = "sandbox", label: str = "Sandbox (bubblewrap)") -> dict[str, Any]:
        """The ``session.environment`` option: the sandbox is started when the session first
        needs its tools, confined to the session's working directory."""
        sandbox = self

        async def open_sandbox(target: ExecutionTarget, context: EnvironmentContext) -> RemoteExecutionEnv:
            from agentcore.extensions.environment.remote import RemoteExecutionEnv

            argv = sandbox.command(target.cwd)
            return await RemoteExecutionEnv.start(id, label, argv, env={"PATH": SANDBOX_PATH}, cwd="/")

        return {"id": id, "label": label, "open": open_sandbox}

    # --- parts of the command line ---------------------------------------------------------

    def _base_args(self) -> list[str]:
        """Isolation and the system, read-only (what the probe runs too)."""
        args = [*_ISOLATION]
        if self.network:
            args.append("--share-net")
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for path in SYSTEM_DIRS:
            args += ["--ro-bind-try", path, path]
        if self.network:
            for path in NETWORK_FILES:
                args += ["--ro-bind-try", path, path]
        return args

    def _environment(self, root: Path) -> list[str]:
        values = {
            "PATH": SANDBOX_PATH,
            "HOME": str(root),
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONSAFEPATH": "1",  # the workspace's files never shadow the worker's modules
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        args: list[str] = []
        for name, value in values.items():
            args += ["--setenv", name, value]
        return args

    def _runtime_dirs(self, python: str) -> list[Path]:
        """What the worker needs to start: this Python's prefixes and the agentcore package."""
        candidates = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
        candidates.add(str(AGENTCORE_DIR))
        candidates.add(str(Path(os.path.realpath(python)).parent))
        dirs: list[Path] = []
        for candidate in sorted(candidates):
            real = Path(os.path.realpath(candidate))
            if real.is_dir() and not _covered(real, dirs) and not _covered(real, _system_dirs()):
                dirs.append(real)
        return dirs

    def _refuse_exposure(self, root: Path, shown: list[Path]) -> None:
        for system in _system_dirs():
            if _contains(root, system):
                raise ToolError(
                    f"the workspace {display_name(root)} contains the system directory {display_name(system)}; "
                    "a sandbox shows one working directory, not the machine"
                )
        hidden = [Path(os.path.realpath(p)) for p in self.hidden]
        for path in [root, *shown]:
            for secret in hidden:
                if _contains(path, secret):
                    what = "the workspace" if path == root else "the read-only directory"
                    raise ToolError(
                        f"{what} {display_name(path)} would show {display_name(secret)}, which this sandbox "
                        "must keep hidden; the sandbox was not started"
                    )


def _system_dirs() -> list[Path]:
    return [Path(os.path.realpath(p)) for p in SYSTEM_DIRS if os.path.isdir(p)]


def _contains(directory: Path, path: Path) -> bool:
    """``path`` is ``directory`` or lies inside it."""
    return path == directory or path.is_relative_to(directory)


def _covered(path: Path, dirs: Iterable[Path]) -> bool:
    return any(_contains(d, path) for d in dirs)
