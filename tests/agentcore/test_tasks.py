"""Extensions and durable tasks (SPEC X1, X2, D5, D7)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from agentcore import (
    AgentError,
    AgentTool,
    InputValidationError,
    ToolResult,
    agent_hook,
    cancel_agent_conversation,
    create_agent_registry,
    define_agent_doc,
    define_agent_extension,
    define_agent_task,
    define_task_tool,
)
from agentcore.testing.steps import Text, ToolCall
from tests.agentcore.session_helpers import last_snapshot, run_with
from tests.agentcore.task_fixtures import Journal, app, done, parent, timer

COMPLETIONS = "openai-completions"


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "journal.txt")


def task_command(request_id: str, name: str, input: Any, background: bool = True) -> dict[str, Any]:
    return {"type": "task", "request_id": request_id, "name": name, "input": input, "background": background}


async def start_task(agent, command: dict[str, Any], prompt: str = "go") -> tuple[list[Any], dict[str, Any]]:
    """Run ``prompt`` and send ``command`` at the first session event; run() waits for the task."""
    receipts: list[dict[str, Any]] = []

    async def on_event(event) -> None:
        if event.type == "session" and not receipts:
            receipts.append(await agent.control(command))

    events = await run_with(agent, prompt, on_event)
    return events, receipts[0]


def tasks_by_id(snapshot: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["task_id"]: t for t in [*snapshot["tasks"], *snapshot["history"]] if t["kind"] == "task"}


async def test_timer_task_runs_to_completion_and_its_row_has_what_a_ui_needs(make_agent, fake_server, journal) -> None:
    """X1: the seed's timer: started by the task command, sleeps until wake_at, completes; the
    row keeps name, version, status, phase, checkpoint, wake_at, timestamps and outcome; a
    resend creates nothing."""
    registry = create_agent_registry()
    registry.install(app(journal))
    fake_server.enqueue([Text("ok")], [Text("again")])
    agent = await make_agent(COMPLETIONS, session={"registry": registry})
    wake_at = int(time.time() * 1000) + 50
    command = task_command("t1", "app.timer", {"wake_at": wake_at})
    events, receipt = await start_task(agent, command)
    assert receipt["status"] == "started" and receipt["task_id"]
    task = tasks_by_id(last_snapshot(events))[receipt["task_id"]]
    assert task["status"] == "completed" and task["result"] == "awake v1"
    detail = task["detail"]
    assert detail["version"] == 1 and detail["phase"] == "wait" and detail["checkpoint"]["wake_at"] == wake_at
    assert detail["created_ms"] <= detail["updated_ms"] and detail["outcome"]["status"] == "completed"
    resent = []

    async def resend(event) -> None:
        if event.type == "session" and not resent:
            resent.append(await agent.control(command))

    await run_with(agent, "again", resend)
    assert resent[0] == receipt
    assert journal.lines() == [f"{receipt['task_id']} wait v1"], "the resend started nothing"


async def test_parent_waits_on_two_children_and_wakes_once(make_agent, fake_server, journal) -> None:
    """X1: tx.create_task makes owned children in the parent's commit; waiting with all_settled
    wakes the parent exactly once, after both children ended."""
    registry = create_agent_registry()
    registry.install(app(journal))
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(COMPLETIONS, session={"registry": registry})
    events, receipt = await start_task(agent, task_command("p", "app.parent", {}))
    tasks = tasks_by_id(last_snapshot(events))
    parent_task = tasks[receipt["task_id"]]
    children = parent_task["detail"]["children"]
    assert parent_task["status"] == "completed" and parent_task["result"] == ["awake v1", "awake v1"]
    assert len(children) == 2 and all(tasks[c]["parent_task_id"] == receipt["task_id"] for c in children)
    assert journal.lines().count(f"{receipt['task_id']} collect") == 1, "woken exactly once"
    assert journal.lines()[0] == f"{receipt['task_id']} spawn"


async def test_cancel_stops_children_first_then_calls_abort(make_agent, fake_server, journal) -> None:
    """X1/S2: cancel (scope task) cancels owned children first — each runs its abort — then the
    task's own abort; the snapshot shows stopping until the end."""
    registry = create_agent_registry()
    registry.install(define_agent_extension(name="app", tasks=[timer(journal), parent(journal, child_delay_ms=60_000)]))
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(COMPLETIONS, session={"registry": registry})
    seen: list[Any] = []

    async def on_event(event) -> None:
        if event.type == "session" and not seen:
            seen.append(await agent.control(task_command("p", "app.parent", {})))
        elif event.type == "session" and len(seen) == 1:
            tasks = tasks_by_id(event.snapshot)
            parent_row = tasks[seen[0]["task_id"]]
            if parent_row["status"] == "waiting":
                cancel = {"type": "cancel", "request_id": "c", "scope": "task", "task_id": seen[0]["task_id"]}
                seen.append(await agent.control(cancel))
                seen.append(tasks_by_id(agent.snapshot())[seen[0]["task_id"]]["stopping"])

    events = await run_with(agent, "go", on_event)
    receipt, cancel, stopping = seen
    assert cancel["status"] == "cancelled" and stopping is True
    tasks = tasks_by_id(last_snapshot(events))
    parent_row = tasks[receipt["task_id"]]
    assert parent_row["status"] == "aborted" and parent_row["stopping"] is False
    children = parent_row["detail"]["children"]
    assert all(tasks[c]["status"] == "aborted" for c in children)
    lines = journal.lines()
    child_aborts = [i for i, line in enumerate(lines) if line.endswith(" abort")]
    parent_abort = lines.index(f"{receipt['task_id']} abort parent")
    assert len(child_aborts) == 2 and max(child_aborts) < parent_abort, lines


