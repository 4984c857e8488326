"""Control commands (SPEC S1, S2): each one a transaction that records its effect and its receipt.

A receipt is stored under the command's ``request_id`` together with the command's
fingerprint, in the same transaction as the effect (``receipts``), so a resend returns the
original receipt and does nothing again. Compare-and-swap commands (``configure``, ``plan``)
fail with ``version_conflict`` and record nothing. A command is routed to its handler by a
``match`` on the command union (``_apply``), which the type checker proves complete.

The handlers see the session through a ``ControlHost``: what commands change (inputs, queues,
contexts, configuration, cancellation) and nothing else of the session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol, assert_never

from agentcore.compaction.background import BackgroundCompactions
from agentcore.config import resolve_web_search
from agentcore.engine.operations import apply_resume, start_op
from agentcore.engine.turn import TurnEngine
from agentcore.errors import UNKNOWN_TASK, VERSION_CONFLICT, AgentError, InputValidationError
from agentcore.events import AgentEvent
from agentcore.harness.projection import ConversationLog, new_id
from agentcore.harness.storage import Commit, Receipt, RegisterWrite
from agentcore.inputs import AgentInput
from agentcore.messages import ImageContent
from agentcore.runtime_parts import RuntimeParts
from agentcore.session import queue as input_queue
from agentcore.session.commands import (
    CancelCommand,
    Command,
    CompactCommand,
    ConfigureCommand,
    DeleteCommand,
    ForkCommand,
    PlanCommand,
    PromoteCommand,
    ResetCommand,
    ResumeCommand,
    SnapshotCommand,
    SubmitCommand,
    TaskCommand,
    WithdrawCommand,
    fingerprint,
    parse_command,
)
from agentcore.session.contexts import Context
from agentcore.session.options import SessionOptions
from agentcore.session.ports import ContextOperations, InputQueue, SessionStore
from agentcore.session.receipts import command_receipt, control_record, record_command, resent_receipt
from agentcore.session.snapshot import SessionSnapshot

PLACED = ("running", "paused")
SETTLED = ("completed", "failed", "aborted", "settled", "applied")


class ControlHost(SessionStore, ContextOperations, InputQueue, Protocol):
    """What control commands need of the session (besides making operations and queueing
    inputs): its store, contexts, options and runtime parts, the snapshot, an engine to apply
    a decision with and the bus to emit its events on, resets, each context's configuration,
    cancellation, and the extensions' tasks."""

    @property
    def options(self) -> SessionOptions: ...

    @property
    def parts(self) -> RuntimeParts: ...

    def snapshot(self) -> SessionSnapshot: ...

    def engine(
        self, log: ConversationLog, request_id: str, abort: asyncio.Event, context: Context | None = None
    ) -> TurnEngine: ...

    def emit(self, context: Context, event: AgentEvent, request_id: str | None = None) -> None: ...

    def apply_reset(self, log: ConversationLog, handoff: str | None, commit: Commit | None = None) -> None: ...

    def config_of(self, conversation_id: str) -> dict[str, Any]: ...

    def cancel_foreground(self, context: Context, reason: str) -> str | None: ...

    def cancel_all(self, context: Context, reason: str) -> list[str]: ...

    def cancel_extension_task(self, context: Context, task_id: str, owned_targets: set[int]) -> list[str] | None:
        """``cancel`` scope task for an extension's task: the ids stopped, or None (not theirs)."""
        ...

    def start_extension_task(self, command: TaskCommand, context: Context, digest: str) -> dict[str, Any] | None:
        """The ``task`` command, by the extension whose task it names: its receipt, or None."""
        ...


