"""One cap on every tool result (SPEC T3, T4, X3, X4; issue 22).

Every tool result crosses ``execute_call``; there its text is cut to ``max_tool_result_bytes``
(default 64 KiB, above what the built-in tools keep of their own output), structured content
larger than that is not kept, the rest is saved to a file beside bash's saved outputs, and the
model is told what was cut and where the rest is. Extra tools, MCP tools, catalog tools and the
nested calls of a code-mode script all pass that boundary; these tests drive each kind through
real runs (the fake provider server, a real stdio MCP server, the real QuickJS worker).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentTool, ToolContext, ToolResult
from agentcore.errors import InputValidationError
from agentcore.extensions.catalogs import AgentToolCatalog, CatalogToolDescriptor, StaticCatalogConnection
from agentcore.extensions.mcp import connect_mcp_server, create_mcp_tools
from agentcore.inputs import MAX_TOOL_RESULT_BYTES as DEFAULT_MAX_RESULT_BYTES
from agentcore.testing.steps import Text, ToolCall
from tests.agentcore.codemode_helpers import codemode_end, entries_of, script_turn
from tests.agentcore.session_helpers import run_with
from tests.helpers import collect, final

COMPLETIONS = "openai-completions"
MCP_SERVER = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp_server.py")
NOTE_BUDGET = 1_000  # the note the cap adds: a few hundred bytes, never more than this
SAVED = re.compile(r"The full text \(([\d.]+ [KM]?B)\) is saved in (\S+?); read it")


def numbered(lines: int) -> str:
    return "\n".join(f"line {n:06d} " + "x" * 60 for n in range(lines))


def text_tool(name: str, text: str, structured: Any = None) -> AgentTool:
    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        result = ToolResult.text(text)
        result.structured_content = structured
        return result

    return AgentTool(name, "Return a large text.", {"type": "object", "properties": {}}, execute)


def saved_text(path: str) -> str:
    """The content of a file the cap saved (read in a plain function: the tests are async)."""
    return Path(path).read_text()


def utf8(text: str) -> int:
    return len(text.encode())


def tool_end(events: list[Any], name: str) -> Any:
    return next(e for e in events if e.type == "tool" and e.phase == "end" and e.name == name)


async def test_an_extra_tools_huge_text_is_cut_and_the_rest_saved_where_read_can_open_it(
    make_agent, fake_server
) -> None:
    """T3: a 1 MB result reaches the event, the store and the model cut to the cap, with a note
    naming the file that holds all of it; the model's ``read`` opens that file (outside the
    workspace) and pages on."""
    full = numbered(15_000)
    saved: list[Path] = []

    def read_the_rest(request: Any) -> list[Any]:
        if len(fake_server.requests) == 1:
            return [ToolCall("dump", {}, id="d1")]
        if len(fake_server.requests) == 2:
            found = SAVED.search(request.json["messages"][-1]["content"])
            assert found, "the model is told where the rest is"
            saved.append(Path(found.group(2)))
            return [ToolCall("read", {"path": found.group(2), "offset": 12_000, "limit": 2}, id="r1")]
        return [Text("ok")]

    fake_server.responder = read_the_rest
    agent = await make_agent(COMPLETIONS, extra_tools=[text_tool("dump", full)])
    events = await collect(agent, "dump it")
    shown = tool_end(events, "dump").result
    assert DEFAULT_MAX_RESULT_BYTES < utf8(shown) <= DEFAULT_MAX_RESULT_BYTES + NOTE_BUDGET
    assert shown.startswith(full[:1000]) and f"({utf8(full):,} bytes)" in shown
    assert saved_text(str(saved[0])) == full and str(saved[0]) in shown
    committed = next(m for m in agent.read_transcript() if m["role"] == "tool_result")
    assert utf8(json.dumps(committed)) < DEFAULT_MAX_RESULT_BYTES * 2
    sent = fake_server.requests[1].json["messages"][-1]["content"]
    assert sent == shown, "the model gets what the event shows"
    assert "line 011999 " in tool_end(events, "read").result, "the saved file is readable by the read tool"


async def test_structured_content_over_the_cap_is_not_kept_and_is_saved_beside(make_agent, fake_server) -> None:
    """T3: structured content larger than the cap is dropped from the result (it would be
    committed and sent as is) and saved as JSON; the note says so."""
    rows = [{"id": n, "name": f"row {n}", "payload": "y" * 50} for n in range(5_000)]
    fake_server.enqueue([ToolCall("rows", {}, id="r1")], [Text("ok")])
    agent = await make_agent(COMPLETIONS, extra_tools=[text_tool("rows", "5000 rows", rows)])
    events = await collect(agent, "rows")
    shown = tool_end(events, "rows").result
    assert shown.startswith("5000 rows")
    match = re.search(r"structured content \(([\d.]+ [KM]?B)\) is larger than the .* saved in (\S+?\.json)", shown)
    assert match, shown
    assert json.loads(saved_text(match.group(2))) == rows
    committed = next(m for m in agent.read_transcript() if m["role"] == "tool_result")
    assert committed.get("structured_content") is None


async def test_the_cap_is_an_option_and_bad_values_name_the_field(make_agent, fake_server, tmp_path) -> None:
    """T3: ``max_tool_result_bytes`` sets the cap for every tool; a value that is not a whole
    number of bytes in range is input_validation naming the option, before a store exists."""
    fake_server.enqueue([ToolCall("dump", {}, id="d1")], [Text("ok")])
    agent = await make_agent(COMPLETIONS, extra_tools=[text_tool("dump", numbered(200))], max_tool_result_bytes=4096)
    shown = tool_end(await collect(agent, "dump"), "dump").result
    assert 4096 < utf8(shown) <= 4096 + NOTE_BUDGET and SAVED.search(shown)
    for bad in (0, 100, -5, "64k", True, 1.5, 1 << 40):
        db = tmp_path / "never.sqlite"
        with pytest.raises(InputValidationError) as caught:
            await make_agent(COMPLETIONS, database_path=str(db), max_tool_result_bytes=bad)
        assert caught.value.field == "max_tool_result_bytes", bad
        assert not db.exists()


async def test_built_in_outputs_keep_their_own_bounds_and_notes_under_the_default_cap(make_agent, fake_server) -> None:
    """T1: bash keeps the tail of 300 KB of output and its own note; the default cap never cuts
    a built-in's bounded output again."""
    command = "for i in $(seq 1 6000); do echo \"output line $i of the command\"; done"
    fake_server.enqueue([ToolCall("bash", {"command": command}, id="b1")], [Text("ok")])
    agent = await make_agent(COMPLETIONS)
    shown = tool_end(await collect(agent, "run"), "bash").result
    assert "output line 6000 of the command" in shown and "[Output cut: showing the last" in shown
    assert "The full text" not in shown