async def test_close_pauses_and_a_reopen_resumes(make_agent, fake_server, journal, tmp_path) -> None:
    """X1: closing the host pauses a task (not a cancel); a reopened runtime finishes it."""
    db = str(tmp_path / "pause.sqlite")
    entered = asyncio.Event()
    registry = create_agent_registry()
    registry.install(app(journal, entered))
    fake_server.enqueue([Text("ok")], [Text("back")])
    agent = await make_agent(COMPLETIONS, session={"registry": registry}, database_path=db)
    started: list[dict[str, Any]] = []

    async def serve() -> None:
        async for event in agent.serve():
            if event.type == "session" and not started:
                started.append(await agent.control(task_command("s", "app.steps", {})))

    serving = asyncio.ensure_future(serve())
    await entered.wait()  # the second phase is running
    agent.stop_serving()
    await serving
    await agent.close()
    task_id = started[0]["task_id"]
    paused = await make_agent(COMPLETIONS, session={"registry": registry}, database_path=db)
    row = paused.log.view.tasks[task_id].payload
    assert row["status"] == "running" and row["phase"] == "second", "closing paused, it did not cancel"
    events = await run_with(paused, "resume")
    assert tasks_by_id(last_snapshot(events))[task_id]["status"] == "completed"
    ran = [line.split(" ", 1)[1] for line in journal.lines()]
    assert ran == ["first", 'second {"n": 1}', 'second {"n": 1}', 'third {"n": 2}']


async def test_a_failing_phase_fails_the_task_and_is_not_resumed(make_agent, fake_server, tmp_path) -> None:
    """X1/D5: a phase that raises, or returns without committing, fails the task with a clear
    reason; a reported failure is not resumed on reopen."""
    db = str(tmp_path / "fail.sqlite")
    calls: list[str] = []

    async def boom(task, runtime, context) -> None:
        calls.append("boom")
        raise RuntimeError("disk on fire")

    async def idle(task, runtime, context) -> None:
        calls.append("idle")

    registry = create_agent_registry()
    registry.install(
        define_agent_extension(
            name="app",
            tasks=[
                define_agent_task(name="app.boom", version=1, initial=lambda i: {}, phases={"go": boom}),
                define_agent_task(name="app.idle", version=1, initial=lambda i: {}, phases={"go": idle}),
            ],
        )
    )
    fake_server.enqueue([Text("ok")], [Text("ok")])
    agent = await make_agent(COMPLETIONS, session={"registry": registry}, database_path=db)
    receipts = []

    async def on_event(event) -> None:
        if event.type == "session" and not receipts:
            receipts.append(await agent.control(task_command("b", "app.boom", {})))
            receipts.append(await agent.control(task_command("i", "app.idle", {})))

    events = await run_with(agent, "go", on_event)
    tasks = tasks_by_id(last_snapshot(events))
    boom_row, idle_row = tasks[receipts[0]["task_id"]], tasks[receipts[1]["task_id"]]
    assert boom_row["status"] == "failed" and "RuntimeError: disk on fire" in boom_row["error"]
    assert idle_row["status"] == "failed" and "returned without committing" in idle_row["error"]
    await agent.close()
    reopened = await make_agent(COMPLETIONS, session={"registry": registry}, database_path=db)
    await run_with(reopened, "again")
    assert sorted(calls) == ["boom", "idle"], "failed tasks never run again"


