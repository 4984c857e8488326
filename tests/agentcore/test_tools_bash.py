"""Unit tests of the ``bash`` tool: output, exit codes, bounds, timeout and cancel, on this machine and in a
remote environment (SPEC T1, T2, L8, X5).

Process-group tests never sleep to synchronise: the command writes its pids to a file, the
test polls for that file with a deadline, then acts, and finally polls (with a deadline) until
every pid is gone.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from agentcore.tools import ToolContext, ToolResult
from tests.agentcore.tool_helpers import Target, text
from tests.agentcore.tool_helpers import call as call_tool

pytest_plugins = ("tests.agentcore.environment_fixtures",)  # the `target` fixture: local and remote

DEADLINE = 10.0


async def call(ctx: ToolContext, name: str = "bash", **args: object) -> ToolResult:
    return await call_tool(ctx, name, **args)


def is_gone(pid: int) -> bool:
    """True when the process no longer exists or is a zombie (dead, waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def wait_for(predicate: object, what: str) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def file_text(path: object) -> str:
    return Path(str(path)).read_text()


def read_pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()]


async def test_output_and_cwd(tmp_path: Path, target: Target) -> None:
    """T2: the command runs in workdir; stdout and stderr both come back."""
    result = await call(target.ctx(tmp_path), command="pwd; echo to-stderr >&2")
    assert not result.is_error
    body = text(result)
    assert str(tmp_path) in body and "to-stderr" in body
    assert result.structured_content["exit_code"] == 0


async def test_nonzero_exit_is_error_with_code(tmp_path: Path, target: Target) -> None:
    """T1: a non-zero exit is an error result that carries the exit code and the output."""
    result = await call(target.ctx(tmp_path), command="echo partial; exit 7")
    assert result.is_error
    assert "partial" in text(result) and "exited with code 7" in text(result)
    assert result.structured_content["exit_code"] == 7


async def test_no_output(tmp_path: Path, target: Target) -> None:
    """T1: a silent command says so rather than returning nothing."""
    assert "(no output)" in text(await call(target.ctx(tmp_path), command="true"))


async def test_tail_kept_and_full_output_saved_readable(tmp_path: Path, target: Target) -> None:
    """T1: large output keeps the TAIL; the full output is saved to a file the read tool may open."""
    scratch = tmp_path / "scratch"
    ws = tmp_path / "ws"
    ws.mkdir()
    ctx = target.ctx(ws, scratch_dir=scratch)
    result = await call(ctx, command="seq 1 100000")
    assert not result.is_error
    body = text(result)
    assert body.splitlines()[0] == "98001" and "\n100000\n" in body
    full = Path(result.structured_content["full_output_path"])
    assert full.parent == target.scratch(ctx)
    assert file_text(full) == "".join(f"{n}\n" for n in range(1, 100001))
    assert str(full) in body
    # scratch is outside the workspace, yet the model may read the saved output
    read = await call(ctx, "read", path=str(full), offset=99999)
    assert not read.is_error, text(read)
    assert "99999\t99999" in text(read) and "100000\t100000" in text(read)


async def test_many_short_lines_truncated_by_lines(tmp_path: Path, target: Target) -> None:
    """T1: the 2,000-line bound applies even when the output is small in bytes."""
    result = await call(target.ctx(tmp_path), command="for i in $(seq 1 3000); do echo $i; done")
    body = text(result)
    assert body.splitlines()[0] == "1001" and "last 2000 lines" in body
    assert len(file_text(result.structured_content["full_output_path"]).splitlines()) == 3000


async def test_streams_partial_output(tmp_path: Path, target: Target) -> None:
    """T1: output is streamed through ctx.on_update while the command runs."""
    updates: list[str] = []
    ctx = target.ctx(tmp_path, on_update=updates.append)
    await call(ctx, command="echo first; echo second")
    assert "".join(updates) == "first\nsecond\n"


async def test_timeout_kills_whole_process_group(tmp_path: Path, host_target: Target) -> None:
    """T1: on timeout the shell and its background children are killed — no orphans."""
    pids = tmp_path / "pids"
    command = f"sleep 300 & echo $! > {pids}.tmp; echo $$ >> {pids}.tmp; mv {pids}.tmp {pids}; wait"
    result = await call(host_target.ctx(tmp_path), command=command, timeout=1)
    assert result.is_error and "timed out after 1 seconds" in text(result)
    assert result.structured_content["timed_out"] is True
    listed = read_pids(pids)
    await wait_for(lambda: all(is_gone(pid) for pid in listed), "the process group to die")


async def test_cancel_kills_whole_process_group(tmp_path: Path, host_target: Target) -> None:
    """T1/L8: setting ctx.abort stops the command and everything it started, including TERM-ignorers."""
    pids = tmp_path / "pids"
    command = (
        "(trap '' TERM; sleep 300) & child=$!; "
        "sh -c 'sleep 300' & grandchild=$!; "
        f"printf '%s\\n' $$ $child $grandchild > {pids}.tmp; mv {pids}.tmp {pids}; wait"
    )
    ctx = host_target.ctx(tmp_path)
    task = asyncio.create_task(call(ctx, command=command))
    await wait_for(pids.exists, "the command to write its pids")
    listed = read_pids(pids)
    assert not any(is_gone(pid) for pid in listed)
    ctx.abort.set()
    result = await asyncio.wait_for(task, DEADLINE)
    assert result.is_error and "cancelled" in text(result)
    assert result.structured_content["cancelled"] is True
    await wait_for(lambda: all(is_gone(pid) for pid in listed), "the process group to die")


async def test_task_cancellation_kills_group_and_propagates(tmp_path: Path, host_target: Target) -> None:
    """T3: asyncio cancellation of the call propagates, and still leaves no processes behind."""
    pids = tmp_path / "pids"
    ctx = host_target.ctx(tmp_path)
    task = asyncio.create_task(call(ctx, command=f"sleep 300 & echo $! > {pids}.tmp; mv {pids}.tmp {pids}; wait"))
    await wait_for(pids.exists, "the command to write its pid")
    listed = read_pids(pids)
    task.cancel()
    try:
        await task
        raise AssertionError("CancelledError expected")
    except asyncio.CancelledError:
        pass
    await wait_for(lambda: all(is_gone(pid) for pid in listed), "the process group to die")


async def test_runs_as_host_user_not_confined(tmp_path: Path, target: Target) -> None:
    """T2: bash is NOT path-confined; it can read outside the workspace (documented)."""
    outside = tmp_path / "outside.txt"
    outside.write_text("visible")
    ws = tmp_path / "ws"
    ws.mkdir()
    result = await call(target.ctx(ws), command=f"cat {outside}; id -u")
    assert "visible" in text(result) and str(os.getuid()) in text(result)


async def test_invalid_timeout_rejected_by_schema(tmp_path: Path, target: Target) -> None:
    """T3: a negative timeout is rejected by validation, naming the field."""
    result = await call(target.ctx(tmp_path), command="true", timeout=-1)
    assert result.is_error and "timeout" in text(result)


async def test_not_started_when_already_cancelled(tmp_path: Path, target: Target) -> None:
    """L8: a call made after the abort signal never starts the command."""
    ctx = target.ctx(tmp_path)
    ctx.abort.set()
    result = await call(ctx, command=f"touch {tmp_path / 'ran'}")
    assert result.is_error and "not started" in text(result)
    assert not (tmp_path / "ran").exists()
