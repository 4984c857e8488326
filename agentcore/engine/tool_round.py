"""The tool round: intents, approvals, execution and settlement of one batch (SPEC T1–T3, D2, L8).

Effect sandwich: every call's intent (with the prepared arguments and its replay policy) is
committed before it starts; its result is committed before its ``end`` event, in the model's
order even when read-only calls ran concurrently. A call found with an intent but no result
is a call interrupted by a crash: re-run if ``replay="safe"``, otherwise answered with
"interrupted, outcome unknown".

A ``NestingTool`` (code mode) gets a ``NestedCalls`` runner bound to its call: its own tool
calls take the same path (``engine/nested.py``) and its execution log's end record is committed
in the same transaction as its result.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import replace
from typing import Any

from agentcore.clock import WallClock
from agentcore.engine.base import TurnConfig
from agentcore.engine.base import display_id as shown_id_of
from agentcore.engine.call_limits import refusal_of
from agentcore.engine.decisions import Decisions
from agentcore.engine.endings import call_key
from agentcore.engine.interrupted import interrupted_result
from agentcore.engine.nested import NestedCalls, NestingTool
from agentcore.errors import UserInputRequired
from agentcore.events import (
    AgentEvent,
    ToolEvent,
)
from agentcore.harness.op_state import OpState, ToolCallState
from agentcore.harness.storage import Commit, Entry
from agentcore.host import call_hook
from agentcore.messages import (
    ToolResultMessage,
)
from agentcore.providers.shared import RAW_ARGUMENTS_KEY
from agentcore.tools.ask_user import ASK_USER
from agentcore.tools.base import AgentTool, ToolContext, ToolResult
from agentcore.tools.environment import execution_env
from agentcore.tools.executor import execute_call, prepare_call
from agentcore.tools.lifeline import new_call_token
from agentcore.tracing import Span

NO_ONE_TO_ASK = (
    "No one is available to answer questions in this run. Continue with your best assumptions "
    "and state them in your answer."
)

class ToolRound(Decisions):
    async def _tool_step(self, op: OpState) -> AsyncIterator[AgentEvent]:
        cfg = self.configure(op)
        step = op["step"]
        calls = op["tool_calls"]
        results: list[ToolResult | None] = [None] * len(calls)
        index = 0
        while index < len(calls):
            call = calls[index]
            key = call_key(self.request_id, step, call["index"])
            if key in self.log.results:
                index += 1
                continue
            if self.abort.is_set():
                yield self.finish_aborted(self.log.op or op, "the run was cancelled")
                return
            # Batch consecutive independent read-only calls so they run concurrently.
            batch = [call]
            tool = cfg.find_tool(call["name"])
            if tool is not None and tool.read_only and not self._recovering_call(key):
                look = index + 1
                while look < len(calls):
                    nxt = calls[look]
                    nxt_tool = cfg.find_tool(nxt["name"])
                    nxt_key = call_key(self.request_id, step, nxt["index"])
                    if (
                        nxt_tool is None
                        or not nxt_tool.read_only
                        or self._recovering_call(nxt_key)
                        or nxt_key in self.log.results
                    ):
                        break
                    batch.append(nxt)
                    look += 1
            last = index + len(batch) == len(calls)
            async for event in self._run_batch(op, cfg, batch, results, advance=last):
                yield event
            current = self.log.op
            if self.final is not None or (current is not None and current["phase"] in ("paused", "model")):
                return
            if self.abort.is_set():  # L8: the running tool was stopped; end without a new request
                yield self.finish_aborted(self.log.op or op, "the run was cancelled during a tool call")
                return
            index += len(batch)
        current = self.log.op or op
        if _terminates(results):
            yield self.finish_completed(current, Commit(), "")
            return
        self.log.commit(self._advance(Commit(), current))

    def _advance(self, commit: Commit, op: OpState) -> Commit:
        """Move the program counter past the tool round to the next model request, in
        ``commit``; steer inputs (session protocol) join the turn here."""
        value: OpState = {**op, "phase": "model", "step": op["step"] + 1, "attempt": 0}
        value.pop("tool_calls", None)
        value.pop("approvals", None)
        commit.registers.append(self.log.set_op(value))
        if self.session is not None:
            self.session.at_tool_boundary(self, commit)
        return commit

    async def _run_batch(
        self,
        op: OpState,
        cfg: TurnConfig,
        batch: list[ToolCallState],
        results: list[ToolResult | None],
        *,
        advance: bool = False,
    ) -> AsyncIterator[AgentEvent]:
        """Run one batch; with ``advance``, the results commit also moves the program counter to
        the next model request (one transaction instead of two on the hot path)."""
        step = op["step"]
        runnable: list[tuple[ToolCallState, AgentTool, dict[str, Any], str]] = []
        settled: list[tuple[ToolCallState, ToolResult, str]] = []
        recovered: dict[str, str] = {}  # display id -> "rerun" | "interrupted": settled after a resume
        intents = Commit()
        for call in batch:
            key = call_key(self.request_id, step, call["index"])
            display_id = shown_id_of(op, call)
            tool = cfg.find_tool(call["name"])
            intent = self.log.intents.get(key)
            if intent is not None and key in self._fresh_intents and tool is not None:
                # Written with the assistant message by this engine, not yet started.
                self._fresh_intents.discard(key)
                runnable.append((call, tool, intent["arguments"], display_id))
                continue
            if intent is not None:
                # Started before a crash, never settled (D2).
                if tool is not None and intent.get("replay") == "safe" and tool.replay == "safe":
                    runnable.append((call, tool, intent["arguments"], display_id))
                    recovered[display_id] = "rerun"
                else:
                    environment = execution_env(cfg.tool_context(display_id, self.abort))
                    settled.append((call, await interrupted_result(intent, environment), display_id))
                    recovered[display_id] = "interrupted"
                continue
            if tool is None:
                settled.append((call, ToolResult.text(f"Unknown tool {call['name']!r}.", is_error=True), display_id))
                continue
            refusal = refusal_of(call, self._window(cfg))
            if refusal is not None:  # refused before it entered the transcript: no intent, no effect
                settled.append((call, ToolResult.text(refusal, is_error=True), display_id))
                continue
            if RAW_ARGUMENTS_KEY in call["arguments"]:
                invalid = "The tool call arguments were not valid JSON; resend the call with a valid JSON object."
                settled.append((call, ToolResult.text(invalid, is_error=True), display_id))
                continue
            prepared = prepare_call(tool, call["arguments"])
            if isinstance(prepared, ToolResult):  # invalid arguments: no intent, no effect (invariant 11)
                settled.append((call, prepared, display_id))
                continue
            if tool.name == ASK_USER and not self.has_host:
                settled.append((call, ToolResult.text(NO_ONE_TO_ASK, is_error=True), display_id))
                continue
            if tool.name == ASK_USER:
                self._pause_for_questions(op, call, prepared, key)
                yield ToolEvent(
                    phase="start", tool_call_id=display_id, name=ASK_USER, index=call["index"], arguments=prepared
                )
                yield self.paused_event(self.log.op or op)
                return
            decision = await self.approve_call(op, cfg, tool, call, prepared, key)
            if decision == "pause":
                yield self.paused_event(self.log.op or op)
                return
            if isinstance(decision, str):
                settled.append((call, ToolResult.text(decision, is_error=True), display_id))
                continue
            intents.entries.append(
                self.log.entry(
                    "tool_intent",
                    {
                        "call_key": key,
                        "name": tool.name,
                        "arguments": prepared,
                        "replay": tool.replay,
                        "id": call["id"],
                        "call_token": new_call_token(),  # recovery reaps processes the call left
                        "at_ms": self.log.now_ms(),
                    },
                )
            )
            runnable.append((call, tool, prepared, display_id))
        if not intents.is_empty():
            self.log.commit(intents)
        starts: dict[str, float] = {}
        started_ms: dict[str, int] = {}  # wall clock, committed with each result (Trace)
        ended_ms: dict[str, int] = {}
        spans: dict[str, Span] = {}
        for call, _tool, arguments, display_id in runnable:
            starts[display_id] = self.clock()
            started_ms[display_id] = self.log.now_ms()
            if self.tracer is not None and self.op_span is not None:
                spans[display_id] = self.tracer.tool(
                    self.op_span, name=call["name"], call_id=display_id, arguments=arguments
                )
            yield ToolEvent(
                phase="start", tool_call_id=display_id, name=call["name"], index=call["index"], arguments=arguments
            )
        updates = _Updates()
        runners: dict[int, NestedCalls] = {}
        calls_running = []
        for call, tool, arguments, display_id in runnable:
            ctx = self._tool_context(cfg, op, call, display_id, updates)
            if isinstance(tool, NestingTool):
                runner = runners[id(call)] = self._nested_calls(op, cfg, call, display_id)
                tool = _bound(tool, runner)
            calls_running.append(_timed(execute_call(tool, arguments, ctx), ended_ms, display_id, self.log.now_ms))
        work = asyncio.gather(*calls_running) if len(calls_running) != 1 else asyncio.ensure_future(calls_running[0])
        try:
            async for update in updates.until_done(work):
                yield update
        except BaseException:  # the engine itself is stopped (close): its tools stop with it
            work.cancel()
            for running in spans.values():
                running.end(error="interrupted")
            raise
        result = work.result()
        if any(runner.paused for runner in runners.values()):
            # A nested call waits for a person: the pause is committed; the parent call keeps
            # its intent and no result, so the resumed turn runs it again (replaying its log).
            yield self.paused_event(self.log.op or op)
            return
        outcomes = result if isinstance(result, list) else [result]
        by_call = {id(call): outcome for (call, _t, _a, _d), outcome in zip(runnable, outcomes, strict=True)}
        commit = Commit()
        finished: list[ToolEvent] = []
        for call in batch:
            key = call_key(self.request_id, step, call["index"])
            if key in self.log.results:
                continue
            match = next(((r, d) for c, r, d in settled if c is call), None)
            if match is not None:
                result, display_id = match
            else:
                result = by_call[id(call)]
                display_id = next(d for c, _t, _a, d in runnable if c is call)
            results[call["index"]] = result
            message = ToolResultMessage(
                tool_call_id=call["id"],
                tool_name=call["name"],
                content=result.content,
                is_error=result.is_error,
                structured_content=result.structured_content,
            )
            nested = runners.get(id(call))
            if nested is not None:  # the execution log's end record and stored values, with the result
                commit.entries.extend(nested.settlement.entries)
                commit.registers.extend(nested.settlement.registers)
            timing = _result_timing(display_id, started_ms, ended_ms, recovered, op, key, self.log.now_ms)
            commit.entries.append(self.log.message_entry(message, self.request_id, call_key=key, **timing))
            if display_id in spans and self.tracer is not None:
                content = {"gen_ai__tool__call__result": message.text[:16_384]} if self.tracer.capture_content else {}
                spans.pop(display_id).end(error=message.text[:200] if result.is_error else None, **content)
            started = starts.get(display_id)
            finished.append(
                ToolEvent(
                    phase="end",
                    tool_call_id=display_id,
                    name=call["name"],
                    index=call["index"],
                    arguments=call["arguments"],
                    result=message.text,
                    is_error=result.is_error,
                    duration_ms=(self.clock() - started) * 1000 if started is not None else None,
                )
            )
        if advance and not self.abort.is_set() and not _terminates(results):
            self._advance(commit, self.log.op or op)
        if not commit.is_empty():
            self.log.commit(commit)
        for event in finished:
            yield event
        meter = self._context_usage()
        if meter:
            yield meter

    def _tool_context(
        self, cfg: TurnConfig, op: OpState, call: ToolCallState, display_id: str, updates: _Updates
    ) -> ToolContext:
        """The tool's context, with partial output forwarded as ``tool`` update events and the
        intent's call token (what processes of the call carry, so recovery can find them)."""
        ctx = cfg.tool_context(display_id, self.abort)
        intent = self.log.intents.get(call_key(self.request_id, op["step"], call["index"]))
        if intent is not None:
            ctx.call_token = intent.get("call_token")

        def on_update(partial: str) -> None:
            updates.push(
                ToolEvent(
                    phase="update", tool_call_id=display_id, name=call["name"], index=call["index"], partial=partial
                )
            )

        ctx.on_update = on_update
        return ctx

    def _nested_calls(self, op: OpState, cfg: TurnConfig, call: ToolCallState, display_id: str) -> NestedCalls:
        """The runner through which a ``NestingTool`` call makes its own tool calls (code mode)."""
        key = call_key(self.request_id, op["step"], call["index"])
        return NestedCalls(self, op, cfg, call, key, display_id)

    def _recovering_call(self, key: str) -> bool:
        """An intent this engine did not write: the call may have started before a crash."""
        return key in self.log.intents and key not in self._fresh_intents

    def early_intents(self, cfg: TurnConfig, step: int, calls: list[ToolCallState]) -> list[Entry]:
        """Intents that travel in the same transaction as the assistant message.

        For every call that needs no decision (no approval, not ask_user) and whose arguments
        validate: its intent (prepared arguments, replay policy, call token) is durable before
        the call can start, exactly as if written just before it — with one transaction less per
        tool round on the hot path (two per turn instead of three). Recovery treats such an
        intent like any other: a ``safe`` call runs again from the persisted arguments, a
        ``never`` call is answered "outcome unknown" (after its processes are reaped), even if
        the crash came before it started — we cannot know, so we never guess "not run".
        """
        entries = []
        for call in calls:
            tool = cfg.find_tool(call["name"])
            if (
                tool is None
                or tool.name == ASK_USER
                or RAW_ARGUMENTS_KEY in call["arguments"]
                or refusal_of(call, self._window(cfg)) is not None
            ):
                continue
            if not tool.builtin and (self.host.approve_tool_call is not None or tool.name in cfg.tool_definitions):
                continue
            prepared = prepare_call(tool, call["arguments"])
            if isinstance(prepared, ToolResult):
                continue
            key = call_key(self.request_id, step, call["index"])
            payload: dict[str, Any] = {"call_key": key, "name": tool.name, "arguments": prepared, "replay": tool.replay}
            payload["id"] = call["id"]
            payload["at_ms"] = self.log.now_ms()
            if tool.replay != "safe":
                payload["call_token"] = new_call_token()  # recovery reaps processes the call left
            entries.append(self.log.entry("tool_intent", payload))
            self._fresh_intents.add(key)
        return entries

    async def approve_call(
        self,
        op: OpState,
        cfg: TurnConfig,
        tool: AgentTool,
        call: Mapping[str, Any],
        arguments: dict[str, Any],
        key: str,
        *,
        caller: dict[str, Any] | None = None,
    ) -> str | bool:
        """True = run it; a string = denied with that message; "pause" = paused durably.
        ``caller`` names the tool call a nested call comes from (code mode); the host sees it
        in the payload and in the pending approval."""
        if tool.builtin:
            return True  # SPEC T2: built-in tools never ask for approval
        approvals = op.get("approvals") or {}
        if key in approvals:
            verdict = approvals[key]
            return True if verdict.get("approved") else (verdict.get("message") or "The tool call was denied.")
        definition = cfg.tool_definitions.get(tool.name)
        needs_pause = definition is not None and not definition.auto_approve and cfg.mode == "plan"
        payload = {"tool": tool.name, "arguments": arguments, "tool_call_id": call["id"], "approval_id": key}
        if caller is not None:
            payload["caller"] = caller
        if self.host.approve_tool_call is not None:
            try:
                await call_hook(self.host.approve_tool_call, payload)
                return True
            except UserInputRequired:
                needs_pause = True
            except Exception as exc:  # a denial: the message goes to the model
                return str(exc) or "The tool call was denied."
        if needs_pause:
            pending = {"kind": "tool_approval", "approval_id": key, "tool": tool.name, "arguments": arguments}
            if caller is not None:
                pending["caller"] = caller
            self._pause(op, pending)
            return "pause"
        return True


