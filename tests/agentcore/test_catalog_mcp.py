"""MCP tool catalogs against real MCP server processes (SPEC X3 on T4).

The server is ``tests/fixtures/mcp_catalog_server.py`` (the official SDK's ``MCPServer``),
over stdio and over streamable HTTP on 127.0.0.1. It appends its pid to a start log and each
tool call to a call log, so "no process was started" and "the drifted tool never ran" are
read from outside the process, not inferred. The model is the fake provider server driving
real runs; a catalog is always reached through ``tool_search`` and the engine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentTool, ToolResult
from agentcore.engine.interrupted import INTERRUPTED_RESULT
from agentcore.errors import InputValidationError
from agentcore.extensions.catalogs import CatalogToolDescriptor
from agentcore.extensions.mcp import connect_mcp_server
from agentcore.extensions.mcp_catalog import McpServerDefinition, create_mcp_tool_catalog, mcp_tool_descriptors
from agentcore.testing.steps import Text, ToolCall
from tests.agentcore.child_process import spawn
from tests.agentcore.session_helpers import last_snapshot, run_with
from tests.agentcore.test_crash_resume import assert_store_invariants

COMPLETIONS = "openai-completions"
SERVER = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp_catalog_server.py")
ALLOWED = ["add", "lookup", "notes", "crash"]
SECRET = "sk-catalog-secret-0123456789"


class ServerLogs:
    """What the fixture server reports about itself: its starts (pids) and its tool calls."""

    def __init__(self, root: Path) -> None:
        self.start_log = root / "starts.log"
        self.call_log = root / "calls.log"

    def starts(self) -> list[int]:
        return [int(line) for line in self.start_log.read_text().split()] if self.start_log.exists() else []

    def calls(self) -> list[str]:
        return self.call_log.read_text().split() if self.call_log.exists() else []

    def env(self, variant: str = "a", **extra: str) -> dict[str, str]:
        return {
            "FIXTURE_START_LOG": str(self.start_log),
            "FIXTURE_CALL_LOG": str(self.call_log),
            "FIXTURE_VARIANT": variant,
            **extra,
        }


def stdio(logs: ServerLogs, variant: str = "a", **extra_env: str) -> dict[str, Any]:
    return {"id": "fx", "command": sys.executable, "args": [SERVER], "env": logs.env(variant, **extra_env)}


async def descriptors(allowed: list[str] = ALLOWED, variant: str = "a") -> list[CatalogToolDescriptor]:
    """The descriptors a host records from a live server (a process without the start log)."""
    connection = await connect_mcp_server(sys.executable, [SERVER], {"FIXTURE_VARIANT": variant}, server_id="fx")
    try:
        return await mcp_tool_descriptors(connection, allowed)
    finally:
        await connection.aclose()


def session(*catalogs: Any) -> dict[str, Any]:
    return {"tool_search": {"catalogs": list(catalogs)}}


def offered(request: Any) -> set[str]:
    return {tool["function"]["name"] for tool in request.json.get("tools", [])}


def tool_ends(events: list[Any], name: str) -> list[Any]:
    return [e for e in events if e.type == "tool" and e.phase == "end" and e.name == name]


def pid_is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def fx_record(snapshot: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in snapshot["records"]["catalogs"] if r["id"] == "fx")


@pytest.fixture
def logs(tmp_path: Path) -> ServerLogs:
    return ServerLogs(tmp_path)


# --- building a catalog starts nothing --------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"definition": {"id": "fx"}}, "definition"),
        ({"definition": {"id": "fx", "command": "x", "url": "http://127.0.0.1:1/mcp"}}, "definition"),
        ({"definition": {"id": "f x", "command": "x"}}, "definition.id"),
        ({"definition": {"id": "fx", "command": "x", "env": {"TOKEN": 5}}}, "definition.env.TOKEN"),
        ({"definition": {"id": "fx", "command": "x", "args": "--flag"}}, "definition.args"),
        ({"definition": {"id": "fx", "command": "x", "headers": {"A": "b"}}}, "definition"),
        ({"definition": {"id": "fx", "url": "ftp://127.0.0.1/mcp"}}, "definition"),
        ({"definition": {"id": "fx", "command": "x", "colour": "red"}}, "definition.colour"),
        ({"definition": {"id": "fx", "command": "x", "connect_timeout": 0}}, "definition.connect_timeout"),
        ({"definition": "python server.py"}, "definition"),
        ({"allowed_tools": "add"}, "allowed_tools"),
        ({"allowed_tools": []}, "allowed_tools"),
        ({"allowed_tools": ["add", ""]}, "allowed_tools.1"),
        ({"allowed_tools": ["a.b", "a_b"]}, "allowed_tools.1"),
        ({"descriptors": []}, "descriptors"),
        ({"descriptors": [{"name": "fx_other", "description": "x", "parameters": {"type": "object"}}]},
         "descriptors.0.name"),
        ({"descriptors": [{"name": "fx_add", "description": " ", "parameters": {"type": "object"}}]},
         "descriptors.0.description"),
        ({"descriptors": [{"name": "fx_add", "description": "x", "parameters": {"type": "object"}, "run": 1}]},
         "descriptors.0"),
        ({"approve": "yes"}, "approve"),
        ({"connect": 42}, "connect"),
    ],
)  # fmt: skip
def test_bad_mcp_catalog_arguments_name_the_field_and_start_nothing(
    logs: ServerLogs, changes: dict[str, Any], field: str
) -> None:
    """X3: create_mcp_tool_catalog validates the definition without starting the process."""
    arguments: dict[str, Any] = {"definition": stdio(logs), "allowed_tools": ["add"], **changes}
    with pytest.raises(InputValidationError) as caught:
        create_mcp_tool_catalog(**arguments)
    assert caught.value.field == field
    assert logs.starts() == []


def test_a_valid_mcp_catalog_starts_nothing_and_hides_its_credentials(logs: ServerLogs) -> None:
    """X3: a valid definition only builds the catalog; ids are <server_id>_<tool>; env values,
    headers and URL credentials never show in reprs or in the catalog's public info."""
    catalog = create_mcp_tool_catalog(definition=stdio(logs, TOKEN=SECRET), allowed_tools=["add", "dotted.name"])
    assert catalog.allowed_tools == ("fx_add", "fx_dotted_name") and catalog.kind == "mcp"
    assert catalog.info == {"transport": "stdio", "target": sys.executable}
    assert logs.starts() == []
    url = f"http://user:{SECRET}@127.0.0.1:9/mcp?token={SECRET}"
    headers = {"Authorization": f"Bearer {SECRET}"}
    http = McpServerDefinition.model_validate({"id": "fx", "url": url, "headers": headers})
    assert http.target == "http://127.0.0.1:9/mcp"
    assert SECRET not in repr(http) and SECRET not in repr(McpServerDefinition.model_validate(stdio(logs, T=SECRET)))
    assert SECRET not in http.redact(f"failed to reach {url} with Bearer {SECRET}")