async def test_hot_install_blocks_without_a_definition_and_reinstall_wakes(make_agent, fake_server, journal) -> None:
    """X2: an update never changes a running phase; the next phase takes a compatible new
    version; a missing or incompatible definition blocks the task (reason in the snapshot);
    installing a compatible one wakes it."""
    registry = create_agent_registry()
    registry.install(define_agent_extension(name="app", tasks=[timer(journal), parent(journal, child_delay_ms=60_000)]))
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(COMPLETIONS, session={"registry": registry})
    seen: dict[str, Any] = {}

    async def serve() -> None:
        async for event in agent.serve():
            if event.type != "session":
                continue
            if "receipt" not in seen:
                seen["receipt"] = await agent.control(task_command("p", "app.parent", {}))
                continue
            tasks = tasks_by_id(event.snapshot)
            parent_row = tasks.get(seen["receipt"]["task_id"])
            if parent_row and parent_row["status"] == "waiting" and "uninstalled" not in seen:
                seen["uninstalled"] = True
                registry.uninstall("app")
                for child in parent_row["detail"]["children"]:
                    cancel = {"type": "cancel", "request_id": f"c-{child}", "scope": "task", "task_id": child}
                    await agent.control(cancel)
            elif parent_row and parent_row["status"] == "blocked" and "blocked" not in seen:
                seen["blocked"] = parent_row["detail"]["blocked_reason"]
                registry.install(define_agent_extension(name="app", tasks=[timer(journal), _parent_v2(journal, ())]))
            elif parent_row and parent_row["status"] == "blocked" and "incompatible" not in seen and "blocked" in seen:
                if "cannot resume" in (parent_row["detail"]["blocked_reason"] or ""):
                    seen["incompatible"] = parent_row["detail"]["blocked_reason"]
                    compatible = [timer(journal), _parent_v2(journal, (1,))]
                    registry.install(define_agent_extension(name="app", tasks=compatible))
            elif parent_row and parent_row["status"] == "completed":
                seen["done"] = parent_row
                agent.stop_serving()

    await serve()
    assert "is not installed" in seen["blocked"]
    assert "version 2 cannot resume a version-1" in seen["incompatible"]
    assert seen["done"]["detail"]["version"] == 2 and seen["done"]["result"] == "collected by v2"


def _parent_v2(journal: Journal, accepts: tuple[int, ...]) -> Any:
    base = parent(journal)

    async def collect(task, runtime, context) -> None:
        journal.note(f"{task.id} collect v2")
        await runtime.commit(done("collected by v2"), context)

    return define_agent_task(
        name="app.parent",
        version=2,
        initial=base.initial,
        phases={"spawn": base.phases["spawn"], "collect": collect},
        accepts_versions=accepts,
    )


def test_reserved_names_and_duplicate_tools_are_refused(journal) -> None:
    """X2: agentcore.* and workflow.* cannot be defined; tools cannot be duplicated or shadow
    runtime tools."""

    async def phase(task, runtime, context) -> None:
        return None

    for name in ("agentcore.timer", "workflow.timer"):
        with pytest.raises(InputValidationError):
            define_agent_task(name=name, version=1, initial=lambda i: {}, phases={"go": phase})
        with pytest.raises(InputValidationError):
            define_agent_extension(name=name)
    tool = AgentTool("app_tool", "x", {"type": "object"}, execute=_noop)
    with pytest.raises(InputValidationError):
        define_agent_extension(name="a", tools=[tool, tool])
    with pytest.raises(InputValidationError):
        define_agent_extension(name="a", tools=[AgentTool("bash", "x", {"type": "object"}, execute=_noop)])
    registry = create_agent_registry()
    registry.install(define_agent_extension(name="a", tools=[tool]))
    with pytest.raises(InputValidationError) as info:
        registry.install(define_agent_extension(name="b", tools=[tool]))
    assert info.value.field == "tools"
    with pytest.raises(InputValidationError):
        registry.install(define_agent_extension(name="c", tasks=[timer(journal)]))
        registry.install(define_agent_extension(name="d", tasks=[timer(journal)]))


async def _noop(arguments: dict[str, Any], ctx: Any) -> ToolResult:
    return ToolResult.text("ok")


