"""Execution environments for a session: ``session={"environment": {id, label, open}}`` (SPEC X5).

``open(target, context)`` is the host's async function that returns an ``AgentExecutionEnv``
(``agentcore.tools.environment``) for ``target`` — the session's working directory, allowed
directories and permission policy on the execution target. From then on read, write, edit,
bash, grep, find and ls of every context of the session (main, forks, subagents) run against
it; they never fall back to this machine: an environment that cannot be opened, or whose
worker died, makes each call a tool error that names it, and the next call tries ``open``
again. Extra tools are the project's own business and are not redirected.

Identity: the declared ``id`` is stored in the session's ``environment`` register the first
time the session runs; reopening the session with another ``id`` is ``input_validation``
naming ``session.environment.id`` and nothing runs (a new execution target needs a new
session). ``open`` must return an environment with that same ``id``. ``cleanup()`` is awaited
when the runtime closes. The snapshot's ``records["environment"]`` shows ``id``, ``label``,
``kind`` (local | remote), ``status`` (not_connected | connected | error | closed), ``message``
and the target's ``cwd`` — never what ``open`` was given or closed over (credentials).

Three environments ship: ``local_environment()`` (this machine, as without the option),
``remote_environment(root)`` (a worker process confined to ``root`` speaking JSON lines on
stdin/stdout — the shape of an SSH or sandbox backend; see ``remote``) and
``BubblewrapSandbox(...).option()`` (that worker inside a ``bwrap`` sandbox that shows only the
session's working directory; see ``sandbox``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from agentcore.errors import InputValidationError, ToolError
from agentcore.extensions.environment.target import EnvironmentContext, ExecutionTarget, OpenEnvironment
from agentcore.harness.storage import Commit, RegisterWrite
from agentcore.session.extension import BaseExtension, ExtensionHost
from agentcore.tools.base import ToolContext, ToolResult
from agentcore.tools.display import clean_text
from agentcore.tools.environment import ENV_KINDS, AgentExecutionEnv, FileOperation, LocalExecutionEnv

if TYPE_CHECKING:
    from agentcore.extensions.environment.remote import RemoteExecutionEnv

REGISTER: Final = "environment"
FIELD: Final = "session.environment"
MAX_NAME: Final = 200
_STATUSES: Final = ("not_connected", "connected", "error", "closed")


@dataclass(frozen=True, slots=True)
class EnvironmentOption:
    id: str
    label: str
    open: OpenEnvironment


def parse_option(raw: Any) -> EnvironmentOption:
    """Strict: ``{id, label, open}`` and nothing else; a bad field is named."""
    if not isinstance(raw, dict):
        raise InputValidationError(f"{FIELD} must be an object {{id, label, open}}", field=FIELD)
    for key in raw:
        if key not in ("id", "label", "open"):
            raise InputValidationError(f"{FIELD}.{key}: unknown option", field=f"{FIELD}.{key}")
    for key in ("id", "label"):
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME or not value.isprintable():
            raise InputValidationError(
                f"{FIELD}.{key} must be a non-empty printable string of at most {MAX_NAME} characters",
                field=f"{FIELD}.{key}",
            )
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InputValidationError(f"{FIELD}.{key} is not valid Unicode", field=f"{FIELD}.{key}") from None
    if not callable(raw.get("open")):
        raise InputValidationError(
            f"{FIELD}.open must be an async function open(target, context) returning the environment",
            field=f"{FIELD}.open",
        )
    return EnvironmentOption(raw["id"], raw["label"], raw["open"])


def create(session: ExtensionHost, parsed: EnvironmentOption) -> EnvironmentExtension:
    """The session's environment; a stored identity other than ``parsed.id`` is refused here,
    before the session runs anything."""
    stored = session.view.register(REGISTER)
    if stored is not None and stored.get("id") != parsed.id:
        raise InputValidationError(
            f"{FIELD}.id: this session runs on execution environment {stored.get('id')!r}; it cannot be reopened "
            f"on {parsed.id!r}. Start a new session to use another execution target.",
            field=f"{FIELD}.id",
        )
    return EnvironmentExtension(session, parsed)


class SessionEnvironment:
    """The ``AgentExecutionEnv`` the session's tools hold: opens the host's environment at the
    first tool call (once at a time), reopens it after a failure, and never runs anything locally."""

    def __init__(self, option: EnvironmentOption, target: ExecutionTarget, context: EnvironmentContext) -> None:
        self.option = option
        self.target = target
        self._context = context
        self._env: AgentExecutionEnv | None = None
        self._failure: str | None = None
        self._closed = False
        self._lock = asyncio.Lock()

    @property
    def id(self) -> str:
        return self.option.id

    @property
    def label(self) -> str:
        return self.option.label

    @property
    def kind(self) -> str:
        return self._env.kind if self._env is not None else "unknown"

    def _name(self) -> str:
        return f"execution environment {self.option.label!r} ({self.option.id})"

    async def connect(self) -> AgentExecutionEnv:
        """The open environment, opening (or reopening) it if needed; ``ToolError`` if it cannot be."""
        env = self._env
        if env is not None and _state(env) == "connected":
            return env
        async with self._lock:
            if self._closed:
                raise ToolError(f"{self._name()} was closed")
            env = self._env
            if env is not None:
                if _state(env) == "connected":
                    return env
                self._failure = str(env.status().get("message") or "it stopped")
                self._env = None
                with contextlib.suppress(Exception):
                    await env.cleanup()
            try:
                opened = await self.option.open(self.target, self._context)
            except Exception as exc:
                self._failure = str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
                raise ToolError(
                    f"{self._name()} could not be opened: {self._failure}. The call did not run "
                    "(tools never fall back to this machine)."
                ) from None
            problem = _misfit(opened, self.option.id)
            if problem is not None:
                self._failure = problem
                with contextlib.suppress(Exception):
                    await opened.cleanup()
                raise ToolError(f"{self._name()}: {problem}. The call did not run.")
            self._env, self._failure = opened, None
            return opened

    async def run_file_operation(self, ctx: ToolContext, operation: FileOperation) -> ToolResult:
        return await (await self.connect()).run_file_operation(ctx, operation)

    async def run_command(self, ctx: ToolContext, command: str, timeout: float) -> ToolResult:  # noqa: ASYNC109
        return await (await self.connect()).run_command(ctx, command, timeout)

    async def reap_call(self, token: str) -> int:
        return await (await self.connect()).reap_call(token)

    def status(self) -> dict[str, Any]:
        if self._closed:
            state, message = "closed", None
        elif self._env is not None:
            state, message = _state(self._env), self._env.status().get("message")
        elif self._failure is not None:
            state, message = "error", self._failure
        else:
            state, message = "not_connected", None
        return {"kind": self._env.kind if self._env is not None else None, "status": state, "message": message}

    async def cleanup(self) -> None:
        async with self._lock:
            self._closed = True
            env, self._env = self._env, None
            if env is not None:
                await env.cleanup()


def _state(env: AgentExecutionEnv) -> str:
    state = env.status().get("status")
    return state if state in _STATUSES else "error"


def _misfit(opened: Any, declared: str) -> str | None:
    if not isinstance(opened, AgentExecutionEnv):
        return f"open() returned {type(opened).__name__}, not an AgentExecutionEnv"
    if opened.id != declared:
        return f"open() returned an environment with id {opened.id!r}; the session declared {declared!r}"
    if opened.kind not in ENV_KINDS:
        return f"open() returned an environment of kind {opened.kind!r}; expected local or remote"
    return None


class EnvironmentExtension(BaseExtension):
    """Binds the session's tools to its environment and reports it in ``records``."""

    def __init__(self, session: ExtensionHost, option: EnvironmentOption) -> None:
        super().__init__(session)
        runtime = session.parts
        opts = runtime.options
        target = ExecutionTarget(
            cwd=os.fspath(opts.workdir or os.getcwd()),
            allowed_directories=tuple(os.fspath(d) for d in opts.allowed_directories or ()),
            permission_policy=opts.permission_policy,
        )
        self.environment = SessionEnvironment(option, target, EnvironmentContext(runtime.session_id, runtime.owner_id))
        runtime.config.use_environment(self.environment)
        self._started = False

    def ensure_activities(self) -> None:
        """The first time the session runs: pin its identity. The environment itself opens at
        the first tool call that needs it (``SessionEnvironment.connect``): a sandbox or a
        remote worker is a process, and a session that only talks must not hold one."""
        if self._started:
            return
        self._started = True
        option = self.environment.option
        view = self.session.view
        stored = view.register(REGISTER)
        if stored is None or stored.get("label") != option.label:
            write = RegisterWrite(REGISTER, {"id": option.id, "label": option.label}, view.register_seq(REGISTER))
            view.commit(Commit(registers=[write]))

    def records(self) -> dict[str, Any]:
        env = self.environment
        status = env.status()
        message = status.get("message")
        return {
            "environment": {
                "id": env.id,
                "label": env.label,
                "kind": status.get("kind"),
                "status": status.get("status"),
                "message": clean_text(str(message))[:1000] if message else None,
                "cwd": env.target.cwd,
            }
        }

    async def aclose(self) -> None:
        await self.environment.cleanup()