# --- stdio: search, connect, drift, crash, retry ----------------------------------------------


async def test_declared_search_starts_no_server_and_the_first_call_does(
    make_agent: Any, fake_server: Any, logs: ServerLogs
) -> None:
    """X3: with declared descriptors search never starts the server; the first call does, one
    process serves the later calls, and closing the session stops it."""
    catalog = create_mcp_tool_catalog(definition=stdio(logs), allowed_tools=ALLOWED, descriptors=await descriptors())
    starts_when: dict[str, list[int]] = {}

    def watch(event: Any) -> None:
        if event.type == "tool" and event.phase == "end":
            starts_when.setdefault(event.name, []).append(len(logs.starts()))

    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "add lookup"}, id="s1")],
        [ToolCall("fx_add", {"a": 2, "b": 3}, id="c1")],
        [ToolCall("fx_lookup", {"key": "oslo"}, id="c2")],
        [Text("5, and sunny")],
    )
    agent = await make_agent(COMPLETIONS, session=session(catalog))
    events = await run_with(agent, {"prompt": "add and look up", "request_id": "r1"}, watch)

    assert starts_when["tool_search"] == [0], "search read the saved descriptors; no process ran"
    assert {"fx_add", "fx_lookup"} <= offered(fake_server.requests[1])
    assert '"sum": 5' in tool_ends(events, "fx_add")[0].result
    assert tool_ends(events, "fx_lookup")[0].result == "oslo: sunny"
    assert starts_when["fx_add"] == [1] and starts_when["fx_lookup"] == [1]
    assert logs.calls() == ["add", "lookup"]
    record = fx_record(last_snapshot(events))
    assert (record["kind"], record["status"], record["declared_tools"], record["saved_tools"]) == (
        "mcp",
        "connected",
        4,
        4,
    )
    assert record["info"] == {"transport": "stdio", "target": sys.executable}
    [pid] = logs.starts()
    await agent.close()
    assert pid_is_gone(pid), "the session owner stops the server when it closes"


