"""The ``target`` fixture: a tool test runs on this machine, in a remote environment and in a
bubblewrap sandbox (SPEC X5).

Loaded as a plugin by the tool test modules (``pytest_plugins``). The remote side is one real
worker process for the whole test session, rooted at pytest's base temp directory (every
``tmp_path`` is below it); the sandbox is the same worker under ``bwrap``, showing only that
directory. Their clients are not bound to an event loop, so each test's loop can use them.
Tests that kill or break a worker start their own; tests that watch processes in the host's
``/proc`` use ``host_target`` (the sandbox's PID namespace is its own).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from agentcore.extensions.environment.remote import RemoteExecutionEnv, start_worker
from tests.agentcore.tool_helpers import Target

ENV_KINDS = ("local", "remote", "sandbox")


@pytest.fixture(scope="session")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteExecutionEnv]:
    """The session's worker, rooted at the base temp dir."""
    env = asyncio.run(start_worker(tmp_path_factory.getbasetemp(), scratch=tmp_path_factory.mktemp("worker-scratch")))
    yield env
    asyncio.run(env.cleanup())


@pytest.fixture(scope="session")
def sandboxed_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteExecutionEnv]:
    """The same worker inside a bubblewrap sandbox that shows only the base temp dir."""
    from agentcore.extensions.environment.sandbox import BubblewrapSandbox

    base = tmp_path_factory.getbasetemp()
    argv = BubblewrapSandbox().command(base, scratch=tmp_path_factory.mktemp("sandbox-scratch"))
    env = asyncio.run(RemoteExecutionEnv.start("sandbox", "Sandbox", argv))
    yield env
    asyncio.run(env.cleanup())


@pytest.fixture(params=ENV_KINDS)
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    yield from _target(request)


@pytest.fixture(params=("local", "remote"))
def host_target(request: pytest.FixtureRequest) -> Iterator[Target]:
    """A target whose processes this test can see in the host's ``/proc`` (the sandbox has a
    PID namespace of its own: its pids mean nothing here)."""
    yield from _target(request)


def _target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "local":
        yield Target("local", None)
        return
    env: RemoteExecutionEnv = request.getfixturevalue("worker" if request.param == "remote" else "sandboxed_worker")
    assert env.status()["status"] == "connected", env.status()
    yield Target(request.param, env)
    env.before_open = None
