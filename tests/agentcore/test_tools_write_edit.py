"""Unit tests of the ``write`` and ``edit`` tools through the executor, on a real temp dir, on this machine and
in a remote environment (SPEC T1, X5)."""

from __future__ import annotations

from pathlib import Path

from tests.agentcore.tool_helpers import Target, call, text

pytest_plugins = ("tests.agentcore.environment_fixtures",)  # the `target` fixture: local and remote


async def test_write_creates_parents_and_reports_bytes(tmp_path: Path, target: Target) -> None:
    """T1: write creates missing parent directories and reports the UTF-8 byte count."""
    result = await call(target.ctx(tmp_path), "write", path="a/b/c.txt", content="héllo\n")
    assert not result.is_error
    assert (tmp_path / "a/b/c.txt").read_text() == "héllo\n"
    assert "7 bytes" in text(result) and "a/b/c.txt" in text(result)


async def test_write_overwrites(tmp_path: Path, target: Target) -> None:
    """T1: write replaces the whole content of an existing file."""
    (tmp_path / "f.txt").write_text("old content that is long\n")
    await call(target.ctx(tmp_path), "write", path="f.txt", content="new\n")
    assert (tmp_path / "f.txt").read_text() == "new\n"


async def test_write_to_directory_is_an_error(tmp_path: Path, target: Target) -> None:
    """T1: writing to a directory fails clearly."""
    (tmp_path / "d").mkdir()
    result = await call(target.ctx(tmp_path), "write", path="d", content="x")
    assert result.is_error and "directory" in text(result)


async def test_edit_exact_returns_unified_diff(tmp_path: Path, target: Target) -> None:
    """T1: an exact unique match is replaced and a unified diff comes back."""
    (tmp_path / "m.py").write_text("def f():\n    return 1\n\nprint(f())\n")
    result = await call(target.ctx(tmp_path), "edit", path="m.py", old_text="return 1", new_text="return 2")
    assert not result.is_error, text(result)
    assert (tmp_path / "m.py").read_text() == "def f():\n    return 2\n\nprint(f())\n"
    body = text(result)
    assert "--- a/m.py" in body and "+++ b/m.py" in body
    assert "-    return 1" in body and "+    return 2" in body and "exact match" in body


async def test_edit_keeps_crlf_and_bom(tmp_path: Path, target: Target) -> None:
    """T1: an LF old_text matches a CRLF file; the CRLF endings and the BOM are kept."""
    path = tmp_path / "win.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n")
    result = await call(target.ctx(tmp_path), "edit", path="win.txt", old_text="one\ntwo\n", new_text="1\n2\n")
    assert not result.is_error, text(result)
    assert path.read_bytes() == b"\xef\xbb\xbf1\r\n2\r\nthree\r\n"


async def test_edit_tolerates_trailing_whitespace(tmp_path: Path, target: Target) -> None:
    """T1: trailing whitespace in the file (or in old_text) does not prevent a match."""
    path = tmp_path / "t.py"
    path.write_text("a = 1   \nb = 2\t\nc = 3\n")
    result = await call(
        target.ctx(tmp_path), "edit", path="t.py", old_text="a = 1\nb = 2  \n", new_text="a = 10\nb = 20\n"
    )
    assert not result.is_error, text(result)
    assert path.read_text() == "a = 10\nb = 20\nc = 3\n"
    assert "tolerant match" in text(result)


async def test_edit_tolerates_smart_quotes_dashes_and_nbsp(tmp_path: Path, target: Target) -> None:
    """T1: curly quotes, Unicode dashes and non-breaking spaces match their ASCII look-alikes."""
    path = tmp_path / "doc.md"
    path.write_text("Intro\nHe said “hello” – it’s\u00a0fine.\nOutro\n")
    result = await call(
        target.ctx(tmp_path), "edit", path="doc.md", old_text='He said "hello" - it\'s fine.', new_text="Changed."
    )
    assert not result.is_error, text(result)
    assert path.read_text() == "Intro\nChanged.\nOutro\n"


async def test_edit_refuses_multiple_matches_with_line_numbers(tmp_path: Path, target: Target) -> None:
    """T1: old_text occurring more than once is refused, naming the lines; the file is unchanged."""
    original = "x = 1\ny = 2\nx = 1\n"
    (tmp_path / "dup.py").write_text(original)
    result = await call(target.ctx(tmp_path), "edit", path="dup.py", old_text="x = 1", new_text="x = 3")
    assert result.is_error
    assert "2 times" in text(result) and "lines 1, 3" in text(result)
    assert (tmp_path / "dup.py").read_text() == original


async def test_edit_refuses_multiple_fuzzy_matches(tmp_path: Path, target: Target) -> None:
    """T1: the tolerant match is also refused when ambiguous."""
    original = "say “hi”\nsay 'x'\nsay “hi”  \n"
    (tmp_path / "q.txt").write_text(original)
    result = await call(target.ctx(tmp_path), "edit", path="q.txt", old_text='say "hi"', new_text="bye")
    assert result.is_error and "2 times" in text(result)
    assert (tmp_path / "q.txt").read_text() == original


async def test_edit_not_found_lists_closest_candidates(tmp_path: Path, target: Target) -> None:
    """T1: when nothing matches, the error shows the closest candidates with line numbers."""
    lines = [f"value_{n} = compute({n})" for n in range(1, 40)]
    (tmp_path / "c.py").write_text("\n".join(lines) + "\n")
    result = await call(target.ctx(tmp_path), "edit", path="c.py", old_text="value_17 = compute(71)", new_text="x")
    body = text(result)
    assert result.is_error and "not found" in body
    assert "Closest candidates" in body and "line 17 (" in body and "value_17 = compute(17)" in body


async def test_edit_rejects_empty_and_identical_and_non_utf8(tmp_path: Path, target: Target) -> None:
    """T1: empty old_text, a no-op edit and a non-UTF-8 file are clear errors."""
    (tmp_path / "f.txt").write_text("abc\n")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfeabc")
    ctx = target.ctx(tmp_path)
    empty = await call(ctx, "edit", path="f.txt", old_text="", new_text="x")
    assert empty.is_error and "empty" in text(empty)
    same = await call(ctx, "edit", path="f.txt", old_text="abc", new_text="abc")
    assert same.is_error and "identical" in text(same)
    binary = await call(ctx, "edit", path="bin.txt", old_text="abc", new_text="x")
    assert binary.is_error and "UTF-8" in text(binary)


async def test_edit_missing_file(tmp_path: Path, target: Target) -> None:
    """T1: editing a missing file names it."""
    result = await call(target.ctx(tmp_path), "edit", path="ghost.txt", old_text="a", new_text="b")
    assert result.is_error and "ghost.txt" in text(result) and "does not exist" in text(result)


async def test_edit_shrinking_file_is_truncated(tmp_path: Path, target: Target) -> None:
    """T1: a shorter replacement leaves no stale bytes at the end of the file."""
    (tmp_path / "s.txt").write_text("keep\n" + "remove me " * 50 + "\nend\n")
    await call(target.ctx(tmp_path), "edit", path="s.txt", old_text="remove me " * 50, new_text="x")
    assert (tmp_path / "s.txt").read_text() == "keep\nx\nend\n"