async def test_undeclared_catalog_is_discovered_once_and_reopened_sessions_search_the_store(
    make_agent: Any, fake_server: Any, logs: ServerLogs, tmp_path: Path
) -> None:
    """X3: without descriptors the first search connects and saves the allowed tools' definitions
    (nothing else the server offers); a reopened session searches them without any process."""
    store = str(tmp_path / "s.sqlite")
    catalog = create_mcp_tool_catalog(definition=stdio(logs), allowed_tools=ALLOWED)
    fake_server.enqueue([ToolCall("tool_search", {"query": "add"}, id="s1")], [Text("found")])
    agent = await make_agent(COMPLETIONS, database_path=store, session=session(catalog))
    assert fx_record(agent.snapshot())["saved_tools"] == 0 and logs.starts() == []
    events = await run_with(agent, {"prompt": "find", "request_id": "r1"})
    assert len(logs.starts()) == 1, "the first search connected"
    record = fx_record(last_snapshot(events))
    assert (record["source"], record["saved_tools"], record["status"]) == ("discovered", 4, "connected")
    await agent.close()

    fake_server.enqueue([ToolCall("tool_search", {"query": "weather reset"}, id="s2")], [Text("found")])
    again = await make_agent(COMPLETIONS, database_path=store, session=session(catalog))
    events = await run_with(again, {"prompt": "find more", "request_id": "r2"})
    found = tool_ends(events, "tool_search")[0].result
    assert "fx_lookup (catalog fx)" in found
    assert "admin_reset" not in found, "a tool the catalog does not allow is never saved or found"
    assert len(logs.starts()) == 1, "the reopened session searched the saved definitions"
    assert fx_record(last_snapshot(events))["status"] == "declared"


async def test_schema_drift_between_sessions_is_a_tool_error_and_closes_the_connection(
    make_agent: Any, fake_server: Any, logs: ServerLogs, tmp_path: Path
) -> None:
    """X3: the store's next session starts the server with another schema for ``add``: the call
    is a tool error naming the change, ``add`` never runs, and that server is stopped at once."""
    store = str(tmp_path / "s.sqlite")
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "add"}, id="s1")],
        [ToolCall("fx_add", {"a": 1, "b": 2}, id="c1")],
        [Text("3")],
    )
    first = await make_agent(
        COMPLETIONS,
        database_path=store,
        session=session(create_mcp_tool_catalog(definition=stdio(logs), allowed_tools=ALLOWED)),
    )
    await run_with(first, {"prompt": "add", "request_id": "r1"})
    await first.close()
    assert logs.calls() == ["add"]

    gone_at_error: list[bool] = []

    def watch(event: Any) -> None:
        if event.type == "tool" and event.phase == "end" and event.name == "fx_add":
            gone_at_error.append(pid_is_gone(logs.starts()[-1]))

    fake_server.enqueue([ToolCall("fx_add", {"a": 1, "b": 2}, id="c2")], [Text("hm")])
    drifted = create_mcp_tool_catalog(definition=stdio(logs, variant="b"), allowed_tools=ALLOWED)
    second = await make_agent(COMPLETIONS, database_path=store, session=session(drifted))
    events = await run_with(second, {"prompt": "add again", "request_id": "r2"}, watch)

    end = tool_ends(events, "fx_add")[0]
    assert end.is_error
    assert "tool 'fx_add' differs from the definition this session saved" in end.result
    assert "description, schema changed in catalog 'fx'" in end.result
    assert "connection was closed" in end.result and "new session" in end.result
    assert len(logs.starts()) == 2, "the call did connect to verify"
    assert gone_at_error == [True], "the drifted server was stopped before the result was reported"
    assert logs.calls() == ["add"], "the drifted tool never ran"
    record = fx_record(last_snapshot(events))
    assert record["status"] == "error" and "differs from the definition" in record["error"]


