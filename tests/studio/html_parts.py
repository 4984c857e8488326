"""Small HTML helpers for Studio tests: one element of a page or push, by id or class.

Pushes and pages are server-rendered HTML; a test that asks "does the conversation's codemode
block show call #1 running" must look inside that block, not anywhere in the push (the Tasks
tab renders the same execution too). Tags are matched by name with depth counting, which is
enough for our own templates (no unclosed ``<div>``/``<li>``).
"""

from __future__ import annotations

import html as html_lib
import re


def element(
    html: str, *, id: str | None = None, css: str | None = None, attr: tuple[str, str] | None = None, start: int = 0
) -> str:
    """The outer HTML of the first element at or after ``start`` with this ``id``, this
    ``attr`` (name, exact value) or this class among its classes; ``""`` when there is none."""
    if id is not None:
        attr = ("id", id)
    if attr is not None:
        pattern = re.compile(r"<(\w+)\b[^>]*\s" + re.escape(attr[0]) + r"=\"" + re.escape(attr[1]) + r"\"")
    else:
        pattern = re.compile(r"<(\w+)\b[^>]*\bclass=\"(?:[^\"]*\s)?" + re.escape(str(css)) + r"(?:\s[^\"]*)?\"")
    match = pattern.search(html, start)
    if match is None:
        return ""
    tag = match.group(1)
    tags = re.compile(r"<(/?)" + tag + r"\b[^>]*>")
    depth = 0
    for found in tags.finditer(html, match.start()):
        depth += -1 if found.group(1) else 1
        if depth == 0:
            return html[match.start() : found.end()]
    return html[match.start() :]


def elements(html: str, *, css: str) -> list[str]:
    """Every element with this class, in document order (nested ones too)."""
    out: list[str] = []
    pattern = re.compile(r"<\w+\b[^>]*\bclass=\"(?:[^\"]*\s)?" + re.escape(css) + r"(?:\s[^\"]*)?\"")
    for match in pattern.finditer(html):
        out.append(element(html, css=css, start=match.start()))
    return out


def text(html: str) -> str:
    """The text of an HTML fragment as a reader sees it (tags dropped, entities decoded)."""
    return html_lib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip())
