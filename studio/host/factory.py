"""Opening a runtime for a store: the factory the host calls, and the host hooks it passes.

``STUDIO_RUNTIME_FACTORY`` (a dotted path) replaces agentcore's ``create_agent`` for tests and
benchmarks; whatever it returns must be an ``AgentRuntime`` with the session protocol on.

Every runtime of a host process sends its model requests through the host's one pooled HTTP
client (``host_http_client``, passed as ``config.http_client``; the host closes it when it shuts
down): connections are reused across sessions, and no runtime builds a client of its own
(agentcore's ``new_host_http_client``, whose cost per request does not grow with the sessions).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol, cast

from django.conf import settings

from studio import runtime_options
from studio.host.contract import SessionConfig

if TYPE_CHECKING:
    import httpx

    from agentcore.host import AgentHost
    from agentcore.runtime import AgentRuntime


class RuntimeFactory(Protocol):
    def __call__(self, config: SessionConfig) -> Awaitable[AgentRuntime]: ...


async def agentcore_runtime_factory(config: SessionConfig, **extra: Any) -> AgentRuntime:
    """Open the real agentcore runtime for a store, with the session protocol on.

    ``extra`` goes to ``create_agent`` as well (a test's factory adds a tool this way)."""
    from agentcore import create_agent

    options: dict[str, Any] = {**runtime_options.runtime_options(), **config.model_options, **extra}
    if config.models:
        options["models"] = dict(config.models)
    if config.http_client is not None:
        options.setdefault("http_client", config.http_client)
    return await create_agent(
        **config.store.runtime_options(),
        workdir=config.workdir,
        permission_policy=config.permission_policy,
        effort=config.effort or None,
        mode="build",
        session=dict(config.session),
        **options,
    )


def host_http_client() -> httpx.AsyncClient:
    """The pooled client every runtime of one host process shares (the host closes it)."""
    from agentcore import new_host_http_client

    return new_host_http_client()


async def close_shared(demo: Any, client: httpx.AsyncClient | None) -> None:
    """What a host shares among its runtimes, closed after them: the demo server, the pool."""
    if demo is not None:
        with contextlib.suppress(Exception):
            demo.stop()
    if client is not None:
        await client.aclose()


def configured_factory() -> RuntimeFactory:
    dotted = getattr(settings, "STUDIO_RUNTIME_FACTORY", "") or ""
    if not dotted:
        return agentcore_runtime_factory
    module, _, name = dotted.replace(":", ".").rpartition(".")
    return cast(RuntimeFactory, getattr(importlib.import_module(module), name))


def _plan_review_pause(payload: dict[str, Any]) -> None:
    """``approve_plan`` hook: every plan waits for a person in the browser."""
    from agentcore.errors import UserInputRequired

    raise UserInputRequired("plan review", payload={"kind": "plan", **payload})


def agent_host() -> AgentHost:
    from agentcore.host import AgentHost

    return AgentHost(approve_plan=_plan_review_pause)
