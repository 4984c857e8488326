"""Image attachments given as file references (SPEC I1).

An unreadable or non-image file ends the turn with an error naming the file: a silently
dropped attachment would look like the model ignoring it.
"""

from __future__ import annotations

import base64
from pathlib import Path

from agentcore.errors import InputValidationError
from agentcore.inputs import MAX_IMAGE_BYTES
from agentcore.messages import ImageContent
from agentcore.tools.read import image_mime_type


def load_image_files(paths: list[str], workdir: Path) -> list[ImageContent]:
    images = []
    for index, name in enumerate(paths):
        field = f"image_files.{index}"
        path = (workdir / name) if not Path(name).is_absolute() else Path(name)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputValidationError(f"image file {name!r} cannot be read: {exc.strerror}", field=field) from exc
        if len(data) > MAX_IMAGE_BYTES:
            raise InputValidationError(f"image file {name!r} is larger than {MAX_IMAGE_BYTES} bytes", field=field)
        mime = image_mime_type(data[:16])
        if mime is None:
            raise InputValidationError(f"file {name!r} is not a PNG, JPEG, GIF or WebP image", field=field)
        images.append(ImageContent(base64.b64encode(data).decode("ascii"), mime))
    return images
