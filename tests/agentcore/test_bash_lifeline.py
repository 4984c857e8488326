"""bash commands die with the agent; recovery reaps what escaped (issue #19 "bash outlives the agent"; SPEC D2).

Real processes and real SIGKILL (Linux: the checks read /proc). Nothing sleeps to
synchronise: the tests act on observed progress (a line in a log file, a JSON line from the
child) and then poll, with a deadline, for a condition on /proc — "no live process is left in
the command's group" — before they look for the late write. Once the group is gone nothing
can write ``LATE`` any more, so its absence then means it never appears.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Text, ToolCall
from agentcore.tools.lifeline import CALL_TOKEN_ENV, find_call_processes, process_lifeline, reap_orphaned_call
from tests.agentcore.test_crash_resume import assert_store_invariants, start_child
from tests.agentcore.test_tools_bash import is_gone
from tests.agentcore.tool_helpers import call, make_ctx, text

pytestmark = pytest.mark.crash
ROOT = Path(__file__).resolve().parents[2]
BASH_CHILD = Path(__file__).with_name("bash_child.py")
# Long enough that a command the watcher failed to kill is still visibly alive at every deadline.
SLEEP = 30
GONE_WITHIN = 10.0


async def until(condition: Callable[[], bool], what: str, limit: float = GONE_WITHIN) -> None:
    """Poll a condition on other processes (files, /proc): there is no event to await."""
    try:
        async with asyncio.timeout(limit):
            while not condition():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out after {limit}s waiting for {what}") from None


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def pid_in(path: Path) -> int | None:
    """The pid a command wrote to ``path``, once it is completely written."""
    try:
        content = path.read_text()
    except FileNotFoundError:
        return None
    return int(content) if content.endswith("\n") else None


def log_has(log: Path, word: str) -> bool:
    return log.exists() and word in log.read_text()


# --- the call's environment ------------------------------------------------------------------


async def test_command_carries_its_token_and_nothing_of_the_lifeline(tmp_path: Path) -> None:
    """The token is exported; the lifeline's fd and helper variables are not visible to the command."""
    fd = process_lifeline().read_fd
    command = f'env | grep ^AGENTCORE_; echo "bash_env=[$BASH_ENV]"; [ -e /proc/$$/fd/{fd} ] && echo fd-open || true'
    result = await call(make_ctx(tmp_path, call_token="tok-1"), "bash", command=command)
    assert text(result).splitlines() == [f"{CALL_TOKEN_ENV}=tok-1", "bash_env=[]"]


async def test_the_users_own_bash_env_still_applies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A BASH_ENV the host set is still sourced by the command's shell and by the shells it starts."""
    rc = tmp_path / "rc.sh"
    rc.write_text("export FROM_RC=yes\n")
    monkeypatch.setenv("BASH_ENV", str(rc))
    result = await call(make_ctx(tmp_path), "bash", command="echo outer=$FROM_RC; bash -c 'echo inner=$BASH_ENV'")
    assert text(result).splitlines() == ["outer=yes", f"inner={rc}"]


async def test_wait_in_the_command_does_not_wait_for_the_watcher(tmp_path: Path) -> None:
    """The watcher is not in the command's job table: a bare `wait` returns when the command's jobs end."""
    result = await call(make_ctx(tmp_path), "bash", command="sleep 0.1 & wait; echo waited", timeout=20)
    assert not result.is_error and text(result) == "waited"


async def test_watcher_lives_with_the_call_and_leaves_after_it(tmp_path: Path) -> None:
    """While the command runs a watcher carries its token; after the call it goes away on its own."""
    ctx = make_ctx(tmp_path, call_token="tok-watch")
    running = asyncio.create_task(call(ctx, "bash", command=f"echo $$ > pgid; sleep {SLEEP}"))
    pgid_file = tmp_path / "pgid"

    def watchers() -> list[int]:
        pgid = pid_in(pgid_file)
        if pgid is None:
            return []
        members = group_members(pgid)
        return [pid for pid in find_call_processes("tok-watch") if pid not in members]

    await until(lambda: bool(watchers()), "the watcher")
    assert len(watchers()) == 1, "exactly one watcher, outside the command's process group"
    ctx.abort.set()
    result = await running
    assert result.is_error and "cancelled" in text(result)
    await until(lambda: not find_call_processes("tok-watch"), "the watcher to leave")


# --- the agent dies ----------------------------------------------------------------------------


