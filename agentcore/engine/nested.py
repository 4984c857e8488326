"""Tool calls made by a running tool (code mode, SPEC X4) — the same path as a direct call.

A ``NestingTool`` runs with a ``NestedCalls`` bound to its own (parent) call. Every call it
makes goes through what the tool round does for a call of the model: the context's tools as
whitelist (minus tools that call tools, ``ask_user`` and ``subagent``), ``prepare_call``,
approval (the payload names the caller), an intent committed before the effect and the result
after it (DURABILITY 9), the replay policy after a crash and cancellation. Calls are recorded
under the parent's key as ``<parent>/n<k>`` in the order they were made; a refused call
(unknown tool, invalid arguments, denied) gets a result and no intent (DURABILITY 11); so does
a call whose arguments are nested deeper than ``call_limits.MAX_ARGUMENT_DEPTH`` — checked
first, as the engine checks a model's calls, and logged with a note in place of its arguments.

Recovery: the parent tool is replay-safe, so the tool round runs it again from the start with
its persisted arguments. ``call(k, ...)`` then answers from the log when call k is committed
(never executing it again), re-runs a ``safe`` call that was in flight, reports a ``never``
call in flight as "outcome unknown" (after reaping what it left running) and runs anything
new. A call that does not match the log — another tool or other arguments at position k —
raises ``ReplayMismatch``: the log no longer describes this run, so nothing more may run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from agentcore.engine.call_limits import OMITTED_KEY, too_deep, too_deep_note, too_deep_result
from agentcore.engine.interrupted import interrupted_result
from agentcore.harness.op_state import OpState, ToolCallState
from agentcore.harness.projection import CodeRun
from agentcore.harness.storage import Commit, RegisterWrite
from agentcore.messages import ImageContent, TextContent
from agentcore.tools.ask_user import ASK_USER
from agentcore.tools.base import AgentTool, ToolContext, ToolResult
from agentcore.tools.display import clean_value
from agentcore.tools.environment import execution_env
from agentcore.tools.executor import execute_call, prepare_call
from agentcore.tools.lifeline import new_call_token

if TYPE_CHECKING:
    from agentcore.engine.base import TurnConfig
    from agentcore.harness.projection import ConversationLog

NOT_NESTABLE = frozenset({ASK_USER, "subagent"})  # they wait for a person / start a context
STOP_GRACE_S = 5.0  # how long a stopped nested call may take to honour its abort signal
TOO_DEEP_DIGEST = "too-deep"  # the log's identity of a call refused for its depth (never a sha256 hex)

Status: TypeAlias = Literal["completed", "failed", "blocked", "invalid", "denied", "unknown", "cancelled", "paused"]
NestedRun: TypeAlias = Callable[[dict[str, Any], ToolContext, "NestedCalls"], Awaitable[ToolResult]]


@dataclass(slots=True)
class NestingTool(AgentTool):
    """A tool whose execution calls other tools through the engine. The engine runs
    ``run_nested(arguments, ctx, calls)``; ``execute`` is only what a caller outside the engine
    (which has no ``NestedCalls`` to give) gets."""

    run_nested: NestedRun | None = None


class CallerRound(Protocol):
    """What nested calls need of the tool round running their parent call — its log, its clock
    and its approval step — so they take a direct call's path without holding the engine."""

    @property
    def log(self) -> ConversationLog: ...

    @property
    def clock(self) -> Callable[[], float]: ...

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
    ) -> str | bool: ...


class ReplayMismatch(Exception):
    """The re-run of a script left the committed execution log: nothing more may run."""


@dataclass(slots=True, frozen=True)
class NestedOutcome:
    """What the caller gets for one nested call: ``value`` (structured content, else the text)
    when ``ok``, ``error`` otherwise."""

    index: int
    name: str
    status: Status
    ok: bool
    value: Any = None
    error: str = ""
    replayed: bool = False  # answered from the log, not executed
    duration_ms: float = 0.0


def arguments_digest(arguments: Any) -> str:
    """The identity of a call's arguments as the caller gave them (before preparation)."""
    text = json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass(slots=True)
