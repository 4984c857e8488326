"""``session={"environment": {id, label, open}}``: the session's tools run on its execution target
(SPEC X5, S3).

Real runtimes against the fake provider server. The environments are real: a recording
subclass of the local one (to see every call arrive), and the remote worker process.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentcore import create_agent
from agentcore.errors import InputValidationError
from agentcore.extensions.environment import (
    EnvironmentContext,
    ExecutionTarget,
    local_environment,
    remote_environment,
)
from agentcore.testing.steps import Text, ToolCall
from agentcore.tools import ToolContext, ToolResult
from agentcore.tools.environment import FileOperation, LocalExecutionEnv
from tests.agentcore.session_helpers import ends, last_snapshot, run_with, user_texts
from tests.agentcore.test_tools_bash import is_gone
from tests.docs import ROOT, python_example

COMPLETIONS = "openai-completions"


class RecordingEnv(LocalExecutionEnv):
    """This machine, noting every operation that reaches it."""

    def __init__(self, id: str, label: str) -> None:
        super().__init__(id, label)
        self.calls: list[str] = []
        self.cleanups = 0

    async def run_file_operation(self, ctx: ToolContext, operation: FileOperation) -> ToolResult:
        self.calls.append(operation.name)
        return await super().run_file_operation(ctx, operation)

    async def run_command(self, ctx: ToolContext, command: str, timeout: float) -> ToolResult:  # noqa: ASYNC109
        self.calls.append("bash")
        return await super().run_command(ctx, command, timeout)

    async def cleanup(self) -> None:
        self.cleanups += 1
        await super().cleanup()


class Opener:
    """An ``open`` that records its calls and hands out ``RecordingEnv``s (or fails)."""

    def __init__(self, env_id: str = "rec", *, fail: Exception | None = None, returns_id: str | None = None) -> None:
        self.env_id = env_id
        self.fail = fail
        self.returns_id = returns_id
        self.opened: list[RecordingEnv] = []
        self.targets: list[ExecutionTarget] = []
        self.contexts: list[EnvironmentContext] = []

    async def __call__(self, target: ExecutionTarget, context: EnvironmentContext) -> RecordingEnv:
        self.targets.append(target)
        self.contexts.append(context)
        if self.fail is not None:
            raise self.fail
        env = RecordingEnv(self.returns_id or self.env_id, "Recorder")
        self.opened.append(env)
        return env

    def option(self, label: str = "Recorder") -> dict[str, Any]:
        return {"id": self.env_id, "label": label, "open": self}


def tool_results(request: Any) -> list[str]:
    """The tool results a Chat Completions request carries, in order."""
    return [m["content"] for m in request.json["messages"] if m["role"] == "tool"]


def stored_register(db: Path, key: str) -> Any:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT value FROM registers WHERE key = ?", (key,)).fetchone()
    return json.loads(row[0]) if row else None


def store_rows(db: Path) -> tuple[int, int, int]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        counts = [conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in ("entries", "receipts")]
        seq = conn.execute("SELECT max(seq) FROM registers").fetchone()[0]
    return counts[0], counts[1], seq


ALL_SEVEN = [
    ToolCall("read", {"path": "README.md"}, id="c1"),
    ToolCall("ls", {}, id="c2"),
    ToolCall("grep", {"pattern": "hello"}, id="c3"),
    ToolCall("find", {"pattern": "*.py"}, id="c4"),
    ToolCall("write", {"path": "notes.txt", "content": "one\n"}, id="c5"),
    ToolCall("edit", {"path": "notes.txt", "old_text": "one", "new_text": "two"}, id="c6"),
    ToolCall("bash", {"command": "cat notes.txt"}, id="c7"),
]


async def test_every_builtin_tool_of_every_context_runs_through_the_environment(
    make_agent, fake_server, workspace: Path
) -> None:
    """X5: read, ls, grep, find, write, edit and bash — of the main context and of a subagent — all
    reach the session's environment; the snapshot shows it, and its identity is stored."""
    child_task = "List the files"

    def responder(request: Any) -> list[Any]:
        return [Text("child done")] if user_texts(request)[:1] == [child_task] else [Text("all done")]

    fake_server.enqueue(
        ALL_SEVEN,
        [ToolCall("subagent", {"task": child_task}, id="s1")],
    )
    fake_server.enqueue([ToolCall("ls", {}, id="k1")])  # the child's first request
    fake_server.responder = responder
    opener = Opener()
    agent = await make_agent(
        COMPLETIONS,
        database_path=str(workspace.parent / "s.sqlite"),
        session={"environment": opener.option(), "subagents": {"tools": ["ls"]}},
    )
    events = await run_with(agent, {"prompt": "use every tool", "request_id": "r1"})
    assert len(opener.opened) == 1, "opened once for the whole session"
    env = opener.opened[0]
    assert sorted(env.calls) == sorted(["read", "ls", "grep", "find", "write", "edit", "bash", "ls"])
    results = tool_results(fake_server.requests[1])
    assert "# Demo project" in results[0] and "two" in results[6]
    assert (workspace / "notes.txt").read_text() == "two\n"
    assert opener.targets == [ExecutionTarget(str(workspace), (), "workspace")]
    assert opener.contexts[0].session_id == "main" and opener.contexts[0].owner_id
    record = last_snapshot(events)["records"]["environment"]
    assert record == {
        "id": "rec",
        "label": "Recorder",
        "kind": "local",
        "status": "connected",
        "message": None,
        "cwd": str(workspace),
    }
    assert stored_register(workspace.parent / "s.sqlite", "environment") == {"id": "rec", "label": "Recorder"}
    await agent.close()
    assert env.cleanups == 1, "cleanup() runs when the runtime closes"


