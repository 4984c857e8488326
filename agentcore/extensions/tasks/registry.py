"""The agent registry: installed extensions, published as immutable snapshots (SPEC X2).

``install`` / ``uninstall`` replace the published snapshot atomically; a reader takes one
snapshot and keeps it for what it is doing — a running phase, a tool call, a hook — so hot
updates never change code under work in flight. Runtimes that use the registry subscribe and
are told when a new snapshot is published (a task blocked on a missing definition wakes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from agentcore.errors import InputValidationError
from agentcore.extensions.tasks.definitions import AgentDoc, AgentExtension, AgentHook, AgentTaskDefinition
from agentcore.tools.base import AgentTool

Listener = Callable[["RegistrySnapshot"], None]


@dataclass(slots=True, frozen=True)
class RegistrySnapshot:
    """One published state of a registry; never changes after publication."""

    serial: int
    extensions: Mapping[str, AgentExtension] = field(default_factory=lambda: MappingProxyType({}))

    def task(self, name: str) -> AgentTaskDefinition | None:
        for extension in self.extensions.values():
            for task in extension.tasks:
                if task.name == name:
                    return task
        return None

    def get(self, name: str) -> AgentTaskDefinition | None:
        """The task definition called ``name`` (the lookup offline cancel uses)."""
        return self.task(name)

    @property
    def tools(self) -> list[AgentTool]:
        return [tool for extension in self.extensions.values() for tool in extension.tools]

    @property
    def docs(self) -> list[AgentDoc]:
        return [doc for extension in self.extensions.values() for doc in extension.docs]

    @property
    def hooks(self) -> list[AgentHook]:
        return [hook for extension in self.extensions.values() for hook in extension.hooks]


class AgentRegistry:
    """Holds the installed extensions of a project; share one between runtimes if you like."""

    def __init__(self) -> None:
        self._snapshot = RegistrySnapshot(0)
        self._listeners: list[Listener] = []

    @property
    def snapshot(self) -> RegistrySnapshot:
        return self._snapshot

    def get(self, name: str) -> AgentTaskDefinition | None:
        return self._snapshot.task(name)

    def install(self, extension: AgentExtension) -> None:
        """Install or replace (same name) ``extension``. Task and tool names must not collide
        with another installed extension's."""
        if not isinstance(extension, AgentExtension):
            raise InputValidationError("install takes what define_agent_extension returns", field="extension")
        others = {name: ext for name, ext in self._snapshot.extensions.items() if name != extension.name}
        for other in others.values():
            clash_tasks = {t.name for t in other.tasks} & {t.name for t in extension.tasks}
            if clash_tasks:
                raise InputValidationError(
                    f"task {sorted(clash_tasks)[0]!r} is already defined by extension {other.name!r}", field="tasks"
                )
            clash_tools = {t.name for t in other.tools} & {t.name for t in extension.tools}
            if clash_tools:
                raise InputValidationError(
                    f"tool {sorted(clash_tools)[0]!r} is already defined by extension {other.name!r}", field="tools"
                )
        self._publish({**others, extension.name: extension})

    def uninstall(self, name: str) -> bool:
        """Remove an extension; running work keeps its definitions, the next phase finds none."""
        if name not in self._snapshot.extensions:
            return False
        self._publish({k: v for k, v in self._snapshot.extensions.items() if k != name})
        return True

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` after every publication; returns the unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _publish(self, extensions: dict[str, AgentExtension]) -> None:
        self._snapshot = RegistrySnapshot(self._snapshot.serial + 1, MappingProxyType(extensions))
        for listener in list(self._listeners):
            listener(self._snapshot)


def create_agent_registry() -> AgentRegistry:
    return AgentRegistry()
