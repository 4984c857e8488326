"""A per-call time limit for MCP and catalog tools (SPEC T3, T4, X3; issue 22).

An MCP server that never answers (one that cannot encode its own result, one that hangs) held
its call — and the turn — until someone pressed Stop. A tool's ``timeout_s`` is enforced where
every call runs (``executor.execute_call``): the call is stopped and gets an error result the
model can read, saying it may be retried. MCP tool sets (``create_mcp_tools(call_timeout_s=)``)
and catalogs (``AgentToolCatalog(call_timeout_s=)``, ``create_mcp_tool_catalog(call_timeout_s=)``)
default to a generous ``DEFAULT_CALL_TIMEOUT_S``; the tests set half a second so they never
wait for the default, and use real stdio MCP servers from ``tests/fixtures``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentTool, ToolContext, ToolResult
from agentcore.errors import InputValidationError
from agentcore.extensions.catalogs import AgentToolCatalog, CatalogToolDescriptor, StaticCatalogConnection
from agentcore.extensions.mcp import connect_mcp_server, create_mcp_tools
from agentcore.extensions.mcp_catalog import create_mcp_tool_catalog
from agentcore.testing.steps import Text, ToolCall
from agentcore.tools.base import DEFAULT_CALL_TIMEOUT_S
from tests.agentcore.session_helpers import run_with
from tests.helpers import collect, final

COMPLETIONS = "openai-completions"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MCP_SERVER = str(FIXTURES / "mcp_server.py")
CATALOG_SERVER = str(FIXTURES / "mcp_catalog_server.py")
SHORT = 0.5


def tool_ends(events: list[Any], name: str) -> list[Any]:
    return [e for e in events if e.type == "tool" and e.phase == "end" and e.name == name]


def assert_timed_out(result: str, name: str) -> None:
    assert f"did not finish within {SHORT:g} s" in result and name in result, result
    assert "call the tool again to retry" in result, result


async def test_a_hung_mcp_call_ends_with_a_retryable_error_and_the_server_stays_usable(make_agent, fake_server) -> None:
    """T4: ``hang`` never answers; with ``call_timeout_s=0.5`` the call ends with an error the
    model reads, the SDK's cancel reaches the server, and the next call on the same connection
    works in the same turn."""
    async with await connect_mcp_server(sys.executable, [MCP_SERVER], server_id="fx") as conn:
        tools = await create_mcp_tools(conn, allowed_tools=["hang", "echo"], call_timeout_s=SHORT)
        fake_server.enqueue(
            [ToolCall("fx_hang", {}, id="h1")],
            [ToolCall("fx_echo", {"text": "still here"}, id="e1")],
            [Text("recovered")],
        )
        agent = await make_agent(COMPLETIONS, extra_tools=tools)
        events = await collect(agent, "hang")
    (hung,) = tool_ends(events, "fx_hang")
    assert hung.is_error
    assert_timed_out(hung.result, "fx_hang")
    assert tool_ends(events, "fx_echo")[0].result == "still here"
    assert final(events).status == "completed" and final(events).text == "recovered"


async def test_a_server_that_cannot_encode_its_answer_is_timed_out(make_agent, fake_server) -> None:
    """T4/issue 22: a result holding a lone surrogate is never sent by the server; the call
    ends at its time limit instead of waiting for ever."""
    async with await connect_mcp_server(sys.executable, [MCP_SERVER], server_id="fx") as conn:
        tools = await create_mcp_tools(conn, allowed_tools=["unencodable"], call_timeout_s=SHORT)
        fake_server.enqueue([ToolCall("fx_unencodable", {}, id="u1")], [Text("moved on")])
        agent = await make_agent(COMPLETIONS, extra_tools=tools)
        events = await collect(agent, "go")
    (end,) = tool_ends(events, "fx_unencodable")
    assert end.is_error
    assert_timed_out(end.result, "fx_unencodable")
    assert final(events).text == "moved on"


async def test_mcp_tools_and_catalogs_have_a_generous_default_limit() -> None:
    """T4/X3: without an explicit limit an MCP tool and a catalog get the default (minutes)."""
    assert DEFAULT_CALL_TIMEOUT_S >= 300
    async with await connect_mcp_server(sys.executable, [MCP_SERVER], server_id="fx") as conn:
        (echo,) = await create_mcp_tools(conn, allowed_tools=["echo"])
    assert echo.timeout_s == DEFAULT_CALL_TIMEOUT_S
    catalog = create_mcp_tool_catalog(definition={"id": "fx", "command": sys.executable}, allowed_tools=["add"])
    assert catalog.call_timeout_s == DEFAULT_CALL_TIMEOUT_S


async def test_a_catalog_tool_that_never_answers_is_timed_out(make_agent, fake_server) -> None:
    """X3: a catalog service whose tool stops answering ends that call at the catalog's limit."""

    async def never(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def open_service() -> StaticCatalogConnection:
        return StaticCatalogConnection([AgentTool("svc_wait", "Wait.", {"type": "object", "properties": {}}, never)])

    catalog = AgentToolCatalog(
        id="svc",
        tools=[CatalogToolDescriptor("svc_wait", "Wait.", {"type": "object", "properties": {}})],
        open=open_service,
        call_timeout_s=SHORT,
    )
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "wait"}, id="s1")], [ToolCall("svc_wait", {}, id="c1")], [Text("ok")]
    )
    agent = await make_agent(COMPLETIONS, session={"tool_search": {"catalogs": [catalog]}})
    events = await run_with(agent, {"prompt": "wait", "request_id": "r1"})
    (end,) = tool_ends(events, "svc_wait")
    assert end.is_error
    assert_timed_out(end.result, "svc_wait")
    assert [e.status for e in events if e.type == "end"] == ["completed"]


