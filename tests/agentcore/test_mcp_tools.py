"""MCP servers as extra tools (SPEC T4, on the tool contract of SPEC T3).

Every test talks to a real stdio MCP server (``tests/fixtures/mcp_server.py``, built with the
official SDK's ``MCPServer``) through ``connect_mcp_server``/``create_mcp_tools``. One server
is shared by the tests that leave it healthy (module-scoped loop and fixture) because a spawn
plus initialize costs about a second; tests that crash, close or reconfigure a server start
their own.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agentcore.errors import InputValidationError, ToolError
from agentcore.extensions.mcp import (
    MCP_CONNECTION_FAILED,
    McpConnection,
    McpConnectionError,
    connect_mcp_server,
    create_mcp_tools,
    mcp_tool_name,
)
from agentcore.messages import ImageContent, TextContent
from agentcore.tools.base import AgentTool, ToolContext

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp_server.py")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def make_ctx(abort: asyncio.Event | None = None, *, accepts_images: bool = True) -> ToolContext:
    # MCP tools never touch paths, so no PathGuard is needed.
    return ToolContext(
        workdir=Path.cwd(),
        guard=None,  # type: ignore[arg-type]
        abort=abort or asyncio.Event(),
        tool_call_id="call_1",
        accepts_images=accepts_images,
    )


async def connect(server_id: str = "fx", **kwargs: Any) -> McpConnection:
    return await connect_mcp_server(sys.executable, [SERVER], server_id=server_id, **kwargs)


def pid_is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def conn() -> AsyncIterator[McpConnection]:
    connection = await connect()
    yield connection
    await connection.aclose()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def tools(conn: McpConnection) -> dict[str, AgentTool]:
    return {tool.name: tool for tool in await create_mcp_tools(conn)}


# -- discovery, naming, schemas ----------------------------------------------------------


async def test_discovery_names_tools_server_id_underscore_tool(tools: dict[str, AgentTool]) -> None:
    """T4: every server tool becomes an AgentTool named <server_id>_<tool>, sanitized."""
    assert set(tools) == {
        "fx_add",
        "fx_echo",
        "fx_fail",
        "fx_crash",
        "fx_slow",
        "fx_slow_status",
        "fx_image",
        "fx_progress",
        "fx_resource",
        "fx_pid",
        "fx_env",
        "fx_dotted_name",  # "dotted.name" reduced to [a-zA-Z0-9_-]
        "fx_big",
        "fx_hang",
        "fx_hang_status",
        "fx_unencodable",
    }
    assert tools["fx_dotted_name"].metadata == {"mcp_server_id": "fx", "mcp_tool": "dotted.name", "mcp_annotations": {}}
    assert tools["fx_add"].description == "Add two integers."
    assert not any(tool.builtin for tool in tools.values())


async def test_schemas_are_passed_through(conn: McpConnection, tools: dict[str, AgentTool]) -> None:
    """T3/T4: parameters = the MCP input_schema, output_schema = the MCP output schema."""
    listed = {tool.name: tool for tool in await conn.list_tools()}
    add = tools["fx_add"]
    assert add.parameters == listed["add"].input_schema
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert add.parameters["required"] == ["a", "b"]
    assert add.output_schema == listed["add"].output_schema
    assert add.output_schema is not None and add.output_schema["properties"]["sum"]["type"] == "integer"
    assert tools["fx_fail"].output_schema is None
    # Copies, not shared references: a caller mutating one cannot corrupt the other.
    add.parameters["x-mutated"] = True
    assert "x-mutated" not in listed["add"].input_schema


async def test_replay_and_read_only_follow_annotations(tools: dict[str, AgentTool]) -> None:
    """T3/D2: readOnlyHint → safe + read_only; idempotentHint → safe only; no hint → never."""
    assert (tools["fx_add"].replay, tools["fx_add"].read_only) == ("safe", True)
    assert (tools["fx_echo"].replay, tools["fx_echo"].read_only) == ("safe", False)
    assert (tools["fx_fail"].replay, tools["fx_fail"].read_only) == ("never", False)
    assert (tools["fx_crash"].replay, tools["fx_crash"].read_only) == ("never", False)
    assert tools["fx_add"].metadata["mcp_annotations"] == {"read_only_hint": True}


async def test_mcp_tool_name_sanitizes_and_bounds_length() -> None:
    """T4: names fit [a-zA-Z0-9_-]{1,64}; shortened names stay distinct and stable."""
    assert mcp_tool_name("read file.v2", "gh") == "gh_read_file_v2"
    assert mcp_tool_name("add", "") == "add"
    long_a = mcp_tool_name("x" * 80 + "a", "srv")
    long_b = mcp_tool_name("x" * 80 + "b", "srv")
    assert len(long_a) == len(long_b) == 64
    assert long_a != long_b
    assert long_a == mcp_tool_name("x" * 80 + "a", "srv")


async def test_prefix_overrides_server_id(conn: McpConnection) -> None:
    """T4: prefix="" keeps the server's names; another prefix replaces the server_id."""
    bare = {tool.name for tool in await create_mcp_tools(conn, prefix="")}
    assert {"add", "echo", "dotted_name"} <= bare
    custom = {tool.name for tool in await create_mcp_tools(conn, prefix="calc")}
    assert "calc_add" in custom


