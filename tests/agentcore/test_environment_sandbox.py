"""The bubblewrap sandbox, attacked from inside (SPEC X5, T1, T2; issue #22).

Real ``bwrap``, the real worker, the real tools. The shared tool suites already run in the
sandbox (``environment_fixtures``); these cases are about what the sandbox hides: the rest of
the file system (symlinks and absolute paths included), hidden paths the host names, the host's
environment variables, the network, capabilities — and that its processes end with it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentcore.errors import ToolError
from agentcore.extensions.environment import EnvironmentContext, ExecutionTarget
from agentcore.extensions.environment.remote import RemoteExecutionEnv
from agentcore.extensions.environment.sandbox import BubblewrapSandbox
from agentcore.tools.lifeline import find_call_processes
from tests.agentcore.tool_helpers import Target, call, text

SECRET = "TOP-SECRET-BESIDE-THE-WORKSPACE"
DEADLINE = 20.0


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """``ws`` (the workspace, with symlinks planted to the outside) beside ``secrets``."""
    ws, secrets = tmp_path / "ws", tmp_path / "secrets"
    ws.mkdir()
    secrets.mkdir()
    (secrets / "key.txt").write_text(SECRET + "\n")
    (ws / "inside.txt").write_text("inside\n")
    (ws / "to-file").symlink_to(secrets / "key.txt")
    (ws / "to-dir").symlink_to(secrets)
    (ws / "to-root").symlink_to("/")
    return tmp_path


def _exists(path: str) -> bool:
    return os.path.exists(path)


async def _start(sandbox: BubblewrapSandbox, ws: Path) -> RemoteExecutionEnv:
    return await RemoteExecutionEnv.start("sandbox", "Sandbox", sandbox.command(ws))


@pytest.fixture
async def boxed(layout: Path) -> AsyncIterator[RemoteExecutionEnv]:
    env = await _start(BubblewrapSandbox(hidden=(str(layout / "secrets"),)), layout / "ws")
    yield env
    await env.cleanup()


async def test_only_the_workspace_exists_for_bash_and_the_file_tools(boxed: RemoteExecutionEnv, layout: Path) -> None:
    """X5/T2: beside the workspace there is nothing — not by absolute path, `..` or a planted symlink."""
    ws = layout / "ws"
    ctx = Target("sandbox", boxed).ctx(ws, "auto")
    for command in [
        f"cat {layout / 'secrets' / 'key.txt'}",
        "cat to-file",
        "ls to-dir/",
        "cat ../secrets/key.txt",
        "cat /etc/passwd /etc/hostname",
        "ls /home /root/.ssh /var",
    ]:
        result = await call(ctx, "bash", command=command)
        assert result.is_error and SECRET not in text(result), (command, text(result))
    assert text(await call(ctx, "bash", command=f"ls -A {layout}")).split() == ["ws"]
    root = text(await call(ctx, "bash", command="ls -A to-root/")).split()
    assert "etc" not in root and "home" not in root and "usr" in root
    for path in ["to-file", "to-dir", "../secrets/key.txt", str(layout / "secrets"), "to-root"]:
        for name in ("read", "ls", "grep"):
            args = {"pattern": "S"} if name == "grep" else {}
            result = await call(ctx, name, path=path, **args)
            assert result.is_error and SECRET not in text(result), (name, path, text(result))
    assert "inside" in text(await call(ctx, "read", path="inside.txt"))
    assert (layout / "secrets" / "key.txt").read_text() == SECRET + "\n"


async def test_writes_land_in_the_workspace_and_nowhere_else(boxed: RemoteExecutionEnv, layout: Path) -> None:
    """X5: the workspace is writable (the host sees the file); the system is read-only, /tmp private."""
    ws = layout / "ws"
    ctx = Target("sandbox", boxed).ctx(ws, "auto")
    made = await call(ctx, "bash", command="echo made > made.txt && echo private > /tmp/p.txt && cat /tmp/p.txt")
    assert not made.is_error and "private" in text(made)
    assert (ws / "made.txt").read_text() == "made\n"
    for command in ["touch /usr/pwned", "touch /bin/pwned", "mkdir /etc", "rm -f to-root/usr/bin/true"]:
        assert (await call(ctx, "bash", command=command)).is_error, command
    assert not _exists("/usr/pwned") and _exists("/usr/bin/true")


async def test_no_capabilities_and_no_host_environment(layout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """X5: every capability is dropped and the host's variables (secrets) never reach the sandbox."""
    monkeypatch.setenv("HOST_ONLY_SECRET", SECRET)
    env = await _start(BubblewrapSandbox(), layout / "ws")
    try:
        ctx = Target("sandbox", env).ctx(layout / "ws")
        out = text(await call(ctx, "bash", command="env; grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status"))
    finally:
        await env.cleanup()
    assert SECRET not in out and "HOST_ONLY_SECRET" not in out
    assert [line.split()[1] for line in out.splitlines() if line.startswith("Cap")] == ["0000000000000000"] * 3