async def test_a_huge_mcp_result_is_bounded_in_the_event_the_store_and_the_context(
    make_agent, fake_server, tmp_path
) -> None:
    """T4/issue 22: an MCP tool answering 5 MB (the 50 MB case is ``bench/tool_result_cap.py``)
    no longer travels whole: the tool event, the committed result and the next request are cut
    to the cap, the SQLite store grows by kilobytes, and the turn completes."""
    db = tmp_path / "mcp.sqlite"
    async with await connect_mcp_server(sys.executable, [MCP_SERVER], server_id="fx") as conn:
        tools = await create_mcp_tools(conn, allowed_tools=["big"])
        fake_server.enqueue([ToolCall("fx_big", {"size": 5_000_000}, id="b1")], [Text("done")])
        agent = await make_agent(COMPLETIONS, database_path=str(db), extra_tools=tools)
        events = await collect(agent, "big")
    assert final(events).status == "completed" and final(events).text == "done"
    shown = tool_end(events, "fx_big").result
    assert utf8(shown) <= DEFAULT_MAX_RESULT_BYTES + NOTE_BUDGET
    assert len(saved_text(SAVED.search(shown).group(2))) == 5_000_000  # type: ignore[union-attr]
    store = sum(p.stat().st_size for p in tmp_path.glob("mcp.sqlite*"))
    assert store < 1_000_000, f"the store holds {store} bytes"
    assert utf8(json.dumps(fake_server.requests[-1].json)) < 4 * DEFAULT_MAX_RESULT_BYTES


