"""Shared fixtures: a scripted fake provider server on loopback and runtimes pointed at it."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from agentcore import AgentRuntime, create_agent
from agentcore.testing.fake_server import FakeProviderServer
from tests.helpers import SleepRecorder
from tests.pg import PostgresCluster

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "false")

API_KINDS = ("openai-responses", "anthropic-messages", "openai-completions")

#: Test modules that run on both event loops Studio's processes can run on (studio.event_loop):
#: the code that drives asyncio transports itself — agentcore's httpcore backend, Studio's
#: single-machine channel layer, and a runtime streaming through them.
BOTH_LOOPS = frozenset({"test_asyncio_network.py", "test_local_layer.py", "test_connection_lanes.py"})


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, Callable[[], Any]]:
    """pytest-asyncio's hook: the ``BOTH_LOOPS`` modules' tests run once on asyncio's own loop
    and once on uvloop's (the default of Studio's servers); every other test on asyncio's (one
    factory: the test's id is unchanged)."""
    if item.path.name not in BOTH_LOOPS:
        return {"asyncio": asyncio.new_event_loop}
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.fixture
async def fake_server() -> AsyncIterator[FakeProviderServer]:
    async with FakeProviderServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A private PostgreSQL server for the whole test session, started on first use (~1-2 s) and
    stopped with ``pg_ctl stop -m immediate``. Tests isolate themselves by store name (or schema)."""
    cluster = PostgresCluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_option(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """The storage option of a ``create_agent`` call, once per built-in backend: memory (no
    option), a fresh SQLite file, a fresh store in the session's private PostgreSQL server."""
    if request.param == "memory":
        return {}
    if request.param == "sqlite":
        return {"database_path": str(tmp_path / "store.sqlite")}
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return {"database_url": f"{cluster.dsn}?store=t-{uuid.uuid4().hex[:12]}"}


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "README.md").write_text("# Demo project\nA tiny project used by the tests.\n")
    (root / "main.py").write_text("print('hello')\n")
    return root


AgentFactory = Callable[..., Awaitable[AgentRuntime]]


@pytest.fixture
async def make_agent(
    fake_server: FakeProviderServer, workspace: Path, sleeps: SleepRecorder
) -> AsyncIterator[AgentFactory]:
    """Create runtimes against the fake server; all are closed at teardown."""
    created: list[AgentRuntime] = []

    async def factory(api_kind: str = "openai-responses", **options: Any) -> AgentRuntime:
        options.setdefault("provider", "fake")
        options.setdefault("model", "fake-model")
        options.setdefault("base_url", fake_server.base_url)
        options.setdefault("api_key", "test-key")
        options.setdefault("workdir", str(workspace))
        options.setdefault("sleep", sleeps)
        runtime = await create_agent(api_kind=api_kind, **options)
        created.append(runtime)
        return runtime

    yield factory
    for runtime in created:
        await runtime.close()
