"""Where a session's built-in tools run, and what its page says about it (SPEC W15, X5).

A session's *isolation* is decided when it is created and kept (``StudioSession.tool_isolation``):
a staff member's choice for that session (the new-session form, the admin), else the model's
(``RegisteredModel.tool_isolation``), else by person — staff run on the server, everyone else in
a sandbox. Each time the host opens a session, its isolation becomes a ``ToolConfinement``:

- ``host``: the tools run in the Studio process, as they always did (``STUDIO_ENVIRONMENT``
  applies);
- ``sandbox``: read, write, edit, ls, grep, find and bash run in agentcore's bubblewrap sandbox
  (``BubblewrapSandbox``), which shows only the session's workspace and hides every path of
  ``studio.workspaces.protected_paths`` (data dir, database, keys, every other workspace) — it
  refuses to start rather than show one;
- ``no_shell``: a sandboxed session on a server with no sandbox (``STUDIO_SANDBOX=off``, no
  ``bwrap``, or one that cannot create namespaces here) runs with the ``read-only`` policy — no
  bash, write or edit; read, ls, grep and find stay confined to the workspace — and its page
  says why. Tools never run unconfined in its place;
- ``refused``: a confined session whose workdir is no longer one it may use (made before the
  rules, or the folder changed since): the host does not open it, and the page says why.
"""

from __future__ import annotations

import os
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from studio import sql
from studio.models import RegisteredModel, StudioSession, ToolIsolation

if TYPE_CHECKING:
    from agentcore.extensions.environment.sandbox import BubblewrapSandbox

SANDBOX_ID = "studio-sandbox"
SANDBOX_LABEL = "Sandbox (bubblewrap): only this session's workspace"
_OFF = frozenset({"", "0", "off", "false", "no", "none"})
Mode = Literal["host", "sandbox", "no_shell", "refused"]


@dataclass(frozen=True, slots=True)
class ToolConfinement:
    """How one session's tools run now. ``environment`` is the ``session.environment`` option
    of a sandboxed session (None otherwise: the host's ``STUDIO_ENVIRONMENT`` or local tools)."""

    mode: Mode
    permission_policy: str
    summary: str
    environment: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def confined(self) -> bool:
        return self.mode != "host"

    def shown(self) -> dict[str, str]:
        """What a page shows of it, as plain data (``HostState.confinement``, which crosses the
        channel layer in worker mode): everything but ``environment``, which holds the sandbox's
        opener (a function)."""
        return {"mode": self.mode, "permission_policy": self.permission_policy, "summary": self.summary}

    @property
    def tools(self) -> list[str]:
        """The built-in tools the session's model is offered (the Records tab)."""
        read_tools = ["read", "grep", "find", "ls"]
        if self.mode == "refused":
            return []
        if self.permission_policy == "read-only":
            return read_tools
        return [*read_tools, "write", "edit", "bash"]


def isolation_for_new_session(owner: Any, model: RegisteredModel, chosen: str = "") -> str:
    """The isolation a new session is created with (``chosen``: a staff member's choice)."""
    for value in (chosen, model.tool_isolation):
        if value in ToolIsolation.values:
            return str(value)
    return str(ToolIsolation.HOST if getattr(owner, "is_staff", False) else ToolIsolation.SANDBOX)


class OwnedWorkspaces:
    """The names of one person's workspaces (``<base>/<session id>``), as a container: ``name in
    it`` reads that one session's row (one plain statement), not every session the person made —
    it is asked at every page open and Records render. ``own``: the id of the session being
    checked, whose row says already that it is theirs (a fresh workspace is named by it): its
    name needs no statement."""

    def __init__(self, owner_id: int, own: str = "") -> None:
        self.owner_id = owner_id
        self.own = own

    def __contains__(self, name: object) -> bool:
        if self.own and name == self.own:
            return True
        try:
            pk = uuid.UUID(str(name))
        except ValueError:
            return False
        if str(pk) != name:
            return False  # a workspace is named by the id exactly as Studio writes it
        return sql.exists(StudioSession, id=pk, owner=self.owner_id)


