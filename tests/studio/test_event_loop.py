"""Studio's server processes run on uvloop (``studio.event_loop``, ``studio.daphne_main``; issue 25).

``STUDIO_EVENT_LOOP`` is read from the environment before Django is set up, so the choice and
its refusals are checked here as functions, and what a process ends up running on in a fresh
interpreter of its own (the loop policy is process-wide): the entry point daphne is started
with, and the loop ``asyncio.run`` then gives. A real daphne started that way is in
``tests/e2e/test_studio_e2e.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from studio import event_loop
from tests.e2e.cluster import answers, stop, wait_until
from tests.e2e.conftest import _free_port

ROOT = Path(__file__).resolve().parents[2]

#: Installs the loop as ``studio.daphne_main`` does, then reports what asyncio.run runs on.
PROBE = """
import asyncio, sys
BLOCK
from studio import event_loop
installed = event_loop.install()
async def main():
    return event_loop.running()
print(installed, asyncio.run(main()), event_loop.running())  # the last with no loop running
"""


def _clean_env(data_dir: Path | None = None, **settings: str) -> dict[str, str]:
    """This process's environment without its Django and Studio settings, plus ``settings``
    (and ``data_dir`` as ``STUDIO_DATA_DIR``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STUDIO_", "DJANGO_"))}
    if data_dir is not None:
        env["STUDIO_DATA_DIR"] = str(data_dir)
    return env | {"PYTHONPATH": str(ROOT), **settings}


def _probe(value: str | None, *, without_uvloop: bool = False) -> subprocess.CompletedProcess[str]:
    settings = {} if value is None else {event_loop.SETTING: value}
    block = "sys.modules['uvloop'] = None  # as if it were not installed" if without_uvloop else ""
    return subprocess.run(
        [sys.executable, "-c", PROBE.replace("BLOCK", block)],
        cwd=ROOT,
        env=_clean_env(**settings),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, "auto"), ("auto", "auto"), ("uvloop", "uvloop"), (" AsyncIO ", "asyncio")],
)
def test_the_choice_is_read_from_the_environment(value: str | None, expected: str) -> None:
    environ = {} if value is None else {event_loop.SETTING: value}
    assert event_loop.chosen(environ) == expected


@pytest.mark.parametrize("value", ["", "trio", "uv loop", "asyncio\udcff"])
def test_an_unknown_loop_is_refused_by_name(value: str) -> None:
    with pytest.raises(ImproperlyConfigured) as refused:
        event_loop.chosen({event_loop.SETTING: value})
    message = str(refused.value)
    assert event_loop.SETTING in message and repr(value) in message
    assert all(choice in message for choice in event_loop.CHOICES)


@pytest.mark.parametrize(("value", "expected"), [(None, "uvloop uvloop uvloop"), ("uvloop", "uvloop uvloop uvloop")])
def test_a_server_process_runs_on_uvloop_by_default(value: str | None, expected: str) -> None:
    done = _probe(value)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == expected.split()


def test_the_standard_loop_is_kept_when_asked_for() -> None:
    done = _probe("asyncio")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["asyncio", "asyncio", "asyncio"]


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused() -> None:
    fallback = _probe("auto", without_uvloop=True)
    assert fallback.returncode == 0, fallback.stderr
    assert fallback.stdout.split() == ["asyncio", "asyncio", "asyncio"]
    refused = _probe("uvloop", without_uvloop=True)
    assert refused.returncode != 0
    assert "ImproperlyConfigured" in refused.stderr and "STUDIO_EVENT_LOOP=uvloop" in refused.stderr


def test_manage_py_studio_serves_with_daphne_on_the_entry_point_that_installs_the_loop(tmp_path: Path) -> None:
    """``manage.py studio`` replaces itself with ``python -m studio.daphne_main`` (not ``-m
    daphne``: daphne makes its loop when it is imported), which serves the login page."""
    port = _free_port()
    env = _clean_env(tmp_path / "data", STUDIO_WORKERS="0")
    log = tmp_path / "studio.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "studio", "--port", str(port)], cwd=ROOT, env=env, stdout=out, stderr=out
        )
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/login/"), "manage.py studio", process, log)
        command = Path(f"/proc/{process.pid}/cmdline").read_bytes().split(b"\0")
        assert command[1:3] == [b"-m", b"studio.daphne_main"], command
        assert b"uvloop" in Path(f"/proc/{process.pid}/maps").read_bytes()  # its loop's module is loaded
    finally:
        stop(process)


def test_manage_py_studio_refuses_an_unknown_loop_before_it_prepares_anything(tmp_path: Path) -> None:
    """A bad ``STUDIO_EVENT_LOOP`` stops ``manage.py studio`` with the setting's name, before it
    migrates or makes a first user (not later, in the daphne it would have started)."""
    data_dir = tmp_path / "data"
    env = _clean_env(data_dir, **{event_loop.SETTING: "trio"})
    done = subprocess.run(
        [sys.executable, "manage.py", "studio", "--no-serve"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "STUDIO_EVENT_LOOP" in done.stderr and "'trio'" in done.stderr
    assert not (data_dir / "initial-login.txt").exists()
    assert not any(data_dir.glob("*.sqlite3"))
