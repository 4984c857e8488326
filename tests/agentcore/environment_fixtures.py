"""The ``target`` fixture: a tool test runs on this machine and in a remote environment (SPEC X5).

Loaded as a plugin by the tool test modules (``pytest_plugins``). The remote side is one real
worker process for the whole test session, rooted at pytest's base temp directory (every
``tmp_path`` is below it); its client is not bound to an event loop, so each test's loop can
use it. Tests that kill or break a worker start their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from agentcore.extensions.environment.remote import RemoteExecutionEnv, start_worker
from tests.agentcore.tool_helpers import Target

ENV_KINDS = ("local", "remote")


@pytest.fixture(scope="session")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteExecutionEnv]:
    """The session's worker, rooted at the base temp dir."""
    env = asyncio.run(start_worker(tmp_path_factory.getbasetemp(), scratch=tmp_path_factory.mktemp("worker-scratch")))
    yield env
    asyncio.run(env.cleanup())


@pytest.fixture(params=ENV_KINDS)
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "local":
        yield Target("local", None)
        return
    env: RemoteExecutionEnv = request.getfixturevalue("worker")
    assert env.status()["status"] == "connected", env.status()
    yield Target("remote", env)
    env.before_open = None
