"""Processes started by ``bash`` die with the agent; after a crash, recovery can reap them.

**The lifeline.** This process holds the write end of one pipe for its whole life (never
inherited: ``O_CLOEXEC``, and closed in ``fork``ed children). Every bash command is started
with the read end and a small script sourced through ``BASH_ENV`` (so the command line, its
``$LINENO`` and bash's own error messages stay exactly the user's). Before the command runs,
the script starts a *watcher*: a forked subshell in its own process group, detached from the
job table (the command's ``wait`` does not wait for it), with no hold on the output pipe. The
watcher blocks reading the lifeline:

* EOF — every write end is closed, i.e. this process died (SIGKILL included) → SIGKILL to the
  command's whole process group: the shell, its children, and background jobs such as
  ``( sleep 6; echo LATE ) &``. If this process died before the command even started, the
  read sees EOF at once and the command is killed as it starts.
* Once a second it checks whether the command's process group still exists and exits when it
  is gone. So a command whose background jobs outlive the call stays tied to the agent until
  those jobs end; a command that finished costs one sleeping process for at most a second.

Escapes: a process that leaves the group (``setsid``, a daemon that double-forks into a new
session) is not killed by the watcher — ``reap_orphaned_call`` finds those by their
environment. Without ``/bin/bash`` (``/bin/sh`` fallback) there is no watcher.

**The call token.** Each bash call exports ``AGENTCORE_CALL_TOKEN=<token>`` (from
``ToolContext.call_token``, or a random one) to its command; every descendant inherits it
unless it clears its environment. ``reap_orphaned_call(token)`` (Linux: it scans
``/proc/*/environ``) SIGKILLs every process that still carries the token and returns only
when they are gone, so recovery can make sure an interrupted call is really over before it
tells the model the outcome is unknown.

The lifeline is per OS process, not per runtime: a closed runtime's background jobs keep
running while the process lives (as a program's children do), and die with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Final

CALL_TOKEN_ENV: Final = "AGENTCORE_CALL_TOKEN"
_LIFELINE_FD_ENV: Final = "AGENTCORE_LIFELINE_FD"
_SCRIPT_FD_ENV: Final = "AGENTCORE_LIFELINE_SCRIPT_FD"
_USER_BASH_ENV: Final = "AGENTCORE_USER_BASH_ENV"
_PROC: Final = Path("/proc")

WATCHER_SCRIPT: Final = f"""\
# agentcore: tie this command's process group to the agent process (agentcore/tools/lifeline.py)
unset BASH_ENV
if [ -n "${{{_SCRIPT_FD_ENV}-}}" ]; then eval "exec ${{{_SCRIPT_FD_ENV}}}<&-"; fi
if [ -n "${{{_LIFELINE_FD_ENV}-}}" ]; then
  set -m
  ( exec >/dev/null 2>&1 0<&"${{{_LIFELINE_FD_ENV}}}"
    trap '' INT TERM HUP
    eval "exec ${{{_LIFELINE_FD_ENV}}}<&-"
    while :; do
      read -r -t 1 _
      if [ $? -le 128 ]; then kill -KILL -- -$$; exit 0; fi
      kill -0 -- -$$ 2>/dev/null || exit 0
    done ) & disown
  set +m
  eval "exec ${{{_LIFELINE_FD_ENV}}}<&-"
fi
unset {_LIFELINE_FD_ENV} {_SCRIPT_FD_ENV}
if [ -n "${{{_USER_BASH_ENV}+x}}" ]; then
  export BASH_ENV="${{{_USER_BASH_ENV}}}"; unset {_USER_BASH_ENV}
  if [ -n "$BASH_ENV" ]; then . "$BASH_ENV"; fi
fi
"""
"""Sourced by bash through ``BASH_ENV`` before the command (bash 3.2+: no ``{var}`` redirections).

The watcher's first act is to drop its copy of the output pipe: until it has, the call's
output cannot reach EOF."""


@dataclass(frozen=True, slots=True)
class Lifeline:
    """This process's lifeline: the pipe, and where bash finds the watcher script."""

    pid: int
    read_fd: int
    write_fd: int
    script_path: str  # what BASH_ENV names
    script_fd: int | None  # an fd to pass along when ``script_path`` is /dev/fd/N

    def pass_fds(self) -> tuple[int, ...]:
        return (self.read_fd,) if self.script_fd is None else (self.read_fd, self.script_fd)

    def environment(self, token: str) -> dict[str, str]:
        """The environment of one bash call: the caller's, plus the token and the watcher."""
        env = dict(os.environ)
        if "BASH_ENV" in env:
            env[_USER_BASH_ENV] = env["BASH_ENV"]
        env["BASH_ENV"] = self.script_path
        env[_LIFELINE_FD_ENV] = str(self.read_fd)
        if self.script_fd is not None:
            env[_SCRIPT_FD_ENV] = str(self.script_fd)
        env[CALL_TOKEN_ENV] = token
        return env


