"""Image attachments given as file references (SPEC I1).

An unreadable or non-image file ends the turn with an error naming the file (field
``image_files.N``): a silently dropped attachment would look like the model ignoring it.

The paths come from the caller, not the model, so symbolic links are followed — but only a
regular file is ever read: the path is checked with ``stat`` before it is opened (so a FIFO,
device or socket is never even opened), opened with ``O_NONBLOCK`` (so a FIFO swapped in after
the check cannot block the open), and the opened descriptor is checked again with ``fstat``.
At most ``MAX_IMAGE_BYTES + 1`` bytes are read, so a file that grows while it is read is
refused instead of filling memory. Each file therefore costs bounded time and memory, which
is what makes the runtime's ``asyncio.to_thread`` call cancellable in practice: a cancelled
run stops waiting at once and the thread finishes a bounded read on its own.
"""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

from agentcore.errors import InputValidationError
from agentcore.inputs import MAX_IMAGE_BYTES, image_mime_type
from agentcore.messages import ImageContent
from agentcore.tools.display import display_name

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_image_file(path: Path, name: str, field: str, max_bytes: int = MAX_IMAGE_BYTES) -> ImageContent:
    """One image file as ``ImageContent``; ``InputValidationError`` (naming ``name``) otherwise."""
    shown = f"'{display_name(name)}'"

    def refuse(reason: str) -> InputValidationError:
        return InputValidationError(f"image file {shown} {reason}", field=field)

    try:
        before = os.stat(path)
        if not stat.S_ISREG(before.st_mode):
            raise refuse(f"is {_kind(before.st_mode)}, not a regular file")
        if before.st_size > max_bytes:
            raise refuse(f"is larger than {max_bytes} bytes ({before.st_size} bytes)")
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise refuse(f"cannot be read: {exc.strerror or exc}") from exc
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):  # swapped after the check
            raise refuse(f"is {_kind(opened.st_mode)}, not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes and (chunk := os.read(fd, min(1 << 20, max_bytes + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise refuse(f"cannot be read: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if size > max_bytes:
        raise refuse(f"is larger than {max_bytes} bytes (it grew while it was read)")
    data = b"".join(chunks)
    mime = image_mime_type(data[:16])
    if mime is None:
        raise InputValidationError(f"file {shown} is not a PNG, JPEG, GIF or WebP image", field=field)
    return ImageContent(base64.b64encode(data).decode("ascii"), mime)


def load_image_files(paths: list[str], workdir: Path) -> list[ImageContent]:
    """Every file of ``paths`` (relative ones taken from ``workdir``), in order, or the first error."""
    return [
        read_image_file(workdir / name, name, f"image_files.{index}")  # an absolute name replaces workdir
        for index, name in enumerate(paths)
    ]
