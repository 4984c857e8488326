"""The worker process seen from the host: spawn, talk, kill (SPEC X4).

One process per script run (``worker.py``): started with ``python -I -S`` (no site packages
beyond the directory that holds QuickJS, no ``PYTHON*`` variables), an empty environment
(the host's secrets never reach it), ``/`` as its working directory and its own session.
The host kills it at the deadline, on cancel, on a protocol error and when it is done; it
also dies with the host (see the worker's docstring). Nothing here raises into the engine
except ``SandboxEnded`` / ``ProtocolError``, which the script runner turns into results.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from agentcore.extensions.codemode.protocol import (
    MAX_LINE_BYTES,
    ProtocolError,
    WorkerMessage,
    answer_message,
    parse_message,
)

WORKER = Path(__file__).with_name("worker.py")
STDERR_KEPT = 4_000
_CRASHES = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE})


class SandboxUnavailable(Exception):
    """QuickJS is not installed."""


class SandboxEnded(Exception):
    """The worker stopped without finishing the protocol (killed by a limit, crashed)."""

    def __init__(self, message: str, *, memory: bool = False) -> None:
        super().__init__(message)
        self.memory = memory


@functools.cache
def quickjs_location() -> tuple[str, str]:
    """The directory holding ``_quickjs`` and the installed ``quickjs`` version."""
    spec = importlib.util.find_spec("_quickjs")
    if spec is None or spec.origin is None:
        raise SandboxUnavailable(
            "code mode needs QuickJS: pip install 'agentcore-studio[codemode]' (the quickjs package)"
        )
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("quickjs")
    except PackageNotFoundError:  # pragma: no cover - an unpackaged build
        installed = "unknown"
    return str(Path(spec.origin).parent), installed


@functools.cache
def sandbox_fingerprint() -> dict[str, str]:
    """What a recovery must find unchanged: the worker program (its prelude included) and the
    interpreter version. A script re-run on another sandbox could take other branches."""
    _, installed = quickjs_location()
    digest = hashlib.sha256(WORKER.read_bytes())
    digest.update(f"\0quickjs {installed}".encode())
    return {"engine": f"quickjs {installed}", "fingerprint": f"sha256:{digest.hexdigest()[:32]}"}


class SandboxProcess:
    """One running worker."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._stderr = bytearray()
        self._drain = asyncio.ensure_future(self._drain_stderr())

    @classmethod
    async def spawn(cls) -> SandboxProcess:
        location, _ = quickjs_location()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-S",
            str(WORKER),
            location,
            str(os.getpid()),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"LC_ALL": "C.UTF-8"},
            cwd="/",
            start_new_session=True,
            limit=MAX_LINE_BYTES,
        )
        return cls(proc)

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def send(self, message: dict[str, Any]) -> None:
        await self._write((json.dumps(message, ensure_ascii=True) + "\n").encode("ascii"))

    async def answer(self, index: int, ok: bool, value: Any, error: str) -> None:
        await self._write(answer_message(index, ok, value, error))

    async def _write(self, data: bytes) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            stdin.write(data)
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise await self._ended() from None

    async def receive(self) -> WorkerMessage:
        """The next message; ``SandboxEnded`` when the worker stopped, ``ProtocolError`` when
        it said something else than the protocol."""
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            line = await stdout.readline()
        except ValueError:  # longer than MAX_LINE_BYTES
            raise ProtocolError(f"a message longer than {MAX_LINE_BYTES} bytes") from None
        if not line:
            raise await self._ended()
        return parse_message(line)

    async def _ended(self) -> SandboxEnded:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2):
                await self.proc.wait()
                await self._drain
        code = self.proc.returncode
        tail = bytes(self._stderr).decode("utf-8", "replace").strip()
        memory = "MemoryError" in tail or "out of memory" in tail
        if code is not None and -code in _CRASHES:
            # QuickJS is known to crash when a script catches out-of-memory and goes on allocating.
            how = f"the sandbox process crashed ({signal.Signals(-code).name}), e.g. after running out of memory"
        elif code is not None and code < 0:
            how = f"the sandbox process was killed by {signal.Signals(-code).name}"
            if -code == signal.SIGXCPU:
                how += " (its CPU time limit)"
        else:
            how = f"the sandbox process ended unexpectedly (exit status {code})"
        detail = tail.splitlines()[-1] if tail else ""
        return SandboxEnded(f"{how}: {detail}" if detail else how, memory=memory)

    async def _drain_stderr(self) -> None:
        stderr = self.proc.stderr
        assert stderr is not None
        while chunk := await stderr.read(65536):
            self._stderr += chunk
            del self._stderr[:-STDERR_KEPT]

    def kill(self) -> None:
        """SIGKILL now (no await: usable while the caller is being cancelled)."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    async def close(self) -> None:
        """Kill (if still running) and reap the worker."""
        self.kill()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self.proc.wait()
        self._drain.cancel()
        with contextlib.suppress(BaseException):
            await self._drain