async def test_allowed_tools_filters_and_validates(conn: McpConnection) -> None:
    """T4/X3: allowed_tools narrows (server or final names); unknown names are an error."""
    picked = await create_mcp_tools(conn, allowed_tools=["add", "fx_echo"])
    assert [tool.name for tool in picked] == ["fx_add", "fx_echo"]
    assert await create_mcp_tools(conn, allowed_tools=[]) == []

    with pytest.raises(InputValidationError) as info:
        await create_mcp_tools(conn, allowed_tools=["add", "nope"])
    assert info.value.field == "allowed_tools"
    assert "nope" in info.value.message and "add" in info.value.message  # lists what exists

    with pytest.raises(InputValidationError) as info:
        await create_mcp_tools(conn, allowed_tools="add")
    assert info.value.field == "allowed_tools"


# -- calls and result mapping --------------------------------------------------------------


async def test_call_result_with_structured_content(tools: dict[str, AgentTool]) -> None:
    """T3/T4: text content maps to TextContent, structured_content is passed through."""
    result = await tools["fx_add"].execute({"a": 2, "b": 40}, make_ctx())
    assert not result.is_error
    assert result.structured_content == {"sum": 42}
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    assert '"sum": 42' in result.content[0].text

    echoed = await tools["fx_echo"].execute({"text": "hello"}, make_ctx())
    assert echoed.content == [TextContent("hello")]


async def test_mcp_error_result_maps_to_is_error(tools: dict[str, AgentTool]) -> None:
    """T3/T4: a tool's own failure (is_error result) reaches the model as an is_error result."""
    result = await tools["fx_fail"].execute({}, make_ctx())
    assert result.is_error
    assert result.content == [TextContent("the widget is broken")]


async def test_server_side_argument_errors_are_error_results(conn: McpConnection) -> None:
    """T4: bad arguments / unknown tools come back as is_error results, the session lives on."""
    bad = await conn.call_tool("add", {"a": "x"})
    assert bad.is_error
    unknown = await conn.call_tool("no_such_tool", {})
    assert unknown.is_error
    assert (await conn.call_tool("echo", {"text": "still fine"})).structured_content == {"result": "still fine"}


async def test_image_content(tools: dict[str, AgentTool]) -> None:
    """T4: image content maps to ImageContent; a text-only model gets a placeholder instead."""
    result = await tools["fx_image"].execute({}, make_ctx())
    assert len(result.content) == 1
    image = result.content[0]
    assert isinstance(image, ImageContent)
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.data).startswith(PNG_SIGNATURE)

    text_only = await tools["fx_image"].execute({}, make_ctx(accepts_images=False))
    assert len(text_only.content) == 1 and isinstance(text_only.content[0], TextContent)
    assert "image/png" in text_only.content[0].text


