"""The remote execution environment under stress: a real worker process per test (SPEC X5, T1, T2).

The shared tool suites already run against a worker (``environment_fixtures``); these cases
are about the remote side itself — its root as a hard boundary, FIFOs, huge outputs, many calls
at once, a worker that dies or lies, and processes that must die with the worker or the agent.
Nothing sleeps to synchronise: tests wait on files a command wrote and poll /proc with a
deadline for processes to be gone.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentcore.errors import ToolError
from agentcore.extensions.environment.protocol import ProtocolError, operation_from_json, scope_from_json
from agentcore.extensions.environment.remote import RemoteExecutionEnv, start_worker, worker_command
from agentcore.tools.lifeline import find_call_processes
from agentcore.tools.truncate import MAX_BYTES
from tests.agentcore.test_bash_lifeline import group_members, pid_in, until
from tests.agentcore.test_tools_bash import is_gone
from tests.agentcore.tool_helpers import Target, call, text

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("environment_child.py")
SECRET = "TOP-SECRET-OUTSIDE"


@pytest.fixture
async def box(tmp_path: Path) -> AsyncIterator[RemoteExecutionEnv]:
    """A worker confined to ``tmp_path/ws``; ``tmp_path/outside.txt`` exists beside it."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "inside.txt").write_text("inside\n")
    (tmp_path / "outside.txt").write_text(SECRET + "\n")
    env = await start_worker(tmp_path / "ws", id="box", label="Box")
    yield env
    await env.cleanup()


def alive(pid: int) -> bool:
    return not is_gone(pid)


def size_of(path: Path) -> int:
    return path.stat().st_size


async def test_the_root_is_a_boundary_no_policy_crosses(box: RemoteExecutionEnv, tmp_path: Path) -> None:
    """X5/T2: on the target, ``auto`` reaches anywhere *inside the worker's root* and nothing outside it —
    not by `..`, an absolute path or a symlink; bash is not confined (as locally)."""
    ws = tmp_path / "ws"
    (ws / "link.txt").symlink_to(tmp_path / "outside.txt")
    ctx = Target("remote", box).ctx(ws, "auto")
    for path in ["../outside.txt", str(tmp_path / "outside.txt"), "link.txt", "/etc/hostname"]:
        for name, args in [("read", {}), ("write", {"content": "pwned"}), ("ls", {}), ("grep", {"pattern": "S"})]:
            result = await call(ctx, name, path=path, **args)
            assert result.is_error and "outside the root of this execution environment" in text(result), text(result)
            assert SECRET not in text(result)
    assert (tmp_path / "outside.txt").read_text() == SECRET + "\n"
    assert "inside" in text(await call(ctx, "read", path="inside.txt"))
    assert SECRET in text(await call(ctx, "bash", command=f"cat {tmp_path / 'outside.txt'}"))


async def test_a_working_directory_outside_the_root_is_refused(box: RemoteExecutionEnv, tmp_path: Path) -> None:
    """X5: the target refuses a call whose working directory is outside its root — bash included."""
    ctx = Target("remote", box).ctx(tmp_path)
    for name, args in [("ls", {}), ("bash", {"command": f"touch {tmp_path / 'ran'}"})]:
        result = await call(ctx, name, **args)
        assert result.is_error and "is outside the root of this execution environment" in text(result)
    assert not (tmp_path / "ran").exists()
    missing = await call(Target("remote", box).ctx(tmp_path / "ws" / "gone"), "ls")
    assert missing.is_error and "does not exist on the target" in text(missing)


async def test_fifos_never_hang_the_worker(box: RemoteExecutionEnv, tmp_path: Path) -> None:
    """T1: a FIFO on the target is refused by read, write and edit, skipped by grep, listed by ls —
    and the worker keeps answering."""
    ws = tmp_path / "ws"
    os.mkfifo(ws / "pipe")
    ctx = Target("remote", box).ctx(ws)
    async with asyncio.timeout(20):
        read = await call(ctx, "read", path="pipe")
        assert read.is_error and "not a regular file" in text(read)
        write = await call(ctx, "write", path="pipe", content="x")
        assert write.is_error
        edit = await call(ctx, "edit", path="pipe", old_text="a", new_text="b")
        assert edit.is_error
        assert "inside.txt:1: inside" in text(await call(ctx, "grep", pattern="inside"))
        assert "pipe" in text(await call(ctx, "ls")).splitlines()
    assert box.status()["status"] == "connected"