async def _listener() -> tuple[asyncio.Server, int, asyncio.Event]:
    connected = asyncio.Event()

    def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    return server, int(server.sockets[0].getsockname()[1]), connected


@pytest.mark.parametrize("network", [False, True])
async def test_no_network_unless_allowed(layout: Path, network: bool) -> None:
    """X5: without ``network`` the sandbox has a loopback of its own (the host's 127.0.0.1 is
    unreachable); with it, the host's network is shared."""
    server, port, connected = await _listener()
    env = await _start(BubblewrapSandbox(network=network), layout / "ws")
    try:
        ctx = Target("sandbox", env).ctx(layout / "ws")
        result = await call(ctx, "bash", command=f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
        if network:
            await asyncio.wait_for(connected.wait(), DEADLINE)
    finally:
        await env.cleanup()
        server.close()
        await server.wait_closed()
    assert ("connected" in text(result) and not result.is_error) is network
    assert connected.is_set() is network


async def test_a_workspace_that_would_show_a_hidden_path_is_never_started(layout: Path) -> None:
    """X5: a workspace (or a read-only bind) that is or holds a hidden path is refused before
    anything starts; a workspace *inside* a hidden directory shows only itself."""
    hidden = BubblewrapSandbox(hidden=(str(layout / "ws" / "inside.txt"),))
    with pytest.raises(ToolError, match="must keep hidden"):
        hidden.command(layout / "ws")
    with pytest.raises(ToolError, match="must keep hidden"):
        BubblewrapSandbox(hidden=(str(layout / "secrets"),), read_only=(str(layout),)).command(layout / "ws")
    with pytest.raises(ToolError, match="system directory"):
        BubblewrapSandbox().command("/")
    (layout / "secrets" / "sub").mkdir()
    env = await _start(BubblewrapSandbox(hidden=(str(layout / "secrets"),)), layout / "secrets" / "sub")
    try:
        ctx = Target("sandbox", env).ctx(layout / "secrets" / "sub")
        result = await call(ctx, "bash", command="cat ../key.txt; ls -A ..")
    finally:
        await env.cleanup()
    assert SECRET not in text(result) and text(result).split()[-1] == "sub"


async def test_the_session_option_opens_the_sandbox_and_never_falls_back(layout: Path, tmp_path: Path) -> None:
    """X5: ``option().open`` starts the sandbox on the target's cwd; with no bwrap it is a
    ``ToolError`` naming it (nothing runs on this machine instead)."""
    target = ExecutionTarget(cwd=str(layout / "ws"), allowed_directories=(), permission_policy="workspace")
    context = EnvironmentContext(session_id="s", owner_id="o")
    env = await BubblewrapSandbox().option(id="sbx", label="Sandbox")["open"](target, context)
    try:
        assert env.id == "sbx" and env.status()["root"] == str(layout / "ws")
    finally:
        await env.cleanup()
    missing = BubblewrapSandbox(bwrap=str(tmp_path / "no-bwrap"))
    assert "is not installed" in (missing.problem() or "")
    with pytest.raises(ToolError, match="is not installed"):
        await missing.option()["open"](target, context)
    assert BubblewrapSandbox().problem() is None


async def test_what_bash_started_ends_with_the_sandbox(boxed: RemoteExecutionEnv, layout: Path) -> None:
    """T1/X5: a background job outlives its call but not the sandbox (its PID namespace ends)."""
    ctx = Target("sandbox", boxed).ctx(layout / "ws", call_token="sandbox-bg-token")
    started = await call(ctx, "bash", command="sleep 300 >/dev/null 2>&1 & echo started")
    assert "started" in text(started)
    assert find_call_processes("sandbox-bg-token"), "the background job should be running"
    await boxed.cleanup()
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while find_call_processes("sandbox-bg-token"):  # polls /proc with a deadline
        assert asyncio.get_running_loop().time() < deadline, "the background job outlived the sandbox"
        await asyncio.sleep(0.05)
