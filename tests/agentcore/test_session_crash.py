"""Session crash tests with real SIGKILL (SPEC S1–S6, D1; DURABILITY 1–8).

A child process runs a session against a SQLite store; it is killed while inputs are queued,
while a fork's turn is running, or while a subagent works. A new process reopens the store and
runs again: no accepted input is lost, none is answered twice, no subagent gets a twin, and
receipts survive.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Hang, Text, ToolCall
from tests.agentcore.child_process import Child, spawn
from tests.agentcore.test_crash_resume import assert_store_invariants

pytestmark = pytest.mark.crash
CHILD = Path(__file__).with_name("session_child.py")
CHILD_TASK = "Inspect the workspace"


@pytest.fixture
async def server():
    async with FakeProviderServer() as fake:
        yield fake


async def start(
    server: FakeProviderServer, db: Path, workdir: Path, request_id: str, prompt: str = "go", commands: Any = ()
) -> Child:
    args = ("--db", str(db), "--base-url", server.base_url, "--workdir", str(workdir), "--request-id", request_id)
    return await spawn(CHILD, *args, "--prompt", prompt, "--commands", json.dumps(list(commands)))


async def run_to_end(child: Child) -> list[dict[str, Any]]:
    return await child.run_to_end(limit=60)


def last_user_text(request: Any) -> str:
    users = [m for m in request.json["messages"] if m["role"] == "user"]
    content = users[-1]["content"] if users else ""
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def echo(request: Any) -> list[Any]:
    return [Text(f"answer to {last_user_text(request)}")]


async def test_kill_with_queued_inputs_loses_none_and_answers_none_twice(server, tmp_path, workspace) -> None:
    """S2/S6: inputs queued behind a turn that is killed are answered once after reopen; their
    receipts survive."""
    db = tmp_path / "queued.sqlite"
    server.enqueue([Hang()])
    follow = [
        {"type": "submit", "request_id": "f1", "prompt": "follow one"},
        {"type": "submit", "request_id": "f2", "prompt": "follow two"},
    ]
    child = await start(server, db, workspace, "r", "first", follow)
    first_receipt = await child.wait_for(lambda e: e["type"] == "receipt" and e["receipt"]["request_id"] == "f1")
    await child.wait_for(lambda e: e["type"] == "receipt" and e["receipt"]["request_id"] == "f2")
    await server.until_hanging(1)
    await child.kill()
    server.responder = echo
    events = await run_to_end(await start(server, db, workspace, "r", "first"))
    ends = [(e["request_id"], e["status"]) for e in events if e["type"] == "end"]
    assert ends == [("r", "completed"), ("f1", "completed"), ("f2", "completed")]
    asked = [last_user_text(r) for r in server.requests]
    assert asked.count("follow one") == 1 and asked.count("follow two") == 1
    again = await run_to_end(await start(server, db, workspace, "r2", "another", follow[:1]))
    resent = next(e for e in again if e["type"] == "receipt")
    assert resent["receipt"] == first_receipt["receipt"]
    assert [last_user_text(r) for r in server.requests].count("follow one") == 1
    assert_store_invariants(db)


def first_assistant_entry(db: Path) -> str:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT id, payload FROM entries WHERE kind = 'message' ORDER BY pos").fetchall()
    finally:
        conn.close()
    return next(entry for entry, payload in rows if json.loads(payload)["message"]["role"] == "assistant")


async def test_kill_during_a_forks_turn_resumes_it_once(server, tmp_path, workspace) -> None:
    """S2: a fork whose first turn was killed mid-request is intact after reopen; its turn is
    answered once and the main conversation is unaffected."""
    db = tmp_path / "fork.sqlite"
    server.responder = echo
    await run_to_end(await start(server, db, workspace, "q1", "question one"))
    entry = first_assistant_entry(db)

    def held(request: Any) -> list[Any]:
        return [Hang()] if last_user_text(request) == "fork question" else echo(request)

    server.responder = held
    commands = [
        {"type": "fork", "request_id": "f", "entry_id": entry},
        {"type": "submit", "request_id": "in-fork", "prompt": "fork question", "target_id": 1},
    ]
    child = await start(server, db, workspace, "q2", "question two", commands)
    await child.wait_for(lambda e: e["type"] == "receipt" and e["receipt"]["request_id"] == "in-fork")
    await server.until(lambda s: any(last_user_text(r) == "fork question" for r in s.requests))
    await server.until_hanging(1)
    await child.kill()
    server.responder = echo
    events = await run_to_end(await start(server, db, workspace, "q3", "question three"))
    done = {e["request_id"]: e for e in events if e["type"] == "end"}
    assert done["in-fork"]["status"] == "completed" and done["in-fork"]["target_id"] == 1
    fork_answers = [e for e in events if e["type"] == "end" and e["request_id"] == "in-fork"]
    assert len(fork_answers) == 1
    snapshot = next(e for e in reversed(events) if e["type"] == "session")["snapshot"]
    contexts = {c["target_id"]: c for c in snapshot["contexts"]}
    assert contexts[1]["kind"] == "fork" and contexts[1]["forked_from"]["entry_id"] == entry
    fork_request = [r for r in server.requests if last_user_text(r) == "fork question"][-1]
    body = json.dumps(fork_request.json)
    assert "question one" in body and "question two" not in body
    assert_store_invariants(db)


async def test_kill_during_a_subagent_reattaches_without_a_twin(server, tmp_path, workspace) -> None:
    """S5: killed while a foreground subagent's request is in flight; the replayed call finds
    the same child and resumes it; one child, one answer, the parent's settled request is not
    repeated."""
    db = tmp_path / "child.sqlite"
    held = {"done": False}

    def responder(request: Any) -> list[Any]:
        users = [m for m in request.json["messages"] if m["role"] == "user"]
        first = users[0]["content"] if users else ""
        if isinstance(first, str) and first.startswith(CHILD_TASK):
            if not held["done"]:
                held["done"] = True
                return [Hang()]
            return [Text("child report: two files")]
        if "child report" in json.dumps(request.json):
            return [Text("parent done")]
        return [ToolCall("subagent", {"task": CHILD_TASK}, id="d1")]

    server.responder = responder
    child = await start(server, db, workspace, "r", "delegate")
    await server.until_hanging(1)
    await child.kill()
    events = await run_to_end(await start(server, db, workspace, "r", "delegate"))
    main_end = next(e for e in events if e["type"] == "end" and e.get("target_id") is None)
    assert main_end["status"] == "completed" and main_end["text"] == "parent done"
    snapshot = next(e for e in reversed(events) if e["type"] == "session")["snapshot"]
    subagents = [c for c in snapshot["contexts"] if c["kind"] == "subagent"]
    assert len(subagents) == 1, "the replay reattached instead of spawning a twin"
    parent_first = [r for r in server.requests if "subagent" in json.dumps(r.json.get("tools", []))]
    delegations = [r for r in parent_first if last_user_text(r) == "delegate" and len(r.json["messages"]) <= 3]
    assert len(delegations) == 1, "the parent's settled request was not repeated"
    assert_store_invariants(db)


async def test_kill_during_a_background_subagent_delivers_its_result_once(server, tmp_path, workspace) -> None:
    """S5/S6: a background child killed mid-request resumes after reopen; its result reaches the
    parent exactly once."""
    db = tmp_path / "bg.sqlite"
    held = {"done": False}

    def responder(request: Any) -> list[Any]:
        users = [m for m in request.json["messages"] if m["role"] == "user"]
        first = users[0]["content"] if users else ""
        body = json.dumps(request.json)
        if isinstance(first, str) and first.startswith(CHILD_TASK):
            if not held["done"]:
                held["done"] = True
                return [Hang()]
            return [Text("background report")]
        if "Background subagent" in body:
            return [Text("thanks for the report")]
        if "Started subagent" in body:
            return [Text("started it")]
        return [ToolCall("subagent", {"task": CHILD_TASK, "background": True}, id="b1")]

    server.responder = responder
    child = await start(server, db, workspace, "r", "delegate")
    await child.wait_for(lambda e: e["type"] == "end" and e["request_id"] == "r")
    await server.until_hanging(1)
    await child.kill()
    events = await run_to_end(await start(server, db, workspace, "r2", "anything new?"))
    deliveries = [r for r in server.requests if "Background subagent" in json.dumps(r.json)]
    assert len(deliveries) == 1
    delivered_turns = {e["request_id"] for e in events if e["type"] == "end" and e["request_id"].endswith(":result")}
    assert len(delivered_turns) == 1
    texts = [e["text"] for e in events if e["type"] == "end" and e.get("target_id") is None]
    assert "thanks for the report" in texts
    assert_store_invariants(db)