async def test_embedded_resources_become_text(tools: dict[str, AgentTool]) -> None:
    """T4: embedded resources map to text (text resources inline, blobs described)."""
    result = await tools["fx_resource"].execute({}, make_ctx())
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    assert len(texts) == 2
    assert "file:///notes.txt" in texts[0] and "hello notes" in texts[0]
    assert "file:///data.bin" in texts[1] and "application/octet-stream" in texts[1]


async def test_progress_notifications_reach_on_update(tools: dict[str, AgentTool]) -> None:
    """T4: server progress notifications become ctx.on_update text (tool update events)."""
    updates: list[str] = []
    ctx = make_ctx()
    ctx.on_update = updates.append
    result = await tools["fx_progress"].execute({}, ctx)
    assert result.content == [TextContent("done")]
    assert updates == ["1/2 halfway", "2/2"]


# -- cancellation ------------------------------------------------------------------------------


async def test_abort_stops_a_running_call_and_keeps_the_connection(
    conn: McpConnection, tools: dict[str, AgentTool]
) -> None:
    """T4: ctx.abort during a call returns promptly; the server is told; the session survives."""
    before = (await conn.call_tool("slow_status", {})).structured_content
    abort = asyncio.Event()
    running = asyncio.ensure_future(tools["fx_slow"].execute({"seconds": 60}, make_ctx(abort)))
    # Synchronise through the server itself: this returns once the slow call is executing.
    started = (await conn.call_tool("slow_status", {"wait_started": True})).structured_content
    assert started["started"] == before["started"] + 1

    aborted_at = time.monotonic()
    abort.set()
    result = await asyncio.wait_for(running, 5)
    assert time.monotonic() - aborted_at < 2
    assert result.is_error
    assert isinstance(result.content[0], TextContent) and "cancelled" in result.content[0].text

    after = (await conn.call_tool("slow_status", {})).structured_content
    assert after["cancelled"] == before["cancelled"] + 1  # notifications/cancelled reached the server
    assert not conn.closed
    assert (await tools["fx_echo"].execute({"text": "next"}, make_ctx())).content == [TextContent("next")]


async def test_abort_already_set_does_not_call(tools: dict[str, AgentTool], conn: McpConnection) -> None:
    """T4: a call whose run is already aborted never reaches the server."""
    before = (await conn.call_tool("slow_status", {})).structured_content
    abort = asyncio.Event()
    abort.set()
    result = await tools["fx_slow"].execute({"seconds": 60}, make_ctx(abort))
    assert result.is_error
    assert (await conn.call_tool("slow_status", {})).structured_content == before


async def test_cancelling_the_callers_task_propagates_and_keeps_the_connection(
    conn: McpConnection, tools: dict[str, AgentTool]
) -> None:
    """T4: when the engine cancels the tool's task, CancelledError propagates; the session survives."""
    running = asyncio.ensure_future(tools["fx_slow"].execute({"seconds": 60}, make_ctx()))
    await conn.call_tool("slow_status", {"wait_started": True})
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert not conn.closed
    assert (await conn.call_tool("echo", {"text": "ok"})).structured_content == {"result": "ok"}


# -- process lifecycle -------------------------------------------------------------------------


async def test_crash_mid_call_is_a_clear_error_and_the_runtime_keeps_working(
    conn: McpConnection, tools: dict[str, AgentTool]
) -> None:
    """T4: a server dying mid-call → ToolError naming it; the dead connection fails fast
    afterwards; other servers' tools keep working; a new connection works."""
    crashy = await connect("crashy")
    crashy_tools = {tool.name: tool for tool in await create_mcp_tools(crashy)}
    pid = (await crashy.call_tool("pid", {})).structured_content["result"]

    with pytest.raises(ToolError) as info:
        await crashy_tools["crashy_crash"].execute({}, make_ctx())
    message = str(info.value)
    assert "MCP server 'crashy' exited during the call to 'crash'" in message
    assert "crashing on purpose" in message  # the server's last stderr words
    assert crashy.closed
    assert crashy.error is not None and "crashy" in crashy.error

    started = time.monotonic()
    with pytest.raises(ToolError, match="MCP server 'crashy' exited"):
        await crashy_tools["crashy_echo"].execute({"text": "hi"}, make_ctx())
    assert time.monotonic() - started < 0.5  # fails fast, no timeout involved

    # Other tools (another server) are unaffected.
    assert (await tools["fx_echo"].execute({"text": "alive"}, make_ctx())).content == [TextContent("alive")]

    await crashy.aclose()  # idempotent on a dead connection; waits for the owner task to reap
    assert pid_is_gone(pid)

    async with await connect("crashy") as again:
        again_tools = {tool.name: tool for tool in await create_mcp_tools(again, allowed_tools=["echo"])}
        result = await again_tools["crashy_echo"].execute({"text": "back"}, make_ctx())
        assert result.content == [TextContent("back")]


