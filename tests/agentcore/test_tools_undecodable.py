"""Names and bytes that are not UTF-8 (SPEC T1, D1, X5; issue #19 "non-UTF-8 names wedge a session").

One display convention: a byte that is not part of valid UTF-8 is shown as ``\\xNN``, in names
and in text alike, and a name shown that way can be passed back as a path. Every tool result
is valid UTF-8, so it can be committed to any store and sent to any provider. The tool tests
run on this machine and in a remote environment (names cross the JSON-lines protocol there).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentInput
from agentcore.errors import ToolError
from agentcore.messages import ImageContent, TextContent
from agentcore.testing.steps import Text, ToolCall
from agentcore.tools import AgentTool, ToolContext, ToolResult, execute_call, prepare_call
from agentcore.tools.display import address_path, clean_text, clean_value, display_name
from tests.agentcore.tool_helpers import Target, call, make_ctx, text
from tests.helpers import collect, final

pytest_plugins = ("tests.agentcore.environment_fixtures",)  # the `target` fixture: local and remote

BAD = "bad\udcff.txt"  # the file system's str for the bytes b"bad\xff.txt"
BAD_SHOWN = "bad\\xff.txt"  # how every tool shows it (and how the model may write it)


def valid_utf8(value: str) -> str:
    value.encode("utf-8")  # raises on a lone surrogate
    return value


@pytest.fixture
def odd_tree(tmp_path: Path) -> Path:
    """A tree with undecodable names and contents: bad\\xff.txt, dir\\xfe/inner\\xfd.py, a link."""
    (tmp_path / BAD).write_bytes(b"hello \xfe world\nsecond line\n")
    (tmp_path / "dir\udcfe").mkdir()
    (tmp_path / "dir\udcfe" / "inner\udcfd.py").write_bytes(b"hello = 1\n")
    (tmp_path / "link").symlink_to(BAD)
    return tmp_path


def test_display_convention_and_its_inverse(tmp_path: Path) -> None:
    """The convention itself: surrogate escapes become \\xNN; other lone surrogates \\uXXXX; valid text is
    untouched (same object); an escaped name leads back to the real bytes."""
    assert display_name(BAD) == BAD_SHOWN
    assert clean_text("a\ud800b") == "a\\ud800b"
    plain = "ünïcode ✓"
    assert clean_text(plain) is plain
    nested = {"k\udcff": ["v\udcfe", 1, None], "ok": "x"}
    assert clean_value(nested) == {"k\\xff": ["v\\xfe", 1, None], "ok": "x"}
    untouched = {"a": ["b", {"c": 1}]}
    assert clean_value(untouched) is untouched
    (tmp_path / BAD).write_bytes(b"")
    assert address_path(BAD_SHOWN, str(tmp_path)) == BAD
    assert address_path("missing\\xff.txt", str(tmp_path)) == "missing\\xff.txt"
    assert address_path("plain\\x41", str(tmp_path)) == "plain\\x41"  # bytes < 0x80 are never escaped


async def test_ls_shows_undecodable_names_as_escapes(odd_tree: Path, target: Target) -> None:
    """T1: ls lists undecodable names (and link targets) with \\xNN escapes, as valid UTF-8."""
    body = valid_utf8(text(await call(target.ctx(odd_tree), "ls", path=".")))
    assert BAD_SHOWN in body.splitlines()
    assert "dir\\xfe/" in body.splitlines()
    assert f"link -> {BAD_SHOWN}" in body


async def test_find_shows_and_matches_escaped_names(odd_tree: Path, target: Target) -> None:
    """T1: find prints escaped paths, and a glob written with the escape matches the name."""
    ctx = target.ctx(odd_tree)
    found = valid_utf8(text(await call(ctx, "find", pattern="*.py")))
    assert found.splitlines() == ["dir\\xfe/inner\\xfd.py"]
    by_escape = text(await call(ctx, "find", pattern="bad\\xff*"))
    assert BAD_SHOWN in by_escape.splitlines()


async def test_grep_shows_escaped_names_and_line_text(odd_tree: Path, target: Target) -> None:
    """T1: grep's file names and matched line text both use the escape convention."""
    ctx = target.ctx(odd_tree)
    body = valid_utf8(text(await call(ctx, "grep", pattern="hello")))
    assert f"{BAD_SHOWN}:1: hello \\xfe world" in body
    assert "dir\\xfe/inner\\xfd.py:1: hello = 1" in body
    literal = text(await call(ctx, "grep", pattern="hello \\xfe", literal=True))
    assert f"{BAD_SHOWN}:1: hello \\xfe world" in literal