class _Updates:
    """Tool progress (``on_update``) forwarded while the tools run. A plain future per wait,
    not a task: this sits on every tool round of the hot loop."""

    def __init__(self) -> None:
        self._items: deque[ToolEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def push(self, event: ToolEvent) -> None:
        self._items.append(event)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def until_done(self, work: asyncio.Future[Any]) -> AsyncIterator[ToolEvent]:
        """Yield updates until ``work`` is done, then whatever is left."""
        loop = asyncio.get_running_loop()
        while not work.done():
            while self._items:
                yield self._items.popleft()
            self._waiter = loop.create_future()
            await asyncio.wait({work, self._waiter}, return_when=asyncio.FIRST_COMPLETED)
            self._waiter = None
        while self._items:
            yield self._items.popleft()


async def _timed(work: Awaitable[ToolResult], ended: dict[str, int], key: str, clock: WallClock) -> ToolResult:
    """``work``'s result, noting when it finished: calls of a batch run concurrently and are
    committed together, but each keeps its own end time."""
    try:
        return await work
    finally:
        ended[key] = clock()


def _result_timing(
    display_id: str,
    started: dict[str, int],
    ended: dict[str, int],
    recovered: dict[str, str],
    op: OpState,
    key: str,
    clock: WallClock,
) -> dict[str, Any]:
    """What a tool result entry records for the Trace: when the call ran (no ``started_ms`` when
    it never ran: refused or answered "interrupted"), whether a resume settled it, and the wait
    for a person's approval before it."""
    timing: dict[str, Any] = {"ended_ms": ended[display_id] if display_id in ended else clock()}
    if display_id in started:
        timing["started_ms"] = started[display_id]
    if display_id in recovered:
        timing["recovery"] = recovered[display_id]
    approval = (op.get("approvals") or {}).get(key)
    if approval and approval.get("wait"):
        timing["wait"] = approval["wait"]
    return timing


def _bound(tool: NestingTool, runner: NestedCalls) -> AgentTool:
    """``tool`` with its nested-call runner bound into ``execute``."""
    run = tool.run_nested
    assert run is not None

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await run(arguments, ctx, runner)

    return replace(tool, execute=execute)


def _terminates(results: list[ToolResult | None]) -> bool:
    """T3: a tool round ends the turn only when every result asks to terminate."""
    return bool(results) and all(r is not None and r.terminate for r in results)
