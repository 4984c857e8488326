"""MCP servers as tool catalogs (SPEC X3 on T4): ``create_mcp_tool_catalog``.

::

    catalog = create_mcp_tool_catalog(
        definition={"id": "files", "command": "my-mcp-server", "args": ["--root", "/srv"],
                    "env": {"API_TOKEN": token}},
        allowed_tools=["read_file", "search"],          # raw MCP names
    )
    runtime = await create_agent(..., session={"tool_search": {"catalogs": [catalog]}})

The model then finds ``files_read_file`` / ``files_search`` (``<server_id>_<tool>``) through
``tool_search``. Building the catalog only validates the definition: no process is started
and nothing is connected until the session needs it (see ``agentcore.extensions.catalogs``).

Credentials follow the MCP environment rules of ``connect_mcp_server``: a stdio server gets a
few safe variables plus exactly ``env``; an HTTP server gets ``headers``. Neither ``env`` nor
``headers`` ever appears in records, reprs or error texts (their values are masked).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentcore.errors import InputValidationError
from agentcore.extensions.catalogs.catalog import (
    AgentToolCatalog,
    ApproveHook,
    CatalogConnection,
    CatalogToolDescriptor,
)
from agentcore.extensions.mcp import (
    McpConnection,
    connect_mcp_http,
    connect_mcp_server,
    mcp_agent_tool,
    mcp_tool_name,
)
from agentcore.tools.base import DEFAULT_CALL_TIMEOUT_S, AgentTool

__all__ = [
    "McpServerDefinition",
    "connect_mcp_definition",
    "create_mcp_tool_catalog",
    "mcp_tool_descriptors",
]

_MASK: Final = "***"
_MIN_SECRET: Final = 4  # shorter values would mask ordinary words and digits


class McpServerDefinition(BaseModel):
    """Where an MCP server is: ``command`` (+ ``args``, ``env``, ``cwd``) for stdio, or ``url``
    (+ ``headers``) for streamable HTTP — exactly one of the two. ``id`` (1–32 of
    ``[A-Za-z0-9_-]``) prefixes its tool ids. Strict: unknown keys and wrong types are
    ``input_validation`` naming ``definition.<field>``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")
    command: str | None = Field(default=None, min_length=1, max_length=4096)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    cwd: str | None = Field(default=None, min_length=1)
    url: str | None = Field(default=None, min_length=1, max_length=8192, repr=False)
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    connect_timeout: float = Field(default=30.0, gt=0, le=600)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerDefinition:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url (a streamable HTTP server)")
        if self.url is not None:
            if self.args or self.env or self.cwd is not None:
                raise ValueError("args, env and cwd belong to a stdio server (command), not to url")
            if urllib.parse.urlsplit(self.url).scheme not in ("http", "https"):
                raise ValueError("url must be an http:// or https:// URL")
        elif self.headers:
            raise ValueError("headers belong to an HTTP server (url), not to command")
        for text in (*self.env.values(), *self.headers.values(), *self.args):
            if "\x00" in text:
                raise ValueError("args, env and headers must not contain NUL characters")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @property
    def target(self) -> str:
        """What records and messages may name: the command, or the URL without credentials."""
        if self.command is not None:
            return self.command
        assert self.url is not None
        parts = urllib.parse.urlsplit(self.url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def secrets(self) -> list[str]:
        values = [*self.env.values(), *self.headers.values()]
        if self.url is not None:
            parts = urllib.parse.urlsplit(self.url)
            values += [parts.password or "", parts.query]
            values += [v for _, v in urllib.parse.parse_qsl(parts.query)]
        return sorted({v for v in values if len(v) >= _MIN_SECRET}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        """``text`` with every credential value of this definition masked."""
        for secret in self.secrets():
            text = text.replace(secret, _MASK)
        return text


Connect = Callable[[McpServerDefinition], Awaitable[McpConnection]]


async def connect_mcp_definition(definition: McpServerDefinition) -> McpConnection:
    """Connect to ``definition`` with ``connect_mcp_server`` (stdio) or ``connect_mcp_http``."""
    if definition.command is not None:
        return await connect_mcp_server(
            definition.command,
            list(definition.args),
            dict(definition.env) or None,
            definition.cwd,
            server_id=definition.id,
            connect_timeout=definition.connect_timeout,
        )
    assert definition.url is not None
    return await connect_mcp_http(
        definition.url,
        dict(definition.headers) or None,
        server_id=definition.id,
        connect_timeout=definition.connect_timeout,
    )


class McpCatalogConnection:
    """A ``CatalogConnection`` over one MCP session: each ``list_tools()`` lists the server's
    tools again (so a server that changes its tools while connected is caught by the next
    call's check) and keeps only the allowed ones, under their final ids."""

    def __init__(self, connection: McpConnection, ids: Mapping[str, str]) -> None:
        self.connection = connection
        self._ids = dict(ids)  # raw MCP name → final id

    @property
    def closed(self) -> bool:
        return self.connection.closed

    async def list_tools(self) -> Sequence[AgentTool]:
        listed = await self.connection.list_tools()
        return [
            mcp_agent_tool(self.connection, self._ids[tool.name], tool) for tool in listed if tool.name in self._ids
        ]

    async def aclose(self) -> None:
        await self.connection.aclose()


def create_mcp_tool_catalog(
    *,
    definition: McpServerDefinition | Mapping[str, Any],
    allowed_tools: Sequence[str],
    descriptors: Sequence[CatalogToolDescriptor | Mapping[str, Any]] | None = None,
    connect: Connect | None = None,
    approve: ApproveHook | None = None,
    call_timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S,
) -> AgentToolCatalog:
    """An ``AgentToolCatalog`` for one MCP server (SPEC X3). Validates, starts nothing.

    - ``allowed_tools``: the server's raw tool names the session may use; their ids are
      ``<id>_<tool>`` (``mcp_tool_name``), e.g. ``files_read_file``.
    - ``descriptors``: declared descriptors (named by final id) for exactly those tools, e.g.
      from ``mcp_tool_descriptors`` on an earlier connection. With them, search never starts
      the server; without them, the first search connects once and saves the definitions.
    - ``connect(definition) -> McpConnection`` replaces how the server is reached (e.g. on a
      remote execution target); default ``connect_mcp_definition``.
    - ``approve(payload)`` is asked before each call (payload: ``catalog_id``, ``server_id``,
      ``tool``, ``mcp_tool``, ``arguments``, ``tool_call_id``); raising or returning False denies.
    - ``call_timeout_s``: the time limit of each call (``AgentToolCatalog.call_timeout_s``;
      default 600 s, None = no limit).
    """
    if isinstance(definition, McpServerDefinition):
        server = definition
    elif isinstance(definition, Mapping):
        try:
            server = McpServerDefinition.model_validate(dict(definition))
        except ValidationError as exc:
            error = exc.errors()[0]
            loc = ".".join(str(part) for part in error["loc"])
            where = f"definition.{loc}" if loc else "definition"
            message = str(error["msg"]).removeprefix("Value error, ")
            raise InputValidationError(f"{where}: {message}", field=where) from None
    else:
        raise InputValidationError("definition must be a dict (or McpServerDefinition)", field="definition")
    ids = _ids(server.id, allowed_tools)
    tools = _descriptors(descriptors, ids) if descriptors is not None else None
    if connect is not None and not callable(connect):
        raise InputValidationError("connect must be an async function (definition) -> McpConnection", field="connect")
    if approve is not None and not callable(approve):
        raise InputValidationError("approve must be a function", field="approve")
    opener = connect or connect_mcp_definition

    async def open_catalog() -> CatalogConnection:
        connection = await opener(server)
        if not isinstance(connection, McpConnection):
            raise TypeError(f"connect() returned {type(connection).__name__}, not an McpConnection")
        return McpCatalogConnection(connection, ids)

    hook = _with_server(approve, server.id, {final: raw for raw, final in ids.items()}) if approve else None
    return AgentToolCatalog(
        id=server.id,
        open=open_catalog,
        tools=tools,
        allowed_tools=list(ids.values()),
        approve=hook,
        kind="mcp",
        info={"transport": server.transport, "target": server.redact(server.target)},
        redact=server.redact,
        call_timeout_s=call_timeout_s,
    )


def _ids(server_id: str, allowed_tools: Any) -> dict[str, str]:
    if isinstance(allowed_tools, str | bytes) or not isinstance(allowed_tools, Sequence) or not allowed_tools:
        raise InputValidationError("allowed_tools must be a non-empty list of MCP tool names", field="allowed_tools")
    ids: dict[str, str] = {}
    for n, raw in enumerate(allowed_tools):
        if not isinstance(raw, str) or not raw or len(raw) > 256 or not raw.isprintable():
            raise InputValidationError(
                f"allowed_tools entries must be MCP tool names (1-256 printable characters), got {raw!r}",
                field=f"allowed_tools.{n}",
            )
        final = mcp_tool_name(raw, server_id)
        clash = next((other for other, taken in ids.items() if taken == final), None)
        if clash is not None:
            raise InputValidationError(
                f"allowed_tools: {clash!r} and {raw!r} both become the tool id {final!r}", field=f"allowed_tools.{n}"
            )
        ids[raw] = final
    return ids


def _descriptors(descriptors: Any, ids: Mapping[str, str]) -> list[CatalogToolDescriptor]:
    if isinstance(descriptors, str | bytes | Mapping) or not isinstance(descriptors, Sequence):
        raise InputValidationError("descriptors must be a list of CatalogToolDescriptor", field="descriptors")
    finals = set(ids.values())
    named: set[str] = set()
    for n, item in enumerate(descriptors):
        name = item.name if isinstance(item, CatalogToolDescriptor) else (item or {}).get("name")
        if name not in finals:
            raise InputValidationError(
                f"descriptors.{n}.name must be the id of an allowed tool ({', '.join(sorted(finals))}), got {name!r}",
                field=f"descriptors.{n}.name",
            )
        named.add(str(name))
    if named != finals:
        raise InputValidationError(
            f"descriptors must describe every allowed tool; missing: {', '.join(sorted(finals - named))}",
            field="descriptors",
        )
    return [
        item if isinstance(item, CatalogToolDescriptor) else _descriptor_of(item, f"descriptors.{n}")
        for n, item in enumerate(descriptors)
    ]


def _descriptor_of(item: Mapping[str, Any], where: str) -> CatalogToolDescriptor:
    try:
        return CatalogToolDescriptor(**item)
    except InputValidationError as exc:
        raise InputValidationError(exc.message, field=f"{where}.{exc.field}") from None
    except TypeError as exc:
        raise InputValidationError(f"descriptor is incomplete or has unknown fields: {exc}", field=where) from None


def _with_server(approve: ApproveHook, server_id: str, raw_names: Mapping[str, str]) -> ApproveHook:
    def hook(payload: dict[str, Any]) -> Any:
        return approve({**payload, "server_id": server_id, "mcp_tool": raw_names.get(payload["tool"], payload["tool"])})

    return hook


async def mcp_tool_descriptors(connection: McpConnection, allowed_tools: Sequence[str]) -> list[CatalogToolDescriptor]:
    """Descriptors of a live server's allowed tools, to declare them next time (so a session's
    search never has to start the server). Raises ``InputValidationError`` (``allowed_tools``)
    for a name the server does not offer."""
    ids = _ids(connection.server_id, allowed_tools)
    live = await McpCatalogConnection(connection, ids).list_tools()
    found = {tool.name for tool in live}
    missing = [raw for raw, final in ids.items() if final not in found]
    if missing:
        raise InputValidationError(
            f"allowed_tools names tools MCP server '{connection.server_id}' does not offer: {', '.join(missing)}",
            field="allowed_tools",
        )
    return [CatalogToolDescriptor.of(tool) for tool in live]
