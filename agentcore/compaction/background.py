"""Compaction in the background of a session (SPEC C5, S2 ``compact``).

Two ways start one: the ``compact`` command, and ``compaction.background_tokens`` — once a
context passes it, the older part is summarized while the foreground goes on, at most once
per context generation, so a turn rarely has to stop at the 90% threshold. Each is a task row
(``kind: compaction``) written before its work starts, and a session activity that plans with
``plan`` and runs the summary requests with ``summary``; every attempt's usage is committed as
it ends. A finished summary is not applied at once: it waits for an input or request boundary
of its context (``apply``), so a running request never sees its context change under it, and
is dropped if another compaction changed the context meanwhile. A crash redoes the summary
(``resume``); ``cancel`` of the task stops it.

The session gives this part a ``CompactionHost``: the store, the contexts, a context's meter,
making and configuring an operation (to plan with the context's model and window) and running
an activity — nothing else of the driver.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from agentcore.compaction.plan import CompactionPlan, plan_compaction, summary_message
from agentcore.compaction.settings import CompactionSettings
from agentcore.compaction.summary import first_kept_entry, summarize, summary_max_tokens
from agentcore.context.meter import ContextMeter
from agentcore.engine.base import TurnConfig
from agentcore.harness.projection import ConversationLog
from agentcore.harness.storage import Commit, Entry, TaskRow
from agentcore.harness.usage import AttemptTiming, usage_payload
from agentcore.messages import AssistantMessage, message_to_dict
from agentcore.providers.base import ProviderFailure
from agentcore.session.contexts import Context
from agentcore.session.ports import ContextOperations, SessionStore

KIND = "compaction"


class CompactionHost(SessionStore, ContextOperations, Protocol):
    """What background compaction needs of the session that runs it (besides making and
    configuring an operation, to plan with the context's model and window)."""

    def meter(self, log: ConversationLog) -> ContextMeter: ...

    def spawn(self, key: str, work: Callable[[], Awaitable[None]]) -> asyncio.Task[None] | None: ...


@dataclass(slots=True)
class _Summarizing:
    abort: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(slots=True, frozen=True)
class _Ready:
    """A finished summary waiting for its context's next boundary."""

    generation: int
    keep_from: str | None
    summary: str
    count: int


class BackgroundCompactions:
    """The background compactions of one session; see the module docstring."""

    def __init__(self, host: CompactionHost, settings: CompactionSettings) -> None:
        self.host = host
        self.settings = settings
        self._work: dict[str, _Summarizing | _Ready] = {}  # by task id, while this owner runs it

    # --- starting ------------------------------------------------------------------------------

    def command_row(
        self, target: Context, request_id: str, instructions: str | None, *, keep_recent: bool = True
    ) -> TaskRow:
        """The task row of a ``compact`` command: the caller commits it with the command's
        receipt, then calls ``start``. ``keep_recent=False`` summarizes the whole context (C3)."""
        log = self.host.view.log(target.conversation_id)
        payload = {
            "kind": KIND,
            "name": KIND,
            "status": "running",
            "instructions": instructions,
            "keep_recent": keep_recent,
            "target_id": target.target_id,
            "generation": log.compaction_generation,
            "created_ms": log.now_ms(),
        }
        return TaskRow(f"compact:{request_id}", target.conversation_id, payload)

    def maybe_start(self, target: Context) -> None:
        """Start one when ``target`` passed ``background_tokens`` and none ran this generation."""
        settings = self.settings
        if not settings.enabled or not settings.background_tokens:
            return
        host = self.host
        log = host.view.log(target.conversation_id)
        usage = host.meter(log).usage()
        if usage is None or usage["used"] < settings.background_tokens:
            return
        for row in host.view.tasks.values():
            payload = row.payload
            if row.conversation_id == target.conversation_id and payload.get("kind") == KIND:
                if payload.get("status") == "running" or payload.get("generation") == log.compaction_generation:
                    return
        if not self._plan(target)[0].to_summarize:
            return  # everything is still within keep_recent_tokens
        task_id = f"compact:auto:{log.compaction_generation}:{log.head or 'start'}"
        payload = {
            "kind": KIND,
            "name": KIND,
            "status": "running",
            "auto": True,
            "generation": log.compaction_generation,
            "target_id": target.target_id,
            "created_ms": log.now_ms(),
        }
        log.commit(Commit(tasks=[TaskRow(task_id, target.conversation_id, payload)]))
        self.start(target, task_id)

    def start(self, target: Context, task_id: str) -> None:
        self.host.spawn(task_id, lambda: self._run(target, task_id))

    def resume(self) -> None:
        """Background compactions a crash interrupted start again (their summary is redone)."""
        for row in list(self.host.view.tasks.values()):
            if row.payload.get("kind") == KIND and row.payload.get("status") == "running":
                if row.task_id not in self._work:
                    self.start(self.host.contexts.by_conversation(row.conversation_id), row.task_id)

    # --- the work --------------------------------------------------------------------------------

    def _plan(self, target: Context, *, force: bool = False) -> tuple[CompactionPlan, TurnConfig, int]:
        """What a background compaction of ``target`` would summarize now (C4's cut; ``force``:
        everything, C3)."""
        host = self.host
        log = host.view.log(target.conversation_id)
        op = log.op or host.new_op(log, "compaction-plan", {})
        cfg = host.configure(log, op, target)
        window = cfg.context_window or cfg.model.context_window
        settings = cfg.compaction
        max_tokens = summary_max_tokens(cfg.model, window)
        plan = plan_compaction(
            log.messages,
            window=window,
            reserve_tokens=settings.reserve(window),
            keep_recent_tokens=settings.keep_recent(window),
            max_summary_tokens=max_tokens,
            force=force,
        )
        return plan, cfg, max_tokens

    async def _run(self, target: Context, task_id: str) -> None:
        log = self.host.view.log(target.conversation_id)
        row = self.host.view.tasks[task_id]
        plan, cfg, max_tokens = self._plan(target, force=row.payload.get("keep_recent") is False)
        running = self._work[task_id] = _Summarizing()
        if plan.oversize or not plan.to_summarize:
            reason = plan.oversize_error() if plan.oversize else None
            self._finish(task_id, "failed" if reason else "completed", error=reason, note="nothing to do")
            return
        counter = 0

        async def on_attempt(message: AssistantMessage, failure: ProviderFailure | None, timing: AttemptTiming) -> None:
            nonlocal counter
            payload = usage_payload(message, task_id, ok=failure is None, timing=timing)
            payload.update(purpose=KIND, auto=True, background=True)
            if failure is not None:
                payload["error"] = {"kind": failure.kind, "message": failure.message}
            log.commit(Commit(usage=[log.usage_row(f"{task_id}:{counter}", payload)]))
            counter += 1

        outcome = await summarize(
            plan,
            cfg.provider,
            cfg.model,
            abort=running.abort,
            max_tokens=max_tokens,
            on_attempt=on_attempt,
            instructions=row.payload.get("instructions"),
            clock=log.now_ms,
        )
        if running.abort.is_set():
            self._finish(task_id, "aborted", error="cancelled")
            return
        if outcome.failure is not None:
            self._finish(task_id, "failed", error=outcome.failure.message)
            return
        keep_from = first_kept_entry(log.message_entry_ids, log.messages, plan.cut_index)
        self._work[task_id] = _Ready(log.compaction_generation, keep_from, outcome.text, len(plan.to_summarize))
        if log.op is None:
            self.apply(target)

    # --- applying, stopping ----------------------------------------------------------------------

    def apply(self, target: Context) -> None:
        """Apply finished background summaries of ``target`` (at an input or request boundary)."""
        log = self.host.view.log(target.conversation_id)
        for task_id, state in list(self._work.items()):
            row = self.host.view.tasks.get(task_id)
            if not isinstance(state, _Ready) or row is None or row.conversation_id != target.conversation_id:
                continue
            if state.generation != log.compaction_generation:
                self._finish(task_id, "aborted", error="the context changed (another compaction)")
                continue
            entry = log.entry(
                "compaction",
                {
                    "summary_message": message_to_dict(summary_message(state.summary)),
                    "keep_from_entry": state.keep_from,
                    "auto": True,
                    "background": True,
                    "summarized": state.count,
                    "task_id": task_id,
                    "started_ms": row.payload.get("created_ms"),
                    "ended_ms": log.now_ms(),
                },
            )
            self._finish(task_id, "completed", entries=[entry])

    def owns(self, task_id: str) -> bool:
        """``task_id`` is a background compaction's (running here, or its row)."""
        row = self.host.view.tasks.get(task_id)
        return row is not None and row.payload.get("kind") == KIND

    def stop(self, task_id: str) -> list[str]:
        """``cancel`` of the task: the ids stopped (none when it is not running here)."""
        state = self._work.get(task_id)
        if state is None:
            return []
        if isinstance(state, _Ready):
            self._finish(task_id, "aborted", error="cancelled")
        else:
            state.abort.set()
        return [task_id]

    def _finish(
        self,
        task_id: str,
        status: str,
        *,
        error: str | None = None,
        note: str | None = None,
        entries: list[Entry] | None = None,
    ) -> None:
        row = self.host.view.tasks[task_id]
        log = self.host.view.log(row.conversation_id)
        payload = dict(row.payload, status=status, error=error, note=note, ended_ms=log.now_ms())
        log.commit(Commit(entries=list(entries or []), tasks=[TaskRow(task_id, row.conversation_id, payload)]))
        self._work.pop(task_id, None)