class _ProcessLifeline:
    """Holds the one ``Lifeline`` of this OS process; a forked child makes its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: Lifeline | None = None

    def get(self) -> Lifeline:
        current = self._current
        if current is not None and current.pid == os.getpid():
            return current
        with self._lock:
            if self._current is None or self._current.pid != os.getpid():
                self._current = _open_lifeline()
            return self._current

    def forget_in_child(self) -> None:
        """After ``fork``: the child must not keep the parent's write end (it would keep the
        parent's commands alive after the parent died)."""
        current, self._current = self._current, None
        self._lock = threading.Lock()
        if current is not None:
            for fd in (current.read_fd, current.write_fd, current.script_fd):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)


def _open_lifeline() -> Lifeline:
    read_fd, write_fd = os.pipe()  # both non-inheritable
    script = WATCHER_SCRIPT.encode()
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None and os.path.isdir("/proc/self/fd"):
        # Opening /dev/fd/N of a memfd re-opens it from the start, for every bash that sources it.
        script_fd = memfd_create("agentcore-bash-lifeline", os.MFD_CLOEXEC)
        os.write(script_fd, script)
        return Lifeline(os.getpid(), read_fd, write_fd, f"/dev/fd/{script_fd}", script_fd)
    fd, path = tempfile.mkstemp(prefix="agentcore-bash-lifeline-", suffix=".sh")
    with os.fdopen(fd, "wb") as handle:
        handle.write(script)
    return Lifeline(os.getpid(), read_fd, write_fd, path, None)


_PROCESS_LIFELINE: Final = _ProcessLifeline()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_PROCESS_LIFELINE.forget_in_child)


def process_lifeline() -> Lifeline:
    """The lifeline of the current process (created on first use)."""
    return _PROCESS_LIFELINE.get()


def new_call_token() -> str:
    """A fresh identity for one tool call: unique across processes and stores."""
    return secrets.token_hex(16)


def find_call_processes(token: str) -> list[int]:
    """Pids of live processes whose environment carries ``AGENTCORE_CALL_TOKEN=<token>``.

    Linux only (``/proc``); elsewhere, and for processes this user may not inspect, nothing is
    found. Zombies have no environment left and are never listed.
    """
    if not token or not _PROC.is_dir():
        return []
    needle = f"\0{CALL_TOKEN_ENV}={token}\0".encode()
    me = os.getpid()
    found = []
    with contextlib.suppress(OSError), os.scandir(_PROC) as entries:
        for entry in entries:
            if entry.name.isdigit() and int(entry.name) != me and _carries(entry.name, needle):
                found.append(int(entry.name))
    return found


def _carries(pid: str | int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    return needle in b"\0" + data + b"\0"


async def reap_orphaned_call(token: str, *, timeout: float = 10.0) -> int:  # noqa: ASYNC109
    """SIGKILL every process that carries ``token`` and return once all of them are gone.

    For recovery: the process that ran the call died, so anything still carrying its token is
    a leftover (normally the watcher already killed the group; this also catches processes
    that left it). Returns how many processes were killed. Raises ``TimeoutError`` if some
    survive ``timeout`` seconds after SIGKILL (only a process stuck in the kernel can).
    Linux only; elsewhere it returns 0 at once.
    """
    if not token or not _PROC.is_dir():
        return 0
    needle = f"\0{CALL_TOKEN_ENV}={token}\0".encode()
    killed = 0
    async with asyncio.timeout(timeout):
        while pids := await asyncio.to_thread(find_call_processes, token):
            # A process may fork until it is killed; the next scan finds what it forked.
            waits = [_kill_and_wait(pid, needle) for pid in pids]
            killed += sum(await asyncio.gather(*waits))
    return killed


async def _kill_and_wait(pid: int, needle: bytes) -> int:
    """1 if ``pid`` still carried ``needle`` and was killed (and is now gone), else 0."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:  # pragma: no cover - Linux < 5.3
        return await _kill_and_poll(pid, needle)
    try:
        pidfd = pidfd_open(pid)
    except OSError:  # already gone
        return 0
    try:
        # Checked after pidfd_open: the pidfd names one process, so a recycled pid cannot be hit.
        if not _carries(pid, needle):
            return 0
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        await _readable(pidfd)  # a pidfd becomes readable when its process has exited
        return 1
    finally:
        os.close(pidfd)


async def _readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


async def _kill_and_poll(pid: int, needle: bytes) -> int:  # pragma: no cover - Linux < 5.3
    if not _carries(pid, needle):
        return 0
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    while _carries(pid, needle):  # noqa: ASYNC110 - without pidfd there is no exit event to wait on
        await asyncio.sleep(0.01)
    return 1