def local_environment(id: str = "local", label: str = "Local machine") -> dict[str, Any]:
    """The ``session.environment`` option for this machine (what the tools do without it)."""

    async def open_local(target: ExecutionTarget, context: EnvironmentContext) -> AgentExecutionEnv:
        return LocalExecutionEnv(id, label)

    return {"id": id, "label": label, "open": open_local}


def remote_environment(
    root: str | os.PathLike[str] | None = None,
    *,
    id: str = "worker",
    label: str = "Worker process",
    scratch: str | os.PathLike[str] | None = None,
    python: str | None = None,
) -> dict[str, Any]:
    """The ``session.environment`` option for a worker process confined to ``root`` (default:
    the session's working directory), started when the session first runs."""

    async def open_remote(target: ExecutionTarget, context: EnvironmentContext) -> RemoteExecutionEnv:
        from agentcore.extensions.environment.remote import start_worker

        where = root if root is not None else target.cwd
        return await start_worker(where, id=id, label=label, scratch=scratch, python=python)

    return {"id": id, "label": label, "open": open_remote}


def __getattr__(name: str) -> Any:
    if name in ("RemoteExecutionEnv", "start_worker", "worker_command"):
        from agentcore.extensions.environment import remote

        return getattr(remote, name)
    if name == "BubblewrapSandbox":
        from agentcore.extensions.environment import sandbox

        return sandbox.BubblewrapSandbox
    raise AttributeError(name)


__all__ = [
    "AgentExecutionEnv",
    "BubblewrapSandbox",
    "EnvironmentContext",
    "EnvironmentExtension",
    "EnvironmentOption",
    "ExecutionTarget",
    "LocalExecutionEnv",
    "RemoteExecutionEnv",
    "SessionEnvironment",
    "create",
    "local_environment",
    "parse_option",
    "remote_environment",
    "start_worker",
    "worker_command",
]