async def test_escaped_name_addresses_the_real_file(odd_tree: Path, target: Target) -> None:
    """The name as shown round-trips: read, edit, write, ls, grep and find reach the real bytes."""
    ctx = target.ctx(odd_tree)
    read = await call(ctx, "read", path=BAD_SHOWN)
    assert not read.is_error and "second line" in text(read)
    assert BAD_SHOWN in text(await call(ctx, "ls", path="dir\\xfe/..")).splitlines()
    inner = await call(ctx, "ls", path="dir\\xfe")
    assert text(inner).splitlines() == ["inner\\xfd.py"]
    assert "inner\\xfd.py:1:" in text(await call(ctx, "grep", pattern="hello", path="dir\\xfe/inner\\xfd.py"))
    assert "dir\\xfe/inner\\xfd.py" in text(await call(ctx, "find", pattern="*", path="dir\\xfe"))
    edited = await call(ctx, "edit", path="dir\\xfe/inner\\xfd.py", old_text="hello = 1", new_text="hello = 2")
    assert not edited.is_error, text(edited)
    assert (odd_tree / "dir\udcfe" / "inner\udcfd.py").read_bytes() == b"hello = 2\n"
    written = await call(ctx, "write", path=BAD_SHOWN, content="replaced\n")
    assert not written.is_error and BAD_SHOWN in text(written)
    assert (odd_tree / BAD).read_bytes() == b"replaced\n"
    assert not (odd_tree / BAD_SHOWN).exists(), "the escape reached the real file; no literal twin was made"


async def test_literal_names_win_and_new_files_get_the_literal_name(tmp_path: Path, target: Target) -> None:
    """A name that really contains `\\xff` text is taken literally; a new file never gets invented bytes."""
    (tmp_path / "lit\\xff.txt").write_text("literal\n")
    (tmp_path / "lit\udcff.txt").write_text("bytes\n")
    ctx = target.ctx(tmp_path)
    assert "literal" in text(await call(ctx, "read", path="lit\\xff.txt"))
    made = await call(ctx, "write", path="new\\xff.txt", content="x")
    assert not made.is_error
    assert (tmp_path / "new\\xff.txt").read_text() == "x"
    assert not (tmp_path / "new\udcff.txt").exists()


async def test_error_messages_show_undecodable_paths_as_escapes(
    odd_tree: Path, tmp_path_factory: Any, target: Target
) -> None:
    """read/write/edit errors that name a real path use the same escapes (and are valid UTF-8)."""
    ctx = target.ctx(odd_tree)
    is_dir = await call(ctx, "read", path="dir\\xfe")
    assert is_dir.is_error and "dir\\xfe is a directory" in valid_utf8(text(is_dir))
    (odd_tree / "latin\udcff.txt").write_bytes(b"caf\xe9\n")
    not_utf8 = await call(ctx, "edit", path="latin\\xff.txt", old_text="caf", new_text="tea")
    assert not_utf8.is_error and "latin\\xff.txt is not UTF-8" in valid_utf8(text(not_utf8))
    outside = tmp_path_factory.mktemp("outside") / "away\udcfa"
    outside.mkdir()
    (odd_tree / "escape").symlink_to(outside)
    denied = await call(ctx, "write", path="escape/x.txt", content="x")
    assert denied.is_error and "away\\xfa" in valid_utf8(text(denied))


async def test_bash_output_escapes_invalid_bytes(odd_tree: Path, target: Target) -> None:
    """bash output (result and streamed updates) uses the same convention, so `ls` output is addressable."""
    updates: list[str] = []
    ctx = target.ctx(odd_tree, on_update=updates.append)
    result = await call(ctx, "bash", command="printf 'raw \\377 byte\\n'; ls")
    body = valid_utf8(text(result))
    assert "raw \\xff byte" in body and BAD_SHOWN in body.splitlines()
    assert "raw \\xff byte" in valid_utf8("".join(updates))


def _extra_tool(execute: Any, **kwargs: Any) -> AgentTool:
    return AgentTool(
        name="odd", description="odd", parameters={"type": "object", "properties": {}}, execute=execute, **kwargs
    )


async def test_executor_makes_any_tool_output_valid_utf8(tmp_path: Path) -> None:
    """The backstop: whatever an extra/MCP tool returns — text, structured content, updates — comes out valid."""
    updates: list[str] = []

    async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        assert ctx.on_update is not None
        ctx.on_update("partial \udcff")
        return ToolResult([TextContent("name bad\udcff and \ud800")], structured_content={"k\udcfe": ["v\udcfd", 3]})

    result = await execute_call(_extra_tool(execute), {}, make_ctx(tmp_path, on_update=updates.append))
    assert text(result) == "name bad\\xff and \\ud800"
    assert result.structured_content == {"k\\xfe": ["v\\xfd", 3]}
    assert updates == ["partial \\xff"]
    json.dumps(result.structured_content, ensure_ascii=False).encode("utf-8")


