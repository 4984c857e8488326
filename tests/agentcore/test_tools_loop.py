"""Every built-in tool through the real loop: the model asks, the tool runs, the result goes
back (SPEC T1–T4, L8)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentHost, AgentInput
from agentcore.extensions.mcp import connect_mcp_server, create_mcp_tools
from agentcore.testing.steps import Text, ToolCall
from tests.helpers import collect, final

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def tool_results(agent: Any) -> list[dict[str, Any]]:
    return [m for m in agent.read_transcript() if m["role"] == "tool_result"]


def result_text(message: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in message["content"])


@pytest.mark.parametrize(
    ("call", "expect"),
    [
        (ToolCall("ls", {"path": "."}), "README.md"),
        (ToolCall("read", {"path": "main.py"}), "print('hello')"),
        (ToolCall("grep", {"pattern": "hello", "path": "."}), "main.py"),
        (ToolCall("find", {"pattern": "*.md"}), "README.md"),
        (ToolCall("bash", {"command": "echo from-bash"}), "from-bash"),
        (ToolCall("write", {"path": "new/dir/out.txt", "content": "written"}), "out.txt"),
    ],
)
async def test_each_tool_result_reaches_the_model(make_agent, fake_server, call: ToolCall, expect: str) -> None:
    """T1: the call runs and its result is in the next request."""
    fake_server.enqueue([call], [Text("ok")])
    agent = await make_agent()
    events = await collect(agent, "use the tool")
    assert final(events).status == "completed"
    [result] = tool_results(agent)
    assert not result["is_error"], result
    assert expect in result_text(result)
    assert expect in json.dumps(fake_server.requests[1].json)


async def test_edit_through_the_loop_returns_a_diff(make_agent, fake_server, workspace: Path) -> None:
    fake_server.enqueue(
        [ToolCall("edit", {"path": "main.py", "old_text": "print('hello')", "new_text": "print('bye')"})],
        [Text("edited")],
    )
    agent = await make_agent()
    await collect(agent, "edit")
    assert (workspace / "main.py").read_text() == "print('bye')\n"
    assert "+print('bye')" in result_text(tool_results(agent)[0])


async def test_bash_streams_updates_and_reports_exit_code(make_agent, fake_server) -> None:
    """T1: bash output streams as `tool` update events; a non-zero exit is an error result."""
    fake_server.enqueue([ToolCall("bash", {"command": "echo one; echo two; exit 3"})], [Text("ok")])
    agent = await make_agent()
    events = await collect(agent, "run")
    phases = [e.phase for e in events if e.type == "tool"]
    assert phases[0] == "start" and phases[-1] == "end" and "update" in phases
    end = next(e for e in events if e.type == "tool" and e.phase == "end")
    assert end.is_error and "3" in (end.result or "")


async def test_read_only_policy_hides_write_tools(make_agent, fake_server) -> None:
    """T2: read-only → write/edit/bash are not sent to the model at all."""
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(permission_policy="read-only")
    await collect(agent, "hi")
    names = {t["name"] for t in fake_server.requests[0].json["tools"]}
    assert names == {"read", "grep", "find", "ls"}


async def test_tools_option_narrows_and_cannot_widen(make_agent, fake_server) -> None:
    """T2/T3: tools=[...] narrows; it can never re-enable a tool the policy removed."""
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(tools=["read", "bash"], permission_policy="read-only")
    await collect(agent, "hi")
    assert {t["name"] for t in fake_server.requests[0].json["tools"]} == {"read"}


async def test_escape_attempt_through_the_loop_is_a_tool_error(make_agent, fake_server, workspace: Path) -> None:
    """T2: a path outside the workspace gets a clear tool error and touches nothing."""
    outside = workspace.parent / "outside.txt"
    fake_server.enqueue([ToolCall("write", {"path": "../outside.txt", "content": "x"})], [Text("ok")])
    agent = await make_agent()
    await collect(agent, "escape")
    [result] = tool_results(agent)
    assert result["is_error"] and "outside" in result_text(result).lower()
    assert not outside.exists()


async def test_per_run_permission_policy_and_workdir_override(make_agent, fake_server, tmp_path: Path) -> None:
    """T2/I2: per-run workdir and policy override the runtime's."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "only-here.txt").write_text("x")
    fake_server.enqueue([ToolCall("ls", {"path": "."})], [Text("ok")])
    agent = await make_agent()
    await collect(agent, AgentInput(prompt="list", workdir=str(other), permission_policy="read-only"))
    assert "only-here.txt" in result_text(tool_results(agent)[0])
    assert "bash" not in {t["name"] for t in fake_server.requests[0].json["tools"]}