async def test_aclose_stops_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """T4: aclose() ends the session and the server process; later calls fail clearly.
    The child sees only the env passed explicitly (plus the SDK's safe basics like PATH)."""
    monkeypatch.setenv("AGENTCORE_TEST_PARENT_SECRET", "must-not-leak")
    # Connected in one task, closed in another: the SDK's cancel scopes live in the
    # connection's own task, so this must not trip anyio's "cancel scope in another task".
    connection = await asyncio.create_task(connect("closer", env={"AGENTCORE_TEST_PASSED": "yes"}))
    async with connection:
        tools = {tool.name: tool for tool in await create_mcp_tools(connection)}
        pid = (await connection.call_tool("pid", {})).structured_content["result"]
        assert not pid_is_gone(pid)
        env = tools["closer_env"]
        assert (await env.execute({"name": "AGENTCORE_TEST_PASSED"}, make_ctx())).content == [TextContent("yes")]
        leaked = await env.execute({"name": "AGENTCORE_TEST_PARENT_SECRET"}, make_ctx())
        assert leaked.content == [TextContent("<unset>")]
        assert (await env.execute({"name": "PATH"}, make_ctx())).content != [TextContent("<unset>")]

    assert connection.closed and connection.error is None
    assert pid_is_gone(pid)
    await connection.aclose()  # idempotent
    with pytest.raises(ToolError, match="closed"):
        await tools["closer_echo"].execute({"text": "x"}, make_ctx())
    with pytest.raises(ToolError, match="closed"):
        await connection.list_tools()


async def test_connect_failures_are_clear(tmp_path: Path) -> None:
    """T4/X3: a missing command is not retryable; a server that dies or never answers during
    start-up is retryable and quotes its stderr; nothing is left running."""
    with pytest.raises(McpConnectionError) as info:
        await connect_mcp_server(str(tmp_path / "no-such-server"), server_id="ghost")
    assert info.value.code == MCP_CONNECTION_FAILED
    assert info.value.retryable is False and "ghost" in info.value.message

    script = "import sys; sys.stderr.write('bad config: missing TOKEN\\n'); sys.exit(2)"
    with pytest.raises(McpConnectionError) as info:
        await connect_mcp_server(sys.executable, ["-c", script], server_id="broken")
    assert info.value.retryable is True
    assert "'broken'" in info.value.message and "bad config: missing TOKEN" in info.value.message

    silent = "import sys; sys.stdin.read()"  # reads requests, never answers, exits at EOF
    with pytest.raises(McpConnectionError) as info:
        await connect_mcp_server(sys.executable, ["-c", silent], server_id="mute", connect_timeout=0.3)
    assert info.value.retryable is True and "within 0.3 s" in info.value.message


async def test_argument_validation() -> None:
    """T4: bad options are input_validation errors naming the field, before any spawn."""
    cases: list[tuple[dict[str, Any], str]] = [
        ({"command": ""}, "command"),
        ({"command": "x", "server_id": "has space"}, "server_id"),
        ({"command": "x", "args": "--flag"}, "args"),
        ({"command": "x", "connect_timeout": 0}, "connect_timeout"),
        ({"command": "x", "env": {"A": 1}}, "env"),
    ]
    for kwargs, field in cases:
        with pytest.raises(InputValidationError) as info:
            await connect_mcp_server(**kwargs)
        assert info.value.field == field
