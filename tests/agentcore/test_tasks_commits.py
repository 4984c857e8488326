"""What a durable task's phase commits is checked before it is written (SPEC X1, X2, D1, D5, D7).

A phase ends by committing its next state: the next phase and checkpoint, a wait on children,
or a terminal outcome with a result or an error. Every value of it that would be stored goes
through one strict-JSON check (finite numbers, string keys, plain containers, valid UTF-8)
and the next phase must be one the definition declares — so a bad value fails that task with
a clear reason instead of a commit the store refuses on every reopen, or a task blocked forever.
Each test runs real phases in a session on a SQLite store and reopens it.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest

from agentcore import cancel_agent_conversation, create_agent_registry, define_agent_extension, define_agent_task
from agentcore.errors import InputValidationError
from agentcore.harness import SqliteStorageFactory
from agentcore.testing.steps import Text
from tests.agentcore.session_helpers import last_snapshot, run_with

COMPLETIONS = "openai-completions"


def terminal_failed(error: Any) -> Any:
    return lambda tx: {"status": "terminal", "outcome": {"status": "failed", "error": error}}


BAD_COMMITS: dict[str, tuple[Any, str]] = {
    "error is a set": (terminal_failed({"a", "b"}), "outcome.error"),
    "error is NaN": (terminal_failed(math.nan), "outcome.error"),
    "error holds a lone surrogate": (terminal_failed("disk \ud800 full"), "outcome.error"),
    "error is a number": (terminal_failed(5), "outcome.error"),
    "result holds a lone surrogate": (
        lambda tx: {"status": "terminal", "outcome": {"status": "completed", "result": {"k\ud800": 1}}},
        "outcome.result",
    ),
    "checkpoint is a set": (lambda tx: {"status": "running", "phase": "go", "checkpoint": {1, 2}}, "checkpoint"),
    "the phase to resume is a set": (lambda tx: {"status": "waiting", "on": [], "phase": {"go"}}, "phase"),
    "the next phase holds a lone surrogate": (lambda tx: {"status": "running", "phase": "go\ud800"}, "phase"),
    "a child's input is a set": (lambda tx: {"status": "waiting", "on": [tx.create_task("app.bad", {1})]}, "input"),
    "a child's background flag is a set": (
        lambda tx: {"status": "waiting", "on": [tx.create_task("app.bad", {}, background={1})]},
        "background",
    ),
}


def one_phase_task(name: str, state: Any, ran: list[str]) -> Any:
    async def go(task: Any, runtime: Any, context: Any) -> None:
        ran.append(task.id)
        await runtime.commit(state, context)

    return define_agent_task(name=name, version=1, initial=lambda input: {}, phases={"go": go})


async def run_task(make_agent: Any, fake_server: Any, db: Path, registry: Any, name: str) -> tuple[Any, str]:
    """Start task ``name`` at the first session event of a run; the run waits for it. Returns
    the run's last snapshot and the task id."""
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(COMPLETIONS, session={"registry": registry}, database_path=str(db))
    receipts: list[dict[str, Any]] = []

    async def on_event(event: Any) -> None:
        if event.type == "session" and not receipts:
            command = {"type": "task", "request_id": "t", "name": name, "input": {}, "background": True}
            receipts.append(await agent.control(command))

    events = await run_with(agent, {"prompt": "go", "request_id": "r"}, on_event)
    await agent.close()
    assert [e.status for e in events if e.type == "end"] == ["completed"]
    return last_snapshot(events), receipts[0]["task_id"]


def task_row(snapshot: dict[str, Any], task_id: str) -> dict[str, Any]:
    return next(t for t in [*snapshot["tasks"], *snapshot["history"]] if t["task_id"] == task_id)


async def reopen_runs(make_agent: Any, fake_server: Any, db: Path, registry: Any) -> dict[str, Any]:
    """A reopened session on ``db`` runs a new request to its end; its last snapshot."""
    fake_server.enqueue([Text("again")])
    agent = await make_agent(COMPLETIONS, session={"registry": registry}, database_path=str(db))
    events = await run_with(agent, {"prompt": "again", "request_id": "r2"})
    assert [e.status for e in events if e.type == "end"] == ["completed"]
    return last_snapshot(events)


async def fails_its_task(make_agent: Any, fake_server: Any, tmp_path: Path, state: Any) -> dict[str, Any]:
    """Run task ``app.bad`` whose one phase commits ``state``; check that it failed, that the run
    and a reopened session went on, and that the task ran once. Returns its row."""
    ran: list[str] = []
    registry = create_agent_registry()
    registry.install(define_agent_extension(name="app", tasks=[one_phase_task("app.bad", state, ran)]))
    db = tmp_path / "agent.sqlite"
    snapshot, task_id = await run_task(make_agent, fake_server, db, registry, "app.bad")
    row = task_row(snapshot, task_id)
    assert row["status"] == "failed", row
    assert row["error"].startswith("phase 'go' raised InputValidationError: "), row["error"]
    assert row["result"] is None and row["detail"]["phase"] == "go" and row["detail"]["checkpoint"] == {}
    reopened = task_row(await reopen_runs(make_agent, fake_server, db, registry), task_id)
    assert reopened["status"] == "failed" and reopened["error"] == row["error"]
    assert ran == [task_id], "a failed task is not run again"
    return row


