"""The import-graph helper itself (``tests/import_graph.py``), which agentcore's and Studio's
no-circle tests share (issue 24)."""

from __future__ import annotations

from pathlib import Path

from tests.import_graph import circles, import_graph


def test_lazy_relative_and_type_only_imports_are_edges(tmp_path: Path) -> None:
    """A circle made only of a lazy import, a relative one and a type-only one is found; with
    ``implicit_parents`` the packages a dotted import runs are edges too."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    import pkg.sub.b\n")
    (package / "sub" / "b.py").write_text("from ..c import thing\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nthing = 1\nif TYPE_CHECKING:\n    from pkg import a\n"
    )
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.c"} and graph["pkg.c"] == {"pkg.a"}
    assert circles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    with_parents = import_graph(tmp_path, "pkg", implicit_parents=True)
    assert with_parents["pkg.a"] == {"pkg.sub.b", "pkg.sub", "pkg"} and with_parents["pkg.sub.b"] == {"pkg.c", "pkg"}
    assert circles(with_parents) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
