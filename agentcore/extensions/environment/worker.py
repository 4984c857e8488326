"""The remote environment's worker: runs the target half of the built-in tools under one root.

Started as ``python -m agentcore.extensions.environment.worker --root DIR [--scratch DIR]``
(locally by ``RemoteExecutionEnv``; over SSH or in a sandbox the same command on the other
side), it speaks the JSON-lines protocol of ``protocol`` on stdin/stdout and runs exactly the
code the local environment runs — ``FileOperation.run`` under a ``PathGuard``, bash's
``run_command`` — so every guarantee of the local tools holds on the target: the policy is
decided on the target's ``realpath`` and files are opened with ``O_NOFOLLOW``; names that are
not UTF-8 are shown and addressed as ``\\xNN``; outputs are bounded; commands run in their own
process group tied to *this* process's lifeline.

On top of the call's permission policy, the worker confines every file tool to ``--root``
(``PathGuard.boundary``), ``auto`` included, and refuses a working directory outside it. bash
runs with its cwd in the root but is not path-confined (as locally). The full output of a cut
bash command is saved under ``--scratch`` (default: a new temporary directory, removed at
exit) and may be read back with ``read``.

The worker ends when stdin ends (the client closed it or died): it cancels its calls — which
kills their process groups — and exits. If it is killed outright, the lifeline kills them.
Only protocol messages go to the real stdout: file descriptor 1 is pointed at stderr so
nothing else can corrupt the stream.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentcore.errors import ToolError
from agentcore.extensions.environment.protocol import (
    MAX_MESSAGE_BYTES,
    PROTOCOL_VERSION,
    ProtocolError,
    decode,
    encode,
    operation_from_json,
    result_to_json,
    scope_from_json,
)
from agentcore.tools.base import ToolContext
from agentcore.tools.display import display_name
from agentcore.tools.guard import PathGuard, PathScope
from agentcore.tools.lifeline import reap_orphaned_call
from agentcore.tools.shell import DEFAULT_TIMEOUT, MAX_TIMEOUT, run_command


@dataclass(slots=True)
class _Call:
    abort: asyncio.Event = field(default_factory=asyncio.Event)
    resume: asyncio.Future[None] | None = None
    task: asyncio.Task[None] | None = None


class Worker:
    """Serves one client on a reader/writer pair (see the module docstring)."""

    def __init__(self, root: Path, scratch: Path, writer: asyncio.StreamWriter) -> None:
        self.root = root
        self.scratch = scratch
        self._writer = writer
        self._calls: dict[int, _Call] = {}
        self._guards: dict[PathScope, PathGuard] = {}
        self._readable: set[Path] = set()  # saved bash output, readable under any scope

    def send(self, message: dict[str, Any]) -> None:
        """Queue one message (whole lines, from the loop thread only, so lines never interleave)."""
        self._writer.write(encode(message))

    async def serve(self, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                self._accept(line)
        finally:
            calls = [call.task for call in self._calls.values() if call.task is not None]
            for task in calls:
                task.cancel()
            await asyncio.gather(*calls, return_exceptions=True)

    def _accept(self, line: bytes) -> None:
        """Handle one line. Registers a call before anything can await, so a ``cancel`` right
        behind its request always finds it."""
        try:
            message = decode(line)
        except ProtocolError as exc:
            print(f"agentcore worker: {exc}", file=sys.stderr)
            return
        op = message.get("op")
        target = message.get("target")
        if op in ("cancel", "resume"):
            call = self._calls.get(target) if isinstance(target, int) else None
            if call is not None and op == "cancel":
                call.abort.set()
            elif call is not None and call.resume is not None and not call.resume.done():
                call.resume.set_result(None)
            return
        call_id = message.get("id")
        if not isinstance(call_id, int) or isinstance(call_id, bool) or call_id in self._calls:
            print(f"agentcore worker: a request needs a new integer id (got {call_id!r})", file=sys.stderr)
            return
        call = self._calls[call_id] = _Call()
        if message.get("cancel") is True:
            call.abort.set()
        call.task = asyncio.ensure_future(self._handle(call_id, call, message))

    async def _handle(self, call_id: int, call: _Call, message: dict[str, Any]) -> None:
        try:
            result = await self._run(call_id, call, message)
            reply: dict[str, Any] = {"id": call_id, "result": result}
        except ToolError as exc:
            reply = {"id": call_id, "error": str(exc)}
        except ProtocolError as exc:
            reply = {"id": call_id, "error": f"protocol error: {exc}"}
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug on the target: report it, keep serving
            reply = {"id": call_id, "error": f"the execution environment failed: {type(exc).__name__}: {exc}"}
        finally:
            self._calls.pop(call_id, None)
        try:
            self.send(reply)
        except ToolError as exc:  # the result itself was too large to send
            self.send({"id": call_id, "error": str(exc)})
        await self._writer.drain()

    async def _run(self, call_id: int, call: _Call, message: dict[str, Any]) -> Any:
        op = message.get("op")
        if op == "hello":
            return {
                "protocol": PROTOCOL_VERSION,
                "root": str(self.root),
                "scratch": str(self.scratch),
                "pid": os.getpid(),
            }
        if op == "file":
            hooks = message.get("hooks") or []
            guard = self._guard(scope_from_json(message.get("scope")), self._hook(call_id, call) if hooks else None)
            operation = operation_from_json(message.get("operation"))
            return result_to_json(await asyncio.to_thread(operation.run, guard, call.abort.is_set))
        if op == "bash":
            return result_to_json(await self._bash(call_id, call, message))
        if op == "reap":
            token = message.get("token")
            if not isinstance(token, str):
                raise ProtocolError("reap needs a token")
            return {"killed": await reap_orphaned_call(token)}
        raise ProtocolError(f"unknown op {op!r}")

    def _guard(self, scope: PathScope, before_open: Callable[[Path], None] | None) -> PathGuard:
        """The guard for ``scope`` on this target; its working directory must be inside the root."""
        if before_open is None and (cached := self._guards.get(scope)) is not None:
            return cached
        real = Path(os.path.realpath(scope.workdir))
        if not (real == self.root or real.is_relative_to(self.root)):
            raise ToolError(
                f"working directory {display_name(scope.workdir)} is outside the root of this execution environment "
                f"({display_name(self.root)})"
            )
        if not real.is_dir():
            raise ToolError(f"working directory {display_name(scope.workdir)} does not exist on the target")
        guard = PathGuard(
            scope.workdir,
            scope.policy,
            scope.allowed_directories,
            before_open=before_open,
            boundary=self.root,
            readable=self._readable,
        )
        if before_open is None:
            self._guards[scope] = guard
        return guard

    def _hook(self, call_id: int, call: _Call) -> Callable[[Path], None]:
        """``before_open`` for a worker thread: report the path, wait for the client's ``resume``."""
        loop = asyncio.get_running_loop()

        async def report(path: str) -> None:
            call.resume = loop.create_future()
            self.send({"id": call_id, "event": "before_open", "path": path})
            await call.resume

        def before_open(real: Path) -> None:
            asyncio.run_coroutine_threadsafe(report(str(real)), loop).result()

        return before_open

    async def _bash(self, call_id: int, call: _Call, message: dict[str, Any]) -> Any:
        command = message.get("command")
        timeout = message.get("timeout", DEFAULT_TIMEOUT)
        token = message.get("call_token")
        if not isinstance(command, str) or not command:
            raise ProtocolError("bash needs a command")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT:
            raise ProtocolError("bash timeout must be a number of seconds")
        if token is not None and not isinstance(token, str):
            raise ProtocolError("call_token must be a string")
        guard = self._guard(scope_from_json(message.get("scope")), None)

        def output(text: str) -> None:
            self.send({"id": call_id, "event": "output", "text": text})

        ctx = ToolContext(
            workdir=Path(guard.scope.workdir),
            guard=guard,
            abort=call.abort,
            tool_call_id=str(message.get("call_id") or f"call-{call_id}"),
            scratch_dir=self.scratch,
            on_update=output,
            call_token=token,
        )
        return await run_command(command, float(timeout), ctx)


async def serve_stdio(root: Path, scratch: Path, stdin_fd: int, stdout_fd: int) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_MESSAGE_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(stdin_fd, "rb", 0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(stdout_fd, "wb", 0))
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    try:
        await Worker(root, scratch, writer).serve(reader)
    finally:
        with contextlib.suppress(Exception):
            await writer.drain()
        transport.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentcore-env-worker", description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the directory every file tool is confined to")
    parser.add_argument("--scratch", help="where bash saves full output (default: a temporary directory)")
    args = parser.parse_args(argv)
    root = Path(os.path.realpath(args.root))
    if not root.is_dir():
        print(f"agentcore worker: root {display_name(root)} is not a directory", file=sys.stderr)
        return 2
    own_scratch = args.scratch is None
    scratch = Path(tempfile.mkdtemp(prefix="agentcore-env-")) if own_scratch else Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    # The protocol gets private copies of stdin/stdout; fd 0 reads nothing and fd 1 goes to stderr.
    stdin_fd, stdout_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    try:
        asyncio.run(serve_stdio(root, scratch, stdin_fd, stdout_fd))
    except KeyboardInterrupt:
        pass
    finally:
        if own_scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
