"""Test child processes die with the test run that started them.

A crash test that fails before it kills its child (an assertion, a timeout), or a test run
that is itself killed, would otherwise leave the child running forever — blocked in a stalled
tool, holding a store's lock. ``die_with_parent()`` asks Linux to SIGKILL this process when the
thread that started it exits (``PR_SET_PDEATHSIG``; the tests start children from the event
loop's thread, which lives as long as the run).
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)
