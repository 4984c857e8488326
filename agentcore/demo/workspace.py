"""A few sample files for a new demo session's workspace, so the tools have something to show.

A fresh workspace is empty, and the demo's headline prompt ("what files are here?") would list
nothing. A host that creates a workspace for a demo session seeds it with these: a README the
demo reads, a small program, a to-do list and a CSV — enough for ``ls``, ``read``, ``grep`` and a
code-mode script to show real results. Seeding never overwrites: a file that exists is kept.
"""

from __future__ import annotations

from pathlib import Path

DEMO_FILES: dict[str, str] = {
    "README.md": (
        "# Copper Tulips\n\n"
        "A tiny garden-planning app, used by the offline demo model to show its tools.\n\n"
        "- `garden.py` — the planting logic\n"
        "- `notes/todo.md` — what is left to do\n"
        "- `data/beds.csv` — the garden beds\n"
    ),
    "garden.py": (
        '"""Plan which tulips go in which bed."""\n\n'
        "import csv\n"
        "from pathlib import Path\n\n\n"
        "def load_beds(path: Path) -> list[dict[str, str]]:\n"
        "    with path.open(newline='') as handle:\n"
        "        return list(csv.DictReader(handle))\n\n\n"
        "def plan(beds: list[dict[str, str]]) -> dict[str, int]:\n"
        "    # TODO: respect each bed's sunlight\n"
        "    return {bed['name']: int(bed['size']) * 12 for bed in beds}\n\n\n"
        "if __name__ == '__main__':\n"
        "    print(plan(load_beds(Path('data/beds.csv'))))\n"
    ),
    "notes/todo.md": (
        "# To do\n\n"
        "- [x] Count the beds\n"
        "- [ ] Respect each bed's sunlight (see the TODO in garden.py)\n"
        "- [ ] Add a bed for the copper tulips\n"
    ),
    "data/beds.csv": "name,size,sunlight\nnorth,3,shade\nsouth,5,full\nwest,2,partial\n",
}


def seed_demo_workspace(root: Path) -> list[Path]:
    """Write ``DEMO_FILES`` under ``root`` (made if missing); returns the files it wrote. Files
    that already exist are left as they are, so seeding an existing workspace loses nothing."""
    written: list[Path] = []
    root.mkdir(parents=True, exist_ok=True)
    for relative, text in DEMO_FILES.items():
        path = root / relative
        if path.exists() or path.is_symlink():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
