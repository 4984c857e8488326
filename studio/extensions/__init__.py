"""Extensions Studio installs into every session, the way Django installs apps.

``settings.STUDIO_EXTENSIONS`` is a list of dotted module paths. Each module exposes its
extensions as ``EXTENSIONS`` (a list of ``AgentExtension``) or as a function ``extensions()``
returning them. The session host builds **one** ``AgentRegistry`` from the setting when it
starts and passes it to every session it opens (``create_agent(session={"registry": ...})``),
so a session command can only *name* a task one of these modules defines: commands never carry
code (SPEC X2).

A module that cannot be imported, or exposes neither name, is a configuration error raised at
start-up naming the path, never a silently missing extension.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ImproperlyConfigured


def extensions_from(paths: Iterable[str]) -> list[Any]:
    """The ``AgentExtension`` objects the modules at ``paths`` define, in order."""
    from agentcore.extensions.tasks import AgentExtension

    found: list[Any] = []
    for path in paths:
        try:
            module = importlib.import_module(path)
        except ImportError as exc:
            raise ImproperlyConfigured(f"STUDIO_EXTENSIONS: cannot import {path!r}: {exc}") from exc
        if hasattr(module, "EXTENSIONS"):
            items = module.EXTENSIONS
        elif callable(getattr(module, "extensions", None)):
            items = module.extensions()
        else:
            raise ImproperlyConfigured(
                f"STUDIO_EXTENSIONS: {path!r} defines neither EXTENSIONS nor a function extensions()"
            )
        for item in items:
            if not isinstance(item, AgentExtension):
                raise ImproperlyConfigured(
                    f"STUDIO_EXTENSIONS: {path!r} gave {type(item).__name__}, not an AgentExtension "
                    "(build it with agentcore.define_agent_extension)"
                )
            found.append(item)
    return found


def build_registry(paths: Iterable[str]) -> Any:
    """One registry with every configured extension installed (name clashes are errors)."""
    from agentcore import create_agent_registry
    from agentcore.errors import AgentError

    registry = create_agent_registry()
    for extension in extensions_from(paths):
        try:
            registry.install(extension)
        except AgentError as exc:
            raise ImproperlyConfigured(f"STUDIO_EXTENSIONS: {extension.name!r} cannot be installed: {exc}") from exc
    return registry