async def test_huge_outputs_stream_whole_and_come_back_bounded(box: RemoteExecutionEnv, tmp_path: Path) -> None:
    """T1: 24 MB of bash output streams through the protocol in full, the result keeps a bounded tail,
    the full output is saved on the target and readable; a 40 MB file reads back bounded."""
    ws = tmp_path / "ws"
    streamed: list[str] = []
    ctx = Target("remote", box).ctx(ws, on_update=streamed.append)
    lines = 240_000
    result = await call(ctx, "bash", command=f"seq -f '%099g' 1 {lines}")  # 100-byte lines, 24 MB
    assert not result.is_error
    assert sum(len(chunk) for chunk in streamed) == lines * 100
    assert len(text(result).encode()) <= MAX_BYTES + 1024
    assert text(result).splitlines()[-3] == f"{lines:099d}"
    full = Path(result.structured_content["full_output_path"])
    assert full.parent == box.scratch and size_of(full) == lines * 100
    tail = await call(ctx, "read", path=str(full), offset=lines)
    assert f"{lines:099d}" in text(tail)
    (ws / "big.log").write_bytes(b"y" * 99 + b"\n" * 1 + (b"z" * 99 + b"\n") * 400_000)
    big = await call(ctx, "read", path="big.log")
    assert len(text(big).encode()) <= MAX_BYTES + 1024 and "of 400001" in text(big)


async def test_many_calls_at_once_are_multiplexed(box: RemoteExecutionEnv, tmp_path: Path) -> None:
    """X5: concurrent calls share one worker; each gets its own answer while a command streams."""
    ws = tmp_path / "ws"
    for n in range(24):
        (ws / f"f{n}.txt").write_text(f"content {n}\n")
    streamed: list[str] = []
    ctx = Target("remote", box).ctx(ws)
    bash_ctx = Target("remote", box).ctx(ws, on_update=streamed.append)
    gate = ws / "gate"
    slow = asyncio.ensure_future(
        call(bash_ctx, "bash", command=f"echo waiting; while [ ! -e {gate} ]; do sleep 0.01; done; echo through")
    )
    reads = await asyncio.gather(*(call(ctx, "read", path=f"f{n}.txt") for n in range(24)))
    assert [text(r).strip() for r in reads] == [f"1\tcontent {n}" for n in range(24)]
    assert not slow.done(), "the command was still running while the reads were answered"
    gate.write_text("")
    assert text(await slow).splitlines() == ["waiting", "through"]
    assert "".join(streamed) == "waiting\nthrough\n"


async def test_a_worker_killed_mid_command_is_a_clear_error_and_takes_the_command_with_it(
    box: RemoteExecutionEnv, tmp_path: Path
) -> None:
    """X5: SIGKILL of the worker mid-call → the call is a tool error naming the environment, the signal
    and an unknown outcome; the command's group dies (the worker's lifeline); later calls fail at once
    and nothing runs locally instead."""
    ws = tmp_path / "ws"
    ctx = Target("remote", box).ctx(ws)
    running = asyncio.ensure_future(call(ctx, "bash", command="echo $$ > pgid; sleep 300; echo LATE > late"))
    await until(lambda: pid_in(ws / "pgid") is not None, "the command to start")
    pgid = pid_in(ws / "pgid")
    assert pgid is not None
    os.kill(box.worker_pid, signal.SIGKILL)
    result = await asyncio.wait_for(running, 30)
    body = text(result)
    assert result.is_error and "'Box' (box) stopped during the call" in body
    assert "killed by signal 9" in body and "outcome of the call is unknown" in body
    await until(lambda: not group_members(pgid), "the command's group to die with the worker")
    status = box.status()
    assert status["status"] == "error" and "signal 9" in status["message"]
    after = await call(ctx, "read", path="inside.txt")
    assert after.is_error and "'Box' (box) is not available: its worker was killed by signal 9" in text(after)
    assert "\tinside" not in text(after), "nothing ran on this machine instead"
    assert not (ws / "late").exists()


async def test_a_worker_dying_during_a_file_operation(box: RemoteExecutionEnv, tmp_path: Path) -> None:
    """X5: the worker dies while it holds a checked path (at its before_open seam) → a clear tool error."""
    ctx = Target("remote", box).ctx(tmp_path / "ws", before_open=lambda _path: os.kill(box.worker_pid, signal.SIGKILL))
    result = await call(ctx, "write", path="inside.txt", content="x")
    assert result.is_error and "stopped during the call" in text(result)
    assert (tmp_path / "ws" / "inside.txt").read_text() == "inside\n"


async def test_cleanup_stops_the_worker_and_what_its_calls_left_running(
    box: RemoteExecutionEnv, tmp_path: Path
) -> None:
    """X5: a background job a finished call left running dies when the environment is cleaned up."""
    ws = tmp_path / "ws"
    ctx = Target("remote", box).ctx(ws)
    result = await call(ctx, "bash", command="sleep 300 >/dev/null 2>&1 & echo $! > job")
    assert not result.is_error
    job = pid_in(ws / "job")
    assert job is not None and alive(job)
    worker = box.worker_pid
    await box.cleanup()
    assert is_gone(worker)
    await until(lambda: is_gone(job), "the background job to die with the worker")
    closed = await call(ctx, "ls")
    assert closed.is_error and "it was closed" in text(closed)
    assert box.status()["status"] == "closed"