class NestedCalls:
    """The nested-call runner of one parent call; see the module docstring."""

    engine: CallerRound
    op: OpState
    cfg: TurnConfig
    parent_call: ToolCallState
    parent_key: str
    task_id: str
    paused: bool = False
    replayed: list[int] = field(default_factory=list)
    settlement: Commit = field(default_factory=Commit)  # committed with the parent's result
    _tools: dict[str, AgentTool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._tools = {
            tool.name: tool
            for tool in self.cfg.tools
            if not isinstance(tool, NestingTool) and tool.name not in NOT_NESTABLE
        }

    # --- what the parent may read ----------------------------------------------------------

    @property
    def tool_names(self) -> list[str]:
        """The whitelist: the context's tools a script may call, in the context's order."""
        return list(self._tools)

    @property
    def conversation_id(self) -> str:
        return self.engine.log.conversation_id

    def now_ms(self) -> int:
        """The store's wall clock (epoch ms): a script's ``Date`` starts from it."""
        return self.engine.log.now_ms()

    @property
    def recorded(self) -> CodeRun | None:
        """The execution log committed so far for this parent call (None on a first run)."""
        return self.engine.log.code_runs.get(self.parent_key)

    def register(self, key: str) -> tuple[dict[str, Any] | None, int]:
        """A register's value and sequence number (for a compare-and-swap write in ``settle``)."""
        view = self.engine.log.view
        return view.register(key), view.register_seq(key)

    # --- writing ---------------------------------------------------------------------------

    def begin(self, header: dict[str, Any]) -> dict[str, Any]:
        """The run's header: the recorded one after a crash, else ``header``, committed now
        (before the script can make any call)."""
        run = self.recorded
        if run is not None:
            return run.header
        payload = dict(header, parent=self.parent_key, task_id=self.task_id)
        self.engine.log.commit(Commit(entries=[self.engine.log.entry("code_run", payload)]))
        return payload

    def settle(self, end: dict[str, Any], registers: list[RegisterWrite]) -> None:
        """Records to commit in the same transaction as the parent's result."""
        log = self.engine.log
        self.settlement = Commit(
            entries=[log.entry("code_run_end", dict(end, parent=self.parent_key, ended_ms=log.now_ms()))],
            registers=list(registers),
        )

    # --- calls -----------------------------------------------------------------------------

    async def call(
        self, index: int, name: str, arguments: Any, *, abort: asyncio.Event, clock: Callable[[], int]
    ) -> NestedOutcome:
        """Nested call ``index`` of the run (indices are the order the script made its calls).

        ``clock`` is the script's elapsed time in ms (stamped on the records, for the Trace and
        the deadline check of a recovery); ``abort`` stops the call like the turn's abort stops
        a direct call. Raises ``ReplayMismatch`` when the call differs from the log.
        """
        depth_refusal: ToolResult | None = None
        if too_deep(arguments):  # before anything walks them (cleaning, the digest) recursively
            arguments, digest = {OMITTED_KEY: too_deep_note()}, TOO_DEEP_DIGEST
            depth_refusal = ToolResult.text(too_deep_result(), is_error=True)
        else:
            arguments = {} if arguments is None else clean_value(arguments)  # as for a model's call
            digest = arguments_digest(arguments)
        run = self.recorded
        intent = run.intents.get(index) if run is not None else None
        result = run.results.get(index) if run is not None else None
        for record in (intent, result):
            if record is not None and (record.get("name") != name or record.get("digest") != digest):
                logged = f"tools.{record.get('name')}({_preview(record.get('arguments', '…'))})"
                raise ReplayMismatch(
                    f"call {index} in the execution log is {logged}, "
                    f"but the re-run asked for tools.{name}({_preview(arguments)})"
                )
        if result is not None:
            self.replayed.append(index)
            return _outcome(result, replayed=True)
        key = f"{self.parent_key}/n{index}"
        tool = self._tools.get(name)
        if intent is not None:  # started before a crash, never settled (D2)
            if intent.get("replay") == "safe" and tool is not None and tool.replay == "safe":
                return await self._execute(index, key, tool, intent, abort, clock, rerun=True)
            environment = execution_env(self.cfg.tool_context(f"{self.task_id}/n{index}", abort))
            unknown = await interrupted_result(intent, environment)
            return self._settle(index, key, name, "unknown", unknown, clock, started=None, intent=intent)
        base = {"index": index, "name": name, "digest": digest}
        if depth_refusal is not None:
            return self._settle(
                index, key, name, "invalid", depth_refusal, clock, started=None, extra=base, args=arguments
            )
        if tool is None:
            refusal = ToolResult.text(
                f"tools.{name} is not available in code mode; available: {', '.join(self._tools) or 'none'}",
                is_error=True,
            )
            return self._settle(index, key, name, "blocked", refusal, clock, started=None, extra=base, args=arguments)
        prepared = (
            prepare_call(tool, arguments)
            if isinstance(arguments, dict)  # not re-parsed: a script's string is not JSON text
            else ToolResult.text(
                f"Invalid arguments for tool {name!r}: expected a JSON object, got {type(arguments).__name__}",
                is_error=True,
            )
        )
        if isinstance(prepared, ToolResult):
            return self._settle(index, key, name, "invalid", prepared, clock, started=None, extra=base, args=arguments)
        op = self.engine.log.op or self.op
        caller = {"tool": self.parent_call["name"], "tool_call_id": self.parent_call["id"], "call_key": self.parent_key}
        nested_call = {"id": f"{self.parent_call['id']}/n{index}", "name": name}
        decision = await self.engine.approve_call(op, self.cfg, tool, nested_call, prepared, key, caller=caller)
        if decision == "pause":
            self.paused = True
            return NestedOutcome(index, name, "paused", ok=False, error="the call waits for approval")
        if isinstance(decision, str):
            denial = ToolResult.text(decision, is_error=True)
            return self._settle(index, key, name, "denied", denial, clock, started=None, extra=base, args=arguments)
        intent = dict(
            base,
            parent=self.parent_key,
            key=key,
            arguments=prepared,
            replay=tool.replay,
            call_token=new_call_token(),
            at_ms=clock(),
            started_ms=self.engine.log.now_ms(),
        )
        log = self.engine.log
        log.commit(Commit(entries=[log.entry("nested_intent", intent)]))
        return await self._execute(index, key, tool, intent, abort, clock, rerun=False)

    async def _execute(
        self,
        index: int,
        key: str,
        tool: AgentTool,
        intent: dict[str, Any],
        abort: asyncio.Event,
        clock: Callable[[], int],
        *,
        rerun: bool,
    ) -> NestedOutcome:
        engine = self.engine
        ctx = self.cfg.tool_context(f"{self.task_id}/n{index}", abort)
        ctx.call_token = intent.get("call_token")
        started = engine.clock()
        started_ms = engine.log.now_ms()
        work = asyncio.ensure_future(execute_call(tool, intent["arguments"], ctx))
        try:
            result = await asyncio.shield(work)
        except asyncio.CancelledError:
            if not abort.is_set():  # the runtime is closing: like a direct call, no result (recovery decides)
                work.cancel()
                raise
            # The script was stopped (deadline, cancel): the call got its abort signal; it has a
            # moment to honour it and is settled either way, so its intent never dangles.
            await asyncio.wait({work}, timeout=STOP_GRACE_S)
            if work.done() and not work.cancelled():
                stopped = work.result()
            else:
                work.cancel()
                stopped = ToolResult.text("Stopped: the code mode script was stopped during this call.", is_error=True)
            status: Status = "cancelled" if stopped.is_error else "completed"
            self._settle(
                index, key, tool.name, status, stopped, clock, started=started, intent=intent, rerun=rerun,
                started_ms=started_ms,
            )
            raise
        status = "failed" if result.is_error else "completed"
        if abort.is_set() and result.is_error:
            status = "cancelled"
        return self._settle(
            index, key, tool.name, status, result, clock, started=started, intent=intent, rerun=rerun,
            started_ms=started_ms,
        )

    def _settle(
        self,
        index: int,
        key: str,
        name: str,
        status: Status,
        result: ToolResult,
        clock: Callable[[], int],
        *,
        started: float | None,
        intent: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
        args: Any = None,
        rerun: bool = False,
        started_ms: int | None = None,
    ) -> NestedOutcome:
        """Commit call ``index``'s result and return what the caller gets; ``started_ms`` /
        ``ended_ms`` (wall clock) place it on the Trace's axis (``at_ms`` is the script's own
        elapsed time, which a resumed run rebases)."""
        duration = (self.engine.clock() - started) * 1000 if started is not None else 0.0
        text = _text_of(result)
        payload: dict[str, Any] = {
            "parent": self.parent_key,
            "key": key,
            "index": index,
            "name": name,
            "digest": (intent or extra or {}).get("digest"),
            "status": status,
            "ok": not result.is_error,
            "duration_ms": round(duration, 3),
            "at_ms": clock(),
            "ended_ms": self.engine.log.now_ms(),
        }
        if started_ms is not None:
            payload["started_ms"] = started_ms
        if intent is None:
            payload["arguments"] = args  # no intent holds them
        if rerun:
            payload["rerun"] = True
        if result.is_error:
            payload["error"] = text
        else:
            payload["value"] = result.structured_content if result.structured_content is not None else text
        log = self.engine.log
        log.commit(Commit(entries=[log.entry("nested_result", payload)]))
        return _outcome(payload, replayed=False)


def _outcome(record: dict[str, Any], *, replayed: bool) -> NestedOutcome:
    return NestedOutcome(
        index=int(record["index"]),
        name=str(record["name"]),
        status=record["status"],
        ok=bool(record["ok"]),
        value=record.get("value"),
        error=str(record.get("error") or ""),
        replayed=replayed,
        duration_ms=float(record.get("duration_ms") or 0.0),
    )


def _text_of(result: ToolResult) -> str:
    parts = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"[image ({block.mime_type}) omitted: code mode passes text only]")
    return "\n".join(parts)


def _preview(arguments: Any, limit: int = 200) -> str:
    text = json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"