async def test_a_catalog_tools_result_passes_the_same_cap(make_agent, fake_server) -> None:
    """X3: a catalog tool's result is cut like any other tool's."""
    full = numbered(5_000)

    async def open_service() -> StaticCatalogConnection:
        return StaticCatalogConnection([text_tool("svc_dump", full)])

    catalog = AgentToolCatalog(
        id="svc",
        tools=[CatalogToolDescriptor("svc_dump", "Return a large text.", {"type": "object", "properties": {}})],
        open=open_service,
    )
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "large text"}, id="s1")],
        [ToolCall("svc_dump", {}, id="c1")],
        [Text("ok")],
    )
    agent = await make_agent(COMPLETIONS, session={"tool_search": {"catalogs": [catalog]}})
    events = await run_with(agent, {"prompt": "dump", "request_id": "r1"})
    shown = tool_end(events, "svc_dump").result
    assert utf8(shown) <= DEFAULT_MAX_RESULT_BYTES + NOTE_BUDGET
    assert saved_text(SAVED.search(shown).group(2)) == full  # type: ignore[union-attr]


async def test_a_code_mode_nested_result_passes_the_same_cap(make_agent, fake_server) -> None:
    """X4: a script's nested call gets the cut result (with the note), and only that is
    committed in its execution log."""
    full = numbered(5_000)
    code = "const out = await tools.dump({}); return {bytes: out.length, tail: out.slice(-300)};"
    fake_server.enqueue(*script_turn(code))
    agent = await make_agent(COMPLETIONS, extra_tools=[text_tool("dump", full)], session={"code_mode": {}})
    events = await run_with(agent, {"prompt": "go", "request_id": "r"})
    end = codemode_end(events)
    assert not end.is_error, end.result
    returned = json.loads(end.result.split("Return value: ", 1)[1])
    assert returned["bytes"] <= DEFAULT_MAX_RESULT_BYTES + NOTE_BUDGET
    assert "is saved in" in returned["tail"]
    (result,) = entries_of(agent, "nested_result")
    assert utf8(json.dumps(result.payload)) <= DEFAULT_MAX_RESULT_BYTES + 2 * NOTE_BUDGET


async def test_a_huge_progress_update_is_cut_at_the_same_cap(make_agent, fake_server) -> None:
    """T3/E1: a tool's ``on_update`` partial crosses the same boundary: a 1 MB update reaches the
    ``tool`` update event cut to the cap, saying so."""

    async def chatty(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        assert ctx.on_update is not None
        ctx.on_update("progress " * 120_000)
        return ToolResult.text("done")

    tool = AgentTool("chatty", "Report a lot of progress.", {"type": "object", "properties": {}}, chatty)
    fake_server.enqueue([ToolCall("chatty", {}, id="c1")], [Text("ok")])
    agent = await make_agent(COMPLETIONS, extra_tools=[tool])
    events = await collect(agent, "go")
    (update,) = [e for e in events if e.type == "tool" and e.phase == "update"]
    assert utf8(update.partial) <= DEFAULT_MAX_RESULT_BYTES + NOTE_BUDGET
    assert update.partial.startswith("progress progress") and "[update cut at 64.0 KB" in update.partial
    assert tool_end(events, "chatty").result == "done"
