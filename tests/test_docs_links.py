"""Every relative link in the README and the docs pages resolves: the file exists and, for a
``#fragment``, the target page has a heading with that anchor (GitHub's slug rules). The README
is a front door whose details live in ``docs/``; a moved section must not leave a dead link."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs import DOCS, ROOT

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("**/*.md"))]


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"`|\*", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    body = FENCE.sub("", page.read_text())
    return {anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", body, re.M)}


def links(page: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(FENCE.sub("", page.read_text()))]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    dead: list[str] = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: — not ours to check
            continue
        path_part, _, fragment = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            dead.append(f"{target} (no file {resolved})")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            dead.append(f"{target} (no heading #{fragment})")
    assert not dead, f"dead links in {page.relative_to(ROOT)}: {dead}"


def test_the_readme_stays_a_front_door() -> None:
    """Issue 24: the README is what a newcomer reads first — at most 200 lines, the two set-up
    commands first, and a link to every docs page."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    first_block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first_block and [line.split("#")[0].strip() for line in first_block.group(1).splitlines()] == [
        "python3 dev.py studio",
        "python3 dev.py test",
    ]
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(ROOT / "README.md")}
    unlinked = [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"