@pytest.mark.crash
async def test_the_worker_and_its_commands_die_with_the_agent(tmp_path: Path) -> None:
    """X5: SIGKILL of the agent process → the worker reads end-of-file, stops its commands and exits."""
    ws = tmp_path / "ws"
    ws.mkdir()
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        str(ws),
        "echo $$ > pgid; ( sleep 300; echo LATE > late ) >/dev/null 2>&1 & echo started",
        stdout=asyncio.subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert child.stdout is not None
    reply = json.loads(await asyncio.wait_for(child.stdout.readline(), 60))
    assert reply["result"] == "started" and not reply["is_error"]
    pgid = pid_in(ws / "pgid")
    assert pgid is not None and group_members(pgid), "the background job outlives its call"
    child.send_signal(signal.SIGKILL)
    await child.wait()
    await until(lambda: is_gone(reply["worker_pid"]), "the worker to exit")
    await until(lambda: not group_members(pgid), "the job to die with the worker")
    assert not (ws / "late").exists()


async def test_reap_call_runs_on_the_target(box: RemoteExecutionEnv, tmp_path: Path) -> None:
    """D2/X5: a process that left its group but carries the call token is reaped through the protocol."""
    ws = tmp_path / "ws"
    ctx = Target("remote", box).ctx(ws, call_token="tok-remote")
    command = "setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo $! > escaped"
    assert not (await call(ctx, "bash", command=command)).is_error
    escaped = pid_in(ws / "escaped")
    assert escaped is not None
    await until(lambda: Path(f"/proc/{escaped}/cmdline").read_bytes().startswith(b"sleep"), "setsid to exec")
    assert await box.reap_call("tok-remote") >= 1  # the sleeper (and the call's watcher if still there)
    assert not find_call_processes("tok-remote")
    await until(lambda: is_gone(escaped), "the reaped process to be gone")
    assert await box.reap_call("tok-remote") == 0


async def test_a_worker_that_cannot_start_or_speaks_nonsense(tmp_path: Path) -> None:
    """X5: a missing root, a missing program, a wrong protocol and garbage mid-call are clear errors."""
    with pytest.raises(ToolError, match=r"could not start: its worker exited with code 2 .*is not a directory"):
        await start_worker(tmp_path / "missing", id="m", label="M")
    with pytest.raises(ToolError, match="cannot start"):
        await RemoteExecutionEnv.start("n", "N", [str(tmp_path / "no-such-program")])
    liar = 'import sys; sys.stdin.readline(); print(\'{"id": 1, "result": {"protocol": 99}}\', flush=True)'
    with pytest.raises(ToolError, match="speaks another protocol"):
        await RemoteExecutionEnv.start("l", "L", [sys.executable, "-c", liar])
    garbage = (
        "import sys\n"
        'sys.stdin.readline(); print(\'{"id": 1, "result": {"protocol": 1}}\', flush=True)\n'
        "sys.stdin.readline(); print('this is not json', flush=True); sys.stdin.read()\n"
    )
    env = await RemoteExecutionEnv.start("g", "G", [sys.executable, "-c", garbage])
    try:
        result = await call(Target("remote", env).ctx(tmp_path), "ls")
        assert result.is_error and "broke the protocol" in text(result)
        assert env.status()["status"] == "error"
    finally:
        await env.cleanup()


async def test_malformed_results_and_requests_are_refused(tmp_path: Path) -> None:
    """X5: a result that is not a tool result is an error, not a crash; the worker refuses requests of
    the wrong shape (types are exact: a bool is not an int)."""
    odd = (
        "import sys, json\n"
        'sys.stdin.readline(); print(\'{"id": 1, "result": {"protocol": 1}}\', flush=True)\n'
        "line = json.loads(sys.stdin.readline())\n"
        'print(json.dumps({"id": line["id"], "result": {"content": [{"type": "video"}]}}), flush=True)\n'
        "sys.stdin.read()\n"
    )
    env = await RemoteExecutionEnv.start("o", "O", [sys.executable, "-c", odd])
    try:
        result = await call(Target("remote", env).ctx(tmp_path), "ls")
        assert result.is_error and "malformed result" in text(result)
    finally:
        await env.cleanup()
    for bad in [
        {"name": "read", "args": {"path": 1}},
        {"name": "read", "args": {"path": "a", "offset": True}},
        {"name": "read", "args": {"path": "a", "unknown": 1}},
        {"name": "rm", "args": {}},
        {"name": "read"},
    ]:
        with pytest.raises(ProtocolError):
            operation_from_json(bad)
    with pytest.raises(ProtocolError):
        scope_from_json({"workdir": "/x", "policy": "everything"})
    assert "--root" in worker_command(tmp_path)
