"""Building the session snapshot from the projection (SPEC S3, S4); the shape is in ``snapshot``."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

from agentcore.context.meter import ContextMeter
from agentcore.engine.endings import call_key
from agentcore.harness.storage import TaskRow
from agentcore.session import queue as input_queue
from agentcore.session.contexts import Context
from agentcore.session.ledger import UsageLedgerIndex, merged
from agentcore.session.ports import SessionStore
from agentcore.session.snapshot import (
    MAX_HISTORY,
    MAX_RECEIPTS,
    MAX_TURNS,
    ContextConfig,
    ContextState,
    ContextUsage,
    PlanState,
    QueuedInput,
    SessionSnapshot,
    SessionUsage,
    TaskState,
    TurnState,
    UsageTotals,
)

TERMINAL_TASKS = ("completed", "failed", "aborted", "orphaned", "cancelled")
TURN_STATUSES = ("queued", "running", "paused", "completed", "failed", "aborted", "withdrawn", "cancelled", "rejected")


class SnapshotSource(SessionStore, Protocol):
    """What the snapshot is built from: the store, the contexts, the usage ledger's totals, the
    live context meters (a context without one shows no usage yet), each context's
    configuration, the ``records`` and the extensions' detail for tool tasks."""

    @property
    def ledger(self) -> UsageLedgerIndex: ...

    @property
    def meters(self) -> Mapping[str, ContextMeter]: ...

    def config_of(self, conversation_id: str) -> dict[str, Any]: ...

    def records(self) -> dict[str, Any]: ...

    def tool_details(self, context: Context) -> dict[str, dict[str, Any]]: ...