@pytest.mark.parametrize("case", list(BAD_COMMITS))
async def test_a_phase_committing_a_value_the_store_cannot_hold_fails_its_task_and_the_session_goes_on(
    case: str, make_agent, fake_server, tmp_path: Path
) -> None:
    """X1 / D5: a phase commits a terminal error that is a set, NaN, a number or text with a lone
    surrogate, a result, checkpoint or phase name that is not strict JSON, a child with such an
    input or flag: the commit is refused before anything is written, the task fails with a
    reason naming the field, the run ends normally, and a reopen runs on without running the
    task again."""
    state, field = BAD_COMMITS[case]
    row = await fails_its_task(make_agent, fake_server, tmp_path, state)
    assert field in row["error"], row["error"]


async def test_an_exception_text_with_a_lone_surrogate_is_escaped_in_the_tasks_error(
    make_agent, fake_server, tmp_path: Path
) -> None:
    """X1 / D5: a phase that raises an exception whose message holds a lone surrogate fails its
    task with that message, the surrogate written as the escape ``\\ud800`` (as tool errors are)."""

    async def go(task: Any, runtime: Any, context: Any) -> None:
        raise RuntimeError("disk \ud800 on fire")

    registry = create_agent_registry()
    boom = define_agent_task(name="app.boom", version=1, initial=lambda input: {}, phases={"go": go})
    registry.install(define_agent_extension(name="app", tasks=[boom]))
    db = tmp_path / "agent.sqlite"
    snapshot, task_id = await run_task(make_agent, fake_server, db, registry, "app.boom")
    row = task_row(snapshot, task_id)
    assert (row["status"], row["error"]) == ("failed", "phase 'go' raised RuntimeError: disk \\ud800 on fire")
    assert task_row(await reopen_runs(make_agent, fake_server, db, registry), task_id)["status"] == "failed"


@pytest.mark.parametrize(
    "state",
    [
        lambda tx: {"status": "running", "phase": "nowhere", "checkpoint": {"n": 1}},
        lambda tx: {"status": "waiting", "on": [], "phase": "nowhere"},
    ],
    ids=["running", "waiting"],
)
async def test_committing_a_phase_the_definition_does_not_declare_fails_the_task_naming_it(
    state: Any, make_agent, fake_server, tmp_path: Path
) -> None:
    """X1 / X2: a phase that commits `running` (or a wait that resumes) into a phase its
    definition does not declare is refused at commit: the task fails, naming the phase and the
    declared ones, instead of waiting `blocked` for a definition no reinstall can provide."""
    row = await fails_its_task(make_agent, fake_server, tmp_path, state)
    assert "phase 'nowhere' is not a phase of task 'app.bad' version 1 (its phases: 'go')" in row["error"]


async def test_an_offline_abort_committing_a_value_the_store_cannot_hold_is_refused_naming_it(
    make_agent, fake_server, tmp_path: Path
) -> None:
    """D7 / X1: offline, an abort's terminal outcome goes through the same check: a result that
    is not strict JSON is an input_validation error naming the field, and the store is
    unchanged (the task is still open)."""

    async def hold(task: Any, runtime: Any, context: Any) -> None:
        await asyncio.Event().wait()  # until the runtime closes: the task pauses

    async def abort(task: Any, runtime: Any, context: Any) -> None:
        outcome = {"status": "aborted", "result": {1}}
        await runtime.commit(lambda tx: {"status": "terminal", "outcome": outcome}, context)

    held = define_agent_task(name="app.held", version=1, initial=lambda input: {}, phases={"go": hold}, abort=abort)
    registry = create_agent_registry()
    registry.install(define_agent_extension(name="app", tasks=[held]))
    db = tmp_path / "agent.sqlite"
    agent = await make_agent(COMPLETIONS, session={"registry": registry}, database_path=str(db))
    command = {"type": "task", "request_id": "t", "name": "app.held", "input": {}, "background": True}
    receipts: list[dict[str, Any]] = []
    async for event in agent.serve():
        if event.type == "session" and not receipts:
            receipts.append(await agent.control(command))
            agent.stop_serving()
    await agent.close()
    task_id = receipts[0]["task_id"]
    with pytest.raises(InputValidationError) as caught:
        await cancel_agent_conversation(agent_store_dir=db, conversation_id="main", registry=registry)
    assert caught.value.field == "outcome.result"
    storage, release = SqliteStorageFactory(str(db)).open()
    try:
        assert storage.load().tasks[task_id].payload["status"] == "running", "nothing was written"
    finally:
        storage.close()
        release()
