"""Reading the documentation from tests: the README is a front door and the details live in
``docs/``, so the examples that tests run are read from the page that documents them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def python_example(page: str, heading: str) -> str:
    """The first ```python block after ``heading`` on ``page`` (a path relative to the repository,
    e.g. ``docs/code-mode.md``), so a test runs the example exactly as a reader copies it."""
    text = (ROOT / page).read_text()
    assert heading in text, f"{page} has no heading {heading!r}"
    section = text[text.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"no python example under {heading!r} in {page}"
    return match.group(1)
