"""The composer's prompt, whichever way it arrives: the session's WebSocket or the POST.

A text prompt travels over the page's already-open, already-authenticated socket (one JSON
frame, what htmx's ws extension sends for a ``ws-send`` form); a prompt with images, or from a
client without the socket, is the multipart POST ``/sessions/<id>/prompt/``. Both are parsed
by the same ``PromptForm`` (``parse_prompt``) and submitted by the same ``submit_prompt``, so a
message means the same thing and is refused with the same words on either path.

A socket frame has no CSRF token to check: the socket's handshake was Origin-checked
(``AllowedHostsOriginValidator`` in ``studio.asgi``), which is what stops another site's page
from opening it with the person's cookie, and the socket belongs to one session its user owns
(``SessionConsumer.connect``). Whatever a frame names, it prompts that session only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict
from django.utils.datastructures import MultiValueDict
from django.utils.html import escape

from studio.forms import MAX_PROMPT_CHARS, PromptForm, form_error
from studio.host.routing import get_host_client
from studio.models import StudioSession

#: The largest socket frame read (characters of its JSON text): a prompt at ``MAX_PROMPT_CHARS``
#: fits however the browser escapes it (JSON escapes a character in at most 6), plus the form's
#: other fields and htmx's headers. A larger frame is refused before it is parsed.
MAX_SOCKET_FRAME_CHARS = 6 * MAX_PROMPT_CHARS + 16_384

#: The form fields a socket frame may carry (others, such as htmx's ``HEADERS`` or the CSRF
#: token the form also holds, are ignored).
_PROMPT_FIELDS = ("prompt", "agent", "effort", "mode")


class PromptRefused(Exception):
    """A prompt that changes nothing: ``field`` is the form field (or ``message`` for the frame
    itself) it is about, ``code`` a stable name for the reason, ``message`` what the page says."""

    def __init__(self, field: str, code: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Prompt:
    """A valid message for the session host's ``prompt`` command."""

    text: str
    agent: str
    mode: str
    images: list[dict[str, str]] = field(default_factory=list)

    def host_arguments(self) -> dict[str, Any]:
        arguments: dict[str, Any] = {"prompt": self.text, "agent": self.agent, "mode": self.mode}
        if self.images:
            arguments["images"] = self.images
        return arguments


def parse_prompt(data: QueryDict, files: MultiValueDict[str, Any] | None, *, default_agent: str) -> Prompt:
    """The composer's fields as a ``Prompt``, or ``PromptRefused`` naming the first bad field."""
    form = PromptForm(data, files)
    if not form.is_valid():
        name, message = form_error(form)
        raise PromptRefused("prompt" if name == "__all__" else name, "invalid", message)
    cleaned = form.cleaned_data
    return Prompt(
        text=cleaned["prompt"],
        agent=cleaned["agent"] or default_agent,
        mode=cleaned["mode"] or "follow_up",
        images=cleaned["images"],
    )


def socket_frame(text_data: str | None, bytes_data: bytes | None) -> tuple[str, QueryDict]:
    """A socket frame's command and its form fields, as the POST would carry them.

    The frame is a JSON object (``{"command": "prompt", "prompt": "...", "agent": "build",
    ...}``) of at most ``MAX_SOCKET_FRAME_CHARS``; a field's value is a string (or a list of
    strings, as htmx sends a repeated name). Anything else is ``PromptRefused``.
    """
    if text_data is None:
        raise PromptRefused("message", "malformed", "The socket takes text frames (JSON), not binary ones.")
    if len(text_data) > MAX_SOCKET_FRAME_CHARS:
        raise PromptRefused(
            "message",
            "too_large",
            f"The message is too large for the socket ({len(text_data)} characters; at most {MAX_SOCKET_FRAME_CHARS}).",
        )
    try:
        frame = json.loads(text_data)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        frame = None
    if not isinstance(frame, dict):
        raise PromptRefused("message", "malformed", "The message is not a JSON object.")
    command = frame.get("command")
    if not isinstance(command, str):
        raise PromptRefused("command", "malformed", "The message names no command.")
    fields = QueryDict(mutable=True)
    for name in _PROMPT_FIELDS:
        value = frame.get(name)
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str) for v in values):
            raise PromptRefused(name, "malformed", f"The field {name!r} must be text.")
        fields.setlist(name, values)
    return command, fields


async def submit_prompt(session: StudioSession, prompt: Prompt) -> dict[str, str]:
    """Send the prompt to the session's host (``HostError`` if it refuses: then nothing is
    written). The composer's build/plan choice becomes the session's default in the host's own
    write of the run (``services.run_submitted``), so a refused prompt leaves it as it was."""
    receipt: dict[str, str] = await get_host_client().call("prompt", str(session.pk), **prompt.host_arguments())
    return receipt


def composer_reply(*, error: str = "", reply: str = "", field: str = "", code: str = "") -> str:
    """``#composer-error`` out of band: empty, or the error as the POST shows it.

    ``reply`` marks the answer to a prompt sent over the socket (``accepted``, ``queued`` or
    ``refused``, with the ``field`` and ``code`` of a refusal), which tells the page's script to
    keep or undo its optimistic send; a notice without ``reply`` (a host that did not answer)
    leaves any send alone.
    """
    marks = (("reply", reply), ("field", field), ("code", code))
    attributes = "".join(f' data-{name}="{escape(value)}"' for name, value in marks if value)
    notice = f'<div class="form-error" role="alert">{escape(error)}</div>' if error else ""
    return (
        f'<div id="composer-error" hx-swap-oob="true" class="composer-error" role="status"{attributes}>{notice}</div>'
    )
