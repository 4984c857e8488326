"""MCP servers as agentcore tools (SPEC T4, on the tool contract of SPEC T3).

``connect_mcp_server`` / ``connect_mcp_http`` (``agentcore.extensions.mcp_connection``,
re-exported here) keep a session with a stdio or streamable HTTP server alive;
``create_mcp_tools`` turns the server's tools into ``AgentTool`` objects that can be passed as
``extra_tools`` (or served lazily through a tool catalog, ``agentcore.extensions.mcp_catalog``)::

    async with await connect_mcp_server("npx", ["-y", "some-mcp-server"], server_id="files",
                                        env={"API_TOKEN": token}) as conn:
        tools = await create_mcp_tools(conn, allowed_tools=["read_file"])
        runtime = await create_agent(..., extra_tools=tools)

Why each call runs in a task of its own: ``ctx.abort`` must stop a slow call without
cancelling the caller's task (which belongs to the engine) or the connection task. Cancelling
the per-call task makes the SDK send ``notifications/cancelled`` to the server and leaves the
session usable for the next call.

Failure behaviour: a server that exits (crash, kill, ``os._exit``) is noticed when its stdout
closes (stdio) or when a request's response stream breaks (HTTP). Calls in flight and every
later call then fail with a ``ToolError`` naming the server (and quoting the tail of its stderr
for stdio); the model sees it as an error tool result, the runtime and other tools keep
working, and the host may reconnect with a new ``connect_mcp_server`` / ``connect_mcp_http``.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

from mcp import types as mcp_types

from agentcore.errors import InputValidationError
from agentcore.extensions.mcp_connection import (
    MCP_CONNECTION_FAILED,
    McpConnection,
    McpConnectionError,
    connect_mcp_http,
    connect_mcp_server,
)
from agentcore.messages import ImageContent, TextContent, UserContent
from agentcore.tools.base import (
    DEFAULT_CALL_TIMEOUT_S,
    AgentTool,
    Replay,
    ToolContext,
    ToolResult,
    check_call_timeout,
)

__all__ = [
    "MCP_CONNECTION_FAILED",
    "McpConnection",
    "McpConnectionError",
    "connect_mcp_http",
    "connect_mcp_server",
    "create_mcp_tools",
    "mcp_agent_tool",
    "mcp_tool_name",
]

_NAME_RE: Final = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_NAME: Final = 64  # what the provider APIs accept for a function name
_CANCEL_SETTLE_SECONDS: Final = 2.0  # bound on waiting for a cancelled call to unwind


def mcp_tool_name(tool_name: str, prefix: str | None) -> str:
    """The agentcore name of an MCP tool: ``<prefix>_<tool>`` reduced to ``[a-zA-Z0-9_-]``,
    at most 64 characters.

    Names that had to be shortened end with a hash of the full name, so two long names that
    share a beginning stay distinct and the same tool always gets the same name — durable
    replay and tool catalogs (SPEC D2, X3) find a tool again by its name.
    """
    full = f"{prefix}_{tool_name}" if prefix else tool_name
    name = _NAME_RE.sub("_", full)
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(full.encode()).hexdigest()[:8]
        name = f"{name[: _MAX_NAME - 9]}_{digest}"
    return name


async def create_mcp_tools(
    connection: McpConnection,
    *,
    allowed_tools: Sequence[str] | None = None,
    prefix: str | None = None,
    call_timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S,
) -> list[AgentTool]:
    """Turn the server's tools into ``AgentTool`` objects for ``extra_tools`` (SPEC T3/T4).

    - name: ``<prefix>_<tool>`` via ``mcp_tool_name``; ``prefix`` defaults to the connection's
      ``server_id`` and ``prefix=""`` keeps the server's bare names.
    - ``parameters`` is the tool's ``input_schema``, ``output_schema`` its output schema.
    - ``replay="safe"`` only when the server annotates the tool ``readOnlyHint`` or
      ``idempotentHint``; otherwise ``"never"`` (an unknown outcome is not repeated).
      ``read_only=True`` (may run concurrently) only for ``readOnlyHint``: an idempotent
      write is safe to repeat but not to reorder. Annotations are the server's own claims;
      only connect servers you trust.
    - ``allowed_tools`` keeps only the listed tools (server names or the final names); a name
      the server does not offer raises ``InputValidationError`` with ``field="allowed_tools"``.
    - ``call_timeout_s`` bounds each call (``AgentTool.timeout_s``; default 600 s, None = no
      limit): a server that never answers (a hung one, or one that cannot encode its own result
      and so never sends it) gets the call stopped — the SDK tells the server it was cancelled
      — and the model a retryable error, instead of a turn that waits until someone cancels it.
    """
    timeout = check_call_timeout(call_timeout_s, "call_timeout_s")
    if allowed_tools is not None and (
        isinstance(allowed_tools, str) or not all(isinstance(n, str) for n in allowed_tools)
    ):
        raise InputValidationError("allowed_tools must be a list of tool names", field="allowed_tools")
    if prefix is None:
        prefix = connection.server_id
    listed = await connection.list_tools()

    named: list[tuple[str, mcp_types.Tool]] = []
    seen: set[str] = set()
    for tool in listed:
        name = mcp_tool_name(tool.name, prefix)
        if name in seen:
            # Two server names collapsed to one after sanitizing: disambiguate by hash.
            digest = hashlib.sha256(tool.name.encode()).hexdigest()[:8]
            name = f"{name[: _MAX_NAME - 9]}_{digest}"
        seen.add(name)
        named.append((name, tool))

    if allowed_tools is not None:
        wanted = set(allowed_tools)
        known = {tool.name for _, tool in named} | {name for name, _ in named}
        unknown = sorted(wanted - known)
        if unknown:
            raise InputValidationError(
                f"allowed_tools names tools that MCP server '{connection.server_id}' does not offer: "
                f"{', '.join(unknown)} (it offers: {', '.join(sorted(t.name for t in listed)) or 'nothing'})",
                field="allowed_tools",
            )
        named = [(name, tool) for name, tool in named if tool.name in wanted or name in wanted]

    return [mcp_agent_tool(connection, name, tool, timeout_s=timeout) for name, tool in named]


def mcp_agent_tool(
    connection: McpConnection, name: str, tool: mcp_types.Tool, *, timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S
) -> AgentTool:
    """One listed MCP tool as an ``AgentTool`` named ``name`` (see ``create_mcp_tools``)."""
    hints = tool.annotations
    read_only = bool(hints and hints.read_only_hint)
    replay: Replay = "safe" if read_only or bool(hints and hints.idempotent_hint) else "never"
    description = tool.description or tool.title or f"Tool '{tool.name}' of MCP server '{connection.server_id}'."
    mcp_name = tool.name

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        result = await _call_with_abort(connection, mcp_name, arguments, ctx.abort, ctx.on_update)
        if result is None:
            return ToolResult.text(f"The call to MCP tool '{mcp_name}' was cancelled.", is_error=True)
        return _to_tool_result(result, accepts_images=ctx.accepts_images)

    return AgentTool(
        name=name,
        description=description,
        parameters=copy.deepcopy(tool.input_schema),
        execute=execute,
        output_schema=copy.deepcopy(tool.output_schema) if tool.output_schema is not None else None,
        replay=replay,
        read_only=read_only,
        timeout_s=timeout_s,
        metadata={
            "mcp_server_id": connection.server_id,
            "mcp_tool": mcp_name,
            "mcp_annotations": hints.model_dump(exclude_none=True) if hints else {},
        },
    )


async def _call_with_abort(
    connection: McpConnection,
    name: str,
    arguments: dict[str, Any],
    abort: asyncio.Event,
    on_progress: Callable[[str], None] | None = None,
) -> mcp_types.CallToolResult | None:
    """Run the call in its own task and race it with ``abort``; None means aborted.

    The SDK's reaction to cancelling the call task is to send ``notifications/cancelled``
    and drop the late response, so the session stays usable. Our caller's own cancellation
    is passed on to the call task the same way and then re-raised.
    """
    if abort.is_set():
        return None
    connection._live_session()  # fail fast (ToolError) on a dead connection
    call = asyncio.create_task(
        connection.call_tool(name, arguments, on_progress=on_progress),
        name=f"mcp-call:{connection.server_id}:{name}",
    )
    aborted = asyncio.create_task(abort.wait())
    try:
        await asyncio.wait({call, aborted}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        aborted.cancel()
        if not call.done():
            call.cancel()
            # Bounded: the courtesy cancel is a short shielded write in the SDK.
            await asyncio.wait({call}, timeout=_CANCEL_SETTLE_SECONDS)
            # Should it still be unwinding, nobody will read its outcome; say so to asyncio.
            call.add_done_callback(_discard_outcome)
    if not call.done() or call.cancelled():
        return None
    return call.result()


def _discard_outcome(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _to_tool_result(result: mcp_types.CallToolResult, *, accepts_images: bool) -> ToolResult:
    content: list[UserContent] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            content.append(TextContent(block.text))
        elif isinstance(block, mcp_types.ImageContent):
            if accepts_images:
                content.append(ImageContent(block.data, block.mime_type))
            else:
                content.append(TextContent(f"[image ({block.mime_type}) omitted: this model does not accept images]"))
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                content.append(TextContent(f"[resource {resource.uri}]\n{resource.text}"))
            else:
                size = len(resource.blob) * 3 // 4
                mime = resource.mime_type or "application/octet-stream"
                content.append(TextContent(f"[binary resource {resource.uri} ({mime}, ~{size} bytes) not shown]"))
        elif isinstance(block, mcp_types.ResourceLink):
            detail = f": {block.description}" if block.description else ""
            content.append(TextContent(f"[resource link {block.name} → {block.uri}]{detail}"))
        elif isinstance(block, mcp_types.AudioContent):
            content.append(TextContent(f"[audio ({block.mime_type}) not shown]"))
        else:  # pragma: no cover - future content types
            content.append(TextContent(f"[unsupported MCP content type {getattr(block, 'type', '?')!r}]"))
    if not content and result.structured_content is not None:
        # Servers may answer with structured content only; the model still needs to read it.
        content.append(TextContent(json.dumps(result.structured_content, ensure_ascii=False)))
    return ToolResult(content, is_error=result.is_error, structured_content=result.structured_content)