class ControlHandlers:
    """Applies control commands to one session; see the module docstring."""

    def __init__(self, session: ControlHost, compactions: BackgroundCompactions) -> None:
        self.session = session
        self.compactions = compactions

    async def handle(self, raw: Any) -> dict[str, Any]:
        command = parse_command(raw)
        session = self.session
        digest = fingerprint(command)
        again = resent_receipt(session.view, command, digest)
        if again is not None:
            if command.type == "snapshot":
                again["snapshot"] = session.snapshot().model_dump(mode="json")
            return again
        return await self._apply(command, session.contexts.by_target(command.target_id), digest)

    async def _apply(self, command: Command, target: Context, digest: str) -> dict[str, Any]:
        """The one route from a command to its handler; the checker sees every kind handled."""
        match command:
            case SubmitCommand():
                return await self._submit(command, target, digest)
            case WithdrawCommand():
                return await self._withdraw(command, target, digest)
            case PromoteCommand():
                return await self._promote(command, target, digest)
            case ResumeCommand():
                return await self._resume(command, target, digest)
            case ResetCommand():
                return await self._reset(command, target, digest)
            case ForkCommand():
                return await self._fork(command, target, digest)
            case DeleteCommand():
                return await self._delete(command, target, digest)
            case ConfigureCommand():
                return await self._configure(command, target, digest)
            case PlanCommand():
                return await self._plan(command, target, digest)
            case CancelCommand():
                return await self._cancel(command, target, digest)
            case SnapshotCommand():
                return await self._snapshot(command, target, digest)
            case TaskCommand():
                return await self._task(command, target, digest)
            case CompactCommand():
                return await self._compact(command, target, digest)
            case _:
                assert_never(command)

    def _log(self, target: Context) -> ConversationLog:
        return self.session.view.log(target.conversation_id)

    # --- inputs -----------------------------------------------------------------------------

    async def _submit(self, command: SubmitCommand, target: Context, digest: str) -> dict[str, Any]:
        session = self.session
        log = self._log(target)
        busy = log.op is not None or bool(input_queue.read_queue(session.view, target.conversation_id))
        if busy and command.mode == "reject":
            return record_command(log, command, digest, command_receipt(command, "rejected", input_id=None))
        images = [ImageContent(i.data, i.mime_type) for i in command.images]
        if not busy:  # an idle submit (any mode) is a new turn
            op = session.new_op(log, command.request_id, {}, mode=command.agent)
            session.configure(log, op, target)
            receipt = command_receipt(command, "accepted", input_id=command.request_id)
            payload = {"status": "running", "control": control_record(command, digest, receipt)}
            extra = {"input_id": command.request_id}
            start_op(log, op, prompt=command.prompt, images=images, receipt=payload, message_extra=extra)
            return receipt
        mode = "steer" if command.mode == "steer" else "follow_up"
        receipt = command_receipt(command, "queued", input_id=command.request_id, mode=mode)
        receipt_payload = {"control": control_record(command, digest, receipt)}
        session.enqueue(
            log, command.request_id, command.prompt, images, mode=mode, receipt=receipt_payload, agent=command.agent
        )
        return receipt

    def _consumed(self, log: ConversationLog, input_id: str) -> str:
        """``already_placed`` or ``settled`` for an input no longer in the queue."""
        receipt = self.session.view.receipts.get(input_id)
        if receipt is None:
            raise InputValidationError(f"no input with id {input_id!r}", field="input_id")
        status = receipt.payload.get("status")
        if status == "placed":
            op = self.session.view.log(receipt.conversation_id).op
            placed_in = receipt.payload.get("placed_in")
            return "already_placed" if op is not None and op["request_id"] == placed_in else "settled"
        if status in PLACED:
            return "already_placed"
        return "settled"

    async def _withdraw(self, command: WithdrawCommand, target: Context, digest: str) -> dict[str, Any]:
        return self._change_queued(command, target, digest, "withdrawn", lambda item: None, {"status": "withdrawn"})

    async def _promote(self, command: PromoteCommand, target: Context, digest: str) -> dict[str, Any]:
        items = input_queue.read_queue(self.session.view, target.conversation_id)
        index = input_queue.find(items, command.input_id)
        agent = items[index].get("agent") if index is not None else None
        if agent is not None:
            raise InputValidationError(
                f"input {command.input_id!r} starts a {agent}-mode turn; it cannot steer the running one",
                field="input_id",
            )
        return self._change_queued(
            command, target, digest, "promoted", lambda item: dict(item, mode="steer"), {"mode": "steer"}
        )

    def _change_queued(
        self,
        command: WithdrawCommand | PromoteCommand,
        target: Context,
        digest: str,
        status: str,
        change: Callable[[dict[str, Any]], dict[str, Any] | None],
        receipt_changes: dict[str, Any],
    ) -> dict[str, Any]:
        """Change a still-queued input in one transaction with both receipts (``change`` returns
        the new item, or None to remove it); a consumed input is ``already_placed`` / ``settled``."""
        view = self.session.view
        log = self._log(target)
        items = input_queue.read_queue(view, target.conversation_id)
        index = input_queue.find(items, command.input_id)
        if index is None:
            status = self._consumed(log, command.input_id)
            return record_command(log, command, digest, command_receipt(command, status, input_id=command.input_id))
        changed = change(items[index])
        if changed is None:
            items.pop(index)
        else:
            items[index] = changed
        commit = Commit(registers=[input_queue.write_queue(view, target.conversation_id, items)])
        original = view.receipts[command.input_id]
        commit.receipts.append(log.receipt(command.input_id, {**original.payload, **receipt_changes}))
        receipt = command_receipt(command, status, input_id=command.input_id)
        return record_command(log, command, digest, receipt, commit)

    async def _resume(self, command: ResumeCommand, target: Context, digest: str) -> dict[str, Any]:
        session = self.session
        log = self._log(target)
        op = log.op
        if op is None or op["request_id"] != command.input_id or op.get("phase") != "paused":
            raise InputValidationError(f"no paused request {command.input_id!r}", field="input_id")
        decision = AgentInput(
            request_id=command.input_id,
            plan_resume=command.plan_resume,
            ask_resume=command.ask_resume,
            tool_resume=command.tool_resume,
        )
        engine = session.engine(log, op["request_id"], asyncio.Event(), target)
        applied = apply_resume(engine, op, decision)
        if applied is None:
            raise InputValidationError("the decision does not answer what the request waits for", field="input_id")
        async for event in applied:
            session.emit(target, event, command.input_id)
        receipt = command_receipt(command, "resumed", input_id=command.input_id)
        return record_command(log, command, digest, receipt)

    # --- context changes -------------------------------------------------------------------

    async def _reset(self, command: ResetCommand, target: Context, digest: str) -> dict[str, Any]:
        session = self.session
        log = self._log(target)
        busy = log.op is not None or bool(input_queue.read_queue(session.view, target.conversation_id))
        if busy:  # at the next input boundary
            items = input_queue.read_queue(session.view, target.conversation_id)
            item = {"input_id": command.request_id, "kind": "reset", "mode": "follow_up", "handoff": command.handoff}
            items.append(item)
            commit = Commit(registers=[input_queue.write_queue(session.view, target.conversation_id, items)])
            return record_command(log, command, digest, command_receipt(command, "queued"), commit)
        receipt = command_receipt(command, "applied")
        payload = {"status": "applied", "control": control_record(command, digest, receipt)}
        commit = Commit(receipts=[Receipt(command.request_id, log.conversation_id, payload)])
        session.apply_reset(log, command.handoff, commit)
        return receipt

    async def _fork(self, command: ForkCommand, target: Context, digest: str) -> dict[str, Any]:
        session = self.session
        source = self._log(target)
        if command.entry_id not in source.entry_ids:
            raise InputValidationError(
                f"entry_id {command.entry_id!r} is not a committed entry of target {target.target_id}",
                field="entry_id",
            )
        conversation_id = f"{target.conversation_id}/fork/{new_id()[:12]}"
        base = {"conversation": target.conversation_id, "entry": command.entry_id}
        context, writes = session.contexts.create(
            conversation_id, "fork", parent=target, base=base, label=f"fork of {target.label or target.target_id}"
        )
        config = session.config_of(target.conversation_id)
        commit = Commit(registers=writes)
        if config.get("model") or config.get("effort") is not None or config.get("web_search"):
            commit.registers.append(RegisterWrite(f"config:{conversation_id}", dict(config, version=0)))
        fork_log = session.view.fork_log(conversation_id, base)
        if session.options.plan_fork == "initial":
            commit.entries.append(fork_log.entry("plan", {"version": fork_log.plan["version"] + 1, "items": []}))
        elif session.options.plan_fork == "current":
            items = source.plan.get("items", [])
            commit.entries.append(fork_log.entry("plan", {"version": fork_log.plan["version"] + 1, "items": items}))
        receipt = command_receipt(
            command, "created", fork_id=conversation_id, target_id=context.target_id, entry_id=command.entry_id
        )
        try:
            return record_command(source, command, digest, receipt, commit)
        except BaseException:
            session.view.logs.pop(conversation_id, None)
            raise

    async def _delete(self, command: DeleteCommand, target: Context, digest: str) -> dict[str, Any]:
        session = self.session
        if target.is_main:
            raise InputValidationError("the main conversation cannot be deleted; delete the store", field="target_id")
        session.cancel_all(target, "the context was deleted")
        log = self._log(target)
        commit = Commit(registers=[session.contexts.mark_deleted(target)])
        return record_command(log, command, digest, command_receipt(command, "deleted"), commit)

    async def _configure(self, command: ConfigureCommand, target: Context, digest: str) -> dict[str, Any]:
        session = self.session
        log = self._log(target)
        current = session.config_of(target.conversation_id)
        version = int(current.get("version", 0))
        if command.expected_version != version:
            raise AgentError(
                VERSION_CONFLICT,
                f"configure expected version {command.expected_version}, but the context is at version {version}",
                details={"expected_version": command.expected_version, "current_version": version},
            )
        value = dict(current, version=version + 1)
        if command.model is not None:
            choice = {"provider": command.model.provider, "model_id": command.model.model_id}
            if target.kind == "subagent":
                options = session.options.subagents
                allowed = {(m.provider, m.model_id) for m in (options.models if options else ())}
                if (choice["provider"], choice["model_id"]) not in allowed:
                    raise InputValidationError(
                        f"model {choice['provider']}/{choice['model_id']} is not in the subagent whitelist",
                        field="model",
                    )
            session.parts.config.model({"provider": choice["provider"], "model": choice["model_id"]})
            value["model"] = choice
        if command.effort is not None:
            value["effort"] = command.effort
        if command.web_search is not None:
            value["web_search"] = command.web_search
        if value.get("web_search") == "on":  # P2: refused where the model cannot search
            chosen = value.get("model")
            settings = {"provider": chosen["provider"], "model": chosen["model_id"]} if chosen else {}
            resolve_web_search(True, session.parts.config.model(settings))
        key = f"config:{target.conversation_id}"
        commit = Commit(registers=[RegisterWrite(key, value, expected_seq=session.view.register_seq(key))])
        receipt = command_receipt(command, "applied", version=version + 1)
        return record_command(log, command, digest, receipt, commit)

    async def _plan(self, command: PlanCommand, target: Context, digest: str) -> dict[str, Any]:
        log = self._log(target)
        version = int(log.plan.get("version", 0))
        if command.expected_version != version:
            raise AgentError(
                VERSION_CONFLICT,
                f"plan expected version {command.expected_version}, but the plan is at version {version}",
                details={"expected_version": command.expected_version, "current_version": version},
            )
        items = [item.model_dump() for item in command.items]
        commit = Commit(entries=[log.entry("plan", {"version": version + 1, "items": items})])
        receipt = command_receipt(command, "applied", version=version + 1)
        return record_command(log, command, digest, receipt, commit)

    # --- work -------------------------------------------------------------------------------

    async def _cancel(self, command: CancelCommand, target: Context, digest: str) -> dict[str, Any]:
        session = self.session
        log = self._log(target)
        if command.scope == "foreground":
            request = session.cancel_foreground(target, "cancelled by the host")
            cancelled = [request] if request else []
        elif command.scope == "all":
            cancelled = session.cancel_all(target, "cancelled by the host")
        else:
            assert command.task_id is not None
            cancelled = self._cancel_task(target, command.task_id)
        status = "cancelled" if cancelled else "idle"
        return record_command(log, command, digest, command_receipt(command, status, cancelled=cancelled))

    def _cancel_task(self, target: Context, task_id: str) -> list[str]:
        session = self.session
        owned = {target.target_id, *(c.target_id for c in session.contexts.children(target.target_id))}
        for child in session.contexts.all():
            if child.kind == "subagent" and child.conversation_id == task_id:
                if child.target_id not in owned:
                    raise InputValidationError(f"task {task_id!r} does not belong to this target", field="task_id")
                return session.cancel_all(child, "cancelled by the host")
        if self.compactions.owns(task_id):
            return self.compactions.stop(task_id)
        stopped = session.cancel_extension_task(target, task_id, owned)
        if stopped is not None:
            return stopped
        raise InputValidationError(f"no active task {task_id!r}", field="task_id")

    async def _snapshot(self, command: SnapshotCommand, target: Context, digest: str) -> dict[str, Any]:
        receipt = record_command(self._log(target), command, digest, command_receipt(command, "ok"))
        receipt["snapshot"] = self.session.snapshot().model_dump(mode="json")
        return receipt

    async def _task(self, command: TaskCommand, target: Context, digest: str) -> dict[str, Any]:
        receipt = self.session.start_extension_task(command, target, digest)
        if receipt is not None:
            return receipt
        raise AgentError(UNKNOWN_TASK, f"no registered task named {command.name!r}", field="name")

    # --- background compaction -----------------------------------------------------------------

    async def _compact(self, command: CompactCommand, target: Context, digest: str) -> dict[str, Any]:
        row = self.compactions.command_row(
            target, command.request_id, command.instructions, keep_recent=command.keep_recent
        )
        receipt = command_receipt(command, "started", task_id=row.task_id)
        record_command(self._log(target), command, digest, receipt, Commit(tasks=[row]))
        self.compactions.start(target, row.task_id)
        return receipt
