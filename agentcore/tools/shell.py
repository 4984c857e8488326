"""Running a shell command on the target: what the ``bash`` tool's command does where it runs
(SPEC T1, T2, X5) — here for the local environment, in the worker for the remote one.

The command runs as the host user via ``/bin/bash -c`` in ``workdir`` and gets its own process
group (``start_new_session``), so a timeout or a cancel (``ctx.abort``) can stop everything it
started: SIGTERM to the group, a short grace, then SIGKILL to the group. The group is also tied
to this process's life (``lifeline``): if the agent dies — even by SIGKILL — a watcher kills the
group, and the call's token (``AGENTCORE_CALL_TOKEN``, from ``ctx.call_token``) lets recovery
reap anything that escaped. Output (stdout and stderr interleaved) streams to ``ctx.on_update``
as it arrives, decoded with the ``display`` convention (bytes that are not UTF-8 as ``\\xNN``).
The result keeps the TAIL of the output, where errors and summaries are; when output is cut,
the whole output is saved to a file whose path is given, and the guard is told that file may be
read. The tool half (schema, arguments) is ``bash``; the environment in between is
``environment``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import tempfile
from pathlib import Path
from typing import Final

from agentcore.errors import ToolError
from agentcore.tools.base import ToolContext, ToolResult
from agentcore.tools.display import decode_bytes, display_name, incremental_decoder
from agentcore.tools.lifeline import new_call_token, process_lifeline
from agentcore.tools.truncate import MAX_BYTES, format_size, truncate_tail

DEFAULT_TIMEOUT: Final = 120.0
MAX_TIMEOUT: Final = 3600.0
KILL_GRACE: Final = 2.0  # seconds between SIGTERM and SIGKILL
DRAIN_GRACE: Final = 1.0  # seconds to wait for the output pipe to close after the shell exited
_KEEP_BYTES: Final = 2 * MAX_BYTES  # in-memory tail; enough for MAX_LINES/MAX_BYTES of tail


def _shell() -> str:
    return "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


class OutputCollector:
    """Keeps a bounded tail in memory and spools the whole output to a file once it is large."""

    def __init__(self, spool_dir: Path | None, call_id: str) -> None:
        self._spool_dir = spool_dir
        self._call_id = re.sub(r"[^A-Za-z0-9_-]", "_", call_id)[:40] or "call"
        self._tail = bytearray()
        self._spool: int | None = None
        self.spool_path: Path | None = None
        self.total_bytes = 0
        self.dropped = False  # the in-memory tail no longer holds the start of the output

    def feed(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        self._tail += chunk
        if self._spool is None:
            if self.total_bytes > MAX_BYTES:
                self._open_spool()  # writes everything so far, this chunk included
        else:
            os.write(self._spool, chunk)
        if self._spool is not None:
            if len(self._tail) > _KEEP_BYTES:
                del self._tail[: len(self._tail) - _KEEP_BYTES]
                self.dropped = True

    def ensure_spooled(self) -> Path:
        """The file holding the whole output, written now if the output never grew large."""
        if self.spool_path is None:
            self._open_spool()
            self.close()
        assert self.spool_path is not None
        return self.spool_path

    def _open_spool(self) -> None:
        directory = self._spool_dir
        if directory is None:
            directory = Path(tempfile.mkdtemp(prefix="agentcore-bash-"))
        else:
            directory.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f"bash-{self._call_id}-", suffix=".log", dir=directory)
        os.write(fd, bytes(self._tail))  # nothing was dropped before the spool existed
        self._spool, self.spool_path = fd, Path(name)

    def close(self) -> None:
        if self._spool is not None:
            os.close(self._spool)
            self._spool = None

    def text(self) -> str:
        text = decode_bytes(bytes(self._tail))
        if self.dropped:  # the first kept line is probably partial
            text = text.split("\n", 1)[-1]
        return text


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def kill_process_group(proc: asyncio.subprocess.Process, reader: asyncio.Task[None]) -> None:
    """SIGTERM the command's process group, give it KILL_GRACE to exit, then SIGKILL the group.

    "Exited" means the shell was reaped and the output pipe closed (every process of the group
    that held it is gone); SIGKILL is sent to the group in any case so a member that ignores
    SIGTERM and closed its output cannot survive.
    """
    pgid = proc.pid
    _signal_group(pgid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(proc.wait(), asyncio.shield(reader)), KILL_GRACE)
    _signal_group(pgid, signal.SIGKILL)
    await proc.wait()


async def _pump(proc: asyncio.subprocess.Process, out: OutputCollector, ctx: ToolContext) -> None:
    assert proc.stdout is not None
    decoder = incremental_decoder()
    while chunk := await proc.stdout.read(65536):
        out.feed(chunk)
        if ctx.on_update is not None:
            text = decoder.decode(chunk)
            if text:
                ctx.on_update(text)


async def _spawn(command: str, ctx: ToolContext) -> asyncio.subprocess.Process:
    """Start the command in a new session tied to the lifeline; a cancel during start-up still
    kills its whole group.

    The process exists before ``create_subprocess_exec`` returns, and asyncio's own clean-up on
    cancellation kills only the shell, so a child it already started would be orphaned. The
    spawn is therefore shielded, and on cancellation its group is killed once it is known.
    """
    lifeline = process_lifeline()
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            _shell(),
            "-c",
            command,
            cwd=ctx.workdir,
            env=lifeline.environment(ctx.call_token or new_call_token()),
            pass_fds=lifeline.pass_fds(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    )
    try:
        return await asyncio.shield(spawn)
    except asyncio.CancelledError:
        proc = await spawn
        _signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()
        raise


async def run_command(command: str, timeout: float, ctx: ToolContext) -> ToolResult:  # noqa: ASYNC109
    if ctx.abort.is_set():
        return ToolResult.text("Command was not started: the run was cancelled.", is_error=True)
    if not ctx.workdir.is_dir():
        raise ToolError(f"working directory {display_name(ctx.workdir)} does not exist")
    out = OutputCollector(ctx.scratch_dir, ctx.tool_call_id)
    proc = await _spawn(command, ctx)
    reader = asyncio.create_task(_pump(proc, out, ctx))
    exited = asyncio.create_task(proc.wait())
    aborted = asyncio.create_task(ctx.abort.wait())
    outcome = "exited"
    try:
        done, _ = await asyncio.wait({exited, aborted}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if exited not in done:
            outcome = "cancelled" if aborted in done else "timeout"
            await kill_process_group(proc, reader)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_GRACE)
        if not reader.done():
            outcome = "held" if outcome == "exited" else outcome
    except BaseException:
        await asyncio.shield(kill_process_group(proc, reader))
        raise
    finally:
        for task in (reader, exited, aborted):
            task.cancel()
        await asyncio.gather(reader, exited, aborted, return_exceptions=True)
        out.close()
    return _result(out, proc.returncode, outcome, timeout, ctx)


def _result(out: OutputCollector, code: int | None, outcome: str, timeout: float, ctx: ToolContext) -> ToolResult:
    tail = truncate_tail(out.text().removesuffix("\n"))  # a final newline does not start another line
    cut = out.dropped or tail.truncated
    notes: list[str] = []
    full_path: Path | None = None
    if cut:
        full_path = out.ensure_spooled()
        ctx.guard.allow_read_file(full_path)
        notes.append(
            f"[Output cut: showing the last {tail.output_lines} lines ({format_size(tail.output_bytes)} of "
            f"{format_size(out.total_bytes)}). Full output: {display_name(full_path)} — use read with offset to "
            "see more.]"
        )
    if outcome == "held":
        notes.append(
            "[The shell exited but a background process still holds its output open; stopped reading. "
            "Redirect background output to a file.]"
        )
    is_error = outcome in ("timeout", "cancelled") or code != 0
    if outcome == "timeout":
        notes.append(f"Command timed out after {timeout:g} seconds; it and its child processes were killed.")
    elif outcome == "cancelled":
        notes.append("Command was cancelled; it and its child processes were killed.")
    elif code is not None and code < 0:
        notes.append(f"Command was killed by signal {-code}.")
    elif code != 0:
        notes.append(f"Command exited with code {code}.")
    body = tail.text if tail.text.strip() else "(no output)"
    result = ToolResult.text(body + ("\n\n" + "\n".join(notes) if notes else ""), is_error=is_error)
    result.structured_content = {
        "exit_code": code,
        "timed_out": outcome == "timeout",
        "cancelled": outcome == "cancelled",
        "full_output_path": display_name(full_path) if full_path else None,
    }
    return result
