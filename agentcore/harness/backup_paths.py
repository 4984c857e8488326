"""What both directions of a store copy share (``backup``, ``postgres_backup``): the two refusals
about paths and making the destination's parent directories so a failed copy can remove them.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from agentcore.errors import STORE_EXISTS, STORE_INVALID, StoreError


def make_parents(directory: Path) -> list[Path]:
    """``mkdir -p``, returning the directories it created (outermost first)."""
    missing: list[Path] = []
    current = directory
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    created: list[Path] = []
    try:
        for path in reversed(missing):
            try:
                path.mkdir()
            except FileExistsError:
                continue
            created.append(path)
    except BaseException:
        for path in reversed(created):
            with contextlib.suppress(OSError):
                path.rmdir()
        raise
    return created


def no_store_error(source: Path) -> StoreError:
    return StoreError(STORE_INVALID, f"{source}: no agent store at this path", details={"path": str(source)})


def exists_error(target: Path) -> StoreError:
    return StoreError(
        STORE_EXISTS,
        f"{target}: the destination already exists and is never overwritten",
        details={"path": str(target)},
    )
