"""How the extension subsystems plug into a session (SPEC X1–X5).

Durable tasks (``registry``), tool catalogs (``tool_search``), code mode (``code_mode``) and
execution environments (``environment``) are each a ``SessionExtension``: the driver asks every
extension for the tools a context gets, what the snapshot's ``records`` say about it, what work
to resume, and how to cancel or start its tasks. Each lives in its own module under
``agentcore/extensions/`` and is registered in ``build_extensions`` — the driver knows none of
them by name, and none of them knows the driver: an extension is given an ``ExtensionHost``,
the session as an extension may see it (the store, the contexts, the runtime's parts, running
an activity, waking the session) — pi-mono's read-only session view, as a ``Protocol``.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from agentcore.events import AgentEvent
from agentcore.runtime_parts import RuntimeParts
from agentcore.session.commands import TaskCommand
from agentcore.session.contexts import Context
from agentcore.session.ports import SessionStore
from agentcore.tools.base import AgentTool


class ExtensionHost(SessionStore, Protocol):
    """What an extension sees of its session (besides the store view and the contexts); see the
    module docstring."""

    @property
    def parts(self) -> RuntimeParts:
        """The runtime's options, configuration, sleep and store (``runtime_parts``)."""
        ...

    def spawn(self, key: str, work: Callable[[], Awaitable[None]]) -> asyncio.Task[None] | None:
        """Run ``work()`` as an activity of the session (``run()`` waits for it), unless one runs
        under ``key`` already (then None)."""
        ...

    def wake(self) -> None:
        """Have the session look for work again (and publish what changed)."""
        ...


class SessionExtension(Protocol):
    """One extension subsystem of a session. Every method may be a no-op."""

    def tools(self, context: Context) -> list[AgentTool]:
        """Tools the model of ``context`` gets from this extension."""
        ...

    def records(self) -> dict[str, Any]:
        """Entries merged into the snapshot's ``records`` (never credentials)."""
        ...

    def sections(self, context: Context) -> list[str]:
        """Prompt sections appended to the system prompt of ``context``'s turns."""
        ...

    def tool_details(self, context: Context) -> dict[str, dict[str, Any]]:
        """Extra ``detail`` for tool tasks of ``context``, by task id (e.g. a code-mode script
        with its nested calls)."""
        ...

    def observe(self, context: Context, event: AgentEvent) -> None:
        """See every event the session emits (hooks); must not block or raise."""
        ...

    def ensure_activities(self) -> None:
        """Start (or resume after a reopen) the extension's work as session activities."""
        ...

    def cancel_all(self, context: Context, reason: str) -> list[str]:
        """``cancel`` scope all: stop this extension's work owned by ``context``; ids stopped."""
        ...

    def cancel_foreground(self, context: Context, reason: str) -> list[str]:
        """``cancel`` scope foreground: stop ``context``'s work that is not background."""
        ...

    def cancel_task(self, context: Context, task_id: str, owned_targets: set[int]) -> list[str] | None:
        """``cancel`` scope task: the ids stopped, or None when ``task_id`` is not this extension's."""
        ...

    def start_task(self, command: TaskCommand, context: Context, digest: str) -> dict[str, Any] | None:
        """The ``task`` command: its receipt (recorded with ``receipts.record_command``, in the
        transaction that creates the task), or None when ``command.name`` is not this
        extension's."""
        ...

    async def aclose(self) -> None:
        """Release connections and processes (the runtime closes; work pauses, not cancels)."""
        ...


class BaseExtension:
    """No-op defaults for every hook, so an extension implements only what it needs."""

    def __init__(self, session: ExtensionHost) -> None:
        self.session = session

    def tools(self, context: Context) -> list[AgentTool]:
        return []

    def records(self) -> dict[str, Any]:
        return {}

    def sections(self, context: Context) -> list[str]:
        return []

    def tool_details(self, context: Context) -> dict[str, dict[str, Any]]:
        return {}

    def observe(self, context: Context, event: AgentEvent) -> None:
        return None

    def ensure_activities(self) -> None:
        return None

    def cancel_all(self, context: Context, reason: str) -> list[str]:
        return []

    def cancel_foreground(self, context: Context, reason: str) -> list[str]:
        return []

    def cancel_task(self, context: Context, task_id: str, owned_targets: set[int]) -> list[str] | None:
        return None

    def start_task(self, command: TaskCommand, context: Context, digest: str) -> dict[str, Any] | None:
        return None

    async def aclose(self) -> None:
        return None


# session option key → the module implementing it. Each module provides
# ``parse_option(raw) -> parsed`` (strict; ``input_validation`` naming ``session.<key>...``) and
# ``create(session: ExtensionHost, parsed) -> SessionExtension``. Modules load only when their key is used.
EXTENSION_MODULES: Mapping[str, str] = MappingProxyType(
    {
        "registry": "agentcore.extensions.tasks",
        "environment": "agentcore.extensions.environment",
        "code_mode": "agentcore.extensions.codemode",
        "tool_search": "agentcore.extensions.catalogs.tool_search",
    }
)


def _module(key: str) -> Any:
    return importlib.import_module(EXTENSION_MODULES[key])


def parse_extension_option(key: str, raw: Any) -> Any:
    return _module(key).parse_option(raw)


def build_extensions(session: ExtensionHost, parsed: dict[str, Any]) -> list[SessionExtension]:
    """The extensions a session's options ask for, in option order."""
    return [_module(key).create(session, value) for key, value in parsed.items()]


def extension_records(extensions: Iterable[SessionExtension]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for extension in extensions:
        merged.update(extension.records())
    return merged