async def test_executor_cleans_tool_error_messages(tmp_path: Path) -> None:
    """An exception whose message holds an odd file name (a ToolError or any other) is cleaned too."""

    async def business(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise ToolError(f"cannot use {tmp_path / BAD}")

    async def crash(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise RuntimeError(f"broke on {BAD}")

    for execute in (business, crash):
        result = await execute_call(_extra_tool(execute), {}, make_ctx(tmp_path))
        assert result.is_error and BAD_SHOWN in valid_utf8(text(result))


@pytest.mark.parametrize("structured", [{"data": b"bytes"}, {"x": math.nan}, {1, 2}])
async def test_executor_refuses_structured_content_that_is_not_json(tmp_path: Path, structured: Any) -> None:
    """Structured content the store could not encode becomes an error result instead of a failed commit."""

    async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult([TextContent("ok")], structured_content=structured)

    result = await execute_call(_extra_tool(execute), {}, make_ctx(tmp_path))
    assert result.is_error and "not JSON" in text(result)


async def test_executor_replaces_images_that_are_not_real(tmp_path: Path) -> None:
    """An image block with invalid base64, or content that is not the declared type, becomes a note."""

    async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(
            [TextContent("kept"), ImageContent("!!not base64", "image/png"), ImageContent("cmFuZG9t", "image/png")]
        )

    result = await execute_call(_extra_tool(execute), {}, make_ctx(tmp_path))
    assert not result.is_error
    assert all(isinstance(block, TextContent) for block in result.content)
    notes = text(result)
    assert notes.startswith("kept") and notes.count("[image (image/png) omitted") == 2


def test_prepared_arguments_are_valid_utf8() -> None:
    """Arguments are committed with the intent: surrogates (from JSON `\\udcff` or prepare_arguments) are cleaned."""

    async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.text("unused")

    tool = _extra_tool(execute, prepare_arguments=lambda args: {**args, "added": "x\udcfe"})
    prepared = prepare_call(tool, {"path": "bad\udcff"})
    assert prepared == {"path": "bad\\xff", "added": "x\\xfe"}


# --- through the whole loop, with a real SQLite store ---------------------------------------


def _tool_text(agent: Any) -> str:
    results = [m for m in agent.read_transcript() if m["role"] == "tool_result"]
    return "".join(c.get("text", "") for m in results for c in m["content"])


@pytest.fixture
def odd_workspace(workspace: Path) -> Path:
    (workspace / BAD).write_bytes(b"hello \xfe world\n")
    (workspace / "sub\udcfe").mkdir()
    (workspace / "sub\udcfe" / "deep\udcfd.md").write_bytes(b"# hello\n")
    return workspace


@pytest.mark.parametrize(
    ("tool_call", "expect"),
    [
        (ToolCall("ls", {"path": "."}), BAD_SHOWN),
        (ToolCall("find", {"pattern": "*"}), "sub\\xfe/deep\\xfd.md"),
        (ToolCall("grep", {"pattern": "hello"}), f"{BAD_SHOWN}:1: hello \\xfe world"),
        (ToolCall("read", {"path": BAD_SHOWN}), "hello \\xfe world"),
        (ToolCall("bash", {"command": "ls; cat bad*"}), "hello \\xfe world"),
    ],
)
async def test_undecodable_names_through_the_loop_with_sqlite(
    make_agent, fake_server, odd_workspace: Path, tmp_path: Path, tool_call: ToolCall, expect: str
) -> None:
    """D1: a tool that meets non-UTF-8 names commits, reaches the model, ends `completed`; the same
    request id resumes cleanly after reopening and the session keeps working."""
    db = tmp_path / "odd.sqlite"
    fake_server.enqueue([tool_call], [Text("seen")])
    agent = await make_agent(database_path=str(db))
    events = await collect(agent, AgentInput(prompt="look", request_id="r1"))
    assert final(events).status == "completed", final(events)
    end = next(e for e in events if e.type == "tool" and e.phase == "end")
    assert expect in valid_utf8(end.result or "")
    assert json.dumps(expect)[1:-1] in json.dumps(fake_server.requests[1].json)
    await agent.close()

    reopened = await make_agent(database_path=str(db))
    again = await collect(reopened, AgentInput(prompt="look", request_id="r1"))
    assert final(again).status == "completed" and final(again).replayed
    assert expect in _tool_text(reopened)
    fake_server.enqueue([tool_call], [Text("seen again")])
    later = await collect(reopened, AgentInput(prompt="look again", request_id="r2"))
    assert final(later).status == "completed"
    assert len(fake_server.requests) == 4


async def test_undecodable_names_with_the_memory_store_keep_the_session_usable(
    make_agent, fake_server, odd_workspace: Path
) -> None:
    """With the in-memory store too, a run that met odd names completes and later requests still work."""
    fake_server.enqueue([ToolCall("ls", {"path": "."})], [Text("one")])
    fake_server.enqueue([ToolCall("grep", {"pattern": "hello"})], [Text("two")])
    agent = await make_agent()
    first = await collect(agent, "list")
    second = await collect(agent, "search")
    assert final(first).status == "completed" and final(second).status == "completed"
    assert f"{BAD_SHOWN}:1: hello \\xfe world" in _tool_text(agent)
