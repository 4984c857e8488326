"""A real agentcore runtime whose turns a test can hold, for the Studio tests that must stop
time inside a turn (queue while busy, steer, stop, reload mid-turn) without sleeping.

The runtime is the real one (session protocol, SQLite store, the ``openai-responses`` adapter)
talking to the scripted fake provider server on loopback. The model is the offline demo's
brain, except that a prompt containing ``HOLD`` first calls the ``gate`` tool, which waits until
the test opens it (``gate.entered`` tells the test the turn is provably busy; ``gate.release()``
lets it go). A prompt containing ``FAIL_WITH_400`` gets the provider's real HTTP 400 (a turn
that fails). Any other prompt gets the demo's own answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.test import AsyncClient

from agentcore.demo import _conversation, _tool_names, _usage, demo_responder
from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import HttpError, Step, Stop, Text, ToolCall

if TYPE_CHECKING:
    from studio.host.session_host import SessionHost

HOLD = "HOLD"
FAIL = "FAIL_WITH_400"  # the provider refuses this prompt: a turn that fails for real


class Gate:
    """An extra tool that blocks its call until the test releases it (once per release)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self._release = asyncio.Event()
        self.calls = 0

    def release(self) -> None:
        self._release.set()

    def tool(self) -> Any:
        from agentcore import AgentTool, ToolResult

        async def execute(arguments: dict[str, Any], ctx: Any) -> Any:
            self.calls += 1
            self.entered.set()
            waiter = asyncio.ensure_future(self._release.wait())
            aborted = asyncio.ensure_future(ctx.abort.wait())
            try:
                await asyncio.wait({waiter, aborted}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                aborted.cancel()
            self._release.clear()
            self.entered.clear()
            if ctx.abort.is_set():
                return ToolResult.text("gate: cancelled", is_error=True)
            return ToolResult.text("gate passed")

        return AgentTool(
            name="gate",
            description="Wait at the gate.",
            parameters={"type": "object", "properties": {}},
            execute=execute,
            read_only=True,
            replay="safe",
        )


def responder(request: RecordedRequest) -> list[Step]:
    body = request.json
    user, calls, _outputs = _conversation(body)
    if FAIL in user:
        return [HttpError(400, "the request was refused by the provider (scripted failure)")]
    if HOLD in user and "gate" in _tool_names(body):
        if not any(c.get("name") == "gate" for c in calls):
            return [ToolCall("gate", {}), _usage(body, "gate"), Stop("tool_use")]
        text = f"Released: {user.strip()[:80]}"
        return [Text(text, chunk_size=8), _usage(body, text), Stop("stop")]
    return demo_responder(request)


def gated_factory(server: FakeProviderServer, gate: Gate) -> Callable[[Any], Any]:
    """A ``SessionHost`` runtime factory: the real runtime on ``server`` with the gate tool."""
    from studio.host.factory import agentcore_runtime_factory

    async def factory(config: Any) -> Any:
        config.model_options["base_url"] = server.base_url
        return await agentcore_runtime_factory(config, extra_tools=[gate.tool()])

    return factory


@contextlib.asynccontextmanager
async def gated_host(
    responder: Callable[[RecordedRequest], list[Step]],
) -> AsyncIterator[tuple[SessionHost, Gate, FakeProviderServer]]:
    """The process's session host for one test: real runtimes with the ``gate`` tool, on a fake
    provider scripted by ``responder``; stopped (host and server) when the block ends."""
    from studio.host.session_host import SessionHost, set_session_host

    server = FakeProviderServer(responder=responder).start_in_thread()
    gate = Gate()
    host = SessionHost(runtime_factory=gated_factory(server, gate), flush_interval=0.01)
    set_session_host(host)
    try:
        yield host, gate, server
    finally:
        await host.close()
        set_session_host(None)
        server.stop_in_thread()


async def scripted_session(
    user: Any,
    server: FakeProviderServer,
    *,
    workdir: str = "",
    permission_policy: str = "read-only",
    model: Any = None,
) -> tuple[Any, AsyncClient]:
    """A session of ``user`` on the scripted model (its tools on this machine), and a client
    logged in as them. ``model``: a registered model made by ``scripted_model`` (default: a new one)."""
    from studio import services

    model = model or await scripted_model(server)
    session = await sync_to_async(services.session_create)(
        owner=user,
        registered_model=model,
        workdir=workdir,
        permission_policy=permission_policy,
        effort="low",
        mode="build",
        tool_isolation="host",
    )
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    return session, client


async def scripted_model(server: FakeProviderServer, name: str = "Scripted", **fields: Any) -> Any:
    """A registered model on the scripted fake provider (``openai-responses``, model ``m``)."""
    from studio.models import RegisteredModel

    options: dict[str, Any] = {"provider": "custom", "model_id": "m", "api_key": "k", "api_kind": "openai-responses"}
    return await RegisteredModel.objects.acreate(name=name, base_url=server.base_url, **(options | fields))