async def test_the_environment_opens_at_the_first_tool_call_not_before(
    make_agent, fake_server, workspace: Path
) -> None:
    """X5: a session whose turns call no tool opens no environment (a sandbox is a process per
    session: an idle or chatting session must not hold one); records say ``not_connected``, with
    the identity pinned all the same. The first tool call opens it, once."""
    db = workspace.parent / "lazy.sqlite"
    opener = Opener()
    fake_server.enqueue([Text("just talking")], [ToolCall("ls", {}, id="c1")], [Text("listed")])
    agent = await make_agent(COMPLETIONS, database_path=str(db), session={"environment": opener.option()})
    events = await run_with(agent, {"prompt": "hello", "request_id": "r1"})
    assert ends(events)[-1].status == "completed"
    assert opener.targets == [], "no tool ran: nothing was opened"
    record = last_snapshot(events)["records"]["environment"]
    assert (record["status"], record["kind"]) == ("not_connected", None)
    assert stored_register(db, "environment") == {"id": "rec", "label": "Recorder"}, "the identity is pinned"
    events = await run_with(agent, {"prompt": "list the files", "request_id": "r2"})
    assert len(opener.opened) == 1 and opener.opened[0].calls == ["ls"]
    assert last_snapshot(events)["records"]["environment"]["status"] == "connected"
    await agent.close()
    assert opener.opened[0].cleanups == 1


async def test_a_failed_open_is_shown_and_no_tool_falls_back_to_this_machine(
    make_agent, fake_server, workspace: Path
) -> None:
    """X5: open() fails → every built-in tool is an error naming the environment (open is retried per
    call), the local files are neither read nor written, and records show the error without the
    credentials open() closed over."""
    password = "hunter2-secret"
    opener = Opener(fail=ConnectionError("ssh: connect to host box port 22: Connection refused"))

    async def open_with_credentials(target: ExecutionTarget, context: EnvironmentContext) -> Any:
        assert password  # the host's credentials live in its closure
        return await opener(target, context)

    fake_server.enqueue(
        [
            ToolCall("read", {"path": "README.md"}, id="c1"),
            ToolCall("bash", {"command": "touch made-locally"}, id="c2"),
            ToolCall("write", {"path": "w.txt", "content": "x"}, id="c3"),
        ],
        [Text("could not")],
    )
    db = workspace.parent / "f.sqlite"
    agent = await make_agent(
        COMPLETIONS,
        database_path=str(db),
        session={"environment": {"id": "box", "label": "Build box", "open": open_with_credentials}},
    )
    events = await run_with(agent, {"prompt": "try", "request_id": "r1"})
    results = tool_results(fake_server.requests[1])
    assert len(results) == 3
    for result in results:
        assert "execution environment 'Build box' (box) could not be opened" in result, result
        assert "Connection refused" in result and "never fall back" in result
    assert "Demo project" not in results[0]
    assert not (workspace / "made-locally").exists() and not (workspace / "w.txt").exists()
    assert len(opener.targets) == 3, "one attempt per call (nothing is opened before a tool needs it)"
    record = last_snapshot(events)["records"]["environment"]
    assert record["status"] == "error" and record["kind"] is None
    assert "Connection refused" in record["message"]
    assert password not in json.dumps(last_snapshot(events))
    await agent.close()
    assert password.encode() not in db.read_bytes()