async def test_a_hung_call_of_an_mcp_catalog_is_timed_out(make_agent, fake_server, tmp_path) -> None:
    """X3 on T4: the catalog fixture's ``hang`` waits for ever; the MCP catalog's limit ends it."""
    definition = {"id": "fx", "command": sys.executable, "args": [CATALOG_SERVER]}
    catalog = create_mcp_tool_catalog(definition=definition, allowed_tools=["hang", "add"], call_timeout_s=SHORT)
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "hang add"}, id="s1")],
        [ToolCall("fx_hang", {}, id="c1")],
        [ToolCall("fx_add", {"a": 2, "b": 3}, id="c2")],
        [Text("ok")],
    )
    agent = await make_agent(COMPLETIONS, session={"tool_search": {"catalogs": [catalog]}})
    events = await run_with(agent, {"prompt": "go", "request_id": "r1"})
    (hung,) = tool_ends(events, "fx_hang")
    assert hung.is_error
    assert_timed_out(hung.result, "fx_hang")
    (added,) = tool_ends(events, "fx_add")
    assert not added.is_error and "5" in added.result


BAD_LIMITS = [0, -1, float("nan"), float("inf"), "30", True, 86_401]


@pytest.mark.parametrize("bad", BAD_LIMITS)
def test_bad_catalog_limits_are_refused_naming_the_field(bad: Any) -> None:
    """X3: a limit that is not a positive number of seconds (at most a day) is refused."""
    with pytest.raises(InputValidationError) as caught:
        AgentToolCatalog(
            id="svc", tools=[CatalogToolDescriptor("svc_a", "A.", {"type": "object"})], open=_open, call_timeout_s=bad
        )
    assert caught.value.field == "call_timeout_s"
    with pytest.raises(InputValidationError) as caught:
        create_mcp_tool_catalog(definition={"id": "fx", "command": "x"}, allowed_tools=["a"], call_timeout_s=bad)
    assert caught.value.field == "call_timeout_s"


async def test_bad_mcp_tool_limits_are_refused_naming_the_field() -> None:
    """T4: the same limits are refused by ``create_mcp_tools``."""
    async with await connect_mcp_server(sys.executable, [MCP_SERVER], server_id="fx") as conn:
        for bad in BAD_LIMITS:
            with pytest.raises(InputValidationError) as caught:
                await create_mcp_tools(conn, allowed_tools=["echo"], call_timeout_s=bad)
            assert caught.value.field == "call_timeout_s", bad


@pytest.mark.parametrize("bad", BAD_LIMITS)
def test_a_bad_limit_on_an_extra_tool_is_refused_naming_the_field(bad: Any) -> None:
    """T3: ``AgentTool(timeout_s=...)`` is checked when the tool is made."""
    with pytest.raises(InputValidationError) as caught:
        AgentTool("x", "X.", {"type": "object"}, _never, timeout_s=bad)
    assert caught.value.field == "timeout_s"


async def _never(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:  # pragma: no cover - never called
    raise AssertionError("unreachable")


async def _open() -> StaticCatalogConnection:
    return StaticCatalogConnection([])
