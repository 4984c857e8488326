"""Control commands (SPEC S1, S2): each one a transaction that records its effect and its receipt.

A receipt is stored under the command's ``request_id`` together with the command's
fingerprint, in the same transaction as the effect. So a resend returns the original receipt
and does nothing again, the same id with another payload is ``request_conflict``, and a
reopened runtime still knows every receipt. Compare-and-swap commands (``configure``,
``plan``) fail with ``version_conflict`` and record nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, assert_never

from agentcore.compaction.background import BackgroundCompactions
from agentcore.engine.operations import apply_resume, start_op
from agentcore.errors import REQUEST_CONFLICT, UNKNOWN_TASK, VERSION_CONFLICT, AgentError, InputValidationError
from agentcore.harness.projection import ConversationLog
from agentcore.harness.storage import Commit, Receipt, RegisterWrite
from agentcore.inputs import AgentInput
from agentcore.messages import ImageContent
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

if TYPE_CHECKING:
    from agentcore.session.driver import SessionDriver

PLACED = ("running", "paused")
SETTLED = ("completed", "failed", "aborted", "settled", "applied")


class ControlHandlers:
    def __init__(self, driver: SessionDriver, compactions: BackgroundCompactions) -> None:
        self.driver = driver
        self.compactions = compactions

    async def handle(self, raw: Any) -> dict[str, Any]:
        command = parse_command(raw)
        driver = self.driver
        existing = driver.view.receipts.get(command.request_id)
        digest = fingerprint(command)
        if existing is not None:
            recorded = existing.payload.get("control")
            if recorded is None or recorded.get("fingerprint") != digest:
                raise AgentError(
                    REQUEST_CONFLICT,
                    f"request_id {command.request_id!r} was already used for another command or input",
                    details={"request_id": command.request_id},
                )
            again = dict(recorded["receipt"])
            if command.type == "snapshot":
                again["snapshot"] = driver.snapshot().model_dump(mode="json")
            return again
        return await self._apply(command, driver.contexts.by_target(command.target_id), digest)

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

    # --- helpers --------------------------------------------------------------------------

    def _receipt(self, command: Any, status: str, **fields: Any) -> dict[str, Any]:
        return {"request_id": command.request_id, "type": command.type, "status": status, **fields}

    def _record(
        self,
        log: ConversationLog,
        command: Any,
        digest: str,
        receipt: dict[str, Any],
        commit: Commit | None = None,
        payload: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Commit ``commit`` with the command's receipt (one transaction); return the receipt."""
        commit = commit or Commit()
        body = dict(payload or {}, control={"fingerprint": digest, "type": command.type, "receipt": receipt})
        body.setdefault("status", receipt["status"])
        commit.receipts.append(Receipt(command.request_id, log.conversation_id, body))
        log.commit(commit)
        return dict(receipt)

    def _log(self, target: Context) -> ConversationLog:
        return self.driver.view.log(target.conversation_id)

    # --- inputs -----------------------------------------------------------------------------

    async def _submit(self, command: SubmitCommand, target: Context, digest: str) -> dict[str, Any]:
        driver = self.driver
        log = self._log(target)
        busy = log.op is not None or bool(input_queue.read_queue(driver.view, target.conversation_id))
        if busy and command.mode == "reject":
            return self._record(log, command, digest, self._receipt(command, "rejected", input_id=None))
        images = [ImageContent(i.data, i.mime_type) for i in command.images]
        if not busy:  # an idle submit (any mode) is a new turn
            op = driver.new_op(log, command.request_id, {}, mode=command.agent)
            driver.configure(log, op, target)
            receipt = self._receipt(command, "accepted", input_id=command.request_id)
            payload = {
                "status": "running",
                "control": {"fingerprint": digest, "type": "submit", "receipt": receipt},
            }
            extra = {"input_id": command.request_id}
            start_op(log, op, prompt=command.prompt, images=images, receipt=payload, message_extra=extra)
            return receipt
        mode = "steer" if command.mode == "steer" else "follow_up"
        receipt = self._receipt(command, "queued", input_id=command.request_id, mode=mode)
        control = {"fingerprint": digest, "type": "submit", "receipt": receipt}
        receipt_payload = {"control": control}
        driver.enqueue(
            log, command.request_id, command.prompt, images, mode=mode, receipt=receipt_payload, agent=command.agent
        )
        return receipt

    def _consumed(self, log: ConversationLog, input_id: str) -> str:
        """``already_placed`` or ``settled`` for an input no longer in the queue."""
        receipt = self.driver.view.receipts.get(input_id)
        if receipt is None:
            raise InputValidationError(f"no input with id {input_id!r}", field="input_id")
        status = receipt.payload.get("status")
        if status == "placed":
            op = self.driver.view.log(receipt.conversation_id).op
            placed_in = receipt.payload.get("placed_in")
            return "already_placed" if op is not None and op["request_id"] == placed_in else "settled"
        if status in PLACED:
            return "already_placed"
        return "settled"

    async def _withdraw(self, command: WithdrawCommand, target: Context, digest: str) -> dict[str, Any]:
        return self._change_queued(command, target, digest, "withdrawn", lambda item: None, {"status": "withdrawn"})

    async def _promote(self, command: PromoteCommand, target: Context, digest: str) -> dict[str, Any]:
        items = input_queue.read_queue(self.driver.view, target.conversation_id)
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
        view = self.driver.view
        log = self._log(target)
        items = input_queue.read_queue(view, target.conversation_id)
        index = input_queue.find(items, command.input_id)
        if index is None:
            status = self._consumed(log, command.input_id)
            return self._record(log, command, digest, self._receipt(command, status, input_id=command.input_id))
        changed = change(items[index])
        if changed is None:
            items.pop(index)
        else:
            items[index] = changed
        commit = Commit(registers=[input_queue.write_queue(view, target.conversation_id, items)])
        original = view.receipts[command.input_id]
        commit.receipts.append(log.receipt(command.input_id, {**original.payload, **receipt_changes}))
        receipt = self._receipt(command, status, input_id=command.input_id)
        return self._record(log, command, digest, receipt, commit)

    async def _resume(self, command: ResumeCommand, target: Context, digest: str) -> dict[str, Any]:
        driver = self.driver
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
        engine = driver.engine(log, op["request_id"], asyncio.Event(), target)
        applied = apply_resume(engine, op, decision)
        if applied is None:
            raise InputValidationError("the decision does not answer what the request waits for", field="input_id")
        async for event in applied:
            driver.emit(target, event, command.input_id)
        receipt = self._receipt(command, "resumed", input_id=command.input_id)
        return self._record(log, command, digest, receipt)

    # --- context changes -------------------------------------------------------------------

    async def _reset(self, command: ResetCommand, target: Context, digest: str) -> dict[str, Any]:
        driver = self.driver
        log = self._log(target)
        busy = log.op is not None or bool(input_queue.read_queue(driver.view, target.conversation_id))
        if busy:  # at the next input boundary
            items = input_queue.read_queue(driver.view, target.conversation_id)
            item = {"input_id": command.request_id, "kind": "reset", "mode": "follow_up", "handoff": command.handoff}
            items.append(item)
            commit = Commit(registers=[input_queue.write_queue(driver.view, target.conversation_id, items)])
            return self._record(log, command, digest, self._receipt(command, "queued"), commit)
        receipt = self._receipt(command, "applied")
        payload = {"status": "applied", "control": {"fingerprint": digest, "type": "reset", "receipt": receipt}}
        commit = Commit(receipts=[Receipt(command.request_id, log.conversation_id, payload)])
        driver.apply_reset(log, command.handoff, commit)
        return receipt

    async def _fork(self, command: ForkCommand, target: Context, digest: str) -> dict[str, Any]:
        driver = self.driver
        source = self._log(target)
        if command.entry_id not in source.entry_ids:
            raise InputValidationError(
                f"entry_id {command.entry_id!r} is not a committed entry of target {target.target_id}",
                field="entry_id",
            )
        from agentcore.harness.projection import new_id

        conversation_id = f"{target.conversation_id}/fork/{new_id()[:12]}"
        base = {"conversation": target.conversation_id, "entry": command.entry_id}
        context, writes = driver.contexts.create(
            conversation_id, "fork", parent=target, base=base, label=f"fork of {target.label or target.target_id}"
        )
        config = driver.config_of(target.conversation_id)
        commit = Commit(registers=writes)
        if config.get("model") or config.get("effort") is not None:
            commit.registers.append(RegisterWrite(f"config:{conversation_id}", dict(config, version=0)))
        fork_log = driver.view.fork_log(conversation_id, base)
        if driver.options.plan_fork == "initial":
            commit.entries.append(fork_log.entry("plan", {"version": fork_log.plan["version"] + 1, "items": []}))
        elif driver.options.plan_fork == "current":
            items = source.plan.get("items", [])
            commit.entries.append(fork_log.entry("plan", {"version": fork_log.plan["version"] + 1, "items": items}))
        receipt = self._receipt(
            command, "created", fork_id=conversation_id, target_id=context.target_id, entry_id=command.entry_id
        )
        try:
            return self._record(source, command, digest, receipt, commit)
        except BaseException:
            driver.view.logs.pop(conversation_id, None)
            raise

    async def _delete(self, command: DeleteCommand, target: Context, digest: str) -> dict[str, Any]:
        driver = self.driver
        if target.is_main:
            raise InputValidationError("the main conversation cannot be deleted; delete the store", field="target_id")
        driver.cancel_all(target, "the context was deleted")
        log = self._log(target)
        commit = Commit(registers=[driver.contexts.mark_deleted(target)])
        return self._record(log, command, digest, self._receipt(command, "deleted"), commit)

    async def _configure(self, command: ConfigureCommand, target: Context, digest: str) -> dict[str, Any]:
        driver = self.driver
        log = self._log(target)
        current = driver.config_of(target.conversation_id)
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
                options = driver.options.subagents
                allowed = {(m.provider, m.model_id) for m in (options.models if options else ())}
                if (choice["provider"], choice["model_id"]) not in allowed:
                    raise InputValidationError(
                        f"model {choice['provider']}/{choice['model_id']} is not in the subagent whitelist",
                        field="model",
                    )
            driver.runtime.config.model({"provider": choice["provider"], "model": choice["model_id"]})
            value["model"] = choice
        if command.effort is not None:
            value["effort"] = command.effort
        key = f"config:{target.conversation_id}"
        commit = Commit(registers=[RegisterWrite(key, value, expected_seq=driver.view.register_seq(key))])
        receipt = self._receipt(command, "applied", version=version + 1)
        return self._record(log, command, digest, receipt, commit)

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
        receipt = self._receipt(command, "applied", version=version + 1)
        return self._record(log, command, digest, receipt, commit)

    # --- work -------------------------------------------------------------------------------

    async def _cancel(self, command: CancelCommand, target: Context, digest: str) -> dict[str, Any]:
        driver = self.driver
        log = self._log(target)
        if command.scope == "foreground":
            request = driver.cancel_foreground(target, "cancelled by the host")
            cancelled = [request] if request else []
        elif command.scope == "all":
            cancelled = driver.cancel_all(target, "cancelled by the host")
        else:
            assert command.task_id is not None
            cancelled = self._cancel_task(target, command.task_id)
        status = "cancelled" if cancelled else "idle"
        return self._record(log, command, digest, self._receipt(command, status, cancelled=cancelled))

    def _cancel_task(self, target: Context, task_id: str) -> list[str]:
        driver = self.driver
        owned = {target.target_id, *(c.target_id for c in driver.contexts.children(target.target_id))}
        for child in driver.contexts.all():
            if child.kind == "subagent" and child.conversation_id == task_id:
                if child.target_id not in owned:
                    raise InputValidationError(f"task {task_id!r} does not belong to this target", field="task_id")
                return driver.cancel_all(child, "cancelled by the host")
        if self.compactions.owns(task_id):
            return self.compactions.stop(task_id)
        for source in driver.extensions:
            result = source.cancel_task(target, task_id, owned)
            if result is not None:
                return list(result)
        raise InputValidationError(f"no active task {task_id!r}", field="task_id")

    async def _snapshot(self, command: SnapshotCommand, target: Context, digest: str) -> dict[str, Any]:
        receipt = self._record(self._log(target), command, digest, self._receipt(command, "ok"))
        receipt["snapshot"] = self.driver.snapshot().model_dump(mode="json")
        return receipt

    async def _task(self, command: TaskCommand, target: Context, digest: str) -> dict[str, Any]:
        for source in self.driver.extensions:
            receipt = source.start_task(command, target, digest, self)
            if receipt is not None:
                return dict(receipt)
        raise AgentError(UNKNOWN_TASK, f"no registered task named {command.name!r}", field="name")

    # --- background compaction -----------------------------------------------------------------

    async def _compact(self, command: CompactCommand, target: Context, digest: str) -> dict[str, Any]:
        row = self.compactions.command_row(target, command.request_id, command.instructions)
        receipt = self._receipt(command, "started", task_id=row.task_id)
        self._record(self._log(target), command, digest, receipt, Commit(tasks=[row]))
        self.compactions.start(target, row.task_id)
        return receipt
