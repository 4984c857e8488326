"""Tree walking and glob matching shared by ``grep`` and ``find``.

The walk never follows symlinks and cannot be redirected by one: every directory is opened
relative to its parent's file descriptor with ``O_NOFOLLOW``, so a directory swapped for a
symlink mid-walk is skipped instead of entered. ``.git`` directories are skipped. Entries
are visited in sorted order (files of a directory, then its subdirectories) so results are
stable from run to run.

Each entry carries its real name (to open it) and its display form (``display_name``: bytes
that are not UTF-8 as ``\\xNN``); globs match and results print the display form, so what the
model sees is what it can match and pass back as a path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from agentcore.tools.display import display_name

SKIP_DIRS: Final = frozenset({".git"})
_DIR_OPEN: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Entry:
    """One walked entry: its parent directory fd (valid only during iteration) and names."""

    dir_fd: int
    name: str  # the real name (may hold surrogate escapes), for opening relative to dir_fd
    label: str  # the name as displayed and matched
    rel: str  # displayed path relative to the walk root, "/"-separated
    kind: str  # "file", "dir", "link" or "other"


def _kind(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            return "link"
        if entry.is_dir(follow_symlinks=False):
            return "dir"
        if entry.is_file(follow_symlinks=False):
            return "file"
    except OSError:
        pass
    return "other"


def _label(name: str) -> str:
    return name if name.isascii() else display_name(name)


def _scan(fd: int, prefix: str) -> tuple[list[Entry], list[tuple[str, str, str]]]:
    """The non-directory entries of ``fd`` and its subdirectories (name, label, rel), sorted by name."""
    try:
        with os.scandir(fd) as it:
            entries = sorted(((e.name, _kind(e)) for e in it), key=lambda item: item[0])
    except OSError:
        return [], []
    others = []
    subdirs = []
    for name, kind in entries:
        label = _label(name)
        if kind != "dir":
            others.append(Entry(fd, name, label, prefix + label, kind))
        elif name not in SKIP_DIRS:
            subdirs.append((name, label, prefix + label))
    return others, subdirs


def walk(root_fd: int, should_stop: Callable[[], bool] = lambda: False) -> Iterator[Entry]:
    """Yield every entry under the directory ``root_fd`` (which the caller keeps open).

    Depth first; a directory is yielded right before its contents. Only one descriptor per
    level of depth is open at a time. The caller may read a file entry with
    ``os.open(entry.name, ..., dir_fd=entry.dir_fd)`` while handling it.
    """
    others, subdirs = _scan(root_fd, "")
    yield from others
    frames: list[tuple[int, bool, Iterator[tuple[str, str, str]]]] = [(root_fd, False, iter(subdirs))]
    try:
        while frames:
            if should_stop():
                return
            fd, _owned, pending = frames[-1]
            step = next(pending, None)
            if step is None:
                frames.pop()
                if _owned:
                    os.close(fd)
                continue
            name, label, rel = step
            yield Entry(fd, name, label, rel, "dir")
            try:
                child = os.open(name, _DIR_OPEN, dir_fd=fd)
            except OSError:
                continue  # vanished, unreadable, or swapped for a symlink: skip it
            frames.append((child, True, iter(())))
            others, subdirs = _scan(child, rel + "/")
            frames[-1] = (child, True, iter(subdirs))
            yield from others
    finally:
        for fd, owned, _pending in frames:
            if owned:
                os.close(fd)


def _translate(pattern: str, i: int, stop: str) -> tuple[str, int]:
    """Translate ``pattern[i:]`` up to an unnested character in ``stop``; returns (regex, next index)."""
    out: list[str] = []
    n = len(pattern)
    while i < n and pattern[i] not in stop:
        ch = pattern[i]
        if ch == "*":
            if pattern.startswith("**", i):
                i += 2
                if i < n and pattern[i] == "/":
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = pattern.find("]", i + 2 if pattern.startswith(("[!", "[^"), i) else i + 1)
            if end == -1:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:].replace("\\", "\\\\")
                else:
                    body = body.replace("\\", "\\\\")
                out.append(f"[{body}]")
                i = end
        elif ch == "{":
            alternatives: list[str] = []
            j = i + 1
            while True:
                part, j = _translate(pattern, j, ",}")
                alternatives.append(part)
                if j >= n:
                    return "".join(out) + re.escape(pattern[i:]), n  # unbalanced: literal
                if pattern[j] == "}":
                    break
                j += 1
            out.append("(?:" + "|".join(alternatives) + ")")
            i = j
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out), i


def compile_glob(pattern: str) -> Callable[[str, str], bool]:
    """A matcher ``(name, rel_path) -> bool`` for a glob with ``*``, ``?``, ``[...]``, ``{a,b}``, ``**``.

    A pattern without ``/`` matches the entry's name anywhere in the tree (``*.py``);
    a pattern with ``/`` matches the path relative to the search root (``src/**/*.ts``).
    """
    text = pattern.removeprefix("./")
    regex, _ = _translate(text, 0, "")
    compiled = re.compile(f"(?s:{regex})\\Z")
    if "/" in text:
        return lambda _name, rel: compiled.match(rel) is not None
    return lambda name, _rel: compiled.match(name) is not None
