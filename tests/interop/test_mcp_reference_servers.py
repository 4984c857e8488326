"""The official MCP reference servers through agentcore's MCP tools and tool catalogs
(SPEC T3, T4, X3; issue 23).

``mcp-server-time`` and ``mcp-server-git`` (PyPI, pinned in ``dev.INTEROP_TOOLS``, installed by
``python3 dev.py test`` into a virtual environment of their own) run as real stdio processes;
the model is the fake provider server driving real runs, so each call goes through the engine:
tool contract, replay policy from the servers' own annotations, results back to the model.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentInput
from agentcore.extensions.mcp import connect_mcp_server, create_mcp_tools
from agentcore.extensions.mcp_catalog import create_mcp_tool_catalog
from agentcore.testing.steps import Text, ToolCall
from tests.interop.tools import program

COMPLETIONS = "openai-completions"


def tool_end(events: list[Any], name: str) -> Any:
    return next(e for e in events if e.type == "tool" and e.phase == "end" and e.name == name)


def processes_naming(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text`` (to find orphans)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            pids.append(int(entry.name))
    return pids


async def test_time_server_tools_run_in_the_loop(make_agent: Any, fake_server: Any) -> None:
    """T4: the time server's tools become extra tools (``time_convert_time``), marked safe to
    replay because the server annotates them read-only; a call's JSON result reaches the model."""
    connection = await connect_mcp_server(
        str(program("mcp-reference", "mcp-server-time")), ["--local-timezone", "UTC"], server_id="time"
    )
    try:
        tools = await create_mcp_tools(connection)
        by_name = {tool.name: tool for tool in tools}
        assert set(by_name) == {"time_get_current_time", "time_convert_time"}
        assert all(tool.replay == "safe" for tool in tools), "readOnlyHint → replay safe"
        fake_server.enqueue(
            [
                ToolCall(
                    "time_convert_time",
                    {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
                    id="t1",
                )
            ],
            [Text("It is 21:00 in Tokyo.")],
        )
        agent = await make_agent(COMPLETIONS, extra_tools=tools)
        events = [e async for e in agent.run(AgentInput(prompt="noon UTC in Tokyo?"))]
        assert events[-1].status == "completed"
        result = json.loads(tool_end(events, "time_convert_time").result)
        assert result["target"]["timezone"] == "Asia/Tokyo" and "T21:00" in result["target"]["datetime"]
        assert result["time_difference"] == "+9.0h"
        assert "Asia/Tokyo" in str(fake_server.requests[1].json), "the result went back to the model"
    finally:
        await connection.aclose()


GIT_USER = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with one commit and an uncommitted change to ``notes.txt``."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "notes.txt").write_text("first\n")
    subprocess.run(["git", "-C", str(repo), *GIT_USER, "add", "notes.txt"], check=True)
    subprocess.run(["git", "-C", str(repo), *GIT_USER, "commit", "-qm", "the first commit"], check=True)
    (repo / "notes.txt").write_text("first\nsecond\n")
    return repo


def commit_log(repo: Path) -> list[str]:
    """``subject|author`` of each commit, newest first, as git itself reads them."""
    out = subprocess.run(["git", "-C", str(repo), "log", "--format=%s|%an"], check=True, capture_output=True, text=True)
    return out.stdout.splitlines()


async def test_git_server_through_a_catalog_reads_and_commits(
    make_agent: Any, fake_server: Any, repo: Path, tmp_path: Path
) -> None:
    """X3: a catalog for the git server: ``tool_search`` finds its tools, the first call starts it,
    ``git_log`` reads the repository, ``git_add`` + ``git_commit`` write a real commit (checked
    with git itself), and closing the session stops the server process."""
    env = {
        "GIT_AUTHOR_NAME": "Agent",
        "GIT_AUTHOR_EMAIL": "agent@example.invalid",
        "GIT_COMMITTER_NAME": "Agent",
        "GIT_COMMITTER_EMAIL": "agent@example.invalid",
        "HOME": str(tmp_path),
        "PATH": os.environ["PATH"],
    }
    definition = {
        "id": "git",
        "command": str(program("mcp-reference", "mcp-server-git")),
        "args": ["--repository", str(repo)],
        "env": env,
    }
    catalog = create_mcp_tool_catalog(
        definition=definition, allowed_tools=["git_status", "git_log", "git_add", "git_commit"]
    )
    fake_server.enqueue(
        [ToolCall("tool_search", {"query": "git log commit"}, id="s1")],
        [ToolCall("git_git_log", {"repo_path": str(repo), "max_count": 5}, id="g1")],
        [ToolCall("git_git_add", {"repo_path": str(repo), "files": ["notes.txt"]}, id="g2")],
        [ToolCall("git_git_commit", {"repo_path": str(repo), "message": "the second commit"}, id="g3")],
        [Text("Committed.")],
    )
    agent = await make_agent(COMPLETIONS, session={"tool_search": {"catalogs": [catalog]}})
    events = [e async for e in agent.run(AgentInput(prompt="commit my notes", request_id="r1"))]
    ends = [e for e in events if e.type == "end"]
    assert ends and ends[-1].status == "completed", ends
    assert "the first commit" in tool_end(events, "git_git_log").result
    assert tool_end(events, "git_git_commit").result.startswith("Changes committed successfully with hash")
    assert commit_log(repo) == ["the second commit|Agent", "the first commit|Test"]
    assert processes_naming(str(repo)), "the first call started the server"
    await agent.close()
    assert not processes_naming(str(repo)), "closing the session stopped the server"