async def test_new_descriptors_and_new_server_together_do_not_bypass_the_check(
    make_agent: Any, fake_server: Any, logs: ServerLogs, tmp_path: Path
) -> None:
    """X3: the host declares the new schema and runs the new server → still an error (checked
    against what this session first saved), and no process is started for it."""
    store = str(tmp_path / "s.sqlite")
    old = create_mcp_tool_catalog(definition=stdio(logs), allowed_tools=ALLOWED, descriptors=await descriptors())
    first = await make_agent(COMPLETIONS, database_path=store, session=session(old))
    await first.close()  # opening the session saved the declared descriptors

    new = create_mcp_tool_catalog(
        definition=stdio(logs, variant="b"), allowed_tools=ALLOWED, descriptors=await descriptors(variant="b")
    )
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "add"}, id="s1")],
        [ToolCall("fx_add", {"a": 1, "b": 2, "c": 3}, id="c1")],
        [ToolCall("fx_add", {"a": 1, "b": 2}, id="c2")],
        [Text("hm")],
    )
    second = await make_agent(COMPLETIONS, database_path=store, session=session(new))
    events = await run_with(second, {"prompt": "add", "request_id": "r1"})
    assert "Add two integers." in tool_ends(events, "tool_search")[0].result, "search shows the saved definition"
    invalid, drifted = tool_ends(events, "fx_add")
    assert invalid.is_error and "c" in invalid.result, "arguments are checked against the saved schema"
    assert drifted.is_error and "the host's declared descriptor" in drifted.result
    assert logs.starts() == [] and logs.calls() == []


async def test_server_crash_mid_call_is_a_clear_error_and_the_next_call_reconnects(
    make_agent: Any, fake_server: Any, logs: ServerLogs
) -> None:
    """X3/T4: the server process dies during a call → an error result naming the server and its
    last words; the catalog shows the error; the next call starts a new process."""
    records: list[dict[str, Any]] = []

    def watch(event: Any) -> None:
        if event.type == "tool" and event.phase == "end" and event.name.startswith("fx_"):
            records.append(fx_record(agent.snapshot()))

    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "crash add"}, id="s1")],
        [ToolCall("fx_crash", {}, id="c1")],
        [ToolCall("fx_add", {"a": 4, "b": 4}, id="c2")],
        [Text("8")],
    )
    catalog = create_mcp_tool_catalog(definition=stdio(logs), allowed_tools=ALLOWED, descriptors=await descriptors())
    agent = await make_agent(COMPLETIONS, session=session(catalog))
    events = await run_with(agent, "crash then add", watch)
    crashed = tool_ends(events, "fx_crash")[0]
    assert crashed.is_error
    assert "MCP server 'fx' exited during the call to 'crash'" in crashed.result
    assert "crashing on purpose" in crashed.result
    assert records[0]["status"] == "error" and "exited during the call" in records[0]["error"]
    assert '"sum": 8' in tool_ends(events, "fx_add")[0].result
    assert records[1]["status"] == "connected" and records[1]["error"] is None
    first_pid, second_pid = logs.starts()
    assert pid_is_gone(first_pid) and first_pid != second_pid