async def test_invalid_arguments_go_back_as_a_correctable_error(make_agent, fake_server) -> None:
    """T3: schema validation failures are tool errors naming the field; the model can retry."""
    fake_server.enqueue([ToolCall("read", {"offset": 2})], [ToolCall("read", {"path": "main.py"})], [Text("ok")])
    agent = await make_agent()
    events = await collect(agent, "read")
    assert final(events).status == "completed"
    first, second = tool_results(agent)
    assert first["is_error"] and "path" in result_text(first)
    assert not second["is_error"]


async def test_malformed_json_arguments_are_a_tool_error(make_agent, fake_server) -> None:
    fake_server.enqueue([ToolCall("read", raw_arguments='{"path": "main.py"')], [Text("ok")])
    agent = await make_agent("openai-completions")
    await collect(agent, "read")
    [result] = tool_results(agent)
    assert result["is_error"] and "valid JSON" in result_text(result)


async def test_cancel_during_bash_kills_the_process_group(make_agent, fake_server, workspace: Path) -> None:
    """L8: cancelling during a tool stops it (whole process group) and ends execution_aborted."""
    pid_file = workspace / "pid.txt"
    command = "sleep 300 & echo $! > pid.tmp && mv pid.tmp pid.txt; wait"
    fake_server.enqueue([ToolCall("bash", {"command": command})], [Text("never requested")])
    agent = await make_agent()
    abort = asyncio.Event()
    task = asyncio.ensure_future(collect(agent, AgentInput(prompt="run"), AgentHost(abort_signal=abort)))
    async with asyncio.timeout(30):
        while not pid_file.exists():  # noqa: ASYNC110 - written by the tool's child process
            await asyncio.sleep(0.01)
    abort.set()
    events = await asyncio.wait_for(task, 30)
    assert final(events).status == "aborted" and final(events).error_code == "execution_aborted"
    child = int(pid_file.read_text())
    # SIGKILL went to the group before the run ended; the kernel may still be finishing the
    # child's exit (its pipe is closed before it turns zombie), so give it a deadline.
    async with asyncio.timeout(10):
        while _running(child):  # noqa: ASYNC110 - another process's state: nothing to await
            await asyncio.sleep(0.01)
    assert len(fake_server.requests) == 1, "no new model request after the cancel"


async def test_cancel_during_retry_backoff(make_agent, fake_server) -> None:
    """L8: a cancel during the backoff wait ends the run at once, with no further request."""
    from agentcore.testing.steps import HttpError

    abort = asyncio.Event()

    async def cancelling_sleep(seconds: float) -> None:
        abort.set()  # the user presses Stop while we wait
        await asyncio.Event().wait()

    fake_server.enqueue([HttpError(503)], [Text("never")])
    agent = await make_agent(sleep=cancelling_sleep)
    events = await collect(agent, "hi", AgentHost(abort_signal=abort))
    assert final(events).status == "aborted"
    assert len(fake_server.requests) == 1


async def test_mcp_tool_through_the_loop(make_agent, fake_server) -> None:
    """T4: a real stdio MCP server's tool becomes an extra tool the model can call."""
    connection = await connect_mcp_server(sys.executable, [str(FIXTURES / "mcp_server.py")], server_id="calc")
    try:
        tools = await create_mcp_tools(connection, allowed_tools=["add"])
        fake_server.enqueue([ToolCall(tools[0].name, {"a": 2, "b": 40})], [Text("42")])
        agent = await make_agent(extra_tools=tools)
        events = await collect(agent, "add")
        assert final(events).status == "completed"
        assert "42" in result_text(tool_results(agent)[0])
    finally:
        await connection.aclose()


def _running(pid: int) -> bool:
    """True when the process exists and is not a zombie (dead, awaiting reaping)."""
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()
