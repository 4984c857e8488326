"""Code mode: options, the script API, nested calls through the engine, approvals, cancel, Trace (SPEC X4).

Every test runs real scripts in the real QuickJS worker process, through the real session driver
and engine against the fake provider server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentHost, UserInputRequired, create_agent
from agentcore.errors import InputValidationError
from agentcore.extensions.codemode import parse_option
from agentcore.extensions.codemode.sandbox import sandbox_fingerprint
from agentcore.harness import SqliteStorageFactory
from agentcore.harness.projection import RESULT_PREVIEW
from agentcore.testing.steps import ToolCall
from tests.agentcore.codemode_helpers import Effects, codemode_end, entries_of, script_turn, worker_pids
from tests.agentcore.session_helpers import Gate, ends, last_snapshot, run_with
from tests.docs import python_example

COMPLETIONS = "openai-completions"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_worker_left_behind():
    yield
    assert worker_pids() == [], "every sandbox worker is reaped when its script ends"


# --- options ----------------------------------------------------------------------------------


def test_options_default_and_maximum_and_refuse_anything_else() -> None:
    """X4: {} = 64 MiB / 300 s; 256 MiB / 300 s is the maximum; above it, unknown keys and wrong
    types are input_validation naming session.code_mode.<field>."""
    assert (parse_option({}).memory_limit_bytes, parse_option({}).timeout_ms) == (64 << 20, 300_000)
    top = parse_option({"memory_limit_bytes": 256 << 20, "timeout_ms": 300_000})
    assert (top.memory_limit_bytes, top.timeout_ms) == (256 << 20, 300_000)
    bad = [
        ({"memory_limit_bytes": (256 << 20) + 1}, "session.code_mode.memory_limit_bytes"),
        ({"timeout_ms": 300_001}, "session.code_mode.timeout_ms"),
        ({"timeout_ms": 0}, "session.code_mode.timeout_ms"),
        ({"timeout_ms": True}, "session.code_mode.timeout_ms"),
        ({"memory_limit_bytes": "64M"}, "session.code_mode.memory_limit_bytes"),
        ({"time_limit": 5}, "session.code_mode.time_limit"),
        (None, "session.code_mode"),
        ([], "session.code_mode"),
    ]
    for raw, field in bad:
        with pytest.raises(InputValidationError) as caught:
            parse_option(raw)
        assert caught.value.field == field, raw


async def test_bad_code_mode_option_opens_nothing(tmp_path: Path, fake_server) -> None:
    """X4: a bad option fails create_agent before the store is created."""
    db = tmp_path / "agent.sqlite"
    with pytest.raises(InputValidationError) as caught:
        await create_agent(
            provider="fake",
            model="m",
            base_url=fake_server.base_url,
            api_kind=COMPLETIONS,
            database_path=str(db),
            session={"code_mode": {"memory_limit_bytes": 512 << 20}},
        )
    assert caught.value.field == "session.code_mode.memory_limit_bytes"
    assert not db.exists()


# --- the script API ---------------------------------------------------------------------------


async def test_script_chains_tools_with_text_and_return_value_and_each_call_is_committed_like_a_direct_one(
    make_agent, fake_server
) -> None:
    """X4: await tools.<name>(args) runs the context's tools; text() and the return value come
    back to the model; every nested call is an intent committed before its result, in order."""
    code = """
        const readme = await tools.read({path: "README.md"});
        text("lines:", readme.split("\\n").length);
        const listing = await tools.ls({});
        return {files: listing.split("\\n"), tools: Object.keys(tools).sort()};
    """
    fake_server.enqueue(*script_turn(code))
    agent = await make_agent(COMPLETIONS, session={"code_mode": {}})
    events = await run_with(agent, {"prompt": "go", "request_id": "r"})
    end = codemode_end(events)
    assert not end.is_error, end.result
    assert end.result.startswith("lines: 2\nReturn value: ")
    returned = json.loads(end.result.split("Return value: ", 1)[1])
    assert returned["files"] == ["main.py", "README.md"]
    assert "codemode" not in returned["tools"] and {"read", "ls", "write", "bash"} <= set(returned["tools"])
    sent = fake_server.requests[1].json["messages"][-1]
    assert sent["role"] == "tool" and sent["content"] == end.result
    nested = [(e.kind, e.payload["index"]) for e in entries_of(agent, "nested_intent", "nested_result")]
    assert nested == [("nested_intent", 0), ("nested_result", 0), ("nested_intent", 1), ("nested_result", 1)]
    kinds = [e.kind for e in entries_of(agent, "code_run", "nested_result", "code_run_end", "message")]
    assert kinds.index("code_run") < kinds.index("nested_result") < kinds.index("code_run_end")
    updates = [e.partial for e in events if e.type == "tool" and e.phase == "update"]
    assert "[call 0] tools.read: completed" in "".join(updates) and "lines: 2\n" in updates


async def test_store_and_load_persist_across_calls_and_reopen_and_a_killed_script_keeps_nothing(
    tmp_path: Path, fake_server, workspace: Path
) -> None:
    """X4: store()/load() keep small JSON values for later codemode calls of the conversation,
    durably (a register, committed with the script's result); undefined removes a key; a script
    stopped at its deadline writes nothing."""
    db = tmp_path / "agent.sqlite"
    fake_server.enqueue(
        *script_turn("store('count', {n: 1}); store('gone', 1); return load('count')", call_id="a"),
        *script_turn("const c = load('count'); store('count', {n: c.n + 1}); store('gone', undefined); return 0"),
        *script_turn("store('count', {n: 99}); while (true) {}", call_id="k"),
    )

    async def open_agent() -> Any:
        return await create_agent(
            provider="fake",
            model="m",
            base_url=fake_server.base_url,
            api_key="k",
            api_kind=COMPLETIONS,
            database_path=str(db),
            workdir=str(workspace),
            session={"code_mode": {"timeout_ms": 1500}},
        )

    async with await open_agent() as agent:
        first = codemode_end(await run_with(agent, {"prompt": "one", "request_id": "r1"}))
        assert first.result == 'Return value: {"n":1}'
        await run_with(agent, {"prompt": "two", "request_id": "r2"})
        killed = codemode_end(await run_with(agent, {"prompt": "three", "request_id": "r3"}))
        assert killed.is_error and "deadline (1500 ms)" in killed.result
    fake_server.enqueue(*script_turn("return [load('count'), load('gone'), typeof load('gone')]"))
    async with await open_agent() as agent:
        reopened = codemode_end(await run_with(agent, {"prompt": "four", "request_id": "r4"}))
        assert reopened.result == 'Return value: [{"n":2},null,"undefined"]'


async def test_store_refuses_values_over_the_limits(make_agent, fake_server) -> None:
    """X4: store() takes small JSON values: too large, not JSON or a bad key throws in the script."""
    code = """
        const errors = [];
        for (const attempt of [() => store("big", "x".repeat(70000)), () => store("", 1), () => store("f", () => 1)]) {
            try { attempt(); errors.push("stored"); } catch (e) { errors.push(e.message.split(":")[0]); }
        }
        return errors;
    """
    fake_server.enqueue(*script_turn(code))
    agent = await make_agent(COMPLETIONS, session={"code_mode": {}})
    end = codemode_end(await run_with(agent, "go"))
    refused = json.loads(end.result.removeprefix("Return value: "))
    assert refused == ['store("big")', "store keys are non-empty strings of at most 200 characters", 'store("f")']


async def test_clock_and_random_are_fixed_by_the_recorded_header(make_agent, fake_server) -> None:
    """X4 (deterministic replay): Date is the script's recorded start time and Math.random is
    seeded from the header, so a re-run sees the same values."""
    code = "return [Date.now(), new Date().getTime(), Math.random(), Math.random()]"
    fake_server.enqueue(*script_turn(code, call_id="a"), *script_turn(code, call_id="b"))
    agent = await make_agent(COMPLETIONS, session={"code_mode": {}})
    first = json.loads(codemode_end(await run_with(agent, "one")).result.removeprefix("Return value: "))
    second = json.loads(codemode_end(await run_with(agent, "two")).result.removeprefix("Return value: "))
    headers = [e.payload for e in entries_of(agent, "code_run")]
    assert first[:2] == [headers[0]["clock_ms"]] * 2 and second[:2] == [headers[1]["clock_ms"]] * 2
    assert first[2:] == list(_mulberry32(headers[0]["seed"], 2))
    assert second[2:] == list(_mulberry32(headers[1]["seed"], 2))


def _mulberry32(seed: int, count: int) -> Any:
    """The prelude's generator, in Python."""
    state = seed & 0xFFFFFFFF

    def imul(a: int, b: int) -> int:
        return ((a & 0xFFFFFFFF) * (b & 0xFFFFFFFF)) & 0xFFFFFFFF

    for _ in range(count):
        state = (state + 0x6D2B79F5) & 0xFFFFFFFF
        t = state
        t = imul(t ^ (t >> 15), t | 1)
        t ^= (t + imul(t ^ (t >> 7), t | 61)) & 0xFFFFFFFF
        yield ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296


# --- whitelist, arguments, approval -------------------------------------------------------------


async def test_whitelist_is_the_contexts_tools_without_codemode_ask_user_and_subagent(make_agent, fake_server) -> None:
    """X4: a script calls only the context's tools; codemode itself, subagent, ask_user and tools
    the policy removed are refused — a result, no intent, no effect."""
    code = """
        const refused = [];
        for (const name of ["bash", "codemode", "subagent", "ask_user", "write", "nope"]) {
            try { await tools[name]({}); refused.push(name + ": ran"); } catch (e) { refused.push(e.message); }
        }
        return {refused, keys: Object.keys(tools), has: ["read" in tools, "bash" in tools]};
    """
    fake_server.enqueue(*script_turn(code))
    agent = await make_agent(
        COMPLETIONS, permission_policy="read-only", session={"code_mode": {}, "subagents": {"tools": ["read"]}}
    )
    end = codemode_end(await run_with(agent, "go"))
    returned = json.loads(end.result.removeprefix("Return value: "))
    assert all(
        m.startswith(f"tools.{n} is not available in code mode")
        for n, m in zip(["bash", "codemode", "subagent", "ask_user", "write", "nope"], returned["refused"], strict=True)
    )
    assert set(returned["keys"]) == {"read", "grep", "find", "ls", "update_plan"}
    assert returned["has"] == [True, False]
    assert entries_of(agent, "nested_intent") == []
    statuses = [e.payload["status"] for e in entries_of(agent, "nested_result")]
    assert statuses == ["blocked"] * 6


async def test_invalid_arguments_are_refused_without_an_intent(make_agent, fake_server) -> None:
    """X4 / DURABILITY 11: a nested call with arguments its tool rejects gets an error, no intent."""
    fake_server.enqueue(*script_turn("try { await tools.read({nope: 1}) } catch (e) { return e.message }"))
    agent = await make_agent(COMPLETIONS, session={"code_mode": {}})
    end = codemode_end(await run_with(agent, "go"))
    assert "Invalid arguments for tool 'read'" in end.result and "path" in end.result
    assert entries_of(agent, "nested_intent") == []
    assert [e.payload["status"] for e in entries_of(agent, "nested_result")] == ["invalid"]


async def test_nested_calls_are_approved_by_the_host_with_the_caller_named(make_agent, fake_server) -> None:
    """X4: each nested call of an extra tool goes to approve_tool_call like a direct call, with
    the codemode call as its caller; a denial reaches the script and nothing ran."""
    effects = Effects()
    seen: list[dict[str, Any]] = []

    def approve(payload: dict[str, Any]) -> None:
        seen.append(payload)
        if payload["arguments"].get("tag") == "no":
            raise PermissionError("not this one")

    code = """
        const ok = await tools.effect({tag: "yes"});
        let denied;
        try { await tools.effect({tag: "no"}); } catch (e) { denied = e.message; }
        return [ok, denied];
    """
    fake_server.enqueue(*script_turn(code))
    agent = await make_agent(COMPLETIONS, extra_tools=[effects.tool()], session={"code_mode": {}})
    end = codemode_end(await run_with(agent, "go", host=AgentHost(approve_tool_call=approve)))
    assert end.result == 'Return value: ["effect yes #1","not this one"]'
    assert effects.calls == [{"tag": "yes"}]
    assert [p["tool"] for p in seen] == ["effect", "effect"]
    assert seen[0]["caller"] == {"tool": "codemode", "tool_call_id": "c1", "call_key": seen[0]["caller"]["call_key"]}
    assert seen[0]["approval_id"] == f"{seen[0]['caller']['call_key']}/n0"
    assert [e.payload["status"] for e in entries_of(agent, "nested_result")] == ["completed", "denied"]
    assert len(entries_of(agent, "nested_intent")) == 1


async def test_a_nested_call_waiting_for_approval_pauses_the_turn_and_the_resume_replays_the_log(
    make_agent, fake_server
) -> None:
    """X4: a nested call that needs a person pauses the run durably (pending names the caller);
    approving resumes the turn: the script re-runs, the committed call is fed back (not run
    again) and the approved call runs once."""
    effects = Effects()

    def approve(payload: dict[str, Any]) -> None:
        if payload["arguments"].get("tag") == "ask":
            raise UserInputRequired("approve?", payload)

    code = "const a = await tools.effect({tag: 'first'}); const b = await tools.effect({tag: 'ask'}); return [a, b]"
    fake_server.enqueue(*script_turn(code))
    agent = await make_agent(COMPLETIONS, extra_tools=[effects.tool()], session={"code_mode": {}})
    host = AgentHost(approve_tool_call=approve)
    paused = ends(await run_with(agent, {"prompt": "go", "request_id": "r"}, host=host))[-1]
    assert paused.status == "paused" and paused.pending["caller"]["tool"] == "codemode"
    assert paused.pending["approval_id"].endswith("/n1") and paused.pending["arguments"] == {"tag": "ask"}
    assert effects.calls == [{"tag": "first"}]
    resume = {"request_id": "r", "tool_resume": {"approval_id": paused.pending["approval_id"], "approved": True}}
    events = await run_with(agent, resume, host=host)
    assert codemode_end(events).result == 'Return value: ["effect first #1","effect ask #2"]'
    assert effects.calls == [{"tag": "first"}, {"tag": "ask"}]
    assert ends(events)[-1].status == "completed"
    record = last_snapshot(events)["records"]["code_mode"]["executions"][-1]
    assert record["replayed"] == [0] and [c["replayed"] for c in record["calls"]] == [True, False]


# --- cancellation -------------------------------------------------------------------------------


async def test_the_turns_abort_stops_the_nested_call_and_kills_the_worker(make_agent, fake_server) -> None:
    """X4 / L8: cancelling the turn during a nested call stops that call (abort signal), kills
    the worker and ends the run aborted; the call is settled, the host keeps working."""
    gate = Gate()
    abort = asyncio.Event()
    fake_server.enqueue([ToolCall("codemode", {"code": "await tools.gate({}); return 'after'"}, id="c1")])
    agent = await make_agent(COMPLETIONS, extra_tools=[gate.tool()], session={"code_mode": {}})

    running: list[int] = []

    async def cancel_inside_the_call() -> None:
        await gate.entered.wait()
        running.extend(worker_pids())
        abort.set()

    canceller = asyncio.ensure_future(cancel_inside_the_call())
    events = await run_with(agent, {"prompt": "go", "request_id": "r"}, host=AgentHost(abort_signal=abort))
    await canceller
    assert len(running) == 1, "the script ran in its worker"
    assert ends(events)[-1].status == "aborted"
    assert "cancelled" in codemode_end(events).result
    assert [e.payload["status"] for e in entries_of(agent, "nested_result")] == ["cancelled"]
    assert worker_pids() == []
    fake_server.enqueue(*script_turn("return 1 + 1", call_id="c2"))
    assert codemode_end(await run_with(agent, {"prompt": "again", "request_id": "r2"})).result == "Return value: 2"


async def test_cancel_command_on_the_script_task_stops_the_script_and_the_turn_goes_on(make_agent, fake_server) -> None:
    """X4 / S2: cancel scope task with the codemode task id stops that script; the turn gets its
    error result and continues."""
    gate = Gate()
    fake_server.enqueue(*script_turn("await tools.gate({}); return 'after'"))
    agent = await make_agent(COMPLETIONS, extra_tools=[gate.tool()], session={"code_mode": {}})
    receipts: list[dict[str, Any]] = []

    async def cancel_the_script() -> None:
        await gate.entered.wait()
        task = next(t for t in agent.snapshot()["tasks"] if t["name"] == "codemode")
        receipts.append(
            await agent.control({"type": "cancel", "request_id": "x", "scope": "task", "task_id": task["task_id"]})
        )

    canceller = asyncio.ensure_future(cancel_the_script())
    events = await run_with(agent, {"prompt": "go", "request_id": "r"})
    await canceller
    assert receipts and receipts[0]["status"] == "cancelled"
    end = codemode_end(events)
    assert end.is_error and "cancelled by a cancel command" in end.result
    assert ends(events)[-1].status == "completed" and ends(events)[-1].text == "done"


async def test_closing_during_a_nested_call_writes_nothing_and_a_reopen_resumes_the_script(
    make_agent, fake_server, tmp_path: Path
) -> None:
    """X4 / DURABILITY 15: close() during a nested call kills the worker and stops the call
    without writing anything (a pause, not a cancel); the reopened runtime re-runs the script:
    the committed call is fed back, the interrupted safe call runs again."""
    db = str(tmp_path / "close.sqlite")
    effects, gate = Effects(), Gate()
    fake_server.enqueue(*script_turn("const a = await tools.effect({tag: 'one'}); await tools.gate({}); return a"))
    options: dict[str, Any] = {"database_path": db, "session": {"code_mode": {}}}
    agent = await make_agent(COMPLETIONS, extra_tools=[effects.tool(), gate.tool()], **options)
    running = asyncio.ensure_future(run_with(agent, {"prompt": "go", "request_id": "r"}))
    await gate.entered.wait()
    committed = agent.log.view.last_seq
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    await agent.close()
    assert worker_pids() == []
    storage, release = SqliteStorageFactory(db).open()
    try:
        assert storage.load().last_seq == committed, "close() wrote nothing"
    finally:
        storage.close()
        release()
    reopened_gate = Gate()
    reopened_gate.open()
    reopened = await make_agent(COMPLETIONS, extra_tools=[effects.tool(), reopened_gate.tool()], **options)
    events = await run_with(reopened, {"request_id": "r"})
    assert codemode_end(events).result == 'Return value: "effect one #1"'
    assert effects.calls == [{"tag": "one"}] and reopened_gate.calls == 1
    assert ends(events)[-1].status == "completed"


# --- the Trace ----------------------------------------------------------------------------------


async def test_records_show_script_nested_calls_timings_and_output_for_the_trace(make_agent, fake_server) -> None:
    """X4 / W3: records["code_mode"] carries the limits, the sandbox identity and each execution:
    script, nested calls in order (name, arguments, status, result, duration), output, status."""
    code = "text('hello'); const r = await tools.ls({}); try { await tools.nope({}) } catch (e) {} return 7"
    fake_server.enqueue(*script_turn(code))
    agent = await make_agent(COMPLETIONS, session={"code_mode": {"memory_limit_bytes": 32 << 20, "timeout_ms": 9000}})
    events = await run_with(agent, {"prompt": "go", "request_id": "r"})
    record = last_snapshot(events)["records"]["code_mode"]
    assert record["enabled"] and record["limits"]["memory_limit_bytes"] == 32 << 20
    assert record["fingerprint"] == sandbox_fingerprint()["fingerprint"] and record["engine"].startswith("quickjs ")
    (execution,) = record["executions"]
    task = next(t for t in last_snapshot(events)["history"] if t["name"] == "codemode")
    assert execution["task_id"] == task["task_id"] and execution["request_id"] == "r"
    assert execution["status"] == "completed" and execution["script"] == code
    assert execution["output"] == "hello\n" and execution["return_json"] == "7"
    assert execution["limits"]["timeout_ms"] == 9000
    first, second = execution["calls"]
    assert (first["name"], first["arguments"], first["status"], first["result"]) == (
        "ls",
        {},
        "completed",
        "main.py\nREADME.md",
    )
    assert first["duration_ms"] >= 0 and first["at_ms"] <= second["at_ms"] <= execution["elapsed_ms"]
    assert (second["name"], second["status"], second["replayed"]) == ("nope", "blocked", False)
    assert execution["worker_start_ms"] > 0 and execution["replayed"] == []


async def test_finished_runs_keep_previews_in_memory_and_everything_in_the_store(
    make_agent, fake_server, workspace: Path
) -> None:
    """X4: the projection keeps a finished script's nested results as previews (memory stays
    bounded in long sessions); the store's entries keep the full results."""
    (workspace / "big.txt").write_text("".join(f"line {n}\n" for n in range(2_000)))
    fake_server.enqueue(*script_turn("return (await tools.read({path: 'big.txt'})).length"))
    agent = await make_agent(COMPLETIONS, session={"code_mode": {}})
    end = codemode_end(await run_with(agent, "go"))
    assert int(end.result.removeprefix("Return value: ")) > 20_000
    (run,) = agent.log.code_history
    assert len(run.results[0]["value"]) == RESULT_PREVIEW
    assert len(entries_of(agent, "nested_result")[0].payload["value"]) > 20_000


# --- README -------------------------------------------------------------------------------------


def test_readme_code_mode_example_runs(workspace: Path) -> None:
    """X4: the Code mode page's example runs as written."""
    script = workspace / "example.py"
    script.write_text(python_example("docs/code-mode.md", "# Code mode"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, str(script)], cwd=workspace, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "Return value:" in result.stdout and "completed" in result.stdout


async def test_the_codemode_task_carries_its_script_and_nested_calls(make_agent, fake_server) -> None:
    """W3/X4: the snapshot's task for a codemode call has the script, its nested calls in order
    (name, arguments, result, duration, replayed or not) and the output, for the Trace."""
    code = 'const a = await tools.ls({}); text("listed"); return (await tools.read({path: "README.md"})).length;'
    fake_server.enqueue(*script_turn(code))
    agent = await make_agent(COMPLETIONS, session={"code_mode": {}})
    events = await run_with(agent, {"prompt": "go", "request_id": "r"})
    task = next(t for t in last_snapshot(events)["history"] if t["name"] == "codemode")
    detail = task["detail"]
    assert detail["script"] == code and detail["status"] == "completed" and detail["output"].startswith("listed")
    assert [(c["index"], c["name"], c["arguments"]) for c in detail["calls"]] == [
        (0, "ls", {}),
        (1, "read", {"path": "README.md"}),
    ]
    assert all(c["duration_ms"] is not None and c["replayed"] is False for c in detail["calls"])
    assert "Demo project" in detail["calls"][1]["result"]


async def test_an_explicit_tools_list_names_codemode_like_any_session_tool(make_agent, fake_server) -> None:
    """T3/X4: tools=[...] narrows session tools too: naming codemode keeps it, leaving it out
    drops it; naming it is never an unknown-tool error."""
    from agentcore.testing.steps import Text

    fake_server.enqueue([Text("a")], [Text("b")])
    kept = await make_agent(COMPLETIONS, session={"code_mode": {}}, tools=["read", "codemode"])
    await run_with(kept, "one")
    dropped = await make_agent(COMPLETIONS, session={"code_mode": {}}, tools=["read"])
    await run_with(dropped, "two")
    offered = [{t["function"]["name"] for t in r.json["tools"]} for r in fake_server.requests]
    assert offered == [{"read", "codemode"}, {"read"}]
