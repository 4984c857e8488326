"""Tool catalogs and ``tool_search`` with host-written catalogs (SPEC X3).

These catalogs are plain Python (``open()`` returns ``StaticCatalogConnection``s of real
``AgentTool``s) so each rule of the catalog contract is checked on its own, through real runs
against the fake provider server and real SQLite stores; ``test_catalog_mcp.py`` checks the
same rules against real MCP server processes.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentTool, ToolResult
from agentcore.errors import InputValidationError
from agentcore.extensions.catalogs import AgentToolCatalog, CatalogToolDescriptor, StaticCatalogConnection
from agentcore.testing.steps import Text, ToolCall
from tests.agentcore.session_helpers import last_snapshot, run_with
from tests.docs import python_example

ROOT = Path(__file__).resolve().parents[2]
COMPLETIONS = "openai-completions"
SCHEMA_A = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
SCHEMA_B = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}
DESCRIPTION = "Weather forecast for a city."


def offered(request: Any) -> set[str]:
    return {tool["function"]["name"] for tool in request.json.get("tools", [])}


def tool_results(request: Any) -> list[str]:
    return [m["content"] for m in request.json["messages"] if m["role"] == "tool"]


class WeatherService:
    """A catalog service whose opens, closes and calls are counted; ``schema`` and
    ``description`` are what its live tool says today (a test changes them to drift)."""

    def __init__(self, schema: dict[str, Any] = SCHEMA_A, description: str = DESCRIPTION) -> None:
        self.schema = schema
        self.description = description
        self.opens = 0
        self.closes = 0
        self.calls: list[dict[str, Any]] = []
        self.failures_left = 0

    async def open(self) -> StaticCatalogConnection:
        self.opens += 1
        if self.failures_left:
            self.failures_left -= 1
            raise ConnectionError("weather service is starting up")

        async def forecast(arguments: dict[str, Any], ctx: Any) -> ToolResult:
            self.calls.append(arguments)
            return ToolResult.text(f"{arguments['city']}: sunny")

        async def close() -> None:
            self.closes += 1

        tool = AgentTool("wx_forecast", self.description, self.schema, forecast, replay="safe")
        return StaticCatalogConnection([tool], close)


def declared(service: WeatherService, schema: dict[str, Any] = SCHEMA_A, **extra: Any) -> AgentToolCatalog:
    return AgentToolCatalog(
        id="wx",
        tools=[CatalogToolDescriptor("wx_forecast", DESCRIPTION, schema, replay="safe")],
        open=service.open,
        **extra,
    )


def catalog_record(snapshot: dict[str, Any], catalog_id: str = "wx") -> dict[str, Any]:
    return next(r for r in snapshot["records"]["catalogs"] if r["id"] == catalog_id)


# --- options ------------------------------------------------------------------------------


async def _noop_open() -> StaticCatalogConnection:
    return StaticCatalogConnection([])


TOOL_A = {"name": "wx_a", "description": "A.", "parameters": {"type": "object"}}
GOOD = {"id": "wx", "tools": [TOOL_A], "open": _noop_open}


@pytest.mark.parametrize(
    ("tool_search", "field"),
    [
        ([], "session.tool_search"),
        ({"catalog": []}, "session.tool_search.catalog"),
        ({"catalogs": {}}, "session.tool_search.catalogs"),
        ({"catalogs": ["wx"]}, "session.tool_search.catalogs.0"),
        ({"catalogs": [dict(GOOD, open=None)]}, "session.tool_search.catalogs.0.open"),
        ({"catalogs": [{"id": "wx", "tools": []}]}, "session.tool_search.catalogs.0.open"),
        ({"catalogs": [dict(GOOD, colour="red")]}, "session.tool_search.catalogs.0.colour"),
        ({"catalogs": [dict(GOOD, id="no spaces")]}, "session.tool_search.catalogs.0.id"),
        ({"catalogs": [GOOD, GOOD]}, "session.tool_search.catalogs.1.id"),
        ({"catalogs": [GOOD, dict(GOOD, id="wx2")]}, "session.tool_search.catalogs.1.tools"),
        ({"catalogs": [{"id": "x", "open": _noop_open}]}, "session.tool_search.catalogs.0.allowed_tools"),
        ({"catalogs": [{"id": "x", "allowed_tools": ["bash"], "open": _noop_open}]},
         "session.tool_search.catalogs.0.allowed_tools"),
        ({"catalogs": [{"id": "x", "allowed_tools": ["a b"], "open": _noop_open}]},
         "session.tool_search.catalogs.0.allowed_tools.0"),
        ({"catalogs": [dict(GOOD, tools=[dict(TOOL_A, parameters={"type": "array"})])]},
         "session.tool_search.catalogs.0.tools.0.parameters"),
        ({"catalogs": [dict(GOOD, tools=[dict(TOOL_A, parameters={"type": 5})])]},
         "session.tool_search.catalogs.0.tools.0.parameters"),
        ({"catalogs": [dict(GOOD, tools=[dict(TOOL_A, description="\ud800")])]},
         "session.tool_search.catalogs.0.tools.0.description"),
        ({"catalogs": [dict(GOOD, tools=[dict(TOOL_A, replay="always")])]},
         "session.tool_search.catalogs.0.tools.0.replay"),
        ({"catalogs": [dict(GOOD, tools=[dict(TOOL_A, execute=_noop_open)])]},
         "session.tool_search.catalogs.0.tools.0.execute"),
        ({"catalogs": [dict(GOOD, allowed_tools=["wx_b"])]}, "session.tool_search.catalogs.0.allowed_tools"),
    ],
)  # fmt: skip
async def test_bad_tool_search_options_name_the_field_and_open_nothing(
    make_agent: Any, tmp_path: Path, tool_search: Any, field: str
) -> None:
    """X3: bad option values → input_validation naming the field; no store is created."""
    store = tmp_path / "never.sqlite"
    with pytest.raises(InputValidationError) as caught:
        await make_agent(COMPLETIONS, database_path=str(store), session={"tool_search": tool_search})
    assert caught.value.field == field
    assert not store.exists()


def test_catalog_constructor_checks_its_fields() -> None:
    """X3: an AgentToolCatalog is validated when built, errors naming the constructor field."""
    with pytest.raises(InputValidationError) as caught:
        AgentToolCatalog(id="wx", open=_noop_open)
    assert caught.value.field == "allowed_tools"
    tool = AgentTool("wx_a", "A.", {"type": "object"}, lambda a, c: None)  # type: ignore[arg-type, return-value]
    with pytest.raises(InputValidationError) as caught:
        AgentToolCatalog(id="wx", tools=[tool], open=_noop_open)  # type: ignore[list-item]
    assert caught.value.field == "tools.0" and "CatalogToolDescriptor.of" in caught.value.message
    with pytest.raises(InputValidationError) as caught:
        CatalogToolDescriptor("wx_a", "A.", {"type": "object", "properties": {"x": {"type": "nope"}}})
    assert caught.value.field == "parameters"
    with pytest.raises(InputValidationError) as caught:
        CatalogToolDescriptor("wx_a", "A.", {"type": "object"}, output_schema={"type": float("nan")})
    assert caught.value.field == "output_schema"
    schema = {"type": "object", "properties": {"x": {"type": "string"}}}
    descriptor = CatalogToolDescriptor("wx_a", "A.", schema)
    schema["properties"]["x"]["type"] = "integer"
    assert descriptor.parameters["properties"]["x"]["type"] == "string", "the descriptor keeps its own copy"


# --- search, offer, call ------------------------------------------------------------------


async def test_declared_catalog_is_searched_without_opening_and_first_call_connects(
    make_agent: Any, fake_server: Any
) -> None:
    """X3: declared descriptors are saved at session open; search reads them and never opens
    the catalog; found tools are offered from the next request; the first call opens it."""
    service = WeatherService()
    seen: list[tuple[str, int, str]] = []

    def watch(event: Any) -> None:
        if event.type == "tool" and event.phase == "end":
            seen.append((event.name, service.opens, event.result))

    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "weather in a city"}, id="s1")],
        [ToolCall("wx_forecast", {"city": "Oslo"}, id="c1")],
        [ToolCall("wx_forecast", {"city": "Bergen"}, id="c2")],
        [Text("Sunny in both.")],
    )
    agent = await make_agent(COMPLETIONS, session={"tool_search": {"catalogs": [declared(service)]}})
    assert service.opens == 0
    assert catalog_record(agent.snapshot())["status"] == "declared"
    assert catalog_record(agent.snapshot())["saved_tools"] == 1, "saved when the session opened"
    events = await run_with(agent, {"prompt": "weather?", "request_id": "r1"}, watch)

    first, second, *_ = fake_server.requests
    assert "tool_search" in offered(first) and "wx_forecast" not in offered(first)
    assert "wx_forecast" in offered(second)
    assert seen[0][0] == "tool_search" and seen[0][1] == 0, "search never opens a declared catalog"
    assert "wx_forecast (catalog wx)" in seen[0][2]
    assert seen[1] == ("wx_forecast", 1, "Oslo: sunny")
    assert seen[2] == ("wx_forecast", 1, "Bergen: sunny"), "one connection serves later calls"
    assert service.calls == [{"city": "Oslo"}, {"city": "Bergen"}]
    record = catalog_record(last_snapshot(events))
    assert record == {
        "id": "wx",
        "kind": "custom",
        "declared_tools": 1,
        "allowed_tools": 0,
        "saved_tools": 1,
        "source": "declared",
        "status": "connected",
        "error": None,
    }
    await agent.close()
    assert service.closes == 1, "the session owner releases the connection on close"


async def test_search_without_a_match_offers_nothing(make_agent: Any, fake_server: Any) -> None:
    """X3: a query matching no saved definition offers no tool and says so."""
    service = WeatherService()
    fake_server.enqueue([ToolCall("tool_search", {"query": "stock prices"}, id="s1")], [Text("none")])
    agent = await make_agent(COMPLETIONS, session={"tool_search": {"catalogs": [declared(service)]}})
    await run_with(agent, "find a stock tool")
    assert "No tool matches 'stock prices'" in tool_results(fake_server.requests[1])[0]
    assert "wx_forecast" not in offered(fake_server.requests[1])
    assert service.opens == 0


async def test_found_tools_stay_offered_after_reopen(make_agent: Any, fake_server: Any, tmp_path: Path) -> None:
    """X3: what a context found is a durable register: a reopened session offers it at once."""
    store = str(tmp_path / "s.sqlite")
    service = WeatherService()
    fake_server.enqueue([ToolCall("tool_search", {"query": "forecast"}, id="s1")], [Text("found it")])
    session = {"tool_search": {"catalogs": [declared(service)]}}
    agent = await make_agent(COMPLETIONS, database_path=store, session=session)
    await run_with(agent, {"prompt": "find", "request_id": "r1"})
    await agent.close()

    fake_server.enqueue([ToolCall("wx_forecast", {"city": "Oslo"}, id="c1")], [Text("done")])
    again = await make_agent(COMPLETIONS, database_path=store, session=session)
    await run_with(again, {"prompt": "use it", "request_id": "r2"})
    assert "wx_forecast" in offered(fake_server.requests[2])
    assert tool_results(fake_server.requests[3])[-1] == "Oslo: sunny"
    assert service.opens == 1


# --- drift ----------------------------------------------------------------------------------


async def _call_once(make_agent: Any, fake_server: Any, store: str, catalog: AgentToolCatalog, rid: str) -> Any:
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "forecast"}, id=f"s-{rid}")],
        [ToolCall("wx_forecast", {"city": "Oslo"}, id=f"c-{rid}")],
        [Text("done")],
    )
    agent = await make_agent(COMPLETIONS, database_path=store, session={"tool_search": {"catalogs": [catalog]}})
    events = await run_with(agent, {"prompt": "weather", "request_id": rid})
    await agent.close()
    return events


def _result_of(events: list[Any], name: str) -> Any:
    return next(e for e in events if e.type == "tool" and e.phase == "end" and e.name == name)


async def test_service_drift_between_sessions_is_an_error_and_closes_the_connection(
    make_agent: Any, fake_server: Any, tmp_path: Path
) -> None:
    """X3: the next session's service answers with another schema → the call is a tool error
    naming what changed, nothing is executed, and the connection is closed at once."""
    store = str(tmp_path / "s.sqlite")
    first = WeatherService()
    events = await _call_once(make_agent, fake_server, store, declared(first), "r1")
    assert _result_of(events, "wx_forecast").result == "Oslo: sunny"

    drifted = WeatherService(schema=SCHEMA_B, description="Forecast, now with days.")
    events = await _call_once(make_agent, fake_server, store, declared(drifted), "r2")
    end = _result_of(events, "wx_forecast")
    assert end.is_error
    assert "differs from the definition this session saved" in end.result
    assert "description, schema changed" in end.result and "new session" in end.result
    assert drifted.calls == [], "a drifted tool is never executed"
    assert drifted.opens == 1 and drifted.closes == 1, "the connection was closed on drift"
    record = catalog_record(last_snapshot(events))
    assert record["status"] == "error" and "differs from the definition" in record["error"]


async def test_updating_the_declared_descriptor_with_the_service_does_not_bypass_the_check(
    make_agent: Any, fake_server: Any, tmp_path: Path
) -> None:
    """X3: the host declares the new schema and the service serves it → still an error: the
    call is held to what this session first saved, and nothing is connected."""
    store = str(tmp_path / "s.sqlite")
    await _call_once(make_agent, fake_server, store, declared(WeatherService()), "r1")
    both = WeatherService(schema=SCHEMA_B)
    events = await _call_once(make_agent, fake_server, store, declared(both, schema=SCHEMA_B), "r2")
    search = _result_of(events, "tool_search")
    assert '"required":["city"]' in search.result, "search shows the saved schema, not the new declaration"
    end = _result_of(events, "wx_forecast")
    assert end.is_error and "declared descriptor" in end.result
    assert both.opens == 0 and both.calls == []


# --- connection failures, approval, undeclared tools --------------------------------------


async def test_transient_open_failure_is_an_error_and_calling_again_retries(make_agent: Any, fake_server: Any) -> None:
    """X3: a failed connect is a tool error that says to retry; the next call connects."""
    service = WeatherService()
    service.failures_left = 1
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "forecast"}, id="s1")],
        [ToolCall("wx_forecast", {"city": "Oslo"}, id="c1")],
        [ToolCall("wx_forecast", {"city": "Oslo"}, id="c2")],
        [Text("done")],
    )
    states: list[tuple[str, str | None]] = []

    def watch(event: Any) -> None:
        if event.type == "tool" and event.phase == "end" and event.name == "wx_forecast":
            record = catalog_record(agent.snapshot())
            states.append((record["status"], record["error"]))

    agent = await make_agent(COMPLETIONS, session={"tool_search": {"catalogs": [declared(service)]}})
    await run_with(agent, "weather", watch)
    failed, retried = tool_results(fake_server.requests[2]), tool_results(fake_server.requests[3])
    assert "could not connect: weather service is starting up" in failed[1]
    assert "call the tool again to retry" in failed[1]
    assert retried[2] == "Oslo: sunny"
    assert service.opens == 2
    assert states[0][0] == "error" and "starting up" in (states[0][1] or "")
    assert states[1] == ("connected", None)


async def test_catalog_approve_hook_is_asked_before_connecting(make_agent: Any, fake_server: Any) -> None:
    """X3: ``approve`` sees each call first; a denial is a tool error and nothing connects."""
    service = WeatherService()
    asked: list[dict[str, Any]] = []

    def approve(payload: dict[str, Any]) -> None:
        asked.append(payload)
        if payload["arguments"]["city"] == "Mordor":
            raise PermissionError("no forecasts for Mordor")

    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "forecast"}, id="s1")],
        [ToolCall("wx_forecast", {"city": "Mordor"}, id="c1")],
        [ToolCall("wx_forecast", {"city": "Oslo"}, id="c2")],
        [Text("done")],
    )
    agent = await make_agent(COMPLETIONS, session={"tool_search": {"catalogs": [declared(service, approve=approve)]}})
    await run_with(agent, "weather")
    denied = tool_results(fake_server.requests[2])[1]
    assert "denied: no forecasts for Mordor" in denied
    assert [p["arguments"]["city"] for p in asked] == ["Mordor", "Oslo"]
    assert asked[0]["catalog_id"] == "wx" and asked[0]["tool"] == "wx_forecast"
    assert service.calls == [{"city": "Oslo"}] and service.opens == 1


async def test_a_tool_not_found_by_search_is_unknown_and_connects_nothing(make_agent: Any, fake_server: Any) -> None:
    """X3: catalog tools are callable only once a search offered them to this context."""
    service = WeatherService()
    fake_server.enqueue([ToolCall("wx_forecast", {"city": "Oslo"}, id="c1")], [Text("done")])
    agent = await make_agent(COMPLETIONS, session={"tool_search": {"catalogs": [declared(service)]}})
    await run_with(agent, "weather")
    assert "Unknown tool 'wx_forecast'" in tool_results(fake_server.requests[1])[0]
    assert service.opens == 0


async def test_records_are_json_and_list_every_catalog(make_agent: Any) -> None:
    """X3/S3: records["catalogs"] holds one entry per catalog, JSON-serialisable."""
    undeclared = AgentToolCatalog(id="later", allowed_tools=["later_x"], open=_noop_open, info={"region": "eu"})
    agent = await make_agent(
        COMPLETIONS, session={"tool_search": {"catalogs": [declared(WeatherService()), undeclared]}}
    )
    records = json.loads(json.dumps(agent.snapshot()["records"]))["catalogs"]
    assert [r["id"] for r in records] == ["wx", "later"]
    assert records[1] == {
        "id": "later",
        "kind": "custom",
        "info": {"region": "eu"},
        "declared_tools": 0,
        "allowed_tools": 1,
        "saved_tools": 0,
        "source": None,
        "status": "declared",
        "error": None,
    }


def test_readme_example_runs_and_connects_nothing(workspace: Path) -> None:
    """X3: the docs' catalog example opens a session with an MCP catalog whose command does
    not exist: nothing is started, the record says ``declared`` and shows no credential."""
    script = workspace / "example.py"
    script.write_text(python_example("docs/tools-and-environments.md", "### Tool catalogs and MCP"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), AGENTCORE_DEMO_DELAY_MS="0")
    result = subprocess.run(
        [sys.executable, str(script)], cwd=workspace, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    [record] = ast.literal_eval(result.stdout.strip())
    assert record == {
        "id": "files",
        "kind": "mcp",
        "info": {"transport": "stdio", "target": "my-mcp-server"},
        "declared_tools": 0,
        "allowed_tools": 2,
        "saved_tools": 0,
        "source": None,
        "status": "declared",
        "error": None,
    }
    assert "tok-123456" not in result.stdout


def test_oversized_descriptors_are_refused() -> None:
    """X3: a declared definition is bounded (it is stored and sent with every request)."""
    huge = {"type": "object", "properties": {f"p{n}": {"type": "string", "description": "x" * 100} for n in range(600)}}
    with pytest.raises(InputValidationError) as caught:
        CatalogToolDescriptor("wx_a", "A.", huge)
    assert caught.value.field == "parameters"
    with pytest.raises(InputValidationError) as caught:
        CatalogToolDescriptor("wx_a", "A" * 20_000, {"type": "object"})
    assert caught.value.field == "description"


async def test_discovery_keeps_out_what_is_not_offered_or_too_large(make_agent: Any, fake_server: Any) -> None:
    """X3: an undeclared catalog's first search saves only allowed tools the service offers
    in a storable size; the rest is listed as missing and never offered."""
    huge = {"type": "object", "properties": {f"p{n}": {"type": "string", "description": "x" * 100} for n in range(600)}}

    async def run(arguments: dict[str, Any], ctx: Any) -> ToolResult:
        return ToolResult.text("ran")

    async def open_catalog() -> StaticCatalogConnection:
        return StaticCatalogConnection(
            [
                AgentTool("kit_small", "A small kit tool.", {"type": "object"}, run),
                AgentTool("kit_huge", "A huge kit tool.", huge, run),
                AgentTool("kit_secret", "A kit tool nobody allowed.", {"type": "object"}, run),
            ]
        )

    catalog = AgentToolCatalog(id="kit", allowed_tools=["kit_small", "kit_huge", "kit_gone"], open=open_catalog)
    fake_server.enqueue([ToolCall("tool_search", {"query": "kit tool"}, id="s1")], [Text("ok")])
    agent = await make_agent(COMPLETIONS, session={"tool_search": {"catalogs": [catalog]}})
    events = await run_with(agent, "find kit tools")
    assert offered(fake_server.requests[1]) >= {"kit_small"}
    assert not offered(fake_server.requests[1]) & {"kit_huge", "kit_secret", "kit_gone"}
    record = catalog_record(last_snapshot(events), "kit")
    assert (record["source"], record["saved_tools"], record["missing"]) == ("discovered", 1, ["kit_huge", "kit_gone"])


async def test_cancel_stops_a_call_whose_service_stopped_answering(make_agent: Any, fake_server: Any) -> None:
    """X3/L8: a catalog that never answers its tool listing cannot hold a cancelled turn."""
    asked = asyncio.Event()

    class Silent(StaticCatalogConnection):
        async def list_tools(self) -> Sequence[AgentTool]:
            asked.set()
            await asyncio.Event().wait()  # the service stopped answering
            raise AssertionError("unreachable")

    async def open_silent() -> StaticCatalogConnection:
        return Silent([])

    catalog = AgentToolCatalog(
        id="wx", tools=[CatalogToolDescriptor("wx_forecast", DESCRIPTION, SCHEMA_A)], open=open_silent
    )
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "forecast"}, id="s1")],
        [ToolCall("wx_forecast", {"city": "Oslo"}, id="c1")],
    )
    agent = await make_agent(COMPLETIONS, session={"tool_search": {"catalogs": [catalog]}})

    async def cancel_when_asked() -> None:
        await asked.wait()
        await agent.control({"type": "cancel", "request_id": "stop"})

    canceller = asyncio.ensure_future(cancel_when_asked())
    events = await run_with(agent, {"prompt": "weather", "request_id": "r1"})
    await canceller
    assert [e.status for e in events if e.type == "end"] == ["aborted"]
    assert (
        "cancelled"
        in next(e for e in events if e.type == "tool" and e.phase == "end" and e.name == "wx_forecast").result
    )


async def test_a_catalog_tool_named_like_an_extra_tool_is_never_offered(make_agent: Any, fake_server: Any) -> None:
    """X3: an extra tool keeps its name; the catalog tool that collides is shown as a conflict."""

    async def local(arguments: dict[str, Any], ctx: Any) -> ToolResult:
        return ToolResult.text("local forecast")

    extra = AgentTool("wx_forecast", "The host's own forecast tool.", SCHEMA_A, local)
    service = WeatherService()
    fake_server.enqueue([ToolCall("tool_search", {"query": "forecast"}, id="s1")], [Text("ok")])
    agent = await make_agent(
        COMPLETIONS, extra_tools=[extra], session={"tool_search": {"catalogs": [declared(service)]}}
    )
    events = await run_with(agent, "find")
    assert "No tool matches" in tool_results(fake_server.requests[1])[0]
    names = [t["function"]["name"] for t in fake_server.requests[1].json["tools"]]
    assert names.count("wx_forecast") == 1
    assert catalog_record(last_snapshot(events))["conflicts"] == ["wx_forecast"]
