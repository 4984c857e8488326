"""agentcore's modules import each other without a circle (issue 24; ARCHITECTURE: a part gets a
narrow port from its owner, and nothing below imports the facade).

Every import counts — lazy ones inside functions and type-only ones under ``TYPE_CHECKING``
too (``tests/import_graph.py``). A circle is what a part that keeps a reference back to its
owner looks like in the source; this test names it the day it appears.
"""

from __future__ import annotations

from pathlib import Path

from tests.import_graph import circles, describe, import_graph

ROOT = Path(__file__).resolve().parents[2]


def test_agentcore_has_no_import_circle() -> None:
    """No module of ``agentcore/`` can reach itself through its imports."""
    found = circles(import_graph(ROOT, "agentcore"))
    assert not found, "import circles in agentcore/: " + describe(found)


def test_nothing_under_session_or_extensions_imports_the_driver_or_the_runtime() -> None:
    """The session's parts and the extensions see ports, never their owners: no module under
    ``agentcore/session/`` or ``agentcore/extensions/`` imports ``session.driver`` or
    ``runtime``, not even for type checking (the driver itself is the one owner)."""
    graph = import_graph(ROOT, "agentcore")
    owners = {"agentcore.session.driver", "agentcore.runtime"}
    below = {
        name: sorted(graph[name] & owners)
        for name in graph
        if name.startswith(("agentcore.session.", "agentcore.extensions")) and name not in owners
    }
    assert not {name: hits for name, hits in below.items() if hits}


def test_a_type_only_import_back_closes_a_circle() -> None:
    """The check itself: an import of the driver added to a part of the session is found."""
    graph = import_graph(ROOT, "agentcore")
    graph["agentcore.session.contexts"].add("agentcore.session.driver")
    assert any("agentcore.session.contexts" in group for group in circles(graph))


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
    assert with_parents["pkg.a"] == {"pkg.sub.b", "pkg.sub", "pkg"}
