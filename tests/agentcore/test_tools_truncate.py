"""Output bounds shared by the tools, and the glob matcher of grep/find (SPEC T1)."""

from __future__ import annotations

import pytest

from agentcore.tools.truncate import cut_line, truncate_head, truncate_tail
from agentcore.tools.walk import compile_glob


def test_head_keeps_first_lines_within_both_bounds() -> None:
    """T1: head truncation keeps whole leading lines, by lines or by bytes, whichever comes first."""
    text = "\n".join(str(n) for n in range(100))
    by_lines = truncate_head(text, max_lines=10, max_bytes=10_000)
    assert by_lines.truncated and by_lines.truncated_by == "lines"
    assert by_lines.text.split("\n") == [str(n) for n in range(10)] and by_lines.total_lines == 100
    by_bytes = truncate_head(text, max_lines=1000, max_bytes=10)
    assert by_bytes.truncated_by == "bytes" and by_bytes.text == "0\n1\n2\n3\n4"
    untouched = truncate_head("short")
    assert not untouched.truncated and untouched.text == "short"


def test_tail_keeps_last_lines_and_end_of_huge_line() -> None:
    """T1: tail truncation keeps whole trailing lines; a single oversized line keeps its end."""
    text = "\n".join(str(n) for n in range(100))
    tail = truncate_tail(text, max_lines=3, max_bytes=10_000)
    assert tail.text == "97\n98\n99" and tail.output_lines == 3
    huge = truncate_tail("start " + "é" * 100 + " END", max_lines=10, max_bytes=20)
    assert huge.truncated and huge.text.endswith(" END") and len(huge.text.encode()) <= 20


def test_cut_line() -> None:
    """T1: long lines are cut with their original length noted."""
    assert cut_line("abc", 5) == ("abc", False)
    cut, was_cut = cut_line("x" * 10, 4)
    assert was_cut and cut.startswith("xxxx") and "10 chars" in cut


@pytest.mark.parametrize(
    ("pattern", "name", "rel", "expected"),
    [
        ("*.py", "a.py", "deep/dir/a.py", True),
        ("*.py", "a.pyc", "a.pyc", False),
        ("*.{ts,tsx}", "c.tsx", "c.tsx", True),
        ("src/**/*.ts", "x.ts", "src/a/b/x.ts", True),
        ("src/**/*.ts", "x.ts", "src/x.ts", True),
        ("src/*.ts", "x.ts", "src/a/x.ts", False),
        ("test_?.py", "test_1.py", "test_1.py", True),
        ("[!a]*", "abc", "abc", False),
        ("[!a]*", "bcd", "bcd", True),
        ("**/node_modules", "node_modules", "x/node_modules", True),
        ("./src/*.py", "m.py", "src/m.py", True),
        ("{unbalanced", "{unbalanced", "{unbalanced", True),
    ],
)
def test_glob(pattern: str, name: str, rel: str, expected: bool) -> None:
    """T1: find/grep globs support *, ?, [...], {a,b} and **; no slash means "match the name"."""
    assert compile_glob(pattern)(name, rel) is expected