def confinement_of(session: StudioSession, protected: tuple[Path, ...] | None = None) -> ToolConfinement:
    """The confinement of ``session``'s store (its main session decides) as it runs now.
    ``protected``: ``protected_paths()`` when the caller keeps it (a host's ``ProtectedPaths``)."""
    from studio.workspaces import protected_paths, workdir_problem

    root = session.root or session
    policy = str(root.permission_policy)
    if root.tool_isolation == ToolIsolation.HOST:
        return ToolConfinement("host", policy, "Tools run on the Studio server, as the Studio process.")
    if protected is None:  # once: the workdir check and the sandbox's hidden paths (a realpath per path)
        protected = protected_paths()
    owned = OwnedWorkspaces(root.owner_id, own=str(root.pk))
    problem = workdir_problem(_real(root.workdir), owned, confined=True, protected=protected)
    if problem is not None:
        summary = f"This session's working directory cannot be used any more: {problem} Start a new session."
        return ToolConfinement("refused", policy, summary)
    sandbox = configured_sandbox(protected)
    off = "no sandbox is configured on this Studio (STUDIO_SANDBOX=off)"
    reason = off if sandbox is None else _PROBES.problem(sandbox)
    if sandbox is None or reason is not None:
        return ToolConfinement(
            "no_shell",
            "read-only",
            f"bash, write and edit are off in this session: {reason}. Reading tools see only this session's workspace.",
        )
    network = "with the server's network" if sandbox.network else "with no network"
    return ToolConfinement(
        "sandbox",
        policy,
        f"Tools run in a sandbox: only this session's workspace is visible, {network}.",
        environment=sandbox.option(id=SANDBOX_ID, label=SANDBOX_LABEL),
    )


def configured_sandbox(protected: tuple[Path, ...] | None = None) -> BubblewrapSandbox | None:
    """The sandbox ``STUDIO_SANDBOX`` names (None when off), hiding Studio's protected paths
    (``protected``: ``protected_paths()`` when the caller has it already)."""
    from agentcore.extensions.environment.sandbox import BubblewrapSandbox
    from studio.workspaces import protected_paths

    raw = getattr(settings, "STUDIO_SANDBOX", "bwrap")
    if raw is None or raw is False or (isinstance(raw, str) and raw.strip().lower() in _OFF):
        return None
    if not isinstance(raw, str) or (raw.strip() != "bwrap" and not Path(raw.strip()).is_absolute()):
        raise ImproperlyConfigured("STUDIO_SANDBOX must be bwrap, the absolute path of a bwrap executable, or off")
    network = getattr(settings, "STUDIO_SANDBOX_NETWORK", False)
    if not isinstance(network, bool):
        raise ImproperlyConfigured(f"STUDIO_SANDBOX_NETWORK must be a boolean; got {type(network).__name__}")
    hidden = protected if protected is not None else protected_paths()
    return BubblewrapSandbox(bwrap=raw.strip(), network=network, hidden=tuple(str(p) for p in hidden))


def check_sandbox() -> str | None:
    """Start-up: the settings parse; returns why confined sessions will have no shell, or None."""
    sandbox = configured_sandbox()
    if sandbox is None:
        return "STUDIO_SANDBOX is off"
    return _PROBES.problem(sandbox)


def _real(path: str) -> Path:
    return Path(os.path.realpath(path))


class _SandboxProbes:
    """Whether a sandbox can be made here, probed once per process and ``bwrap`` executable.

    Module state because the answer belongs to the machine, not to a session, and a probe
    starts a process: every page view and session open asks. Installing bubblewrap takes
    effect when Studio restarts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers: dict[tuple[str, str | None], str | None] = {}

    def problem(self, sandbox: BubblewrapSandbox) -> str | None:
        key = (sandbox.bwrap, sandbox.executable())
        with self._lock:
            if key not in self._answers:
                self._answers[key] = sandbox.problem()
            return self._answers[key]


_PROBES = _SandboxProbes()
