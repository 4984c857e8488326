"""Running durable tasks inside a session (SPEC X1, X2, D5, D7).

A task is a row of the store's ``tasks`` table — its program counter: definition name and
version, status, phase, checkpoint, wake time, children. A phase runs as a session activity;
it ends by committing the next state (``runtime.commit``): the next phase with a new
checkpoint, waiting on children, or a terminal outcome, written in one transaction with the
children it creates. A crash at any point therefore resumes from the last committed state and
never re-runs a committed phase; a phase that returns without committing fails the task. What a
phase commits is checked whole before anything is written (``phase_state.py``): a value the
store cannot hold, or a phase its definition does not declare, is an error in the phase.

Definitions come from the registry snapshot in force when a phase starts, so an update never
changes code under a running phase; the next phase takes the newest compatible version, and a
missing or incompatible one leaves the task ``blocked`` (with the reason) until one is installed.
Cancelling stops owned children first, then runs the definition's ``abort``; closing the
runtime only pauses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentcore.engine.retry import abortable_sleep
from agentcore.errors import InputValidationError
from agentcore.events import AgentEvent
from agentcore.extensions.tasks.definitions import AgentTaskDefinition
from agentcore.extensions.tasks.history import TERMINAL, with_history
from agentcore.extensions.tasks.hooks import HookRunner
from agentcore.extensions.tasks.phase_state import (
    MAX_VALUE_BYTES,
    PhaseState,
    Running,
    Terminal,
    Waiting,
    read_phase_state,
)
from agentcore.extensions.tasks.registry import AgentRegistry, RegistrySnapshot
from agentcore.extensions.tasks.task_tools import bind_task_tool
from agentcore.harness.projection import StoreView
from agentcore.harness.storage import Commit, TaskRow
from agentcore.session.commands import check_strict_json
from agentcore.session.contexts import Context
from agentcore.session.extension import BaseExtension, ExtensionHost
from agentcore.session.receipts import command_receipt, record_command
from agentcore.tools.base import AgentTool
from agentcore.tools.display import clean_text

if TYPE_CHECKING:
    from agentcore.session.commands import TaskCommand

log = logging.getLogger("agentcore.tasks")

ABORT_GRACE_S = 5.0


class TaskCancelled(Exception):
    """Raised inside a phase whose task is being cancelled (from ``sleep`` or ``commit``)."""


@dataclass(slots=True)
class PhaseContext:
    """What identifies one execution of a phase (or of ``abort``): it commits at most once."""

    task_id: str
    phase: str
    abort: asyncio.Event = field(default_factory=asyncio.Event)
    committed: bool = False
    aborting: bool = False  # the context of ``abort``: may commit while the task is stopping


@dataclass(slots=True, frozen=True)
class TaskChild:
    task_id: str
    name: str
    status: str
    outcome: Any = None


@dataclass(slots=True, frozen=True)
class TaskHandle:
    """The task as a phase sees it (read-only)."""

    id: str
    name: str
    version: int
    input: Any
    phase: str | None
    checkpoint: Any
    parent_id: str | None
    children: tuple[TaskChild, ...]
    wake_at: int | None

    @property
    def state(self) -> TaskHandle:
        """``task.state.checkpoint`` as in the seed's examples."""
        return self


class TaskTransaction:
    """``tx`` in ``runtime.commit(fn)``: children created here are committed with the state."""

    def __init__(self, scheduler: TaskScheduler, parent: TaskRow, snapshot: RegistrySnapshot) -> None:
        self._scheduler = scheduler
        self._parent = parent
        self._snapshot = snapshot
        self.rows: list[TaskRow] = []

    def create_task(self, name: str, input: Any = None, *, background: bool = True) -> str:
        """A child owned by this task, created in the same commit; returns its id. Checked like
        the rest of the commit (its input as strict JSON), before anything is written."""
        definition = self._snapshot.task(name)
        if definition is None:
            raise InputValidationError(f"no registered task named {name!r}", field="name")
        if not isinstance(background, bool):
            kind = type(background).__name__
            raise InputValidationError(f"background must be true or false, got {kind}", field="background")
        row = self._scheduler.new_row(
            definition,
            input,
            conversation_id=self._parent.conversation_id,
            target_id=int(self._parent.payload.get("target_id", 0)),
            parent_id=self._parent.task_id,
            background=background,
            request_id=None,
        )
        self.rows.append(row)
        return row.task_id


