"""The ``codemode(code)`` tool: run a script in the sandbox, its tool calls through the engine (SPEC X4).

``ScriptRun`` is the host side of one run: it writes (or, after a crash, checks) the execution
log's header, starts a worker, answers the script's ``tools.<name>(args)`` calls one at a time
through ``NestedCalls`` (whitelist, approval, intent → effect → result, replay, cancel), keeps
``text()`` output, and stops the worker at the deadline, on cancel, at the call limit or on a
protocol error. Whatever the script does, the result is a ``ToolResult`` — the host never
fails because of a script. The end record (status, output, timings, the calls answered from
the log) and the ``store()`` values are committed with that result.

The tool itself is replay-safe: recovery runs the script again and ``NestedCalls`` feeds it the
committed results (see ``replay.py`` for what is checked first).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable
from typing import Any

from agentcore.engine.nested import NestedCalls, NestedOutcome, NestingTool, ReplayMismatch
from agentcore.errors import ToolError
from agentcore.extensions.codemode.options import CodeModeOptions
from agentcore.extensions.codemode.protocol import (
    MAX_CALLS,
    MAX_OUTPUT_CHARS,
    MAX_SCRIPT_CHARS,
    CallRequest,
    Fatal,
    Finished,
    ProtocolError,
    TextOutput,
    WorkerMessage,
    start_message,
)
from agentcore.extensions.codemode.replay import new_header, recovery_problem, store_digest, store_key
from agentcore.extensions.codemode.sandbox import (
    SandboxEnded,
    SandboxProcess,
    SandboxUnavailable,
    sandbox_fingerprint,
)
from agentcore.harness.storage import RegisterWrite
from agentcore.tools.base import ToolContext, ToolResult

CODEMODE = "codemode"
READ_AHEAD = 16  # worker messages buffered while a nested call runs (bounded memory)
UPDATE_INTERVAL_S = 0.1  # text() output reaches `tool` update events at most this often

DESCRIPTION = """Run JavaScript (an async function body; QuickJS, ES2023) in a sandbox and get its output.
Use it to chain several tool calls, loop over results or compute something in one step.
- `await tools.<name>(args)` calls one of your other tools with the same arguments as a direct call
  (not ask_user or subagent). It resolves to the tool's text (or structured result) and rejects with an
  Error carrying the tool's error message. Calls run one at a time, in the order made; at most 500.
- `text(...values)` (also `console.log`) appends a line to the output you get back; `return value`
  adds the value (as JSON).
- `store(key, value)` saves a small JSON value for later codemode calls of this conversation (saved when
  the script ends; `undefined` removes it); `load(key)` reads it.
- No network, files, processes, timers or modules except through tools. `Date` is fixed at the start
  time and `Math.random` is seeded.
