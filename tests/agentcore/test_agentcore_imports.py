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


def test_internals_never_import_the_facade() -> None:
    """Only the entry points above it import ``agentcore.runtime`` or the ``agentcore`` package
    (its lazy re-exports, ``cli``, ``sync``): every other module gets what it needs handed down."""
    graph = import_graph(ROOT, "agentcore")
    entry_points = {"agentcore", "agentcore.cli", "agentcore.sync", "agentcore.__main__"}
    facade = {"agentcore", "agentcore.runtime"}
    importers = {name: sorted(deps & facade) for name, deps in graph.items() if deps & facade}
    assert set(importers) <= entry_points, {k: v for k, v in importers.items() if k not in entry_points}


# docs/architecture.md's drawing, top to bottom: a module may import its own row and the rows
# below it. A module is in the row of the longest name (package or module) it starts with.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("agentcore", "agentcore.cli", "agentcore.sync", "agentcore.__main__"),
    ("agentcore.runtime", "agentcore.offline"),
    ("agentcore.session.driver",),
    (
        "agentcore.session.control",
        "agentcore.session.children",
        "agentcore.session.snapshots",
        "agentcore.compaction.background",
        "agentcore.extensions",
    ),
    ("agentcore.session",),
    ("agentcore.admission", "agentcore.runtime_parts", "agentcore.config", "agentcore.demo"),
    ("agentcore.engine", "agentcore.compaction.step"),
    (
        "agentcore.compaction",
        "agentcore.tools",
        "agentcore.providers",
        "agentcore.models",
        "agentcore.context",
        "agentcore.inputs",
        "agentcore.tracing",
        "agentcore.trace",
    ),
    ("agentcore.harness",),
    (
        "agentcore.messages",
        "agentcore.events",
        "agentcore.errors",
        "agentcore.clock",
        "agentcore.host",
        "agentcore.json_depth",
        "agentcore.prompts",
        "agentcore.testing",
    ),
)


def layer_of(module: str) -> int:
    matches = [
        (len(name), row)
        for row, names in enumerate(LAYERS)
        for name in names
        if module == name or module.startswith(f"{name}.")
    ]
    return max(matches)[1]


def test_imports_point_down_the_layers_of_the_architecture_page() -> None:
    """Every import points down the drawing in docs/architecture.md, or sideways within a row."""
    graph = import_graph(ROOT, "agentcore")
    upward = sorted(
        f"{name} → {target}" for name, deps in graph.items() for target in deps if layer_of(target) < layer_of(name)
    )
    assert not upward, upward
