"""Which asyncio event loop a Studio server process runs on: uvloop where it is installed.

Why: everything a Studio process does per streamed token is event-loop work — a socket read
for the provider's bytes, a future resolved for the runtime, a task step for each pusher, a
write to every watching page — and at 50 concurrent streams the standard loop's own Python
(``_run_once``, handles, futures, transports) is a measurable share of it. uvloop implements the
same ``asyncio`` interface on libuv in C. Measured with ``bench/studio_overhead.py`` at 50
sessions, ten pairs interleaved with the standard loop on the 2-core VM: Studio's CPU per turn
26.8 ms against 29.0 on average (docs/benchmarks.md, round 11).

``STUDIO_EVENT_LOOP`` chooses: ``auto`` (the default: uvloop when it can be imported — it is
part of Studio's install on Linux and macOS — else the standard loop), ``uvloop`` (required:
an error when it is missing), ``asyncio`` (the standard loop). It is read from the environment,
not from Django's settings, because daphne creates its loop when ``daphne.server`` is imported,
before Django is set up (``studio.daphne_main``).
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Mapping

from django.core.exceptions import ImproperlyConfigured

#: The environment variable, for its error.
SETTING = "STUDIO_EVENT_LOOP"
CHOICES = ("auto", "uvloop", "asyncio")


def chosen(environ: Mapping[str, str] = os.environ) -> str:
    """``STUDIO_EVENT_LOOP`` as one of ``CHOICES``; anything else is refused by name."""
    raw = environ.get(SETTING, "auto")
    value = raw.strip().lower()
    if value not in CHOICES:
        raise ImproperlyConfigured(f"{SETTING} must be one of {', '.join(CHOICES)}, not {raw!r}")
    return value


def install(environ: Mapping[str, str] = os.environ) -> str:
    """Make the chosen loop the one ``asyncio`` creates from now on in this process; returns
    which it is (``uvloop`` or ``asyncio``). Called once, first thing, by a server process's
    entry point (a process-wide setting, as the loop itself is)."""
    choice = chosen(environ)
    if choice == "asyncio":
        return "asyncio"
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError as exc:
        if choice == "uvloop":
            raise ImproperlyConfigured(f"{SETTING}=uvloop, but uvloop is not installed: {exc}") from exc
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def running() -> str:
    """Which loop runs this thread's tasks: ``uvloop`` or ``asyncio`` (for the logs). Called with
    no loop running (a sync view that reaches the host through ``async_to_sync``), the loop
    ``asyncio`` would make now: the installed policy's."""
    try:
        maker: object = asyncio.get_running_loop()
    except RuntimeError:
        maker = asyncio.get_event_loop_policy()
    return "uvloop" if type(maker).__module__.startswith("uvloop") else "asyncio"
