"""Studio's modules import each other in one direction only (ARCHITECTURE: a prompt passes each
layer once, downward, and comes back once, upward).

The graph is read from each module's ``ast``: every ``import`` and ``from … import`` anywhere
in it — at the top, inside functions (a lazy import is still a dependency) and under
``if TYPE_CHECKING:`` (a type-only import is one too). ``from package import name`` is an edge
to ``package.name`` when that is a module, else to the package. Importing ``a.b.c`` also runs
``a/__init__`` and ``a/b/__init__``, so those are edges as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "studio"


def _modules(root: Path, package: str) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(module: str, level: int, current: str, is_package: bool) -> str:
    if not level:
        return module
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _targets(name: str, modules: dict[str, Path]) -> set[str]:
    """``name`` and the packages whose ``__init__`` importing it runs (Studio's only)."""
    parts = name.split(".")
    out = {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
    return {m for m in out if m in modules}


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    modules = _modules(root, package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    graph[name] |= _targets(alias.name, modules)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node.module or "", node.level, name, is_package)
                graph[name] |= _targets(base, modules)
                for alias in node.names:
                    graph[name] |= _targets(f"{base}.{alias.name}", modules) & {f"{base}.{alias.name}"}
        graph[name].discard(name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each as a path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_studio_has_no_import_circle() -> None:
    """No module of ``studio/`` can reach itself through imports (type-only ones included)."""
    found = circles(import_graph())
    assert not found, "import circles in studio/: " + "; ".join(" ↔ ".join(group) for group in found)


def test_the_check_finds_a_circle_through_a_type_only_import() -> None:
    """The check itself: a type-only import back to a module that imports it is a circle."""
    graph = import_graph()
    graph["studio.host.contract"] = graph["studio.host.contract"] | {"studio.host.session_host"}
    assert any("studio.host.contract" in group for group in circles(graph))


def test_lazy_relative_and_type_only_imports_are_edges(tmp_path: Path) -> None:
    """A circle made only of a lazy import, a relative one and a type-only one is still found."""
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
    assert graph["pkg.a"] >= {"pkg.sub.b", "pkg.sub"} and graph["pkg.sub.b"] == {"pkg.c", "pkg"}
    assert circles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
