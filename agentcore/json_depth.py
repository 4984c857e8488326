"""How deep a JSON value nests, measured without recursion.

Python's JSON decoder and encoder, pydantic and every recursive walk of a value raise
``RecursionError`` somewhere near 1,000 levels, so a value of unbounded depth from a model or a
script must be measured before anything walks it. Both measures here use an explicit stack or a
flat scan, so a value or text of any depth is safe to pass. A leaf module: the engine (a model's
tool-call arguments) and code mode (a script's stored values) share it.
"""

from __future__ import annotations

import re
from typing import Any

_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[{\]}]')
_OPENING, _CLOSING = frozenset("[{"), frozenset("]}")


def value_nests_deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests dicts and lists (or tuples) more than ``limit`` levels
    (``{"a": 1}`` is one level)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list | tuple) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return False


def text_nests_deeper_than(text: str, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` levels in JSON ``text``, read without
    decoding it (brackets inside strings do not count). Text with at most ``limit`` brackets is
    not scanned."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token in _OPENING:
            depth += 1
            if depth > limit:
                return True
        elif token in _CLOSING:
            depth -= 1
    return False
