"""Studio's modules import each other in one direction only (ARCHITECTURE: a prompt passes each
layer once, downward, and comes back once, upward).

The graph is read from each module's ``ast`` by the shared helper (``tests/import_graph.py``):
every ``import`` and ``from … import`` anywhere in it — at the top, inside functions (a lazy
import is still a dependency) and under ``if TYPE_CHECKING:`` (a type-only import is one too).
Studio's ``__init__`` files import nothing, so importing ``a.b.c`` also counts as an edge to
``a`` and ``a.b``, whose ``__init__`` runs first (``implicit_parents``).
"""

from __future__ import annotations

from pathlib import Path

from tests.import_graph import Graph, circles, describe, import_graph

ROOT = Path(__file__).resolve().parents[2]


def studio_graph() -> Graph:
    return import_graph(ROOT, "studio", implicit_parents=True)


def test_studio_has_no_import_circle() -> None:
    """No module of ``studio/`` can reach itself through imports (type-only ones included)."""
    found = circles(studio_graph())
    assert not found, "import circles in studio/: " + describe(found)


def test_the_check_finds_a_circle_through_a_type_only_import() -> None:
    """The check itself: a type-only import back to a module that imports it is a circle."""
    graph = studio_graph()
    graph["studio.host.contract"] = graph["studio.host.contract"] | {"studio.host.session_host"}
    assert any("studio.host.contract" in group for group in circles(graph))