async def test_failed_start_is_retried_by_the_next_call_and_credentials_stay_out_of_records(
    make_agent: Any, fake_server: Any, logs: ServerLogs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """X3/T4: a server that fails its first start → a retryable tool error (its stderr quoted,
    the credential in it masked); calling again starts it. The server gets exactly the
    definition's env, never the host's; records never show the credential."""
    monkeypatch.setenv("HOST_ONLY_TOKEN", "host-secret-value")
    marker = tmp_path / "failed-once"
    definition = stdio(logs, FIXTURE_FAIL_ONCE=str(marker), FIXTURE_LEAK=SECRET, API_TOKEN=SECRET)
    allowed = ["add", "secret_env"]
    declared = await descriptors(allowed)
    catalog = create_mcp_tool_catalog(definition=definition, allowed_tools=allowed, descriptors=declared)
    seen: list[dict[str, Any]] = []

    def watch(event: Any) -> None:
        if event.type == "tool" and event.phase == "end" and event.name.startswith("fx_"):
            seen.append(fx_record(agent.snapshot()))

    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "add secret"}, id="s1")],
        [ToolCall("fx_add", {"a": 1, "b": 1}, id="c1")],
        [ToolCall("fx_add", {"a": 1, "b": 1}, id="c2")],
        [ToolCall("fx_secret_env", {"name": "API_TOKEN"}, id="c3")],
        [ToolCall("fx_secret_env", {"name": "HOST_ONLY_TOKEN"}, id="c4")],
        [Text("done")],
    )
    agent = await make_agent(COMPLETIONS, session=session(catalog))
    events = await run_with(agent, "go", watch)
    failed, retried = tool_ends(events, "fx_add")
    assert failed.is_error and "catalog 'fx' could not connect" in failed.result
    assert "failing this start on purpose ***" in failed.result and SECRET not in failed.result
    assert "call the tool again to retry" in failed.result
    assert seen[0]["status"] == "error" and SECRET not in json.dumps(seen[0])
    assert '"sum": 2' in retried.result and seen[1]["status"] == "connected"
    assert len(logs.starts()) == 2
    given, inherited = tool_ends(events, "fx_secret_env")
    assert given.result == SECRET, "the definition's env reaches the server"
    assert inherited.result == "<unset>", "the host's environment does not"
    records = json.dumps(last_snapshot(events)["records"])
    assert SECRET not in records and "API_TOKEN" not in records


async def test_tools_and_services_outside_the_declaration_are_never_connected(
    make_agent: Any, fake_server: Any, logs: ServerLogs
) -> None:
    """X3: search finds only declared tools, a tool the server offers but the host did not
    declare is unknown, and ``approve`` denies before connecting: no process ever starts."""
    asked: list[dict[str, Any]] = []

    def approve(payload: dict[str, Any]) -> bool:
        asked.append(payload)
        return False

    catalog = create_mcp_tool_catalog(
        definition=stdio(logs), allowed_tools=ALLOWED, descriptors=await descriptors(), approve=approve
    )
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "reset everything"}, id="s1")],
        [ToolCall("fx_admin_reset", {}, id="c1")],
        [ToolCall("tool_search", {"query": "notes"}, id="s2")],
        [ToolCall("fx_notes", {"text": "hi"}, id="c2")],
        [Text("done")],
    )
    agent = await make_agent(COMPLETIONS, session=session(catalog))
    events = await run_with(agent, "try everything")
    assert "No tool matches" in tool_ends(events, "tool_search")[0].result
    assert "Unknown tool 'fx_admin_reset'" in tool_ends(events, "fx_admin_reset")[0].result
    denied = tool_ends(events, "fx_notes")[0]
    assert denied.is_error and "denied by catalog 'fx'" in denied.result
    assert asked == [
        {
            "catalog_id": "fx",
            "tool": "fx_notes",
            "arguments": {"text": "hi"},
            "tool_call_id": asked[0]["tool_call_id"],
            "server_id": "fx",
            "mcp_tool": "notes",
        }
    ]
    assert logs.starts() == [] and logs.calls() == []


# --- streamable HTTP on 127.0.0.1 -------------------------------------------------------------


class HttpServer:
    """The fixture server over streamable HTTP. The port is reserved first (a bound socket that
    does not listen, so connecting is refused); ``start()`` hands that socket to a new server
    process and returns once it listens."""

    def __init__(self, logs: ServerLogs) -> None:
        self.logs = logs
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}/mcp"
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        fd = self.socket.fileno()
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            SERVER,
            "--http",
            "--fd",
            str(fd),
            env={**os.environ, **self.logs.env()},
            stdout=asyncio.subprocess.PIPE,
            pass_fds=[fd],
        )
        assert self.process.stdout is not None
        assert await self.process.stdout.readline() == b"LISTENING\n"
        # The server owns the listening socket now. Our copy would keep the port listening
        # after the server dies, and a client would then wait for an answer instead of
        # being refused.
        self.socket.close()

    async def kill_when_called(self, tool: str) -> None:
        assert self.process is not None and self.process.stdout is not None
        while (line := await self.process.stdout.readline()) and line != f"CALL {tool}\n".encode():
            pass
        self.process.kill()
        await self.process.wait()

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        self.socket.close()


