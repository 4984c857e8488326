"""``session={"tool_search": {"catalogs": [...]}}``: the ``tool_search`` tool (SPEC X3).

How a catalog tool reaches the model, and why each step is where it is:

1. **Saved once.** Declared descriptors are saved (register ``catalog:<id>``) when the session
   is opened; an undeclared catalog's tools are saved by the first search that reaches it,
   filtered to ``allowed_tools``. A saved definition is never overwritten: what the session
   first saw is what every later call is held to, across reopens.
2. **Search reads the store.** ``tool_search(query)`` ranks the saved definitions; it connects
   only to an undeclared catalog that has nothing saved yet. The tools it returns are offered
   to that context's model from its next request on (register ``catalog-offered:<conv>``,
   so a reopened session still offers them). Nothing outside the host's catalogs, and nothing
   a catalog did not declare or allow, can be found or called.
3. **Calls connect and verify.** A catalog tool is an ordinary ``AgentTool`` built from the
   saved definition, so the engine applies the whitelist, host approval, intent-before-effect
   and the saved replay policy as for any extra tool. Its ``execute`` compares the host's
   current descriptor and then the service's live definition with the saved one, asks the
   catalog's ``approve`` hook, connects if needed and calls. Drift is an error result and the
   connection is closed; a failed connect is an error result and the next call tries again.

The connections belong to the session owner and are closed by ``aclose()`` (runtime close).
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from agentcore.errors import InputValidationError, ToolError
from agentcore.extensions.catalogs.catalog import AgentToolCatalog, CatalogConnection, check_catalog
from agentcore.extensions.catalogs.definitions import (
    NotJson,
    catalog_key,
    describe_drift,
    differences,
    live_definition,
    offered_key,
    oversized,
    rank,
)
from agentcore.extensions.catalogs.link import (
    RETRY_HINT,
    Cancelled,
    CatalogLink,
    CatalogUnavailable,
    describe,
    until_abort,
)
from agentcore.harness.storage import Commit, RegisterWrite
from agentcore.host import call_hook
from agentcore.messages import TextContent
from agentcore.session.extension import BaseExtension, ExtensionHost
from agentcore.tools.base import AgentTool, ToolContext, ToolResult

if TYPE_CHECKING:
    from agentcore.session.contexts import Context

TOOL_SEARCH: Final = "tool_search"
DEFAULT_LIMIT: Final = 8
MAX_LIMIT: Final = 20
SCHEMA_SHOWN: Final = 2_000  # characters of a found tool's schema shown in the search result
NEW_SESSION: Final = "Using a changed definition needs a new session."
# Names catalog tools can never take: built-in and session tools (extra tools are checked at open).
RESERVED: Final = frozenset(
    {"read", "write", "edit", "bash", "grep", "find", "ls", "ask_user", "update_plan", "subagent", "codemode"}
    | {TOOL_SEARCH}
)


@dataclass(frozen=True, slots=True)
class ToolSearchOptions:
    catalogs: tuple[AgentToolCatalog, ...] = ()


def parse_option(raw: Any) -> ToolSearchOptions:
    """Validate ``session.tool_search`` without connecting anything (errors name the field)."""
    where = "session.tool_search"
    if not isinstance(raw, Mapping):
        raise InputValidationError(f"{where} must be an object {{catalogs: [...]}}", field=where)
    for key in raw:
        if key != "catalogs":
            raise InputValidationError(f"{where}.{key}: unknown option", field=f"{where}.{key}")
    items = raw.get("catalogs", [])
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise InputValidationError(f"{where}.catalogs must be a list of AgentToolCatalog", field=f"{where}.catalogs")
    catalogs: list[AgentToolCatalog] = []
    owners: dict[str, str] = {}
    for n, item in enumerate(items):
        at = f"{where}.catalogs.{n}"
        catalog = _catalog(item, at)
        if any(other.id == catalog.id for other in catalogs):
            raise InputValidationError(f"{at}.id: catalog id {catalog.id!r} is used twice", field=f"{at}.id")
        list_field = "tools" if catalog.declared else "allowed_tools"
        for tool_id in catalog.tool_ids():
            if tool_id in RESERVED:
                raise InputValidationError(
                    f"{at}.{list_field}: {tool_id!r} is the name of a built-in or session tool",
                    field=f"{at}.{list_field}",
                )
            if tool_id in owners:
                raise InputValidationError(
                    f"{at}.{list_field}: tool id {tool_id!r} is also in catalog {owners[tool_id]!r}",
                    field=f"{at}.{list_field}",
                )
            owners[tool_id] = catalog.id
        catalogs.append(catalog)
    return ToolSearchOptions(tuple(catalogs))


def _catalog(item: Any, at: str) -> AgentToolCatalog:
    if isinstance(item, AgentToolCatalog):
        try:
            check_catalog(item, "")
        except InputValidationError as exc:
            raise InputValidationError(exc.message, field=f"{at}.{exc.field}") from None
        return item
    if isinstance(item, Mapping):
        fields = set(AgentToolCatalog.__dataclass_fields__)
        for key in item:
            if key not in fields:
                raise InputValidationError(f"{at}.{key}: unknown catalog field", field=f"{at}.{key}")
        for key in ("id", "open"):
            if key not in item:
                raise InputValidationError(f"{at}.{key} is required", field=f"{at}.{key}")
        try:
            return AgentToolCatalog(**item)
        except InputValidationError as exc:
            raise InputValidationError(exc.message, field=f"{at}.{exc.field}") from None
    raise InputValidationError(f"{at} must be an AgentToolCatalog", field=at)


def create(session: ExtensionHost, parsed: ToolSearchOptions) -> ToolSearchExtension:
    return ToolSearchExtension(session, parsed)


class ToolSearchExtension(BaseExtension):
    """The session side of tool catalogs; see the module docstring."""

    def __init__(self, session: ExtensionHost, options: ToolSearchOptions) -> None:
        super().__init__(session)
        self.view = session.view
        self.links = {catalog.id: CatalogLink(catalog) for catalog in options.catalogs}
        self._owner = {tool_id: c.id for c in options.catalogs for tool_id in c.tool_ids()}
        taken = {tool.name for tool in session.parts.config.extra_tools}
        self._conflicts = {tool_id for tool_id in self._owner if tool_id in taken}
        self._search_tools: dict[str, AgentTool] = {}
        self._wrappers: dict[str, AgentTool] = {}
        self._discovering: dict[str, asyncio.Lock] = {}
        self._save_declared()

    # --- saved definitions ---------------------------------------------------------------

    def _save_declared(self) -> None:
        """Save the declared descriptors the store does not know yet (session open), in one
        transaction. Known ids keep their saved definition, whatever the host declares now."""
        commit = Commit()
        for link in self.links.values():
            catalog = link.catalog
            if not catalog.declared:
                continue
            key = catalog_key(catalog.id)
            saved = self.view.register(key)
            tools = dict(saved["tools"]) if saved else {}
            fresh = {t.name: t.definition() for t in catalog.tools or () if t.name not in tools}
            if not fresh:
                continue
            value = {
                "kind": catalog.kind,
                "source": saved.get("source", "declared") if saved else "declared",
                "tools": {**tools, **fresh},
                "missing": list(saved.get("missing", [])) if saved else [],
            }
            commit.registers.append(RegisterWrite(key, value, expected_seq=self.view.register_seq(key)))
        if not commit.is_empty():
            self.view.commit(commit)

    def _saved(self, catalog_id: str) -> dict[str, Any] | None:
        return self.view.register(catalog_key(catalog_id))

    def _saved_tools(self, catalog_id: str) -> dict[str, Any]:
        saved = self._saved(catalog_id)
        tools: dict[str, Any] = saved.get("tools", {}) if saved else {}
        return tools

    # --- the extension hooks -------------------------------------------------------------

    def tools(self, context: Context) -> list[AgentTool]:
        conversation = context.conversation_id
        search = self._search_tools.get(conversation)
        if search is None:
            search = self._search_tools[conversation] = self._search_tool(conversation)
        offered = (self.view.register(offered_key(conversation)) or {}).get("tools", [])
        tools = [search]
        for tool_id in offered:
            wrapper = self._wrapper(tool_id)
            if wrapper is not None:
                tools.append(wrapper)
        return tools

    def records(self) -> dict[str, Any]:
        return {"catalogs": [self._record(link) for link in self.links.values()]}

    def _record(self, link: CatalogLink) -> dict[str, Any]:
        catalog = link.catalog
        saved = self._saved(catalog.id) or {}
        record: dict[str, Any] = {
            "id": catalog.id,
            "kind": catalog.kind,
            **({"info": dict(catalog.info)} if catalog.info else {}),
            "declared_tools": len(catalog.tools or ()),
            "allowed_tools": len(catalog.allowed_tools or ()),
            "saved_tools": len(saved.get("tools", {})),
            "source": saved.get("source"),
            "status": link.status,
            "error": link.error,
        }
        if saved.get("missing"):
            record["missing"] = list(saved["missing"])
        conflicts = sorted(t for t in self._conflicts if self._owner.get(t) == catalog.id)
        if conflicts:
            record["conflicts"] = conflicts
        return record

    async def aclose(self) -> None:
        for link in self.links.values():
            await link.aclose()

    # --- tool_search ---------------------------------------------------------------------

    def _search_tool(self, conversation_id: str) -> AgentTool:
        listed = ", ".join(f"{c.id} ({c.kind})" for c in (link.catalog for link in self.links.values())) or "none"

        async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
            return await self._search(conversation_id, arguments, ctx)

        return AgentTool(
            name=TOOL_SEARCH,
            description=(
                "Find tools in the tool catalogs connected to this session by keywords (what the tool does, "
                "its name or its parameters). Matching tools are returned with their parameters and become "
                f"callable from your next step. Catalogs: {listed}."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 1000},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            execute=execute,
            replay="safe",  # reads saved definitions; offering the same tools twice changes nothing
            builtin=True,  # a session tool: governed by the session options, never by approvals
        )

    async def _search(self, conversation_id: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = str(arguments["query"])
        limit = int(arguments.get("limit") or DEFAULT_LIMIT)
        unreachable: list[dict[str, str]] = []
        for link in self.links.values():
            if not link.catalog.declared and self._saved(link.catalog.id) is None:
                problem = await self._discover(link, ctx.abort)
                if problem is not None:
                    unreachable.append({"catalog": link.catalog.id, "error": problem})
        candidates = [
            (link.catalog.id, definition)
            for link in self.links.values()
            for tool_id in link.catalog.tool_ids()
            if tool_id not in self._conflicts and (definition := self._saved_tools(link.catalog.id).get(tool_id))
        ]
        matches = rank(query, candidates, limit)
        self._offer(conversation_id, [definition["name"] for _, definition in matches])
        return _search_result(query, matches, unreachable, searched=len(candidates))

    async def _discover(self, link: CatalogLink, abort: asyncio.Event) -> str | None:
        """First search of an undeclared catalog: connect, save the allowed tools' definitions.
        Returns why it could not (the next search tries again), or None."""
        catalog = link.catalog
        lock = self._discovering.setdefault(catalog.id, asyncio.Lock())
        async with lock:
            if self._saved(catalog.id) is not None:
                return None
            try:
                connection = await link.connect(abort)
                live = {tool.name: tool for tool in await until_abort(connection.list_tools(), abort)}
            except CatalogUnavailable as exc:
                return exc.message
            except Cancelled:
                return "the search was cancelled"
            except Exception as exc:
                message = catalog.clean(f"catalog '{catalog.id}' could not list its tools: {describe(exc)}")
                await link.fail(message)
                return f"{message}. {RETRY_HINT}"
            tools: dict[str, Any] = {}
            missing: list[str] = []
            for tool_id in catalog.allowed_tools or ():
                tool = live.get(tool_id)
                try:
                    definition = live_definition(tool) if tool is not None else None
                except NotJson:
                    definition = None
                if definition is None or oversized(definition) is not None:
                    missing.append(tool_id)  # not offered, or not something the store can keep
                else:
                    tools[tool_id] = definition
            key = catalog_key(catalog.id)
            value = {"kind": catalog.kind, "source": "discovered", "tools": tools, "missing": missing}
            self.view.commit(Commit(registers=[RegisterWrite(key, value, expected_seq=self.view.register_seq(key))]))
            link.ok()
            return None

    def _offer(self, conversation_id: str, tool_ids: list[str]) -> None:
        key = offered_key(conversation_id)
        offered: list[str] = list((self.view.register(key) or {}).get("tools", []))
        fresh = [tool_id for tool_id in tool_ids if tool_id not in offered]
        if fresh:
            value = {"tools": [*offered, *fresh]}
            self.view.commit(Commit(registers=[RegisterWrite(key, value, expected_seq=self.view.register_seq(key))]))

    # --- catalog tools -------------------------------------------------------------------

    def _wrapper(self, tool_id: str) -> AgentTool | None:
        wrapper = self._wrappers.get(tool_id)
        if wrapper is not None:
            return wrapper
        catalog_id = self._owner.get(tool_id)
        if catalog_id is None or tool_id in self._conflicts:
            return None  # its catalog is not part of this session (any more)
        definition = self._saved_tools(catalog_id).get(tool_id)
        if definition is None:
            return None

        async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
            return await self._call(catalog_id, tool_id, arguments, ctx)

        wrapper = self._wrappers[tool_id] = AgentTool(
            name=tool_id,
            description=definition["description"],
            parameters=copy.deepcopy(definition["parameters"]),
            execute=execute,
            output_schema=copy.deepcopy(definition.get("output_schema")),
            replay=definition["replay"],
            read_only=bool(definition["read_only"]),
            metadata={"catalog_id": catalog_id},
            timeout_s=self.links[catalog_id].catalog.call_timeout_s,
        )
        return wrapper

    async def _call(self, catalog_id: str, tool_id: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        link = self.links[catalog_id]
        catalog = link.catalog
        saved = self._saved_tools(catalog_id).get(tool_id)
        if saved is None:  # pragma: no cover - wrappers exist only for saved tools
            return ToolResult.text(f"Tool '{tool_id}' has no saved definition in this session.", is_error=True)
        declared = catalog.descriptor(tool_id)
        if declared is not None and (changed := differences(saved, declared.definition())):
            message = describe_drift(tool_id, changed, "the host's declared descriptor")
            await link.fail(message)
            return _error(f"{message}. {NEW_SESSION}")
        if catalog.approve is not None:
            denial = await _ask(catalog, tool_id, arguments, ctx)
            if denial is not None:
                return _error(denial)
        try:
            connection = await link.connect(ctx.abort)
        except CatalogUnavailable as exc:
            return _error(exc.message)
        try:
            live = {tool.name: tool for tool in await until_abort(connection.list_tools(), ctx.abort)}
        except Cancelled:
            return _error(f"The call to '{tool_id}' was cancelled.")
        except Exception as exc:
            message = catalog.clean(f"catalog '{catalog_id}' could not list its tools: {describe(exc)}")
            await link.fail(message)
            return _error(f"{message}. {RETRY_HINT}")
        tool = live.get(tool_id)
        problem = _drift(saved, tool, tool_id, catalog_id)
        if tool is None or problem is not None:
            problem = catalog.clean(problem or "")
            await link.fail(problem)
            return _error(f"{problem}; its connection was closed. {NEW_SESSION}")
        link.ok()
        try:
            result = await tool.execute(arguments, ctx)
        except ToolError as exc:
            message = catalog.clean(str(exc))
            if _lost(link, connection):  # e.g. the server died mid-call: the next call reconnects
                await link.fail(message)
            raise ToolError(message) from exc
        except Exception:  # the executor turns it into an error result
            if _lost(link, connection):
                await link.fail(f"the connection of catalog '{catalog_id}' was lost during a call")
            raise
        if _lost(link, connection):
            await link.fail(f"the connection of catalog '{catalog_id}' was lost during a call")
        return result


def _lost(link: CatalogLink, connection: CatalogConnection) -> bool:
    return connection is link.connection and bool(getattr(connection, "closed", False))


def _drift(saved: dict[str, Any], tool: AgentTool | None, tool_id: str, catalog_id: str) -> str | None:
    """How the live ``tool`` differs from its saved definition, or None when it does not."""
    if tool is None:
        return f"tool '{tool_id}' is no longer offered by catalog '{catalog_id}'"
    try:
        changed = differences(saved, live_definition(tool))
    except NotJson as exc:
        return f"catalog '{catalog_id}' now describes tool '{tool_id}' in a form that cannot be compared: {exc}"
    return describe_drift(tool_id, changed, f"catalog '{catalog_id}'") if changed else None


async def _ask(catalog: AgentToolCatalog, tool_id: str, arguments: dict[str, Any], ctx: ToolContext) -> str | None:
    """The catalog's approval hook: None = allowed, else the denial for the model."""
    payload = {
        "catalog_id": catalog.id,
        "tool": tool_id,
        "arguments": copy.deepcopy(arguments),
        "tool_call_id": ctx.tool_call_id,
    }
    assert catalog.approve is not None
    try:
        verdict = await call_hook(catalog.approve, payload)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return f"The call to '{tool_id}' was denied: {catalog.clean(describe(exc))}"
    if verdict is False:
        return f"The call to '{tool_id}' was denied by catalog '{catalog.id}'."
    return None


