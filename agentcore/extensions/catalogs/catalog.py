"""What a host hands to ``session={"tool_search": {"catalogs": [...]}}`` (SPEC X3).

A catalog is a service the session may connect to for tools, declared up front so that the
model can only ever reach what the host allowed:

- ``AgentToolCatalog(id=, tools=[descriptors] | None, allowed_tools=[ids] | None, open=)``.
  ``tools`` are ``CatalogToolDescriptor``s — name, description, schemas and replay policy, no
  ``execute`` — so searching them never needs the service. Without descriptors,
  ``allowed_tools`` (final tool ids) says which of the service's tools may be taken when the
  first search connects and saves their definitions.
- ``open()`` connects and returns a ``CatalogConnection``: ``list_tools()`` gives the live
  ``AgentTool``s (named by their final ids) and ``aclose()`` releases the connection.

Everything is validated when the catalog is built: a bad value is ``input_validation`` naming
the field (``tools.0.parameters``, ``allowed_tools``), and nothing is connected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from agentcore.errors import InputValidationError
from agentcore.extensions.catalogs.definitions import LIMITS, oversized
from agentcore.tools.base import DEFAULT_CALL_TIMEOUT_S, AgentTool, Replay, check_call_timeout

__all__ = [
    "AgentToolCatalog",
    "CatalogConnection",
    "CatalogToolDescriptor",
    "StaticCatalogConnection",
]

CATALOG_ID: Final = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
TOOL_ID: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_TOOLS: Final = 1_000

ApproveHook = Callable[[dict[str, Any]], Any]  # sync or async; raise (or return False) = deny


@runtime_checkable
class CatalogConnection(Protocol):
    """A live connection returned by ``AgentToolCatalog.open()``.

    ``list_tools()`` is asked before every call, so a service whose tools change while
    connected is caught too; it returns the live tools named by their final ids. A connection
    may expose ``closed`` (True once it died); the session then opens a new one at the next call.
    """

    async def list_tools(self) -> Sequence[AgentTool]: ...

    async def aclose(self) -> None: ...


class StaticCatalogConnection:
    """A ``CatalogConnection`` over a fixed list of tools, with an optional ``close`` hook."""

    def __init__(self, tools: Sequence[AgentTool], close: Callable[[], Awaitable[None]] | None = None) -> None:
        self._tools = list(tools)
        self._close = close
        self.closed = False

    async def list_tools(self) -> Sequence[AgentTool]:
        return list(self._tools)

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            if self._close is not None:
                await self._close()


@dataclass(frozen=True, slots=True)
class CatalogToolDescriptor:
    """A catalog tool as the session saves it: everything but ``execute``.

    ``name`` is the final tool id the model calls. ``parameters`` / ``output_schema`` are JSON
    schemas (Draft 2020-12; ``parameters`` describes an object). Validated on construction;
    the schemas are deep-copied, so later changes to the caller's dicts change nothing.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None
    replay: Replay = "never"
    read_only: bool = False

    def __post_init__(self) -> None:
        check_descriptor(self, "")
        object.__setattr__(self, "parameters", _json_copy(self.parameters, "parameters"))
        if self.output_schema is not None:
            object.__setattr__(self, "output_schema", _json_copy(self.output_schema, "output_schema"))

    @classmethod
    def of(cls, tool: AgentTool) -> CatalogToolDescriptor:
        """The descriptor of a live tool (what a host records to declare it next time)."""
        return cls(tool.name, tool.description, tool.parameters, tool.output_schema, tool.replay, tool.read_only)

    def definition(self) -> dict[str, Any]:
        """The JSON form the session saves and compares (see ``definitions``)."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": _json_copy(self.parameters, "parameters"),
            "output_schema": _json_copy(self.output_schema, "output_schema") if self.output_schema else None,
            "replay": self.replay,
            "read_only": self.read_only,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentToolCatalog:
    """A tool catalog of the session (SPEC X3); see the module docstring.

    ``approve(payload)`` (optional, sync or async) is asked before each call connects:
    raising, or returning False, denies the call and the message goes to the model.
    ``kind`` and ``info`` are shown in the snapshot's ``records["catalogs"]`` — never put
    credentials there. ``redact`` is applied to every error text of this catalog before it
    reaches the model, the store or the records (the MCP helper masks its env and headers).
    ``call_timeout_s`` bounds each call of a catalog tool — connecting, verifying, ``approve``
    and the service's answer together (default 600 s, None = no limit): a call that runs
    longer is stopped and the model gets a retryable error.
    """

    id: str
    open: Callable[[], Awaitable[CatalogConnection]]
    tools: Sequence[CatalogToolDescriptor] | None = None
    allowed_tools: Sequence[str] | None = None
    approve: ApproveHook | None = None
    kind: str = "custom"
    info: Mapping[str, str] = field(default_factory=dict)
    redact: Callable[[str], str] | None = None
    call_timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S

    def __post_init__(self) -> None:
        tools, allowed = check_catalog(self, "")
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "allowed_tools", allowed)
        object.__setattr__(self, "info", dict(self.info))

    @property
    def declared(self) -> bool:
        """Whether the host declared descriptors (search then never connects)."""
        return self.tools is not None

    def descriptor(self, tool_id: str) -> CatalogToolDescriptor | None:
        for tool in self.tools or ():
            if tool.name == tool_id:
                return tool
        return None

    def tool_ids(self) -> tuple[str, ...]:
        """The ids this catalog may ever offer: the declared ones, else ``allowed_tools``."""
        if self.tools is not None:
            return tuple(tool.name for tool in self.tools)
        return tuple(self.allowed_tools or ())

    def clean(self, text: str) -> str:
        return self.redact(text) if self.redact is not None else text


# --- validation ---------------------------------------------------------------------------


def _fail(message: str, where: str) -> InputValidationError:
    return InputValidationError(message, field=where)


Normalized = tuple[tuple[CatalogToolDescriptor, ...] | None, tuple[str, ...] | None]


def check_catalog(catalog: AgentToolCatalog, prefix: str) -> Normalized:
    """Validate ``catalog``; errors name ``<prefix><field>``. Returns the normalized tools and
    allowed ids (tuples, so the frozen catalog cannot be changed through a shared list)."""
    if not isinstance(catalog.id, str) or not CATALOG_ID.match(catalog.id):
        raise _fail(f"catalog id must be 1-32 characters of [A-Za-z0-9_-], got {catalog.id!r}", f"{prefix}id")
    if not callable(catalog.open):
        raise _fail("open must be an async function returning a CatalogConnection", f"{prefix}open")
    if catalog.approve is not None and not callable(catalog.approve):
        raise _fail("approve must be a function", f"{prefix}approve")
    if catalog.redact is not None and not callable(catalog.redact):
        raise _fail("redact must be a function", f"{prefix}redact")
    if not isinstance(catalog.kind, str) or not CATALOG_ID.match(catalog.kind):
        raise _fail("kind must be a short name such as 'mcp' or 'custom'", f"{prefix}kind")
    if not isinstance(catalog.info, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in catalog.info.items()
    ):
        raise _fail("info must map strings to strings", f"{prefix}info")
    check_call_timeout(catalog.call_timeout_s, f"{prefix}call_timeout_s")

    tools: tuple[CatalogToolDescriptor, ...] | None = None
    if catalog.tools is not None:
        if isinstance(catalog.tools, str | bytes | Mapping) or not isinstance(catalog.tools, Sequence):
            raise _fail("tools must be a list of CatalogToolDescriptor", f"{prefix}tools")
        if len(catalog.tools) > MAX_TOOLS:
            raise _fail(f"tools may declare at most {MAX_TOOLS} tools", f"{prefix}tools")
        tools = tuple(_descriptor(item, f"{prefix}tools.{n}") for n, item in enumerate(catalog.tools))
        _unique([tool.name for tool in tools], f"{prefix}tools")

    allowed: tuple[str, ...] | None = None
    if catalog.allowed_tools is not None:
        raw = catalog.allowed_tools
        if isinstance(raw, str | bytes) or not isinstance(raw, Sequence) or not raw:
            raise _fail("allowed_tools must be a non-empty list of tool ids", f"{prefix}allowed_tools")
        for n, name in enumerate(raw):
            if not isinstance(name, str) or not TOOL_ID.match(name):
                raise _fail(
                    f"allowed_tools entries must be tool ids of 1-64 [A-Za-z0-9_-], got {name!r}",
                    f"{prefix}allowed_tools.{n}",
                )
        allowed = tuple(raw)
        _unique(list(allowed), f"{prefix}allowed_tools")
        if len(allowed) > MAX_TOOLS:
            raise _fail(f"allowed_tools may list at most {MAX_TOOLS} tools", f"{prefix}allowed_tools")

    if tools is None and allowed is None:
        raise _fail(
            "a catalog without declared tools must list allowed_tools (the final tool ids the first search may save)",
            f"{prefix}allowed_tools",
        )
    if tools is not None and allowed is not None and {t.name for t in tools} != set(allowed):
        raise _fail(
            "allowed_tools must name exactly the declared tools when both are given "
            f"(declared: {', '.join(t.name for t in tools)})",
            f"{prefix}allowed_tools",
        )
    return tools, allowed


def _unique(names: list[str], where: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise _fail(f"{name!r} is listed twice", where)
        seen.add(name)


def _descriptor(item: Any, where: str) -> CatalogToolDescriptor:
    if isinstance(item, CatalogToolDescriptor):
        check_descriptor(item, f"{where}.")
        return item
    if isinstance(item, AgentTool):
        raise _fail(
            "declared tools are descriptors without execute: pass CatalogToolDescriptor.of(tool); "
            "the catalog's open() provides the executable tools",
            where,
        )
    if not isinstance(item, Mapping):
        raise _fail("a declared tool must be a CatalogToolDescriptor or a dict of its fields", where)
    known = {"name", "description", "parameters", "output_schema", "replay", "read_only"}
    for key in item:
        if key not in known:
            raise _fail(f"unknown descriptor field {key!r}", f"{where}.{key}")
    try:
        return CatalogToolDescriptor(**item)
    except InputValidationError as exc:
        raise _fail(exc.message, f"{where}.{exc.field}") from None
    except TypeError as exc:  # a required field is missing
        raise _fail(f"descriptor is incomplete: {exc}", where) from None


def check_descriptor(tool: CatalogToolDescriptor, prefix: str) -> None:
    if not isinstance(tool.name, str) or not TOOL_ID.match(tool.name):
        raise _fail(f"name must be a tool id of 1-64 [A-Za-z0-9_-], got {tool.name!r}", f"{prefix}name")
    if not isinstance(tool.description, str) or not tool.description.strip():
        raise _fail("description must be a non-empty string", f"{prefix}description")
    _check_text(tool.description, f"{prefix}description")
    _check_schema(tool.parameters, f"{prefix}parameters", want_object=True)
    if tool.output_schema is not None:
        _check_schema(tool.output_schema, f"{prefix}output_schema", want_object=False)
    if tool.replay not in ("never", "safe"):
        raise _fail(f"replay must be 'never' or 'safe', got {tool.replay!r}", f"{prefix}replay")
    if not isinstance(tool.read_only, bool):
        raise _fail("read_only must be a boolean", f"{prefix}read_only")
    too_big = oversized(
        {"description": tool.description, "parameters": tool.parameters, "output_schema": tool.output_schema}
    )
    if too_big is not None:
        raise _fail(f"{too_big} is longer than {LIMITS[too_big]} characters", f"{prefix}{too_big}")


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail("text must be valid Unicode (no lone surrogates)", where) from None


def _check_schema(schema: Any, where: str, *, want_object: bool) -> None:
    from agentcore.tools.executor import InvalidSchema, validate_against

    if not isinstance(schema, Mapping):
        raise _fail("must be a JSON schema object", where)
    try:
        text = json.dumps(schema, allow_nan=False)
        text.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise _fail(f"must be plain JSON: {exc}", where) from None
    if want_object and schema.get("type") != "object":
        raise _fail('a tool\'s parameters must be a schema with "type": "object"', where)
    try:
        validate_against(json.loads(text), {})
    except InvalidSchema as exc:
        raise _fail(f"is not a valid JSON schema: {exc.message}", where) from None


def _json_copy(value: Any, where: str) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:  # pragma: no cover - validated before
        raise _fail(f"must be plain JSON: {exc}", where) from None