The script is stopped at its time and memory limits."""


class _Stop(Exception):
    """The run must stop now: the deadline passed or it was cancelled."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ScriptClock:
    """The script's elapsed time. A re-run after a crash rebases it on the times the log
    recorded, so the time the process was down, and the replayed prefix, never count twice."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._base_ms = 0
        self._since = now()

    def elapsed_ms(self) -> int:
        return self._base_ms + int((self._now() - self._since) * 1000)

    def rebase(self, at_ms: int) -> None:
        self._base_ms = int(at_ms)
        self._since = self._now()


def codemode_tool(options: CodeModeOptions, running: dict[str, ScriptRun]) -> NestingTool:
    """The tool; ``running`` (by task id) lets the extension stop runs (cancel, close)."""

    async def run_nested(arguments: dict[str, Any], ctx: ToolContext, calls: NestedCalls) -> ToolResult:
        script = ScriptRun(options, arguments["code"], ctx, calls)
        script.task = asyncio.current_task()
        running[calls.task_id] = script
        try:
            return await script.run()
        finally:
            if running.get(calls.task_id) is script:
                del running[calls.task_id]

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise ToolError("codemode runs only inside an agent session (its tool calls go through the engine)")

    return NestingTool(
        name=CODEMODE,
        description=DESCRIPTION,
        parameters={
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_SCRIPT_CHARS,
                    "description": "The body of an async JavaScript function.",
                }
            },
            "required": ["code"],
            "additionalProperties": False,
        },
        execute=execute,
        run_nested=run_nested,
        replay="safe",
        builtin=True,  # a session tool: its nested calls are approved one by one, not the script
    )


class ScriptRun:
    """One run of one script (see the module docstring)."""

    def __init__(self, options: CodeModeOptions, code: str, ctx: ToolContext, calls: NestedCalls) -> None:
        self.options = options
        self.code = code
        self.ctx = ctx
        self.calls = calls
        self.clock = ScriptClock()
        self.nested_abort = asyncio.Event()
        self.timeout_ms = options.timeout_ms
        self.output: list[str] = []
        self.output_chars = 0
        self.dropped_chars = 0
        self.made = 0
        self.started = time.monotonic()
        self.worker_start_ms: float | None = None
        self._halt: asyncio.Future[tuple[str, str]] | None = None
        self._unsent: list[str] = []  # output not yet shown in an update event
        self._last_update = 0.0
        self.task: asyncio.Task[Any] | None = None  # the task running it (the extension cancels it on close)

    def stop(self, status: str, message: str) -> None:
        """Stop the run from outside (a ``cancel`` of this task, the runtime closing)."""
        if self._halt is not None and not self._halt.done():
            self._halt.set_result((status, message))

    # --- the run -----------------------------------------------------------------------------

    async def run(self) -> ToolResult:
        try:
            sandbox_id = sandbox_fingerprint()
        except SandboxUnavailable as exc:
            return self._finish("failed", error=str(exc))
        values, _ = self._stored()
        store_sha = store_digest(values)
        recorded = self.calls.recorded
        if recorded is not None:
            problem = recovery_problem(recorded, script=self.code, sandbox=sandbox_id, store_sha=store_sha)
            if problem is not None:
                return self._finish(
                    "mismatch",
                    error=f"Code mode could not resume this script after a restart: {problem}. "
                    "Nothing was run again; check the state before repeating the work.",
                )
            header = recorded.header
        else:
            header = self.calls.begin(
                new_header(
                    script=self.code,
                    options=self.options,
                    sandbox=sandbox_id,
                    store_sha=store_sha,
                    seed=secrets.randbits(32),
                    clock_ms=self.calls.now_ms(),
                )
            )
        self.timeout_ms = int(header["limits"]["timeout_ms"])
        loop = asyncio.get_running_loop()
        self._halt = loop.create_future()
        watcher = asyncio.ensure_future(self._watch_abort())
        sandbox: SandboxProcess | None = None
        reader: asyncio.Task[None] | None = None
        try:
            spawned = time.monotonic()
            sandbox = await SandboxProcess.spawn()
            message = start_message(script=self.code, header=header, store=values, tools=self.calls.tool_names)
            await sandbox.send(message)
            self.worker_start_ms = (time.monotonic() - spawned) * 1000
            inbox: asyncio.Queue[WorkerMessage | BaseException] = asyncio.Queue(READ_AHEAD)
            reader = asyncio.ensure_future(_read(sandbox, inbox))
            return await self._converse(sandbox, inbox)
        except _Stop as stop:
            return self._finish(stop.status, error=stop.message)
        except ReplayMismatch as exc:
            return self._finish(
                "mismatch",
                error=f"Code mode could not resume this script after a restart: {exc}. "
                "Nothing after that point was run; check the state before repeating the work.",
            )
        except ProtocolError as exc:
            return self._finish("failed", error=f"The sandbox broke its protocol and was stopped: {exc}")
        except SandboxEnded as exc:
            if exc.memory:
                return self._finish("memory", error=self._memory_message())
            return self._finish("crashed", error=f"The script was stopped: {exc}.")
        except OSError as exc:
            return self._finish("failed", error=f"The sandbox could not be started: {exc}")
        finally:
            watcher.cancel()
            if reader is not None:
                reader.cancel()
            if sandbox is not None:
                sandbox.kill()
                await sandbox.close()

    async def _watch_abort(self) -> None:
        await self.ctx.abort.wait()
        self.stop("cancelled", "The script was cancelled.")

    async def _converse(
        self, sandbox: SandboxProcess, inbox: asyncio.Queue[WorkerMessage | BaseException]
    ) -> ToolResult:
        while True:
            if inbox.empty():
                message = await self._until(inbox.get())
            else:
                message = inbox.get_nowait()
                if not isinstance(message, Finished | Fatal):
                    self._check_time()
            if isinstance(message, BaseException):
                raise message
            if isinstance(message, TextOutput):
                self._add_output(message.text)
            elif isinstance(message, CallRequest):
                if message.index != self.made:
                    raise ProtocolError(f"call {message.index} arrived when call {self.made} was expected")
                if message.index >= MAX_CALLS:
                    limit = f"The script made more than {MAX_CALLS} tool calls and was stopped."
                    return self._finish("limit", error=limit)
                self.made += 1
                outcome = await self._nested(message)
                if outcome.status == "paused":
                    return self._finish("paused", error="A tool call waits for approval; the script will run again.")
                await self._until(sandbox.answer(outcome.index, outcome.ok, outcome.value, outcome.error))
            elif isinstance(message, Finished):
                self._check_log_consumed()
                if not message.ok and message.error.startswith("InternalError: out of memory"):
                    return self._finish("memory", error=self._memory_message())
                return self._finish("completed" if message.ok else "failed", finished=message)
            elif isinstance(message, Fatal):
                if message.kind == "memory":
                    return self._finish("memory", error=self._memory_message())
                return self._finish("failed", error=f"The script was stopped: {message.error}")

    def _check_log_consumed(self) -> None:
        """A re-run that ends before the calls its log records is not the run that was logged."""
        recorded = self.calls.recorded
        logged = len(set(recorded.intents) | set(recorded.results)) if recorded is not None else 0
        if logged > self.made:
            raise ReplayMismatch(f"the execution log has {logged} calls, but the re-run ended after {self.made}")

    async def _nested(self, request: CallRequest) -> NestedOutcome:
        recorded = self.calls.recorded
        if recorded is not None:
            record = recorded.results.get(request.index) or recorded.intents.get(request.index)
            if record is not None:
                self.clock.rebase(int(record.get("at_ms") or 0))
        work = asyncio.ensure_future(
            self.calls.call(
                request.index, request.name, request.arguments, abort=self.nested_abort, clock=self.clock.elapsed_ms
            )
        )
        try:
            outcome: NestedOutcome = await self._until(work)
        except _Stop:
            self.nested_abort.set()
            raise
        self._progress(outcome)
        return outcome

    async def _until(self, awaitable: Any) -> Any:
        """``awaitable``'s result, unless the deadline passes or the run is stopped first (then
        the work is cancelled — a nested call settles itself — and ``_Stop`` is raised)."""
        assert self._halt is not None
        work = asyncio.ensure_future(awaitable)
        remaining = (self.timeout_ms - self.clock.elapsed_ms()) / 1000
        try:
            if remaining > 0:
                await asyncio.wait({work, self._halt}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the runtime is closing: stop without settling anything
            work.cancel()
            raise
        if work.done():
            return work.result()
        self.nested_abort.set()
        work.cancel()
        with contextlib.suppress(BaseException):
            await work
        if self._halt.done():
            raise _Stop(*self._halt.result())
        raise _Stop("timeout", f"The script was stopped at its deadline ({self.timeout_ms} ms).")

    def _check_time(self) -> None:
        if self._halt is not None and self._halt.done():
            raise _Stop(*self._halt.result())
        if self.clock.elapsed_ms() >= self.timeout_ms:
            raise _Stop("timeout", f"The script was stopped at its deadline ({self.timeout_ms} ms).")

    # --- output, progress and the end ----------------------------------------------------------

    def _add_output(self, text: str) -> None:
        room = MAX_OUTPUT_CHARS - self.output_chars
        if len(text) > room:
            self.dropped_chars += len(text) - max(room, 0)
            text = text[: max(room, 0)]
        if text:
            self.output.append(text)
            self.output_chars += len(text)
            self._unsent.append(text)
            if time.monotonic() - self._last_update >= UPDATE_INTERVAL_S:
                self._flush_updates()

    def _flush_updates(self) -> None:
        """Show pending output as one ``tool`` update (each update costs the host a snapshot)."""
        if self._unsent and self.ctx.on_update is not None:
            self.ctx.on_update("".join(self._unsent))
        self._unsent.clear()
        self._last_update = time.monotonic()

    def _progress(self, outcome: NestedOutcome) -> None:
        self._flush_updates()
        if self.ctx.on_update is None:
            return
        how = "from the log" if outcome.replayed else f"{outcome.duration_ms:.0f} ms"
        self.ctx.on_update(f"[call {outcome.index}] tools.{outcome.name}: {outcome.status} ({how})\n")

    def _memory_message(self) -> str:
        limit = self.options.memory_limit_bytes
        recorded = self.calls.recorded
        if recorded is not None:
            limit = int(recorded.header.get("limits", {}).get("memory_limit_bytes", limit))
        return f"The script ran out of memory (limit {limit} bytes) and was stopped."

    def _stored(self) -> tuple[dict[str, str], int]:
        value, seq = self.calls.register(store_key(self.calls.conversation_id))
        values = (value or {}).get("values") or {}
        return {str(k): str(v) for k, v in values.items()}, seq

    def _finish(self, status: str, *, error: str | None = None, finished: Finished | None = None) -> ToolResult:
        self._flush_updates()
        output = "".join(self.output)
        dropped = self.dropped_chars + (finished.dropped_chars if finished else 0)
        parts = [output.rstrip("\n")] if output else []
        if dropped:
            parts.append(f"[output truncated: {dropped} more characters were not kept]")
        end: dict[str, Any] = {
            "status": status,
            "output": output,
            "dropped_chars": dropped,
            "elapsed_ms": self.clock.elapsed_ms(),
            "duration_ms": round((time.monotonic() - self.started) * 1000, 3),
            "calls": self.made,
            "replayed": list(self.calls.replayed),
        }
        if self.worker_start_ms is not None:
            end["worker_start_ms"] = round(self.worker_start_ms, 3)
        registers: list[RegisterWrite] = []
        if finished is not None:
            if finished.value_json is not None:
                shown = finished.value_json[:MAX_OUTPUT_CHARS]
                more = len(finished.value_json) - len(shown) + finished.value_truncated
                parts.append(f"Return value: {shown}" + (f" [… {more} more characters]" if more else ""))
                end["return_json"] = shown
            if not finished.ok:
                error = f"The script threw: {finished.error}"
            registers = self._store_writes(finished.stores)
            end["stored"] = sorted(finished.stores)
        if error:
            parts.append(error)
            end["error"] = error
        if status != "paused":
            self.calls.settle(end, registers)
        text = "\n".join(parts) or "(the script finished without output)"
        return ToolResult.text(text, is_error=status != "completed")

    def _store_writes(self, changes: dict[str, str | None]) -> list[RegisterWrite]:
        if not changes:
            return []
        values, seq = self._stored()
        for key, text in changes.items():
            if text is None:
                values.pop(key, None)
            else:
                values[key] = text
        if not values and seq == 0:
            return []
        key = store_key(self.calls.conversation_id)
        return [RegisterWrite(key, {"values": values} if values else None, expected_seq=seq)]


async def _read(sandbox: SandboxProcess, inbox: asyncio.Queue[WorkerMessage | BaseException]) -> None:
    """Forward the worker's messages (read-ahead bounded by the queue) until it is done. Every
    way the reading can end reaches the inbox: the run waits for nothing that cannot come."""
    while True:
        try:
            message: WorkerMessage | BaseException = await sandbox.receive()
        except (SandboxEnded, ProtocolError) as exc:
            await inbox.put(exc)
            return
        except Exception as exc:  # whatever else stops the reading stops the script now, not at its deadline
            await inbox.put(ProtocolError(f"a message could not be read ({type(exc).__name__}: {exc})"))
            return
        await inbox.put(message)
        if isinstance(message, Finished | Fatal):
            return
