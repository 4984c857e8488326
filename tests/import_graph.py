"""The import graph of a package, read from its source, and the circles in it (issue 24).

A module's dependencies are every ``import`` and ``from … import`` anywhere in its ``ast``: at
the top, inside functions (a lazy import is still a dependency) and under
``if TYPE_CHECKING:`` (a type-only import is one too, and the circle it closes is the same
knot). ``from package import name`` is an edge to ``package.name`` when that is a module, and
to ``package`` otherwise. With ``implicit_parents``, importing ``a.b.c`` is also an edge to
``a`` and ``a.b``, whose ``__init__`` runs first — right for a package whose ``__init__`` files
are empty; a package whose ``__init__`` re-exports its submodules (agentcore's) would be all
one circle under that rule, so there only the imports written in the source count.

No third-party tool: ``ast`` and Tarjan's strongly connected components, small enough to read.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Set
from pathlib import Path

Graph = dict[str, set[str]]


def package_modules(root: Path, package: str) -> dict[str, Path]:
    """Module name → file, for every ``.py`` file under ``root/package``."""
    found: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _absolute(module: str, level: int, current: str, is_package: bool) -> str:
    """The absolute name a (possibly relative) ``from`` import in ``current`` refers to."""
    if not level:
        return module
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _targets(name: str, modules: Set[str], implicit_parents: bool) -> set[str]:
    """The package's modules that importing ``name`` depends on: the longest known prefix of
    ``name`` (the module itself, or the package a name is taken from), plus its parent
    packages when ``implicit_parents``."""
    parts = name.split(".")
    prefixes = [".".join(parts[:n]) for n in range(len(parts), 0, -1)]
    known = [prefix for prefix in prefixes if prefix in modules]
    if not known:
        return set()
    return set(known) if implicit_parents else {known[0]}


def import_graph(root: Path, package: str, *, implicit_parents: bool = False) -> Graph:
    """Module → the modules of ``package`` it imports (see the module docstring)."""
    modules = package_modules(root, package)
    graph: Graph = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    graph[name] |= _targets(alias.name, modules.keys(), implicit_parents)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node.module or "", node.level, name, is_package)
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    target = submodule if submodule in modules else base
                    graph[name] |= _targets(target, modules.keys(), implicit_parents)
        graph[name].discard(name)
    return graph


def circles(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
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
            group: list[str] = []
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


def describe(groups: list[list[str]]) -> str:
    """One line per circle, for an assertion message."""
    return "; ".join(" ↔ ".join(group) for group in groups)