@pytest.fixture
async def http_server(logs: ServerLogs) -> AsyncIterator[HttpServer]:
    server = HttpServer(logs)
    yield server
    await server.stop()


def side_tool(name: str, action: Callable[[], Any]) -> AgentTool:
    """An extra tool the scripted model calls to change the world between two steps."""

    async def execute(arguments: dict[str, Any], ctx: Any) -> ToolResult:
        result = action()
        if asyncio.iscoroutine(result):
            await result
        return ToolResult.text(f"{name}: done")

    return AgentTool(name, f"Test hook: {name}.", {"type": "object", "properties": {}}, execute)


async def test_http_search_needs_no_server_a_refused_call_is_retried_and_a_crash_is_reported(
    make_agent: Any, fake_server: Any, logs: ServerLogs, http_server: HttpServer
) -> None:
    """X3 over streamable HTTP: search works while nothing listens; a refused connect is a
    retryable error; after the server starts the retry succeeds; the server killed mid-call is
    a clear error; the Authorization header never reaches the records."""
    allowed = ["add", "hang"]
    catalog = create_mcp_tool_catalog(
        definition={"id": "fx", "url": http_server.url, "headers": {"Authorization": f"Bearer {SECRET}"}},
        allowed_tools=allowed,
        descriptors=await descriptors(allowed),
    )
    killer: list[asyncio.Task[None]] = []
    extra = [
        side_tool("start_server", http_server.start),
        side_tool("arm_killer", lambda: killer.append(asyncio.ensure_future(http_server.kill_when_called("hang")))),
    ]
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "add hang"}, id="s1")],
        [ToolCall("fx_add", {"a": 1, "b": 2}, id="c1")],
        [ToolCall("start_server", {}, id="h1")],
        [ToolCall("fx_add", {"a": 1, "b": 2}, id="c2")],
        [ToolCall("arm_killer", {}, id="h2")],
        [ToolCall("fx_hang", {}, id="c3")],
        [Text("done")],
    )
    agent = await make_agent(COMPLETIONS, session=session(catalog), extra_tools=extra)
    events = await run_with(agent, "over http")
    assert "fx_add (catalog fx)" in tool_ends(events, "tool_search")[0].result
    refused, added = tool_ends(events, "fx_add")
    assert refused.is_error and "could not connect" in refused.result and "retry" in refused.result
    assert "http://127.0.0.1:" in refused.result and SECRET not in refused.result
    assert '"sum": 3' in added.result
    hung = tool_ends(events, "fx_hang")[0]
    assert hung.is_error and "MCP server 'fx' closed the connection during the call to 'hang'" in hung.result
    await killer[0]
    assert logs.calls() == ["add", "hang"]
    snapshot = last_snapshot(events)
    record = fx_record(snapshot)
    assert record["status"] == "error" and record["info"] == {"transport": "http", "target": http_server.url}
    assert SECRET not in json.dumps(snapshot["records"])


async def test_http_undeclared_catalog_search_retries_after_a_refused_connection(
    make_agent: Any, fake_server: Any, logs: ServerLogs, http_server: HttpServer
) -> None:
    """X3: the first search of an undeclared catalog that cannot connect saves nothing and says
    so; the next search connects, saves and offers the tools."""
    catalog = create_mcp_tool_catalog(definition={"id": "fx", "url": http_server.url}, allowed_tools=["add"])
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "add"}, id="s1")],
        [ToolCall("start_server", {}, id="h1")],
        [ToolCall("tool_search", {"query": "add"}, id="s2")],
        [ToolCall("fx_add", {"a": 20, "b": 22}, id="c1")],
        [Text("42")],
    )
    agent = await make_agent(
        COMPLETIONS, session=session(catalog), extra_tools=[side_tool("start_server", http_server.start)]
    )
    events = await run_with(agent, "find add")
    refused, found = tool_ends(events, "tool_search")
    assert "No tool matches" in refused.result and "Catalog fx could not be searched" in refused.result
    assert "fx_add (catalog fx)" in found.result
    assert '"sum": 42' in tool_ends(events, "fx_add")[0].result
    assert fx_record(last_snapshot(events))["saved_tools"] == 1


