"""Security suite: the file tools cannot escape the workspace (SPEC T2, X5).

Every case asserts a clear tool error naming the path AND that nothing outside the workspace
was read into the result or touched on disk (a byte-and-mtime snapshot of the outside tree is
compared before and after). Every case runs twice: on this machine, and in a remote
environment whose worker process enforces the policy on its side (the symlink swaps then
happen while the worker waits at its ``before_open`` seam).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agentcore.errors import ToolError
from agentcore.tools import PathGuard, ToolContext, ToolResult, builtin_tools, execute_call, prepare_call
from agentcore.tools.guard import PermissionPolicy
from tests.agentcore.tool_helpers import Target, text

pytest_plugins = ("tests.agentcore.environment_fixtures",)  # the `target` fixture: local and remote

SECRET = "TOP-SECRET-OUTSIDE"


def snapshot(root: Path) -> dict[str, tuple[str, int, bytes]]:
    """Everything under ``root`` (without following links): kind, mtime and content."""
    state: dict[str, tuple[str, int, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            info = path.lstat()
            if path.is_symlink():
                state[str(path)] = ("link", info.st_mtime_ns, os.readlink(path).encode())
            elif path.is_dir():
                state[str(path)] = ("dir", info.st_mtime_ns, b"")
            else:
                state[str(path)] = ("file", info.st_mtime_ns, path.read_bytes())
    return state


class Workspace:
    def __init__(self, tmp_path: Path, target: Target) -> None:
        self.target = target
        self.ws = tmp_path / "ws"
        self.outside = tmp_path / "outside"
        self.ws.mkdir()
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text(SECRET + "\n")
        (self.outside / "dir").mkdir()
        (self.outside / "dir" / "inner.txt").write_text(SECRET + " inner\n")
        (self.ws / "ok.txt").write_text("inside\n")
        self.before = snapshot(self.outside)
        self.tools = {tool.name: tool for tool in builtin_tools()}

    def ctx(
        self,
        policy: PermissionPolicy = "workspace",
        before_open: Callable[[Path], None] | None = None,
        allowed_directories: tuple[str, ...] = (),
    ) -> ToolContext:
        return self.target.ctx(self.ws, policy, allowed_directories=allowed_directories, before_open=before_open)

    async def call(self, name: str, ctx: ToolContext | None = None, **args: object) -> ToolResult:
        tool = self.tools[name]
        prepared = prepare_call(tool, args)
        if isinstance(prepared, ToolResult):
            return prepared
        return await execute_call(tool, prepared, ctx or self.ctx())

    def assert_untouched(self) -> None:
        assert snapshot(self.outside) == self.before


@pytest.fixture
def w(tmp_path: Path, target: Target) -> Workspace:
    return Workspace(tmp_path, target)


def file_calls(path: str) -> list[tuple[str, dict[str, object]]]:
    """Every file tool aimed at ``path``."""
    return [
        ("read", {"path": path}),
        ("write", {"path": path, "content": "pwned"}),
        ("edit", {"path": path, "old_text": SECRET, "new_text": "pwned"}),
        ("ls", {"path": path}),
        ("grep", {"pattern": "SECRET", "path": path}),
        ("find", {"pattern": "*", "path": path}),
    ]


async def assert_denied(w: Workspace, path: str, *, needle: str = "outside the workspace") -> None:
    for name, args in file_calls(path):
        result = await w.call(name, **args)
        assert result.is_error, f"{name} {path!r} was allowed: {text(result)}"
        assert needle in text(result), f"{name}: {text(result)}"
        assert SECRET not in text(result)
    w.assert_untouched()


async def test_dotdot_escape_denied(w: Workspace) -> None:
    """T2: `../outside/...` cannot leave the workspace, for every file tool."""
    await assert_denied(w, "../outside/secret.txt")
    await assert_denied(w, "../outside/dir")
    await assert_denied(w, "sub/../../outside/secret.txt")


async def test_absolute_path_denied(w: Workspace) -> None:
    """T2: an absolute path outside the workspace is denied and named in the error."""
    target = str(w.outside / "secret.txt")
    result = await w.call("read", path=target)
    assert result.is_error and target in text(result)
    await assert_denied(w, target)
    await assert_denied(w, str(w.outside))


async def test_symlink_to_etc_inside_workspace(w: Workspace) -> None:
    """T2: a symlink in the workspace pointing at /etc is judged by its real path."""
    os.symlink("/etc", w.ws / "etc")
    result = await w.call("read", path="etc/hostname")
    assert result.is_error and "/etc/hostname" in text(result)
    ls = await w.call("ls", path="etc")
    assert ls.is_error and "outside the workspace" in text(ls)


async def test_symlinked_file_and_parent_directory(w: Workspace) -> None:
    """T2: symlinked files and symlinked parent directories cannot redirect any tool."""
    os.symlink(w.outside / "secret.txt", w.ws / "link.txt")
    os.symlink(w.outside / "dir", w.ws / "linkdir")
    await assert_denied(w, "link.txt")
    await assert_denied(w, "linkdir")
    await assert_denied(w, "linkdir/inner.txt")
    created = await w.call("write", path="linkdir/new/deep.txt", content="x")
    assert created.is_error and "outside the workspace" in text(created)
    assert not (w.outside / "dir" / "new").exists()
    w.assert_untouched()


async def test_tilde_home_denied(w: Workspace) -> None:
    """T2: `~` expands to the home directory, which is outside this workspace."""
    result = await w.call("read", path="~/.bashrc")
    assert result.is_error and "outside the workspace" in text(result)


async def test_toctou_parent_swapped_for_symlink(w: Workspace) -> None:
    """T2: a directory swapped for a symlink between the check and the write is not followed."""
    (w.ws / "sub").mkdir()

    def swap(real: Path) -> None:
        (w.ws / "sub").rmdir()
        os.symlink(w.outside, w.ws / "sub")

    ctx = w.ctx(before_open=swap)
    result = await w.call("write", ctx, path="sub/secret.txt", content="pwned")
    assert result.is_error and "sub/secret.txt" in text(result) and "nothing was touched" in text(result)
    w.assert_untouched()


async def test_toctou_file_swapped_for_symlink(w: Workspace) -> None:
    """T2: the final component swapped for a symlink after the check fails with O_NOFOLLOW (write and edit)."""
    for name, args in [
        ("write", {"content": "pwned"}),
        ("edit", {"old_text": "inside", "new_text": "pwned"}),
        ("read", {}),
    ]:
        (w.ws / "victim.txt").write_text("inside\n")

        def swap(real: Path) -> None:
            (w.ws / "victim.txt").unlink()
            os.symlink(w.outside / "secret.txt", w.ws / "victim.txt")

        result = await w.call(name, w.ctx(before_open=swap), path="victim.txt", **args)
        assert result.is_error, name
        assert "victim.txt" in text(result) and "symbolic link" in text(result), text(result)
        assert SECRET not in text(result)
        (w.ws / "victim.txt").unlink()
    w.assert_untouched()


async def test_toctou_new_directories_swapped(w: Workspace) -> None:
    """T2: while creating parent directories, a component swapped for a symlink stops the write."""
    (w.ws / "a").mkdir()

    def swap(real: Path) -> None:
        (w.ws / "a").rmdir()
        os.symlink(w.outside, w.ws / "a")

    result = await w.call("write", w.ctx(before_open=swap), path="a/b/c.txt", content="pwned")
    assert result.is_error and "nothing was touched" in text(result)
    assert not (w.outside / "b").exists()
    w.assert_untouched()


@pytest.mark.parametrize("name", ["read", "write", "edit", "ls", "grep", "find"])
async def test_very_long_paths(w: Workspace, name: str) -> None:
    """T2: a too-long component or whole path (ENAMETOOLONG) is a clear tool error."""
    args = dict(file_calls("x")[[n for n, _ in file_calls("x")].index(name)][1])
    for bad in ["a" * 300, "/".join(["abcdefgh"] * 600)]:
        args["path"] = bad
        result = await w.call(name, **args)
        assert result.is_error and "too long" in text(result), text(result)
    w.assert_untouched()


@pytest.mark.parametrize("name", ["read", "write", "edit", "ls", "grep", "find"])
async def test_nul_bytes(w: Workspace, name: str) -> None:
    """T2: a NUL byte in a path is a clear tool error."""
    args = dict(file_calls("x")[[n for n, _ in file_calls("x")].index(name)][1])
    args["path"] = "ok.txt\x00../../outside/secret.txt"
    result = await w.call(name, **args)
    assert result.is_error and "NUL" in text(result)
    w.assert_untouched()


@pytest.mark.parametrize("name", ["Привет.txt", "文件/数据.txt", "emoji-🎉/🚀.md", "ünïcödé é.txt"])
async def test_names_in_other_scripts_work_inside(w: Workspace, name: str) -> None:
    """T2: Cyrillic, CJK and emoji names work like any other inside the workspace."""
    assert not (await w.call("write", path=name, content="hello мир\n")).is_error
    assert "hello мир" in text(await w.call("read", path=name))
    edited = await w.call("edit", path=name, old_text="мир", new_text="世界")
    assert not edited.is_error, text(edited)
    assert (w.ws / name).read_text() == "hello 世界\n"
    assert name in text(await w.call("grep", pattern="世界"))
    assert name in text(await w.call("find", pattern=Path(name).name))
    assert Path(name).parts[0] in text(await w.call("ls"))


async def test_symlink_loops(w: Workspace) -> None:
    """T2: symlink loops give a clear error and never hang grep/find."""
    os.symlink("loop", w.ws / "loop")
    os.symlink("l2", w.ws / "l1")
    os.symlink("l1", w.ws / "l2")
    os.symlink(".", w.ws / "self")
    for name, args in file_calls("loop"):
        result = await w.call(name, **args)
        assert result.is_error and "loop" in text(result), f"{name}: {text(result)}"
    result = await w.call("read", path="l1")
    assert result.is_error and "symbolic link" in text(result)
    assert not (await w.call("grep", pattern="inside")).is_error
    found = text(await w.call("find", pattern="*"))
    assert "self/" not in found and "ok.txt" in found
    w.assert_untouched()


async def test_allowed_directories_extend_the_workspace(w: Workspace) -> None:
    """T2: allowed_directories (relative to workdir) become readable and writable; others stay closed."""
    (w.outside / "allowed").mkdir()
    before = snapshot(w.outside)
    ctx = w.ctx(allowed_directories=("../outside/allowed",))
    ok = await w.call("write", ctx, path="../outside/allowed/new.txt", content="fine")
    assert not ok.is_error and (w.outside / "allowed/new.txt").read_text() == "fine"
    denied = await w.call("read", ctx, path="../outside/secret.txt")
    assert denied.is_error and SECRET not in text(denied)
    after = snapshot(w.outside)
    assert {k: v for k, v in after.items() if "allowed" not in k} == {
        k: v for k, v in before.items() if "allowed" not in k
    }


async def test_auto_policy_goes_anywhere(w: Workspace) -> None:
    """T2: with `auto` the file tools may read and write outside the workspace."""
    ctx = w.ctx("auto")
    assert SECRET in text(await w.call("read", ctx, path="../outside/secret.txt"))
    assert not (await w.call("write", ctx, path="../outside/made.txt", content="x")).is_error
    assert (w.outside / "made.txt").read_text() == "x"


async def test_read_only_guard_refuses_writes(w: Workspace) -> None:
    """T2: defence in depth — even if write were called under read-only, the guard refuses it."""
    ctx = w.ctx("read-only")
    result = await w.call("write", ctx, path="ok.txt", content="changed")
    assert result.is_error and "read-only" in text(result)
    assert (w.ws / "ok.txt").read_text() == "inside\n"
    assert "inside" in text(await w.call("read", ctx, path="ok.txt"))
    denied = await w.call("read", ctx, path="../outside/secret.txt")
    assert denied.is_error


def test_guard_resolve_directly(tmp_path: Path) -> None:
    """T2: the guard itself raises ToolError naming the path and its real location."""
    w = Workspace(tmp_path, Target("local", None))
    guard = PathGuard(w.ws)
    os.symlink(w.outside, w.ws / "out")
    with pytest.raises(ToolError) as info:
        guard.resolve("out/secret.txt")
    assert "out/secret.txt" in str(info.value) and str(w.outside / "secret.txt") in str(info.value)
    assert guard.resolve("ok.txt") == (w.ws / "ok.txt").resolve()