async def test_the_identity_is_fixed_per_session(make_agent, fake_server, workspace: Path) -> None:
    """X5: reopening a session with another environment id is input_validation naming
    session.environment.id; nothing is opened or written. The same id with a new label is fine."""
    db = workspace.parent / "id.sqlite"
    first = Opener("box-a")
    fake_server.enqueue([Text("hello")])
    agent = await make_agent(COMPLETIONS, database_path=str(db), session={"environment": first.option()})
    await run_with(agent, {"prompt": "hi", "request_id": "r1"})
    await agent.close()
    assert stored_register(db, "environment") == {"id": "box-a", "label": "Recorder"}

    relabelled = Opener("box-a")
    fake_server.enqueue([Text("again")])
    agent = await make_agent(COMPLETIONS, database_path=str(db), session={"environment": relabelled.option("Box A")})
    await run_with(agent, {"prompt": "hi again", "request_id": "r2"})
    await agent.close()
    assert stored_register(db, "environment") == {"id": "box-a", "label": "Box A"}

    before = store_rows(db)
    other = Opener("box-b")
    with pytest.raises(InputValidationError) as info:
        await make_agent(COMPLETIONS, database_path=str(db), session={"environment": other.option()})
    assert info.value.field == "session.environment.id"
    assert "'box-a'" in str(info.value) and "'box-b'" in str(info.value)
    assert other.targets == [], "the other environment was never opened"
    assert store_rows(db) == before
    fake_server.enqueue([Text("after the refusal")])
    option = Opener("box-a").option("Box A")
    again = await make_agent(COMPLETIONS, database_path=str(db), session={"environment": option})
    assert ends(await run_with(again, {"prompt": "still mine", "request_id": "r3"}))[-1].status == "completed", (
        "the refused open released the store"
    )
    assert stored_register(db, "environment") == {"id": "box-a", "label": "Box A"}


async def test_open_must_return_the_declared_identity(make_agent, fake_server) -> None:
    """X5: an environment whose id differs from the declared one is refused (and cleaned up); the tool
    call is an error and the snapshot says why."""
    opener = Opener("declared", returns_id="something-else")
    fake_server.enqueue([ToolCall("ls", {}, id="c1")], [Text("ok")])
    agent = await make_agent(COMPLETIONS, session={"environment": opener.option()})
    events = await run_with(agent, {"prompt": "list", "request_id": "r1"})
    result = tool_results(fake_server.requests[1])[0]
    assert "returned an environment with id 'something-else'" in result and "declared 'declared'" in result
    assert opener.opened and all(env.cleanups == 1 and env.calls == [] for env in opener.opened)
    record = last_snapshot(events)["records"]["environment"]
    assert record["status"] == "error" and "something-else" in record["message"]