class TaskRuntime:
    """``runtime`` in a phase: commit the next state, sleep durably, read the clock. Bound to the
    definition the phase runs under (the phases its commits may name)."""

    def __init__(self, scheduler: TaskScheduler, task_id: str, definition: AgentTaskDefinition) -> None:
        self._scheduler = scheduler
        self.task_id = task_id
        self.definition = definition

    def now_ms(self) -> int:
        return self._scheduler.now_ms()

    async def commit(self, fn: Any, context: PhaseContext) -> None:
        self._scheduler.commit_state(self.task_id, fn, context, self.definition)

    async def sleep(self, wake_at_ms: int, context: PhaseContext) -> None:
        """Wait until the wall clock reaches ``wake_at_ms``; survives close and crash because the
        phase that sleeps runs again from its checkpoint and asks for the same time."""
        await self._scheduler.sleep_until(self.task_id, int(wake_at_ms), context)


@dataclass(slots=True)
class _Running:
    task: asyncio.Future[None]
    context: PhaseContext


class TaskScheduler(BaseExtension):
    """The ``registry`` session extension: runs, wakes, blocks and cancels durable tasks."""

    def __init__(self, session: ExtensionHost, registry: AgentRegistry) -> None:
        super().__init__(session)
        self.registry = registry
        self._running: dict[str, _Running] = {}
        self._cancelling: set[str] = set()
        self._terminal_waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._resumed: dict[str, dict[str, Any]] = {}  # task id -> its resume event, for the next write
        self.hooks = HookRunner(session.spawn, registry)
        self._unsubscribe = registry.subscribe(lambda _snapshot: self._on_publish())

    # --- SessionExtension -----------------------------------------------------------------

    def tools(self, context: Context) -> list[AgentTool]:
        return [bind_task_tool(self, tool, context) for tool in self.registry.snapshot.tools]

    def sections(self, context: Context) -> list[str]:
        return [f"# {doc.name}\n\n{doc.text}" for doc in self.registry.snapshot.docs]

    def records(self) -> dict[str, Any]:
        snapshot = self.registry.snapshot
        return {
            "extensions": [
                {
                    "name": ext.name,
                    "version": ext.version,
                    "tasks": [{"name": t.name, "version": t.version} for t in ext.tasks],
                    "tools": [t.name for t in ext.tools],
                    "docs": [d.name for d in ext.docs],
                    "hooks": [h.event for h in ext.hooks],
                }
                for ext in snapshot.extensions.values()
            ],
            "registry": {"serial": snapshot.serial, "hook_errors": self.hooks.errors},
        }

    def observe(self, context: Context, event: AgentEvent) -> None:
        self.hooks.event(event, context)

    def ensure_activities(self) -> None:
        for row in list(self.session.view.tasks.values()):
            payload = row.payload
            if payload.get("kind") != "task" or payload.get("status") in TERMINAL:
                continue
            if payload.get("stopping"):
                self._start_cancel(row.task_id)
            elif payload.get("status") == "waiting":
                self._maybe_wake(row)
            elif payload.get("status") in ("running", "blocked") and row.task_id not in self._running:
                self._schedule(row)

    def cancel_all(self, context: Context, reason: str) -> list[str]:
        return self._cancel_top_level(context, reason, background=None)

    def cancel_foreground(self, context: Context, reason: str) -> list[str]:
        """``cancel`` scope foreground keeps background tasks (the background subtree)."""
        return self._cancel_top_level(context, reason, background=False)

    def _cancel_top_level(self, context: Context, reason: str, *, background: bool | None) -> list[str]:
        ids = [
            row.task_id
            for row in self.session.view.tasks.values()
            if row.payload.get("kind") == "task"
            and row.payload.get("status") not in TERMINAL
            and row.payload.get("parent_id") is None
            and row.conversation_id == context.conversation_id
            and (background is None or bool(row.payload.get("background")) == background)
        ]
        for task_id in ids:
            self.request_cancel(task_id, reason)
        return ids

    def cancel_task(self, context: Context, task_id: str, owned_targets: set[int]) -> list[str] | None:
        row = self.session.view.tasks.get(task_id)
        if row is None or row.payload.get("kind") != "task":
            return None
        if int(row.payload.get("target_id", 0)) not in owned_targets:
            raise InputValidationError(f"task {task_id!r} does not belong to this target", field="task_id")
        if row.payload.get("status") in TERMINAL:
            return []
        self.request_cancel(task_id, "cancelled by the host")
        return [task_id]

    def start_task(self, command: TaskCommand, context: Context, digest: str) -> dict[str, Any] | None:
        definition = self.registry.snapshot.task(command.name)
        if definition is None:
            return None
        row = self.new_row(
            definition,
            command.input,
            conversation_id=context.conversation_id,
            target_id=context.target_id,
            parent_id=None,
            background=command.background,
            request_id=command.request_id,
        )
        log_ = self.session.view.log(context.conversation_id)
        receipt = command_receipt(command, "started", task_id=row.task_id, name=command.name)
        recorded = record_command(log_, command, digest, receipt, Commit(tasks=[row]))
        self.notify(row.task_id)
        return recorded

    async def aclose(self) -> None:
        self._unsubscribe()
        for running in list(self._running.values()):
            running.task.cancel()
        self._running.clear()

    # --- rows ---------------------------------------------------------------------------

    @property
    def view(self) -> StoreView:
        return self.session.view

    def definition(self, name: str) -> AgentTaskDefinition | None:
        """The installed definition of ``name`` now (the registry's current snapshot)."""
        return self.registry.snapshot.task(name)

    def new_row(
        self,
        definition: AgentTaskDefinition,
        input: Any,
        *,
        conversation_id: str,
        target_id: int,
        parent_id: str | None,
        background: bool,
        request_id: str | None,
    ) -> TaskRow:
        """A new task's row; its input and first checkpoint are checked as strict JSON."""
        check_strict_json(input, "input")
        if definition.input_schema is not None:
            from agentcore.tools.executor import describe_validation_errors, validate_against

            errors = validate_against(dict(definition.input_schema), input)
            if errors:
                raise InputValidationError(
                    f"input does not match task {definition.name!r}: {describe_validation_errors(errors)}",
                    field="input",
                )
        try:
            checkpoint = definition.initial(input)
        except Exception as exc:
            raise InputValidationError(f"task {definition.name!r} rejected its input: {exc}", field="input") from exc
        check_strict_json(checkpoint, "checkpoint", limit=MAX_VALUE_BYTES)
        stamp = self.now_ms()
        payload = {
            "kind": "task",
            "name": definition.name,
            "version": definition.version,
            "status": "running",
            "phase": definition.first_phase(checkpoint),
            "checkpoint": checkpoint,
            "input": input,
            "wake_at": None,
            "waiting_on": [],
            "parent_id": parent_id,
            "children": [],
            "background": background,
            "target_id": target_id,
            "request_id": request_id,
            "created_ms": stamp,
            "updated_ms": stamp,
            "outcome": None,
            "error": None,
            "blocked_reason": None,
            "stopping": False,
            "owner": self.session.view.owner_id,
        }
        payload = with_history({}, payload, stamp)
        return TaskRow(f"task-{uuid.uuid4().hex[:16]}", conversation_id, payload)

    def now_ms(self) -> int:
        """The store view's wall clock: the task's times and its sleeps' wake times use it."""
        return self.session.view.clock()

    def _write(self, row: TaskRow, extra: list[TaskRow] | None = None, **changes: Any) -> TaskRow:
        """Commit ``changes`` to ``row`` (and ``extra`` rows) in one transaction; the row's
        ``history`` gains the write's event (``history.with_history``)."""
        at = self.now_ms()
        after = {**row.payload, **changes, "updated_ms": at, "owner": self.session.view.owner_id}
        payload = with_history(row.payload, after, at, resumed=self._resumed.pop(row.task_id, None))
        updated = TaskRow(row.task_id, row.conversation_id, payload)
        self.session.view.log(row.conversation_id).commit(Commit(tasks=[updated, *(extra or [])]))
        self._emit_task(updated)
        return updated

    def row(self, task_id: str) -> TaskRow:
        return self.session.view.tasks[task_id]

    def _handle(self, row: TaskRow) -> TaskHandle:
        tasks = self.session.view.tasks
        children = []
        for child_id in row.payload.get("children") or []:
            child = tasks.get(child_id)
            if child is not None:
                p = child.payload
                children.append(TaskChild(child_id, p.get("name", ""), p.get("status", ""), p.get("outcome")))
        payload = row.payload
        return TaskHandle(
            id=row.task_id,
            name=payload["name"],
            version=int(payload["version"]),
            input=payload.get("input"),
            phase=payload.get("phase"),
            checkpoint=payload.get("checkpoint"),
            parent_id=payload.get("parent_id"),
            children=tuple(children),
            wake_at=payload.get("wake_at"),
        )

    # --- scheduling -----------------------------------------------------------------------

    def _on_publish(self) -> None:
        self.session.wake()  # a blocked task may be runnable now

    def notify(self, task_id: str) -> None:
        self.ensure_activities()
        self.session.wake()

    def _definition_for(self, row: TaskRow) -> AgentTaskDefinition | str:
        """The definition the next phase uses, or why there is none (the ``blocked`` reason)."""
        name, version = row.payload["name"], int(row.payload["version"])
        definition = self.registry.snapshot.task(name)
        if definition is None:
            return f"task definition {name!r} is not installed"
        if not definition.accepts(version):
            return (
                f"task definition {name!r} version {definition.version} cannot resume a version-{version} "
                "checkpoint (declare accepts_versions to allow it)"
            )
        if row.payload.get("phase") not in definition.phases:
            return f"task definition {name!r} version {definition.version} has no phase {row.payload.get('phase')!r}"
        return definition

    def _schedule(self, row: TaskRow) -> None:
        owner = self.session.view.owner_id
        if row.payload.get("owner") != owner and row.task_id not in self._resumed:
            # Another owner ran it last (a restart, a failover): its next write records the resume.
            self._resumed[row.task_id] = {"at_ms": self.now_ms(), "event": "resumed", "owner_id": owner}
        definition = self._definition_for(row)
        if isinstance(definition, str):
            if row.payload.get("status") != "blocked" or row.payload.get("blocked_reason") != definition:
                self._write(row, status="blocked", blocked_reason=definition)
            return
        if row.payload.get("status") == "blocked" or int(row.payload["version"]) != definition.version:
            row = self._write(row, status="running", blocked_reason=None, version=definition.version)
        context = PhaseContext(row.task_id, str(row.payload["phase"]))
        key = f"task:{row.task_id}:{uuid.uuid4().hex[:8]}"
        task = self.session.spawn(key, lambda: self._run_phase(row.task_id, definition, context))
        if task is not None:
            self._running[row.task_id] = _Running(task, context)

    def _maybe_wake(self, row: TaskRow) -> None:
        """``waiting`` with ``all_settled``: wake exactly once, when every child is terminal."""
        tasks = self.session.view.tasks
        waiting = row.payload.get("waiting_on") or []
        if all((tasks.get(child) is None) or tasks[child].payload.get("status") in TERMINAL for child in waiting):
            phase = row.payload.get("resume_phase") or row.payload.get("phase")
            woken = self._write(row, status="running", phase=phase, waiting_on=[], resume_phase=None)
            self._schedule(woken)

    async def _run_phase(self, task_id: str, definition: AgentTaskDefinition, context: PhaseContext) -> None:
        row = self.row(task_id)
        phase = definition.phases[context.phase]
        try:
            await phase(self._handle(row), TaskRuntime(self, task_id, definition), context)
        except TaskCancelled:
            pass
        except asyncio.CancelledError:
            raise  # the runtime closes: the task pauses here and resumes on reopen
        except Exception as exc:
            if not context.committed and not self.row(task_id).payload.get("stopping"):
                self._finish(task_id, "failed", error=f"phase {context.phase!r} raised {type(exc).__name__}: {exc}")
        else:
            if not context.committed and not self.row(task_id).payload.get("stopping"):
                self._finish(
                    task_id,
                    "failed",
                    error=f"phase {context.phase!r} returned without committing progress or an outcome",
                )
        finally:
            running = self._running.get(task_id)
            if running is not None and running.context is context:
                del self._running[task_id]
            self.session.wake()

    def _finish(self, task_id: str, status: str, *, result: Any = None, error: str | None = None) -> None:
        """End the task for the scheduler's own reason. ``error`` may quote an exception of the
        phase, so it is made valid UTF-8 (``display.clean_text``, as for tool errors)."""
        row = self.row(task_id)
        if row.payload.get("status") in TERMINAL:
            return
        error = None if error is None else clean_text(error)
        outcome = {"status": status, "result": result}
        self._write(row, status=status, outcome=outcome, error=error, wake_at=None, stopping=False)
        self.notify(task_id)

    # --- commit and sleep (called from phases) --------------------------------------------------

    def commit_state(self, task_id: str, fn: Any, context: PhaseContext, definition: AgentTaskDefinition) -> None:
        """Write the state ``fn(tx)`` returns (checked whole first: ``phase_state``) with the
        children ``tx`` created, in one transaction."""
        if context.committed:
            raise RuntimeError(f"phase {context.phase!r} already committed: a phase commits once, then returns")
        row = self.row(task_id)
        payload = row.payload
        if payload.get("status") in TERMINAL:
            raise TaskCancelled(f"task {task_id} already ended")
        if payload.get("stopping") and not context.aborting:
            raise TaskCancelled(f"task {task_id} is being cancelled")
        tx = TaskTransaction(self, row, self.registry.snapshot)
        committed = fn(tx)
        children = [*(payload.get("children") or []), *(child.task_id for child in tx.rows)]
        phase, checkpoint = str(payload.get("phase")), payload.get("checkpoint")
        state = read_phase_state(committed, definition, phase=phase, checkpoint=checkpoint, children=children)
        context.committed = True
        self._write(row, tx.rows, **_row_changes(state, children))
        self.notify(task_id)

    async def sleep_until(self, task_id: str, wake_at: int, context: PhaseContext) -> None:
        row = self.row(task_id)
        if row.payload.get("wake_at") != wake_at:
            self._write(row, wake_at=wake_at)  # shown in the Trace; the phase re-asks after a crash
        while (remaining := wake_at - self.now_ms()) > 0:
            if await abortable_sleep(remaining / 1000, context.abort, self.session.parts.sleep):
                raise TaskCancelled(f"task {task_id} was cancelled while sleeping")
            if self.session.parts.sleep is not asyncio.sleep:
                break  # an injected sleep (tests) does not pass real time: trust it

    # --- cancellation ---------------------------------------------------------------------------

    def request_cancel(self, task_id: str, reason: str) -> None:
        """Mark the task (durably) as stopping, then run the cancel flow as an activity."""
        row = self.row(task_id)
        if row.payload.get("status") in TERMINAL:
            return
        if not row.payload.get("stopping"):
            self._write(row, stopping=True, stop_reason=reason)
        self._start_cancel(task_id)

    def _start_cancel(self, task_id: str) -> None:
        if task_id in self._cancelling:
            return
        self._cancelling.add(task_id)
        self.session.spawn(f"cancel:{task_id}", lambda: self._cancel_flow(task_id))

    async def _cancel_flow(self, task_id: str) -> None:
        """Owned children first (each with its own cleanup), then this task's ``abort``."""
        try:
            row = self.row(task_id)
            for child_id in row.payload.get("children") or []:
                child = self.session.view.tasks.get(child_id)
                if child is not None and child.payload.get("status") not in TERMINAL:
                    self.request_cancel(child_id, "its parent task was cancelled")
            for child_id in row.payload.get("children") or []:
                if child_id in self.session.view.tasks:
                    await self.wait_terminal(child_id)
            running = self._running.get(task_id)
            if running is not None:
                running.context.abort.set()
                done, _ = await asyncio.wait({running.task}, timeout=ABORT_GRACE_S)
                if not done:
                    running.task.cancel()
                    with contextlib.suppress(BaseException):
                        await running.task
            await self._run_abort(task_id)
        finally:
            self._cancelling.discard(task_id)

    async def _run_abort(self, task_id: str) -> None:
        row = self.row(task_id)
        if row.payload.get("status") in TERMINAL:
            return
        definition = self.registry.snapshot.task(row.payload["name"])
        if definition is not None and definition.abort is not None:
            context = PhaseContext(task_id, "abort", aborting=True)
            try:
                await definition.abort(self._handle(row), TaskRuntime(self, task_id, definition), context)
            except Exception as exc:  # the cleanup failed: the task still ends, saying so
                self._finish(task_id, "aborted", error=f"abort raised {type(exc).__name__}: {exc}")
                return
        reason = str(self.row(task_id).payload.get("stop_reason") or "cancelled")
        self._finish(task_id, "aborted", error=reason)

    # --- events and waiting ---------------------------------------------------------------------

    def _emit_task(self, row: TaskRow) -> None:
        if row.payload.get("status") in TERMINAL:
            for waiter in self._terminal_waiters.pop(row.task_id, []):
                if not waiter.done():
                    waiter.set_result(None)
        context = self.session.contexts.by_conversation(row.conversation_id)
        self.hooks.task_changed(row, context)

    async def wait_terminal(self, task_id: str, abort: asyncio.Event | None = None) -> None:
        """Until the task has ended (or ``abort`` is set)."""
        while self.row(task_id).payload.get("status") not in TERMINAL:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._terminal_waiters.setdefault(task_id, []).append(waiter)
            if abort is None:
                await waiter
                continue
            aborted: asyncio.Future[Any] = asyncio.ensure_future(abort.wait())
            try:
                await asyncio.wait([waiter, aborted], return_when=asyncio.FIRST_COMPLETED)
            finally:
                aborted.cancel()
            if abort.is_set():
                return


def _row_changes(state: PhaseState, children: list[str]) -> dict[str, Any]:
    """The task row's fields a committed (checked) state sets."""
    match state:
        case Terminal():
            return {
                "status": state.status,
                "outcome": {"status": state.status, "result": state.result},
                "error": state.error,
                "wake_at": None,
                "children": children,
                "stopping": False,
            }
        case Running():
            return {
                "status": "running",
                "phase": state.phase,
                "checkpoint": state.checkpoint,
                "wake_at": None,
                "children": children,
            }
        case Waiting():
            return {
                "status": "waiting",
                "waiting_on": list(state.on),
                "policy": "all_settled",
                "resume_phase": state.phase,
                "checkpoint": state.checkpoint,
                "wake_at": None,
                "children": children,
            }