async def start_bash_child(workdir: Path, token: str, command: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(BASH_CHILD),
        str(workdir),
        token,
        command,
        stdout=asyncio.subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


async def kill(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGKILL)
    await proc.wait()


@pytest.mark.parametrize(
    "command",
    [
        f"echo $$ > pgid; echo started >> log; sleep {SLEEP}; echo LATE >> log",
        f"echo $$ > pgid; ( sleep {SLEEP}; echo LATE >> log ) & echo started >> log; wait",
    ],
    ids=["foreground", "background-job"],
)
async def test_a_running_command_dies_with_the_agent(tmp_path: Path, command: str) -> None:
    """SIGKILL of the agent mid-command kills the command's whole group, background jobs included."""
    log = tmp_path / "log"
    child = await start_bash_child(tmp_path, "tok-running", command)
    await until(lambda: log_has(log, "started") and pid_in(tmp_path / "pgid") is not None, "the command to start", 30)
    pgid = pid_in(tmp_path / "pgid")
    assert pgid is not None
    await kill(child)
    await until(lambda: not group_members(pgid), "the command's group to be gone")
    assert not log_has(log, "LATE")


async def test_a_finished_calls_background_job_dies_with_the_agent(tmp_path: Path) -> None:
    """A job a finished call left running keeps running — until the agent process dies."""
    log = tmp_path / "log"
    command = f"( sleep {SLEEP}; echo LATE >> log ) >/dev/null 2>&1 & echo $! > job; echo started >> log"
    child = await start_bash_child(tmp_path, "tok-finished", command)
    assert child.stdout is not None
    reply = json.loads(await asyncio.wait_for(child.stdout.readline(), 30))
    assert not reply["is_error"], reply
    job = pid_in(tmp_path / "job")
    assert job is not None
    assert not is_gone(job), "the background job outlives the call"
    await kill(child)
    await until(lambda: is_gone(job), "the background job to die with the agent")
    assert log_has(log, "started") and not log_has(log, "LATE")


# --- recovery ----------------------------------------------------------------------------------


async def test_reap_kills_processes_that_left_the_group_and_waits_for_them(tmp_path: Path) -> None:
    """A process that escaped the group (a session of its own) but kept the token is found,
    killed (SIGKILL), and gone on return; processes of other calls are left alone.

    The sleepers are grandchildren: a shell without the token starts each one and reports how
    it ended. Were they this process's own children, their exit status could be stolen — a
    stale ``subprocess.Popen`` of an earlier, reused pid reaps whatever now has that pid (seen
    as asyncio's "Unknown child process … returncode 255")."""

    async def sleeper(token: str) -> tuple[asyncio.subprocess.Process, int]:
        script = f'{CALL_TOKEN_ENV}={token} sleep {SLEEP} & echo $!; wait $!; echo "status $?"'
        env = {k: v for k, v in os.environ.items() if k != CALL_TOKEN_ENV}
        shell = await asyncio.create_subprocess_exec(
            "sh", "-c", script, env=env, stdout=asyncio.subprocess.PIPE, start_new_session=True
        )
        assert shell.stdout is not None
        return shell, int(await shell.stdout.readline())

    (mine, mine_pid), (other, other_pid) = await sleeper("tok-reap"), await sleeper("tok-other")
    try:
        await until(
            lambda: find_call_processes("tok-reap") == [mine_pid] and find_call_processes("tok-other") == [other_pid],
            "both sleepers to exec, each the only carrier of its token",
        )
        assert await reap_orphaned_call("tok-reap") == 1
        assert is_gone(mine_pid), "it had exited when reap returned"
        assert not is_gone(other_pid)
        assert await reap_orphaned_call("tok-reap") == 0
        assert mine.stdout is not None
        assert (await mine.stdout.readline()).decode().strip() == f"status {128 + signal.SIGKILL}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(other_pid, signal.SIGKILL)
        for shell in (mine, other):
            await shell.wait()


async def test_reap_finds_what_a_bash_call_started_outside_its_group(tmp_path: Path) -> None:
    """Through the bash tool: `setsid` takes a process out of reach of the watcher, not of the token."""
    ctx = make_ctx(tmp_path, call_token="tok-setsid")
    result = await call(ctx, "bash", command=f"setsid sleep {SLEEP} >/dev/null 2>&1 < /dev/null & echo $! > escaped")
    assert not result.is_error
    escaped = pid_in(tmp_path / "escaped")
    assert escaped is not None
    await until(lambda: escaped in find_call_processes("tok-setsid") or is_gone(escaped), "setsid to exec")
    assert await reap_orphaned_call("tok-setsid") >= 1
    assert not find_call_processes("tok-setsid")
    await until(lambda: is_gone(escaped), "the reaped process to be reaped by init")


# --- the whole agent, killed and resumed -------------------------------------------------------


@pytest.fixture
async def server():
    async with FakeProviderServer() as fake:
        yield fake


@pytest.mark.parametrize(
    "command",
    [
        f"echo $$ > pgid; echo started >> log; sleep {SLEEP}; echo LATE >> log",
        f"echo $$ > pgid; ( sleep {SLEEP}; echo LATE >> log ) & echo started >> log; wait",
    ],
    ids=["foreground", "background-job"],
)
async def test_bash_killed_with_the_agent_never_finishes_and_resume_reports_unknown(
    server, tmp_path: Path, workspace: Path, command: str
) -> None:
    """D2: SIGKILL the agent while bash runs: the command's group dies with it, the resumed run tells
    the model the outcome is unknown and completes, and `LATE` is never written."""
    db = tmp_path / "lifeline.sqlite"
    log = workspace / "log"
    server.enqueue([ToolCall("bash", {"command": command}, id="b1")])
    child = await start_child(server, db, workspace)
    await until(lambda: log_has(log, "started") and pid_in(workspace / "pgid") is not None, "the command to start", 30)
    pgid = pid_in(workspace / "pgid")
    assert pgid is not None
    await child.kill()
    await until(lambda: not group_members(pgid), "the command's group to die with the agent")
    assert not log_has(log, "LATE")
    server.enqueue([Text("noted")])
    end = await (await start_child(server, db, workspace)).finish()
    assert end["status"] == "completed"
    assert "interrupted" in json.dumps(server.requests[-1].json)
    assert log.read_text() == "started\n"
    assert_store_invariants(db)
