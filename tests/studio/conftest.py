"""Studio test fixtures: users, the demo model, sessions, and a session host per test."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import django
import pytest
from django.test import Client

# Studio tests need Django configured before their modules import studio.* (pytest-django then
# finds the settings through the environment). Studio modules are imported inside the fixtures.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
django.setup()


@pytest.fixture(autouse=True)
def studio_data_dir(tmp_path: Path, settings: Any) -> Path:
    data = tmp_path / "studio-data"
    data.mkdir()
    settings.STUDIO_DATA_DIR = data
    settings.STUDIO_HOST_MODE = "inprocess"
    return data


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(username="alice", password="alice-pass-123")


@pytest.fixture
def other_user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(username="mallory", password="mallory-pass-123")


@pytest.fixture
def demo_model(db: Any) -> Any:
    from studio.management.commands.studio import ensure_demo_model
    from studio.models import RegisteredModel

    ensure_demo_model()
    return RegisteredModel.objects.get(provider="demo")


@pytest.fixture
def make_session(demo_model: Any, tmp_path: Path) -> Callable[..., Any]:
    """A session in a folder of its own under ``tmp_path``, with a README. Its tools run on the
    server (``tool_isolation="host"``, as staff may choose for any session): tests of tool
    confinement pass ``tool_isolation="sandbox"`` (and a workdir the person may use)."""
    from studio import services
    from studio.models import StudioSession

    def make(owner: Any, **kwargs: Any) -> Any:
        workdir = tmp_path / f"work-{owner.username}-{StudioSession.objects.count()}"
        workdir.mkdir()
        (workdir / "README.md").write_text("# Sample project\nUsed by Studio tests.\n")
        options = {
            "registered_model": demo_model,
            "workdir": str(workdir),
            "permission_policy": "workspace",
            "effort": "medium",
            "mode": "build",
            "tool_isolation": "host",
        } | kwargs
        return services.session_create(owner=owner, **options)

    return make


@pytest.fixture
def logged_in(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


@pytest.fixture
async def host() -> AsyncIterator[Any]:
    """A fresh in-process session host (real agentcore runtimes, demo model)."""
    from studio.host.session_host import SessionHost, set_session_host

    session_host = SessionHost(flush_interval=0.01)
    set_session_host(session_host)
    yield session_host
    await session_host.close()
    set_session_host(None)


@pytest.fixture
async def gated_host() -> AsyncIterator[tuple[Any, Any, Any]]:
    """A session host whose runtimes are real but whose ``HOLD`` prompts wait at a gate
    (see ``fakes``): ``(host, gate, provider server)``."""
    from agentcore.testing.fake_server import FakeProviderServer
    from studio.host.session_host import SessionHost, set_session_host
    from tests.studio.fakes import Gate, gated_factory, responder

    server = FakeProviderServer(responder=responder).start_in_thread()
    gate = Gate()
    session_host = SessionHost(runtime_factory=gated_factory(server, gate), flush_interval=0.01)
    set_session_host(session_host)
    yield session_host, gate, server
    await session_host.close()
    set_session_host(None)
    server.stop_in_thread()


@pytest.fixture
async def code_host(settings: Any, studio_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    """A session host with code mode on and the scripted model of ``tests.e2e.extras_model``
    (its ``HOLD:<token>`` scripts wait for ``<data dir>/release-<token>``)."""
    from studio.host.session_host import SessionHost, set_session_host
    from tests.e2e import extras_model

    settings.STUDIO_CODE_MODE = '{"timeout_ms": 60000}'
    monkeypatch.setenv("STUDIO_DATA_DIR", str(studio_data_dir))  # the hold tool's gate files

    host = SessionHost(runtime_factory=extras_model.open_runtime, flush_interval=0.01)
    set_session_host(host)
    yield host
    await host.close()
    set_session_host(None)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A private redis-server (Debian's, as in production) on a free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        ["/usr/bin/redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while True:  # until it accepts (or fail at once if it died)
            assert server.poll() is None, "redis-server exited"
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(timeout=0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=10)
