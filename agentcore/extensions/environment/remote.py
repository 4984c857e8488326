"""``RemoteExecutionEnv``: the built-in tools in a worker process, over JSON lines (SPEC X5).

The worker (``worker.py``) is any process that speaks ``protocol`` on its stdin/stdout: here a
local ``python`` under another root directory (``start_worker``); over SSH or in a sandbox the
same worker on the far side (``RemoteExecutionEnv.start(argv=["ssh", host, "python3", "-m",
"agentcore.extensions.environment.worker", "--root", path])``). The path policy, the
``O_NOFOLLOW`` opens and the process groups all live on that side.

One reader thread per worker reads replies and hands each to the event loop that made the
call, so the environment is not bound to one loop (a host may call it from several). Calls
are multiplexed by id and may run concurrently. ``ctx.abort`` sends ``cancel`` (bash kills its
group, grep/find stop); a call cancelled by asyncio sends ``cancel`` too and waits a moment
for the worker to confirm, so no process is left behind by a cancelled turn.

If the worker dies, every call in flight fails with a ``ToolError`` that says the outcome is
unknown (with the worker's exit status and the tail of its stderr), ``status()`` turns to
``error`` and later calls fail at once — nothing ever runs locally instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agentcore.errors import ToolError
from agentcore.extensions.environment.protocol import (
    MAX_MESSAGE_BYTES,
    PROTOCOL_VERSION,
    ProtocolError,
    decode,
    encode,
    operation_to_json,
    result_from_json,
    scope_to_json,
)
from agentcore.tools.base import ToolContext, ToolResult
from agentcore.tools.environment import FileOperation

CONNECT_TIMEOUT: Final = 30.0
CANCEL_GRACE: Final = 5.0  # bash needs KILL_GRACE + DRAIN_GRACE to confirm a cancel
EXIT_GRACE: Final = 10.0
_STDERR_TAIL: Final = 4096
_LARGE: Final = 1 << 20  # messages above this are written from a thread, not the loop


@dataclass(slots=True)
class _Pending:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[dict[str, Any]]
    on_event: Callable[[dict[str, Any]], None] | None


def worker_command(
    root: str | os.PathLike[str], *, scratch: str | os.PathLike[str] | None = None, python: str | None = None
) -> list[str]:
    """The command that starts a worker on this machine with this copy of agentcore."""
    package_parent = str(Path(__file__).resolve().parents[3])
    boot = (
        f"import sys; sys.path.insert(0, {package_parent!r}); "
        "from agentcore.extensions.environment.worker import main; sys.exit(main(sys.argv[1:]))"
    )
    argv = [python or sys.executable, "-c", boot, "--root", os.fspath(root)]
    if scratch is not None:
        argv += ["--scratch", os.fspath(scratch)]
    return argv


class RemoteExecutionEnv:
    """An ``AgentExecutionEnv`` backed by a worker process (see the module docstring).

    ``before_open`` is a test seam (the remote twin of ``PathGuard(before_open=...)``): when
    set, the worker pauses right before each open and this callable runs with the checked path.
    """

    def __init__(self, id: str, label: str, proc: subprocess.Popen[bytes]) -> None:
        self._id = id
        self._label = label
        self._proc = proc
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        self._failure: str | None = None
        self._closed = False
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self.info: dict[str, Any] = {}
        self.before_open: Callable[[Path], None] | None = None
        self._reader = threading.Thread(target=self._read_replies, name=f"agentcore-env-{id}", daemon=True)
        self._stderr_reader = threading.Thread(target=self._read_stderr, name=f"agentcore-env-{id}-err", daemon=True)
        self._reader.start()
        self._stderr_reader.start()

    @classmethod
    async def start(
        cls,
        id: str,
        label: str,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> RemoteExecutionEnv:
        """Start the worker ``argv`` and shake hands; ``ToolError`` (with its stderr) if it fails."""
        try:
            proc = subprocess.Popen(  # noqa: ASYNC220 - fork/exec is quick; the handshake is awaited
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:
            raise ToolError(f"execution environment {label!r} ({id}): cannot start {argv[0]!r}: {exc}") from None
        remote = cls(id, label, proc)
        try:
            async with asyncio.timeout(connect_timeout):
                hello = await remote._request({"op": "hello"}, None)
        except BaseException as exc:
            failure = remote._failure
            await remote.cleanup()
            if isinstance(exc, TimeoutError):
                raise ToolError(
                    f"execution environment {label!r} ({id}): no answer from the worker within {connect_timeout:g} s"
                ) from None
            if isinstance(exc, ToolError) and failure is not None:
                raise ToolError(f"execution environment {label!r} ({id}) could not start: {failure}") from None
            raise
        if not isinstance(hello, dict) or hello.get("protocol") != PROTOCOL_VERSION:
            await remote.cleanup()
            raise ToolError(f"execution environment {label!r} ({id}): the worker speaks another protocol ({hello!r})")
        remote.info = hello
        return remote

    # --- identity and status -----------------------------------------------------------------

    @property
    def id(self) -> str:
        return self._id

    @property
    def label(self) -> str:
        return self._label

    @property
    def kind(self) -> str:
        return "remote"

    @property
    def worker_pid(self) -> int:
        return self._proc.pid

    @property
    def scratch(self) -> Path | None:
        """Where the worker saves full bash output (a path on the target)."""
        value = self.info.get("scratch")
        return Path(value) if isinstance(value, str) else None

    def status(self) -> dict[str, Any]:
        if self._closed:
            state, message = "closed", None
        elif self._failure is not None:
            state, message = "error", self._failure
        else:
            state, message = "connected", None
        return {"kind": "remote", "status": state, "message": message, "root": self.info.get("root")}

    # --- the environment -----------------------------------------------------------------------

    async def run_file_operation(self, ctx: ToolContext, operation: FileOperation) -> ToolResult:
        message: dict[str, Any] = {
            "op": "file",
            "scope": scope_to_json(ctx.guard.scope),
            "operation": operation_to_json(operation),
        }
        hook = self.before_open
        on_event = None
        if hook is not None:
            message["hooks"] = ["before_open"]

            def on_event(event: dict[str, Any]) -> None:
                if event.get("event") == "before_open" and isinstance(event.get("path"), str):
                    try:
                        hook(Path(event["path"]))
                    finally:
                        self._send_nowait({"op": "resume", "target": event["id"]})

        return self._result(await self._request(message, ctx, on_event))

    async def run_command(self, ctx: ToolContext, command: str, timeout: float) -> ToolResult:  # noqa: ASYNC109
        message = {
            "op": "bash",
            "scope": scope_to_json(ctx.guard.scope),
            "command": command,
            "timeout": timeout,
            "call_token": ctx.call_token,
            "call_id": ctx.tool_call_id,
        }
        on_update = ctx.on_update

        def on_event(event: dict[str, Any]) -> None:
            if event.get("event") == "output" and isinstance(event.get("text"), str) and on_update is not None:
                on_update(event["text"])

        return self._result(await self._request(message, ctx, on_event))

    async def reap_call(self, token: str) -> int:
        reply = await self._request({"op": "reap", "token": token}, None)
        killed = reply.get("killed") if isinstance(reply, dict) else None
        return killed if isinstance(killed, int) else 0

    async def cleanup(self) -> None:
        """Close the worker's stdin (it stops its commands and exits), wait, then kill if needed."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError, ValueError):
            with self._write_lock:
                if self._proc.stdin is not None:
                    self._proc.stdin.close()
        try:
            await asyncio.to_thread(self._proc.wait, EXIT_GRACE)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            await asyncio.to_thread(self._proc.wait)
        await asyncio.to_thread(self._reader.join)
        await asyncio.to_thread(self._stderr_reader.join)
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()

    # --- calls ---------------------------------------------------------------------------------

    def _result(self, reply: Any) -> ToolResult:
        try:
            return result_from_json(reply)
        except ProtocolError as exc:
            raise ToolError(
                f"execution environment {self._label!r} ({self._id}) sent a malformed result: {exc}"
            ) from None

    def _unavailable(self) -> ToolError:
        reason = "it was closed" if self._closed else self._failure or "it is not connected"
        return ToolError(f"execution environment {self._label!r} ({self._id}) is not available: {reason}")

    async def _request(
        self,
        message: dict[str, Any],
        ctx: ToolContext | None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> Any:
        if self._closed or self._failure is not None:
            raise self._unavailable()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        with self._lock:
            self._next_id += 1
            call_id = self._next_id
            self._pending[call_id] = _Pending(loop, future, on_event)
        try:
            message["id"] = call_id
            if ctx is not None and ctx.abort.is_set():
                message["cancel"] = True  # already cancelled: the worker must not even start it
            line = encode(message)
            if len(line) > _LARGE:
                await asyncio.to_thread(self._write, line)
            else:
                self._write(line)
            try:
                reply = await (future if ctx is None else self._until_reply(future, ctx.abort, call_id))
            except asyncio.CancelledError:
                self._send_nowait({"op": "cancel", "target": call_id})
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(future), CANCEL_GRACE)
                raise
        finally:
            with self._lock:
                self._pending.pop(call_id, None)
        if "error" in reply:
            raise ToolError(str(reply["error"]))
        return reply.get("result")

    async def _until_reply(
        self, future: asyncio.Future[dict[str, Any]], abort: asyncio.Event, call_id: int
    ) -> dict[str, Any]:
        """The reply; when ``abort`` is set first, tell the worker to cancel and keep waiting."""
        if not abort.is_set():
            aborted: asyncio.Future[Any] = asyncio.ensure_future(abort.wait())
            try:
                await asyncio.wait([future, aborted], return_when=asyncio.FIRST_COMPLETED)
            finally:
                aborted.cancel()
        if not future.done():
            self._send_nowait({"op": "cancel", "target": call_id})
        return await future

    def _write(self, line: bytes) -> None:
        stdin = self._proc.stdin
        try:
            with self._write_lock:
                if stdin is None or stdin.closed:
                    raise self._unavailable()
                stdin.write(line)
                stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            raise self._unavailable() from None

    def _send_nowait(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(ToolError):
            self._write(encode(message))

    # --- the reader threads --------------------------------------------------------------------

    def _read_replies(self) -> None:
        stdout = self._proc.stdout
        assert stdout is not None
        reason: str | None = None
        try:
            while line := stdout.readline(MAX_MESSAGE_BYTES + 1):
                if not line.endswith(b"\n"):
                    reason = f"the worker sent a message larger than {MAX_MESSAGE_BYTES} bytes"
                    break
                self._dispatch(decode(line))
        except (ProtocolError, OSError, ValueError) as exc:
            reason = f"the worker broke the protocol: {exc}"
        if reason is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
        self._fail_all(reason)

    def _dispatch(self, message: dict[str, Any]) -> None:
        call_id = message.get("id")
        with self._lock:
            pending = self._pending.get(call_id) if isinstance(call_id, int) else None
        if pending is None:
            return  # a call that gave up (cancelled) or a stray message
        if "event" in message:
            if pending.on_event is not None:
                with contextlib.suppress(RuntimeError):  # the caller's loop is closed
                    pending.loop.call_soon_threadsafe(pending.on_event, message)
            return
        with contextlib.suppress(RuntimeError):
            pending.loop.call_soon_threadsafe(_settle, pending.future, message)

    def _read_stderr(self) -> None:
        stderr = self._proc.stderr
        assert stderr is not None
        while chunk := os.read(stderr.fileno(), 65536):
            with self._lock:
                self._stderr.append(chunk)
                self._stderr_size += len(chunk)
                while self._stderr_size - len(self._stderr[0]) >= _STDERR_TAIL:
                    self._stderr_size -= len(self._stderr.popleft())

    def stderr_tail(self) -> str:
        with self._lock:
            data = b"".join(self._stderr)[-_STDERR_TAIL:]
        return data.decode("utf-8", "backslashreplace").strip()

    def _fail_all(self, reason: str | None) -> None:
        """The worker's stdout ended: describe why, and fail every call still waiting."""
        try:
            code = self._proc.wait(EXIT_GRACE)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            code = self._proc.wait()
        self._stderr_reader.join(1.0)
        if reason is None:
            reason = f"its worker was killed by signal {-code}" if code < 0 else f"its worker exited with code {code}"
        tail = self.stderr_tail()
        if tail:
            reason += f" (stderr: {tail[-500:]})"
        if not self._closed:
            self._failure = reason
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
        error = ToolError(
            f"execution environment {self._label!r} ({self._id}) stopped during the call — {reason}; "
            "the outcome of the call is unknown"
        )
        for each in pending:
            with contextlib.suppress(RuntimeError):
                each.loop.call_soon_threadsafe(_fail, each.future, error)


def _settle(future: asyncio.Future[dict[str, Any]], message: dict[str, Any]) -> None:
    if not future.done():
        future.set_result(message)


def _fail(future: asyncio.Future[dict[str, Any]], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


async def start_worker(
    root: str | os.PathLike[str],
    *,
    id: str = "worker",
    label: str = "Worker process",
    scratch: str | os.PathLike[str] | None = None,
    python: str | None = None,
) -> RemoteExecutionEnv:
    """A ``RemoteExecutionEnv`` whose worker runs on this machine, confined to ``root``."""
    return await RemoteExecutionEnv.start(id, label, worker_command(root, scratch=scratch, python=python))