async def test_closing_the_session_is_bounded_when_the_http_server_stops_answering(
    make_agent: Any, fake_server: Any, http_server: HttpServer
) -> None:
    """X3/T4: the owner releases catalogs on close even when a server stops answering (SIGSTOP:
    its socket still accepts, nothing replies): the connection is given up after a few seconds,
    not after the HTTP read timeout (300 s)."""
    await http_server.start()
    catalog = create_mcp_tool_catalog(
        definition={"id": "fx", "url": http_server.url}, allowed_tools=["add"], descriptors=await descriptors(["add"])
    )
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "add"}, id="s1")],
        [ToolCall("fx_add", {"a": 1, "b": 1}, id="c1")],
        [Text("2")],
    )
    agent = await make_agent(COMPLETIONS, session=session(catalog))
    events = await run_with(agent, "add")
    assert '"sum": 2' in tool_ends(events, "fx_add")[0].result
    assert http_server.process is not None
    os.kill(http_server.process.pid, signal.SIGSTOP)
    started = time.monotonic()
    await agent.close()
    assert time.monotonic() - started < 15


# --- durability: a call interrupted by a crash -----------------------------------------------

CHILD = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_catalog_child.py"
ROOT = Path(__file__).resolve().parents[2]


async def open_fifo(path: Path) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    reader = asyncio.StreamReader()
    pipe = os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb", buffering=0)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    return reader, transport


@pytest.mark.crash
@pytest.mark.parametrize(
    ("tool", "expected", "new_starts"),
    [
        ("held_lookup", "oslo: archived", 1),  # read-only hint → saved replay "safe": re-run
        ("hang", INTERRUPTED_RESULT, 0),  # no hint → "never": interrupted, nothing reconnects
    ],
)
async def test_a_catalog_call_cut_by_a_crash_follows_its_saved_replay_policy(
    make_agent: Any, fake_server: Any, logs: ServerLogs, tmp_path: Path, tool: str, expected: str, new_starts: int
) -> None:
    """X3/D2: a child process is SIGKILLed while a catalog call runs (its intent committed);
    the reopened session answers it by the saved definition's replay policy, as for any tool."""
    db = tmp_path / "s.sqlite"
    allowed = ["held_lookup", "hang"]
    declared = await descriptors(allowed)
    calls = tmp_path / "calls.fifo"
    os.mkfifo(calls)
    spec = {
        "definition": stdio(logs, FIXTURE_HOLD="1", FIXTURE_CALL_PIPE=str(calls)),
        "allowed_tools": allowed,
        "descriptors": [dataclasses.asdict(d) for d in declared],
    }
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "archive wait"}, id="s1")],
        [ToolCall(f"fx_{tool}", {"key": "oslo"} if tool == "held_lookup" else {}, id="c1")],
        [Text("after the crash")],
    )
    in_flight, fifo = await open_fifo(calls)  # a reader first, so the server's write can open it
    child = await spawn(
        CHILD, "--db", str(db), "--base-url", fake_server.base_url, "--catalog", json.dumps(spec), "--request-id", "r1"
    )
    try:
        async with asyncio.timeout(30):
            assert await in_flight.readline() == f"{tool}\n".encode(), "the server is running the call"
        await child.kill()
        before = len(logs.starts())
        assert before == 1

        catalog = create_mcp_tool_catalog(definition=stdio(logs), allowed_tools=allowed, descriptors=declared)
        agent = await make_agent(COMPLETIONS, database_path=str(db), session=session(catalog))
        events = await run_with(agent, {"prompt": "go", "request_id": "r1"})
        resumed = [m["content"] for m in fake_server.requests[-1].json["messages"] if m["role"] == "tool"]
        assert resumed[-1] == expected
        assert [e.status for e in events if e.type == "end"] == ["completed"]
        assert len(logs.starts()) - before == new_starts
        await agent.close()
        assert_store_invariants(db)
    finally:
        fifo.close()
        if child.proc.returncode is None:
            await child.kill()
        for pid in logs.starts():  # a server the killed child left behind
            if not pid_is_gone(pid):
                os.kill(pid, signal.SIGKILL)