async def test_task_commands_only_name_registered_tasks(make_agent, fake_server, journal) -> None:
    """X2/S2: a task command names an installed task with JSON input; an unknown name is
    unknown_task; input that fails the task's schema or initial() is input_validation — and
    nothing is recorded either way."""
    registry = create_agent_registry()
    schema = {"type": "object", "properties": {"wake_at": {"type": "integer"}}, "required": ["wake_at"]}
    task = timer(journal)
    strict = define_agent_task(
        name="app.strict", version=1, initial=task.initial, phases=task.phases, input_schema=schema
    )
    registry.install(define_agent_extension(name="app", tasks=[strict]))
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(COMPLETIONS, session={"registry": registry})
    errors: list[tuple[str, str | None]] = []

    async def on_event(event) -> None:
        if event.type == "session" and not errors:
            for command in (
                task_command("x1", "app.missing", {}),
                task_command("x2", "app.strict", {"wake_at": "soon"}),
            ):
                with pytest.raises(AgentError) as info:
                    await agent.control(command)
                errors.append((info.value.code, info.value.field))
            assert not agent.log.view.tasks and "x1" not in agent.log.receipts

    await run_with(agent, "go", on_event)
    assert errors == [("unknown_task", "name"), ("input_validation", "input")]


async def test_extension_docs_tools_and_hooks(make_agent, fake_server, journal) -> None:
    """X1: docs add a prompt section; a declared tool starts a task (replay-safe id); hooks see
    events and task transitions."""
    seen: list[str] = []
    registry = create_agent_registry()
    start_timer = define_task_tool(
        name="start_timer",
        description="Start a timer.",
        parameters={"type": "object", "properties": {"in_ms": {"type": "integer"}}, "required": ["in_ms"]},
        task="app.timer",
        input=lambda args: {"wake_at": int(time.time() * 1000) + args["in_ms"]},
        background=False,
    )
    registry.install(
        define_agent_extension(
            name="app",
            tasks=[timer(journal)],
            tools=[start_timer],
            docs=[define_agent_doc("timers", "Use start_timer for reminders.")],
            hooks=[
                agent_hook("tool", lambda event, ctx: seen.append(f"tool:{event['phase']}")),
                agent_hook("task", lambda event, ctx: seen.append(f"task:{event['status']}")),
            ],
        )
    )
    fake_server.enqueue([ToolCall("start_timer", {"in_ms": 10}, id="t")], [Text("timer done")])
    agent = await make_agent(COMPLETIONS, session={"registry": registry})
    events = await run_with(agent, "remind me")
    system = fake_server.requests[0].json["messages"][0]["content"]
    assert "Use start_timer for reminders." in system
    tool_end = next(e for e in events if e.type == "tool" and e.phase == "end")
    assert "ended completed: 'awake v1'" in tool_end.result
    assert "tool:start" in seen and "tool:end" in seen and "task:completed" in seen
    records = last_snapshot(events)["records"]["extensions"]
    assert records[0]["name"] == "app" and records[0]["tasks"] == [{"name": "app.timer", "version": 1}]


async def test_offline_cancel_uses_the_registry_and_the_task_rows(make_agent, fake_server, journal, tmp_path) -> None:
    """D7: offline cancel runs each defined task's abort (children first); without a
    definition a task ends orphaned."""
    db = tmp_path / "offline.sqlite"
    registry = create_agent_registry()
    registry.install(define_agent_extension(name="app", tasks=[timer(journal), parent(journal, child_delay_ms=60_000)]))
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(COMPLETIONS, session={"registry": registry}, database_path=str(db))
    receipts: list[dict[str, Any]] = []
    async for event in agent.serve():
        if event.type == "session" and not receipts:
            receipts.append(await agent.control(task_command("p", "app.parent", {})))
        elif event.type == "session" and tasks_by_id(event.snapshot)[receipts[0]["task_id"]]["status"] == "waiting":
            agent.stop_serving()
    await agent.close()
    parent_id = receipts[0]["task_id"]
    known_timer_only = create_agent_registry()
    known_timer_only.install(define_agent_extension(name="timers", tasks=[timer(journal)]))
    outcome = await cancel_agent_conversation(agent_store_dir=db, conversation_id="main", registry=known_timer_only)
    assert len(outcome["aborted_tasks"]) == 2 and outcome["orphaned_tasks"] == [parent_id]
    assert sum(1 for line in journal.lines() if line.endswith(" abort")) == 2
    reopened = await make_agent(COMPLETIONS, session={"registry": registry}, database_path=str(db))
    rows = reopened.log.view.tasks
    assert rows[parent_id].payload["status"] == "orphaned"
    assert {rows[c].payload["status"] for c in rows[parent_id].payload["children"]} == {"aborted"}
    assert json.dumps(reopened.snapshot()["tasks"]) == "[]"


