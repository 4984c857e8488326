"""Unit tests of ``grep``, ``find`` and ``ls`` through the executor, on a real temp dir, on this machine and in a
remote environment (SPEC T1, T2, X5)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.agentcore.tool_helpers import Target, call, text

pytest_plugins = ("tests.agentcore.environment_fixtures",)  # the `target` fixture: local and remote


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "src/pkg").mkdir(parents=True)
    (tmp_path / "src/main.py").write_text("import os\n\ndef main():\n    return TODO_fix\n")
    (tmp_path / "src/pkg/util.py").write_text("# helper\nTODO_fix = 1\nother = 2\n")
    (tmp_path / "src/pkg/view.ts").write_text("const todo_fix = 3;\n")
    (tmp_path / "README.md").write_text("Привет МИР\nTODO_fix in docs\n")
    (tmp_path / "blob.bin").write_bytes(b"TODO_fix\x00\x01\x02")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git/config").write_text("TODO_fix in git\n")
    (tmp_path / ".hidden").write_text("TODO_fix hidden\n")
    return tmp_path


async def test_grep_regex_lists_path_and_line(tree: Path, target: Target) -> None:
    """T1: grep prints path:line: text for each matching line, skipping binaries and .git."""
    body = text(await call(target.ctx(tree), "grep", pattern=r"TODO_\w+"))
    assert "src/main.py:4:     return TODO_fix" in body
    assert "src/pkg/util.py:2: TODO_fix = 1" in body
    assert "README.md:2: TODO_fix in docs" in body
    assert ".hidden:1: TODO_fix hidden" in body
    assert "blob.bin" not in body and ".git" not in body
    assert "view.ts" not in body  # case-sensitive by default


async def test_grep_ignore_case_including_non_ascii(tree: Path, target: Target) -> None:
    """T1: ignore_case works for ASCII and for other scripts (Cyrillic)."""
    ctx = target.ctx(tree)
    assert "src/pkg/view.ts:1:" in text(await call(ctx, "grep", pattern="TODO_FIX", ignore_case=True))
    assert "README.md:1: Привет МИР" in text(await call(ctx, "grep", pattern="мир", ignore_case=True))


async def test_grep_literal_and_invalid_regex(tree: Path, target: Target) -> None:
    """T1: literal searches plain text; an invalid regex is a clear error suggesting literal."""
    ctx = target.ctx(tree)
    (tree / "paren.txt").write_text("call(a.b)\ncallXaYb\n")
    literal = text(await call(ctx, "grep", pattern="(a.b)", literal=True))
    assert "paren.txt:1:" in literal and "paren.txt:2:" not in literal
    bad = await call(ctx, "grep", pattern="(unclosed")
    assert bad.is_error and "invalid regular expression" in text(bad) and "literal" in text(bad)


async def test_grep_glob_filters(tree: Path, target: Target) -> None:
    """T1: glob filters by name (no slash) or by path (with ** and braces)."""
    ctx = target.ctx(tree)
    only_py = text(await call(ctx, "grep", pattern="TODO", ignore_case=True, glob="*.py"))
    assert "main.py" in only_py and "util.py" in only_py and "README" not in only_py and "view.ts" not in only_py
    by_path = text(await call(ctx, "grep", pattern="TODO", ignore_case=True, glob="src/**/*.{ts,md}"))
    assert "view.ts" in by_path and "main.py" not in by_path


async def test_grep_context_lines(tmp_path: Path, target: Target) -> None:
    """T1: context lines use '-' and separate groups with '--'."""
    (tmp_path / "c.txt").write_text("\n".join(f"l{n}" + (" HIT" if n in (3, 10) else "") for n in range(1, 15)) + "\n")
    body = text(await call(target.ctx(tmp_path), "grep", pattern="HIT", context=1))
    assert body.splitlines()[:7] == [
        "c.txt-2- l2",
        "c.txt:3: l3 HIT",
        "c.txt-4- l4",
        "--",
        "c.txt-9- l9",
        "c.txt:10: l10 HIT",
        "c.txt-11- l11",
    ]


async def test_grep_limit_and_long_lines(tmp_path: Path, target: Target) -> None:
    """T1: grep stops at limit matches with a note, and cuts long match lines."""
    (tmp_path / "many.txt").write_text("match\n" * 50 + "match " + "y" * 2000 + "\n")
    ctx = target.ctx(tmp_path)
    limited = text(await call(ctx, "grep", pattern="match", limit=5))
    assert limited.count("many.txt:") == 5 and "Stopped after 5 matches" in limited
    long = text(await call(ctx, "grep", pattern="match y"))
    assert "line cut, 2006 chars" in long


async def test_grep_single_file_and_no_match(tree: Path, target: Target) -> None:
    """T1: path may be a single file; no match says so (not an error)."""
    ctx = target.ctx(tree)
    assert "src/main.py:1: import os" in text(await call(ctx, "grep", pattern="import", path="src/main.py"))
    none = await call(ctx, "grep", pattern="zzz_nothing")
    assert not none.is_error and "No matches" in text(none)


async def test_grep_and_find_do_not_follow_symlinks(tree: Path, target: Target) -> None:
    """T2: symlinked files and directories, even inside the workspace, are not followed."""
    os.symlink(tree / "src", tree / "src_link")
    os.symlink(tree / "src/main.py", tree / "main_link.py")
    ctx = target.ctx(tree)
    body = text(await call(ctx, "grep", pattern="TODO_fix"))
    assert "src_link" not in body and "main_link.py" not in body
    found = text(await call(ctx, "find", pattern="*.py")).splitlines()
    assert found == ["main_link.py", "src/main.py", "src/pkg/util.py"]  # the link is listed, src_link not entered


async def test_find_by_name_and_path(tree: Path, target: Target) -> None:
    """T1: find matches names anywhere (no slash) or relative paths (with **); dirs end with '/'."""
    ctx = target.ctx(tree)
    names = text(await call(ctx, "find", pattern="*.py")).splitlines()
    assert names == ["src/main.py", "src/pkg/util.py"]
    dirs = text(await call(ctx, "find", pattern="pkg")).splitlines()
    assert dirs == ["src/pkg/"]
    deep = text(await call(ctx, "find", pattern="src/**/*.ts")).splitlines()
    assert deep == ["src/pkg/view.ts"]
    under = text(await call(ctx, "find", pattern="*.py", path="src/pkg")).splitlines()
    assert under == ["src/pkg/util.py"]
    assert ".git" not in text(await call(ctx, "find", pattern="*"))


async def test_find_limit_and_no_match(tmp_path: Path, target: Target) -> None:
    """T1: find stops at limit with a note; no match is not an error."""
    for n in range(10):
        (tmp_path / f"f{n}.txt").write_text("")
    ctx = target.ctx(tmp_path)
    limited = text(await call(ctx, "find", pattern="*.txt", limit=3))
    assert limited.splitlines()[:3] == ["f0.txt", "f1.txt", "f2.txt"] and "Stopped after 3" in limited
    none = await call(ctx, "find", pattern="*.nothing")
    assert not none.is_error and "No files" in text(none)


async def test_ls_sorted_with_markers(tree: Path, target: Target) -> None:
    """T1: ls lists sorted entries incl. dotfiles, marks directories with '/', shows link targets."""
    os.symlink("src/main.py", tree / "link")
    body = text(await call(target.ctx(tree), "ls"))
    assert body.splitlines() == [".git/", ".hidden", "blob.bin", "link -> src/main.py", "README.md", "src/"]


async def test_ls_limit_empty_and_file(tmp_path: Path, target: Target) -> None:
    """T1: ls honours limit, reports an empty directory, and refuses a file."""
    for n in range(5):
        (tmp_path / f"e{n}").write_text("")
    (tmp_path / "empty").mkdir()
    ctx = target.ctx(tmp_path)
    limited = text(await call(ctx, "ls", limit=2))
    assert limited.splitlines()[:2] == ["e0", "e1"] and "Showing 2 of 6" in limited
    assert "empty" in text(await call(ctx, "ls", path="empty"))
    file_result = await call(ctx, "ls", path="e0")
    assert file_result.is_error and "not a directory" in text(file_result)


async def test_grep_cancelled_by_abort(tree: Path, target: Target) -> None:
    """T1/L8: a set abort signal stops a tree walk."""
    ctx = target.ctx(tree)
    ctx.abort.set()
    result = await call(ctx, "grep", pattern="TODO")
    assert result.is_error and "cancelled" in text(result)
