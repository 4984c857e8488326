"""Web search per conversation: ``configure`` sets auto / on / off for the next request (SPEC P2, S2, W13).

The choice is validated like the ``web_search`` option (P2): ``on`` where the model's API kind
has no search tool, or where the model declares ``web_search: false``, is ``input_validation``
naming ``web_search`` — and nothing is written (the settings version stays).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentcore.errors import InputValidationError
from agentcore.testing.steps import Text


class Served:
    """A runtime held by ``serve()`` (commands need a lease), fed by ``submit`` commands."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.events: asyncio.Queue[Any] = asyncio.Queue()

    async def __aenter__(self) -> Served:
        self.task = asyncio.create_task(self._pump())
        while (await self.events.get()).type != "session":
            pass
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.agent.stop_serving()
        await self.task

    async def _pump(self) -> None:
        async for event in self.agent.serve():
            await self.events.put(event)

    async def turn(self, prompt: str) -> None:
        await self.agent.control({"type": "submit", "request_id": f"r-{prompt}", "prompt": prompt})
        while not ((event := await self.events.get()).type == "end" and event.request_id == f"r-{prompt}"):
            pass


def searches(request) -> bool:
    tools = request.json.get("tools") or []
    return any(t.get("type") in ("web_search", "web_search_20250305") for t in tools)


async def configure(agent, version: int, value: str) -> dict:
    return await agent.control(
        {"type": "configure", "request_id": f"c{version}-{value}", "expected_version": version, "web_search": value}
    )


@pytest.mark.parametrize("api_kind", ["openai-responses", "anthropic-messages"])
async def test_on_off_and_auto_decide_the_next_request(make_agent, fake_server, api_kind: str) -> None:
    """P2: a model that declares search searches by default (auto); ``off`` drops the tool,
    ``on`` and ``auto`` bring it back; the snapshot shows the choice."""
    fake_server.enqueue([Text("a")], [Text("b")], [Text("c")])
    agent = await make_agent(api_kind, session={}, model_attributes={"web_search": True})
    async with Served(agent) as served:
        await served.turn("first")
        assert searches(fake_server.requests[0])
        assert (await configure(agent, 0, "off"))["version"] == 1
        assert agent.session_snapshot().contexts[0].config.web_search == "off"
        await served.turn("second")
        assert not searches(fake_server.requests[1])
        await configure(agent, 1, "auto")
        await served.turn("third")
        assert searches(fake_server.requests[2])
        assert agent.session_snapshot().contexts[0].config.web_search == "auto"


async def test_on_turns_search_on_for_an_undeclared_endpoint(make_agent, fake_server) -> None:
    """P2: an explicit ``on`` turns search on where the model does not declare it."""
    fake_server.enqueue([Text("a")], [Text("b")])
    agent = await make_agent("openai-responses", session={})
    async with Served(agent) as served:
        await served.turn("first")
        assert not searches(fake_server.requests[0])
        await configure(agent, 0, "on")
        await served.turn("second")
        assert searches(fake_server.requests[1])


@pytest.mark.parametrize(
    ("api_kind", "attributes", "message"),
    [
        ("openai-completions", None, "openai-completions"),
        ("openai-responses", {"web_search": False}, "declares web_search: false"),
    ],
)
async def test_on_where_search_is_impossible_is_input_validation(
    make_agent, api_kind: str, attributes: dict | None, message: str
) -> None:
    """P2: ``on`` where there is no search tool is refused, naming ``web_search``; the settings
    version is unchanged and ``off`` / ``auto`` still work."""
    agent = await make_agent(api_kind, session={}, **({"model_attributes": attributes} if attributes else {}))
    async with Served(agent):
        with pytest.raises(InputValidationError) as caught:
            await configure(agent, 0, "on")
        assert caught.value.field == "web_search" and message in caught.value.message
        assert agent.session_snapshot().contexts[0].config.version == 0
        assert (await configure(agent, 0, "off"))["version"] == 1


async def test_a_bad_value_names_the_field(make_agent) -> None:
    agent = await make_agent("openai-responses", session={})
    async with Served(agent):
        with pytest.raises(InputValidationError) as caught:
            await configure(agent, 0, "sometimes")
        assert caught.value.field == "web_search"
