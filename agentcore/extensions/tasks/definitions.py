"""Project-defined extensions: durable tasks, tools, prompt docs and hooks (SPEC X1, X2).

Everything here is plain, immutable data plus the project's own functions. Nothing is ever
created from a session command: a command can only *name* a task a project installed (X2).
Names under the reserved namespaces ``agentcore.*`` and ``workflow.*`` are refused, as are
tools that would shadow a runtime tool.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from agentcore.errors import InputValidationError
from agentcore.tools.base import AgentTool

RESERVED_PREFIXES = ("agentcore.", "workflow.")
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")
RUNTIME_TOOLS = frozenset(
    {"read", "write", "edit", "bash", "grep", "find", "ls", "ask_user", "update_plan", "subagent"}
    | {"tool_search", "codemode"}
)

Phase = Callable[[Any, Any, Any], Awaitable[None]]  # (task, runtime, context)
Initial = Callable[[Any], Any]  # input → checkpoint
HookFunction = Callable[[dict[str, Any], Any], Any]  # (event, context) → None | awaitable


def check_name(name: Any, what: str, *, field_name: str = "name") -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise InputValidationError(
            f"{what} name {name!r} must be 1-128 letters, digits, '_', '-' or '.'", field=field_name
        )
    if name.startswith(RESERVED_PREFIXES):
        raise InputValidationError(
            f"{what} name {name!r} is in a reserved namespace ({', '.join(RESERVED_PREFIXES)})", field=field_name
        )
    return name


@dataclass(slots=True, frozen=True)
class AgentTaskDefinition:
    """A durable task: ``initial(input)`` is the first checkpoint; ``phases`` run one at a time,
    each committing the next state; ``abort`` cleans up on cancel. ``accepts_versions`` lists
    the definition versions whose checkpoints this one can resume (its own always)."""

    name: str
    version: int
    initial: Initial
    phases: Mapping[str, Phase]
    abort: Phase | None = None
    accepts_versions: frozenset[int] = frozenset()
    input_schema: Mapping[str, Any] | None = None

    def accepts(self, version: int) -> bool:
        return version == self.version or version in self.accepts_versions

    def first_phase(self, checkpoint: Any) -> str:
        """The phase a new task starts in: the checkpoint's ``phase`` if it names one, else the
        first phase declared."""
        if isinstance(checkpoint, dict) and checkpoint.get("phase") in self.phases:
            return str(checkpoint["phase"])
        return next(iter(self.phases))


@dataclass(slots=True, frozen=True)
class AgentDoc:
    """A named section appended to the system prompt of every turn."""

    name: str
    text: str


@dataclass(slots=True, frozen=True)
class AgentHook:
    """``fn(event, context)`` observes events of ``event`` type (an event ``type`` such as
    ``tool`` or ``end``, ``task`` for task transitions, or ``*``). It cannot change them."""

    event: str
    fn: HookFunction


@dataclass(slots=True, frozen=True)
class AgentExtension:
    name: str
    version: str = "1"
    tasks: tuple[AgentTaskDefinition, ...] = ()
    tools: tuple[AgentTool, ...] = ()
    hooks: tuple[AgentHook, ...] = ()
    docs: tuple[AgentDoc, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


def define_agent_task(
    *,
    name: str,
    version: int,
    initial: Initial,
    phases: Mapping[str, Phase],
    abort: Phase | None = None,
    accepts_versions: tuple[int, ...] | list[int] = (),
    input_schema: Mapping[str, Any] | None = None,
) -> AgentTaskDefinition:
    check_name(name, "task")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InputValidationError("task version must be a positive integer", field="version")
    if not callable(initial):
        raise InputValidationError("initial must be a function of the task input", field="initial")
    if not isinstance(phases, Mapping) or not phases:
        raise InputValidationError("phases must map at least one phase name to an async function", field="phases")
    for phase_name, fn in phases.items():
        if not isinstance(phase_name, str) or not phase_name or not callable(fn):
            raise InputValidationError(f"phase {phase_name!r} must be a named async function", field="phases")
    if abort is not None and not callable(abort):
        raise InputValidationError("abort must be an async function", field="abort")
    return AgentTaskDefinition(
        name=name,
        version=version,
        initial=initial,
        phases=MappingProxyType(dict(phases)),
        abort=abort,
        accepts_versions=frozenset(int(v) for v in accepts_versions),
        input_schema=MappingProxyType(dict(input_schema)) if input_schema is not None else None,
    )


def define_agent_doc(name: str, text: str) -> AgentDoc:
    check_name(name, "doc")
    if not isinstance(text, str) or not text.strip():
        raise InputValidationError("a doc needs non-empty text", field="text")
    return AgentDoc(name, text)


def agent_hook(event: str, fn: HookFunction) -> AgentHook:
    if not isinstance(event, str) or not event:
        raise InputValidationError("a hook needs an event type", field="event")
    if not callable(fn):
        raise InputValidationError("a hook needs a function", field="fn")
    return AgentHook(event, fn)


def define_agent_extension(
    *,
    name: str,
    version: str = "1",
    tasks: list[AgentTaskDefinition] | tuple[AgentTaskDefinition, ...] = (),
    tools: list[AgentTool] | tuple[AgentTool, ...] = (),
    hooks: list[AgentHook] | tuple[AgentHook, ...] = (),
    docs: list[AgentDoc] | tuple[AgentDoc, ...] = (),
) -> AgentExtension:
    """One installable unit of project code (X1). Validated here; conflicts with other installed
    extensions are checked by ``AgentRegistry.install``."""
    check_name(name, "extension")
    for task in tasks:
        if not isinstance(task, AgentTaskDefinition):
            raise InputValidationError("tasks must come from define_agent_task", field="tasks")
    task_names = [task.name for task in tasks]
    if len(set(task_names)) != len(task_names):
        raise InputValidationError("an extension defines a task name twice", field="tasks")
    tool_names = []
    for tool in tools:
        if not isinstance(tool, AgentTool):
            raise InputValidationError("tools must be AgentTool objects", field="tools")
        if tool.name in RUNTIME_TOOLS:
            raise InputValidationError(f"tool {tool.name!r} would shadow a runtime tool", field="tools")
        tool_names.append(tool.name)
    if len(set(tool_names)) != len(tool_names):
        raise InputValidationError("an extension defines a tool name twice", field="tools")
    for hook in hooks:
        if not isinstance(hook, AgentHook):
            raise InputValidationError("hooks must come from agent_hook", field="hooks")
    for doc in docs:
        if not isinstance(doc, AgentDoc):
            raise InputValidationError("docs must come from define_agent_doc", field="docs")
    return AgentExtension(
        name=name, version=str(version), tasks=tuple(tasks), tools=tuple(tools), hooks=tuple(hooks), docs=tuple(docs)
    )