def _error(text: str) -> ToolResult:
    return ToolResult.text(text, is_error=True)


def _search_result(
    query: str, matches: list[tuple[str, dict[str, Any]]], unreachable: list[dict[str, str]], *, searched: int
) -> ToolResult:
    found = [
        {"name": definition["name"], "catalog": catalog_id, "description": definition["description"]}
        for catalog_id, definition in matches
    ]
    lines: list[str] = []
    if found:
        lines.append(f"Found {len(found)} tool(s); you can call them from your next step:")
        for (catalog_id, definition), item in zip(matches, found, strict=True):
            schema = json.dumps(definition["parameters"], ensure_ascii=False, separators=(",", ":"))
            if len(schema) > SCHEMA_SHOWN:  # the full schema comes with the tool itself
                schema = f"{schema[:SCHEMA_SHOWN]}… (cut; the tool's own definition has all of it)"
            lines.append(f"- {item['name']} (catalog {catalog_id}): {item['description']}\n  parameters: {schema}")
    else:
        lines.append(f"No tool matches {query!r} (searched {searched} tool(s)). Try other keywords.")
    for problem in unreachable:
        lines.append(f"Catalog {problem['catalog']} could not be searched: {problem['error']}")
    structured = {"tools": found, "unreachable": unreachable}
    return ToolResult([TextContent("\n".join(lines))], structured_content=structured)
