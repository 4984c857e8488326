"""Decoding wire JSON into values a UTF-8 store can hold (SPEC P1, D1).

JSON may carry a UTF-16 surrogate as an escape. A pair of escapes (``"\\ud83d\\ude00"``, how
ASCII-only encoders write an emoji) decodes to one character, but a lone one — half an emoji,
as proxies that slice UTF-16 strings send — decodes to a Python str that cannot be encoded
as UTF-8: the first commit of that text fails, and the response's usage with it. So every
adapter decodes wire JSON through ``loads``, which replaces each lone surrogate, in keys and
values at any depth, with U+FFFD. A pair sliced across two events arrives as two lone halves
and becomes two U+FFFD: each event is decoded on its own.

Cost: this is on the hot path (every SSE event). A surrogate can only come from an escape —
the SSE text is decoded from UTF-8 with replacement, which never yields one — so an event
without a backslash pays one ``memchr``-speed character search (~50 ns for a 250-character
event here); one with backslashes (newlines, quotes) adds a regex search (~350 ns); the walk
over the decoded value runs only when a ``\\uD800``–``\\uDFFF`` escape is actually present.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def loads(text: str) -> Any:
    """``json.loads`` for text decoded from UTF-8 (which holds no raw surrogates): the value
    with every lone surrogate replaced by U+FFFD. Raises ``json.JSONDecodeError`` like ``json.loads``."""
    value = json.loads(text)
    if "\\" in text and _SURROGATE_ESCAPE.search(text):
        return scrub(value)
    return value


def scrub(value: Any) -> Any:
    """``value`` (decoded JSON) with lone surrogates in its strings replaced by U+FFFD.

    After ``json.loads`` every valid pair is already one character, so any surrogate code
    point left is lone."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        return {scrub(key): scrub(item) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub(item) for item in value]
    return value
