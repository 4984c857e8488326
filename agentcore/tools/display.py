"""How bytes that are not UTF-8 become text, and how that text leads back to the bytes.

File names on Linux are bytes; Python hands them out as ``str`` with each undecodable byte
as a lone surrogate (``'\\udcff'`` for byte ``0xff``, PEP 383). Such a string cannot be
encoded as UTF-8, so a tool result holding one breaks the store (JSON/SQLite text) and the
provider request alike. File contents and command output can hold the same bytes.

One convention everywhere a tool turns bytes into text — names, file text, grep lines, bash
output, error messages: **a byte that is not part of valid UTF-8 is shown as ``\\xNN``** (a
backslash, ``x`` and two lowercase hex digits; Python's ``backslashreplace``). A name shown
this way can be given back: ``address_path`` maps ``\\x80``–``\\xff`` escapes in a path
argument to the real bytes when the literal name does not exist but the byte name does.

``clean_text`` / ``clean_value`` make any string (or JSON-like value) valid UTF-8 by the same
rule, with other lone surrogates shown as ``\\uXXXX``; the tool executor applies them to every
result, so no tool — built-in, extra or MCP — can hand the engine text that is not UTF-8.
"""

from __future__ import annotations

import codecs
import os
import re
from typing import Any, Final

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_BYTE_ESCAPE: Final = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])")


def decode_bytes(data: bytes) -> str:
    """Bytes as text; every byte that is not part of valid UTF-8 becomes ``\\xNN``."""
    return data.decode("utf-8", "backslashreplace")


def incremental_decoder() -> codecs.IncrementalDecoder:
    """A streaming ``decode_bytes``: a character split across chunks is decoded whole."""
    return codecs.getincrementaldecoder("utf-8")("backslashreplace")


def _escape_surrogate(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte smuggled through surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def clean_text(text: str) -> str:
    """``text`` as valid UTF-8: lone surrogates become ``\\xNN`` (bytes) or ``\\uXXXX`` (others).

    Text that is already valid is returned as is (the same object), so the common case costs
    one encode at most.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(_escape_surrogate, text)
    return text


def display_name(name: str | os.PathLike[str]) -> str:
    """A file name or path as it is shown to the model (see the module docstring)."""
    return clean_text(os.fspath(name))


def clean_value(value: Any) -> Any:
    """``value`` with every string in it (dict keys included) passed through ``clean_text``.

    Containers are copied only when something in them changed; other values are returned as is.
    """
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        changed = False
        cleaned: dict[Any, Any] = {}
        for key, item in value.items():
            new_key = clean_text(key) if isinstance(key, str) else key
            new_item = clean_value(item)
            changed = changed or new_key is not key or new_item is not item
            cleaned[new_key] = new_item
        return cleaned if changed else value
    if isinstance(value, list | tuple):
        items = [clean_value(item) for item in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


def unescape_bytes(text: str) -> str:
    """``text`` with each ``\\x80``–``\\xff`` escape turned back into the byte it stands for.

    The result is a file-system string (PEP 383): bytes that form valid UTF-8 together come
    back as ordinary characters, the others as surrogate escapes ``os`` functions accept.
    """
    replaced = _BYTE_ESCAPE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), text)
    return os.fsdecode(os.fsencode(replaced))


def address_path(path: str, base: str = "") -> str:
    """The path the model means when it writes a name the way ``display_name`` showed it.

    Component by component (a relative ``path`` is looked up below ``base``): a component with
    ``\\xNN`` escapes (80–ff) is taken literally when something of that literal name exists,
    else as the bytes the escapes stand for when THAT exists; when neither exists it stays
    literal, so a new file always gets the literal name. Bytes below 0x80 are never escaped in
    display, so ``\\x41`` is always literal. Returns ``path`` itself when it has no escapes.
    """
    if "\\x" not in path or _BYTE_ESCAPE.search(path) is None:
        return path
    resolved: list[str] = []
    for part in path.split("/"):
        if _BYTE_ESCAPE.search(part):
            literal = os.path.join(base, "/".join([*resolved, part]))
            if not os.path.lexists(literal):
                decoded = unescape_bytes(part)
                if os.path.lexists(os.path.join(base, "/".join([*resolved, decoded]))):
                    part = decoded
        resolved.append(part)
    return "/".join(resolved)