@pytest.mark.parametrize(
    ("option", "field"),
    [
        ("not an object", "session.environment"),
        ({"id": "a", "label": "A", "open": None}, "session.environment.open"),
        ({"id": "", "label": "A", "open": Opener()}, "session.environment.id"),
        ({"id": "a\nb", "label": "A", "open": Opener()}, "session.environment.id"),
        ({"id": "a", "label": "x" * 201, "open": Opener()}, "session.environment.label"),
        ({"id": "a", "open": Opener()}, "session.environment.label"),
        ({"id": "a", "label": "A", "open": Opener(), "password": "p"}, "session.environment.password"),
    ],
)
async def test_the_option_is_strict(tmp_path: Path, workspace: Path, option: Any, field: str) -> None:
    """X5: a bad option is input_validation naming the field, before any store is opened."""
    db = tmp_path / "never.sqlite"
    with pytest.raises(InputValidationError) as info:
        await create_agent(
            provider="fake",
            model="m",
            base_url="http://127.0.0.1:9",
            api_key="k",
            workdir=str(workspace),
            database_path=str(db),
            session={"environment": option},
        )
    assert info.value.field == field
    assert not db.exists()


async def test_the_session_runs_in_a_remote_worker_and_reopens_it_after_it_dies(
    make_agent, fake_server, workspace: Path, tmp_path: Path
) -> None:
    """X5: with remote_environment() bash runs as a child of the worker process and the file tools obey
    the worker's root (auto reaches nothing outside it). A worker killed mid-call is a tool error;
    the next call opens a fresh worker. close() stops it."""
    (workspace.parent / "beside.txt").write_text("beside the workspace\n")
    fake_server.enqueue(
        [ToolCall("bash", {"command": "tr '\\0' ' ' < /proc/$PPID/cmdline; echo; echo $PPID"}, id="c1")],
        [ToolCall("read", {"path": "../beside.txt"}, id="c2")],
        [ToolCall("bash", {"command": "kill -9 $PPID; sleep 30"}, id="c3")],
        [ToolCall("bash", {"command": "echo fresh $PPID"}, id="c4")],
        [Text("done")],
    )
    agent = await make_agent(
        COMPLETIONS,
        permission_policy="auto",
        session={"environment": remote_environment(id="w1", label="Worker", scratch=tmp_path / "scratch")},
    )
    events = await run_with(agent, {"prompt": "go", "request_id": "r1"})
    where = tool_results(fake_server.requests[1])[0]
    assert "agentcore.extensions.environment.worker" in where and f"--root {workspace}" in where
    first_worker = int(where.split()[-1])
    denied = tool_results(fake_server.requests[2])[-1]
    assert "outside the root of this execution environment" in denied and "beside the workspace" not in denied
    died = tool_results(fake_server.requests[3])[-1]
    assert "'Worker' (w1) stopped during the call" in died and "signal 9" in died
    fresh = tool_results(fake_server.requests[4])[-1]
    second_worker = int(fresh.split()[-1])
    assert fresh.startswith("fresh") and second_worker != first_worker
    record = last_snapshot(events)["records"]["environment"]
    assert record["kind"] == "remote" and record["status"] == "connected"
    await agent.close()
    assert is_gone(second_worker), "close() stopped the worker"


async def test_local_environment_option_is_this_machine(make_agent, fake_server, workspace: Path) -> None:
    """X5: local_environment() behaves as the tools without the option, and says so in records."""
    fake_server.enqueue([ToolCall("read", {"path": "main.py"}, id="c1")], [Text("ok")])
    agent = await make_agent(COMPLETIONS, session={"environment": local_environment()})
    events = await run_with(agent, {"prompt": "read", "request_id": "r1"})
    assert "print('hello')" in tool_results(fake_server.requests[1])[0]
    record = last_snapshot(events)["records"]["environment"]
    assert (record["id"], record["kind"], record["status"]) == ("local", "local", "connected")


def test_readme_example_runs(workspace: Path) -> None:
    """X5: the README's Execution environments example runs the demo's tools in a worker process."""
    script = workspace / "example.py"
    script.write_text(python_example("docs/tools-and-environments.md", "## Execution environments"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), AGENTCORE_DEMO_DELAY_MS="0")
    result = subprocess.run(
        [sys.executable, str(script)], cwd=workspace, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ls ran on the worker: ")
    assert lines[-1] == "worker-1 remote connected"