async def test_running_phase_keeps_its_definition_and_the_next_phase_takes_the_new_one(make_agent, fake_server) -> None:
    """X2: an update published while a phase runs does not change that phase's code; the next
    phase uses the newest compatible definition (and the row records its version)."""
    release = asyncio.Event()
    entered = asyncio.Event()
    ran: list[str] = []

    def definition(version: int) -> Any:
        async def first(task, runtime, context) -> None:
            ran.append(f"first v{version}")
            entered.set()
            await release.wait()
            await runtime.commit(lambda tx: {"status": "running", "phase": "second", "checkpoint": {}}, context)

        async def second(task, runtime, context) -> None:
            ran.append(f"second v{version}")
            await runtime.commit(done(f"v{version}"), context)

        phases = {"first": first, "second": second}
        return define_agent_task(
            name="app.two", version=version, initial=lambda i: {}, phases=phases, accepts_versions=(1,)
        )

    registry = create_agent_registry()
    registry.install(define_agent_extension(name="app", tasks=[definition(1)]))
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(COMPLETIONS, session={"registry": registry})
    receipts: list[dict[str, Any]] = []

    async def on_event(event) -> None:
        if event.type == "session" and not receipts:
            receipts.append(await agent.control(task_command("t", "app.two", {})))
            await entered.wait()
            registry.install(define_agent_extension(name="app", tasks=[definition(2)]))
            release.set()

    events = await run_with(agent, "go", on_event)
    task = tasks_by_id(last_snapshot(events))[receipts[0]["task_id"]]
    assert ran == ["first v1", "second v2"]
    assert task["result"] == "v2" and task["detail"]["version"] == 2


async def test_cancel_all_ends_the_contexts_tasks(make_agent, fake_server, journal) -> None:
    """S2/X1: cancel scope all stops every task of the context (children first)."""
    registry = create_agent_registry()
    registry.install(define_agent_extension(name="app", tasks=[timer(journal), parent(journal, child_delay_ms=60_000)]))
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(COMPLETIONS, session={"registry": registry})
    receipts: list[dict[str, Any]] = []

    async def on_event(event) -> None:
        if event.type == "session" and not receipts:
            receipts.append(await agent.control(task_command("p", "app.parent", {})))
            far = int(time.time() * 1000) + 60_000
            receipts.append(await agent.control(task_command("t", "app.timer", {"wake_at": far})))
        elif event.type == "session" and len(receipts) == 2:
            if tasks_by_id(event.snapshot)[receipts[0]["task_id"]]["status"] == "waiting":
                receipts.append(await agent.control({"type": "cancel", "request_id": "all", "scope": "all"}))

    events = await run_with(agent, "go", on_event)
    tasks = tasks_by_id(last_snapshot(events))
    assert receipts[2]["status"] == "cancelled"
    assert {t["status"] for t in tasks.values()} == {"aborted"} and len(tasks) == 4


async def test_a_sleeping_tasks_wake_time_is_published_while_it_sleeps(make_agent, fake_server, journal) -> None:
    """X1/S3: the snapshot that shows a sleeping task's ``wake_at`` (the countdown a UI shows)
    is published when the phase starts to sleep, not when something else happens later: a
    ``session`` event follows every committed change, a task row's included."""
    sleeping = asyncio.Event()

    async def held_sleep(seconds: float) -> None:  # the phase stays asleep until the runtime closes
        sleeping.set()
        await asyncio.Event().wait()

    registry = create_agent_registry()
    registry.install(app(journal))
    agent = await make_agent(COMPLETIONS, session={"registry": registry}, sleep=held_sleep)
    wake_at = int(time.time() * 1000) + 3_600_000
    started: list[dict[str, Any]] = []
    published = asyncio.Event()

    async def serve() -> None:
        async for event in agent.serve():
            if event.type != "session":
                continue
            if not started:
                started.append(await agent.control(task_command("nap", "app.timer", {"wake_at": wake_at})))
                continue
            task = tasks_by_id(event.snapshot).get(started[0]["task_id"])
            if task is not None and task["detail"].get("wake_at") == wake_at:
                published.set()

    serving = asyncio.ensure_future(serve())
    try:
        await sleeping.wait()  # the wake time is committed: the phase sleeps now
        await asyncio.wait_for(published.wait(), timeout=10)
    finally:
        agent.stop_serving()
        await serving