class SnapshotBuilder:
    """Builds ``SessionSnapshot``s of one session; see the module docstring."""

    def __init__(self, source: SnapshotSource) -> None:
        self.source = source
        self._counter = 0

    def revision(self) -> int:
        """Strictly increasing per owner; a newer owner (higher fence) is always above."""
        self._counter += 1
        return (self.source.view.fence << 32) | self._counter

    def build(self) -> SessionSnapshot:
        source = self.source
        contexts = source.contexts.all()
        by_conversation = {c.conversation_id: c for c in source.contexts.all(include_deleted=True)}
        tasks: list[TaskState] = []
        ended: list[tuple[int, Callable[[], TaskState]]] = []  # (store seq, build) of finished tasks
        details = {c.conversation_id: source.tool_details(c) for c in contexts}
        for context in contexts:
            tasks.extend(self._tool_tasks(context, details[context.conversation_id]))
        child_tasks, child_history = self._subagent_tasks(by_conversation)
        tasks.extend(child_tasks)
        ended.extend(child_history)
        rows_active, rows_history = self._row_tasks(by_conversation)
        tasks.extend(rows_active)
        ended.extend(rows_history)
        ended.extend(self._tool_history(contexts, details))
        history_total = len(child_history) + len(rows_history) + sum(
            source.view.log(c.conversation_id).tools_finished for c in contexts
        )
        ended.sort(key=lambda item: item[0])
        history = [build() for _seq, build in ended[-MAX_HISTORY:]]  # only the shown ones are built
        turns, turns_total = self._turns(by_conversation)
        main_log = source.view.log(source.contexts.main_conversation)
        return SessionSnapshot(
            owner_id=source.view.owner_id,
            revision=self.revision(),
            contexts=[self._context(context) for context in contexts],
            tasks=tasks,
            history=history,
            history_total=history_total,
            turns=turns,
            turns_total=turns_total,
            plan=PlanState.model_validate(main_log.plan),
            records=source.records(),
            receipts=self._receipts(),
            usage=self._usage(contexts),
        )

    # --- contexts ------------------------------------------------------------------------

    def _context(self, context: Context) -> ContextState:
        source = self.source
        log = source.view.log(context.conversation_id)
        op = log.op
        queue = input_queue.read_queue(source.view, context.conversation_id)
        status: Literal["idle", "running", "paused", "queued"]
        if op is None:
            status = "queued" if queue else "idle"
        else:
            status = "paused" if op.get("phase") == "paused" else "running"
        meter = source.meters.get(context.conversation_id)
        usage = meter.usage() if meter is not None else None
        config = source.config_of(context.conversation_id)
        forked_from = None
        if context.base is not None:
            origin = source.contexts.by_conversation(context.base["conversation"])
            forked_from = {"target_id": origin.target_id, "entry_id": context.base["entry"]}
        return ContextState(
            target_id=context.target_id,
            conversation_id=context.conversation_id,
            kind=context.kind,
            parent_target_id=context.parent_target_id,
            label=context.label,
            status=status,
            request_id=op["request_id"] if op else None,
            context_usage=ContextUsage(**usage) if usage else None,
            config=ContextConfig(
                version=int(config.get("version", 0)),
                model=config.get("model"),
                effort=config.get("effort"),
                web_search=config.get("web_search"),
            ),
            queue=[QueuedInput(**input_queue.preview(item)) for item in queue],
            plan=PlanState.model_validate(log.plan),
            forked_from=forked_from,
        )

    # --- tasks ---------------------------------------------------------------------------

    def _tool_tasks(self, context: Context, details: dict[str, dict[str, Any]]) -> list[TaskState]:
        """The open turn's tool calls: submitted arguments, running once their intent is durable."""
        log = self.source.view.log(context.conversation_id)
        op = log.op
        if op is None or op.get("phase") not in ("tools", "paused") or not op.get("tool_calls"):
            return []
        stopping = log.cancel_marker is not None
        out = []
        for call in op["tool_calls"]:
            key = call_key(op["request_id"], op["step"], call["index"])
            if key in log.results:
                continue
            known = log.open_call(call["id"])
            task_id = known["task_id"] if known else f"{str(op.get('assistant_entry', ''))[:12]}:{call['id']}"
            status = "running" if key in log.intents else "pending"
            if (op.get("pending") or {}).get("approval_id") == key:
                status = "waiting"
            out.append(
                TaskState(
                    task_id=task_id,
                    kind="tool",
                    name=call["name"],
                    status=status,
                    stopping=stopping,
                    target_id=context.target_id,
                    request_id=op["request_id"],
                    arguments=call["arguments"],
                    detail=details.get(task_id, {}),
                )
            )
        return out

    def _tool_history(
        self, contexts: list[Context], details: dict[str, dict[str, dict[str, Any]]]
    ) -> list[tuple[int, Callable[[], TaskState]]]:
        out: list[tuple[int, Callable[[], TaskState]]] = []
        for context in contexts:
            log = self.source.view.log(context.conversation_id)
            for item in log.tool_history:
                build = functools.partial(
                    TaskState,
                    task_id=item["task_id"],
                    kind="tool",
                    name=item["name"],
                    status=item["status"],
                    target_id=context.target_id,
                    request_id=item.get("request_id"),
                    arguments=item["arguments"],
                    result=item["result"],
                    detail=details[context.conversation_id].get(item["task_id"], {}),
                )
                out.append((int(item.get("seq", 0)), build))
        return out

    def _subagent_tasks(
        self, by_conversation: dict[str, Context]
    ) -> tuple[list[TaskState], list[tuple[int, Callable[[], TaskState]]]]:
        source = self.source
        active: list[TaskState] = []
        done: list[tuple[int, Callable[[], TaskState]]] = []
        for child in by_conversation.values():
            if child.kind != "subagent":
                continue
            receipt = source.view.receipts.get(f"{child.conversation_id}:task")
            final = (receipt.payload.get("final") if receipt else None) or {}
            build = functools.partial(self._subagent_task, child, final)
            if final:
                done.append((receipt.seq if receipt else 0, build))
            else:
                active.append(build())
        return active, done

    def _subagent_task(self, child: Context, final: dict[str, Any]) -> TaskState:
        log = self.source.view.log(child.conversation_id)
        op = log.op
        status = final.get("status") or ("paused" if op is not None and op["phase"] == "paused" else "running")
        return TaskState(
            task_id=child.conversation_id,
            kind="subagent",
            name=child.label or "subagent",
            status=status,
            stopping=log.cancel_marker is not None and not final,
            target_id=child.target_id,
            parent_task_id=child.owner_call,
            request_id=f"{child.conversation_id}:task",
            arguments={"task": child.label, "background": child.background},
            result=final.get("text") if final.get("status") == "completed" else None,
            error=final.get("error"),
            background=child.background,
            detail={
                "parent_target_id": child.parent_target_id,
                "tools": list(child.tools or ()),
                "deleted": child.deleted,
            },
        )

    def _row_tasks(
        self, by_conversation: dict[str, Context]
    ) -> tuple[list[TaskState], list[tuple[int, Callable[[], TaskState]]]]:
        """Task rows of the store: background compactions and durable tasks (extensions)."""
        active: list[TaskState] = []
        done: list[tuple[int, Callable[[], TaskState]]] = []
        for row in self.source.view.tasks.values():
            terminal = str(row.payload.get("status", "running")) in TERMINAL_TASKS
            build = functools.partial(self._row_task, row, by_conversation, terminal)
            if terminal:
                done.append((row.seq, build))
            else:
                active.append(build())
        return active, done

    @staticmethod
    def _row_task(row: TaskRow, by_conversation: dict[str, Context], terminal: bool) -> TaskState:
        payload = row.payload
        context = by_conversation.get(row.conversation_id)
        kind: Literal["compaction", "task"] = "compaction" if payload.get("kind") == "compaction" else "task"
        return TaskState(
            task_id=row.task_id,
            kind=kind,
            name=str(payload.get("name", kind)),
            status=str(payload.get("status", "running")),
            stopping=bool(payload.get("stopping")) and not terminal,
            target_id=context.target_id if context else 0,
            parent_task_id=payload.get("parent_id"),
            arguments=payload.get("input"),
            result=outcome.get("result") if isinstance(outcome := payload.get("outcome"), dict) else None,
            error=payload.get("error"),
            background=bool(payload.get("background")),
            detail={k: v for k, v in payload.items() if k not in ("input", "name", "status", "kind")},
        )

    # --- turns, receipts, usage -------------------------------------------------------------

    def _turns(self, by_conversation: dict[str, Context]) -> tuple[list[TurnState], int]:
        source = self.source
        turns: list[TurnState] = []
        total = 0
        for request_id in reversed(source.view.receipts):
            receipt = source.view.receipts[request_id]
            payload = receipt.payload
            control = payload.get("control")
            if control is not None and control.get("type") != "submit":
                continue
            if payload.get("status") not in TURN_STATUSES:  # a placed steer joined another turn
                continue
            total += 1
            if len(turns) >= MAX_TURNS:
                continue
            final = payload.get("final") or {}
            context = by_conversation.get(receipt.conversation_id)
            status = str(payload.get("status"))
            turns.append(
                TurnState(
                    request_id=request_id,
                    target_id=context.target_id if context else 0,
                    status=status,
                    reason=final.get("error_code") if status != "completed" else None,
                    detail=final.get("error") if status != "completed" else None,
                    steer_missed=bool(payload.get("steer_missed")),
                    usage=UsageTotals(**source.ledger.request(request_id)),
                )
            )
        turns.reverse()
        return turns, total

    def _receipts(self) -> list[dict[str, Any]]:
        out = []
        for request_id in reversed(self.source.view.receipts):
            control = self.source.view.receipts[request_id].payload.get("control")
            if control is not None:
                out.append(dict(control["receipt"]))
                if len(out) >= MAX_RECEIPTS:
                    break
        out.reverse()
        return out

    def _usage(self, contexts: list[Context]) -> list[SessionUsage]:
        source = self.source
        everything = source.contexts.all(include_deleted=True)
        out = []
        for context in contexts:
            own = source.ledger.conversation(context.conversation_id)
            children = [c for c in everything if c.kind == "subagent" and _descends(c, context, everything)]
            total = merged(itertools.chain([own], (source.ledger.conversation(c.conversation_id) for c in children)))
            out.append(SessionUsage(target_id=context.target_id, own=UsageTotals(**own), total=UsageTotals(**total)))
        return out


def _descends(child: Context, ancestor: Context, contexts: list[Context]) -> bool:
    by_target = {c.target_id: c for c in contexts}
    current: Context | None = child
    while current is not None and current.parent_target_id is not None:
        if current.parent_target_id == ancestor.target_id:
            return True
        current = by_target.get(current.parent_target_id)
    return False
