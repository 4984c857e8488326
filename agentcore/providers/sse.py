"""Server-sent events, parsed from the response bytes (the WHATWG "event stream" rules).

Why not ``httpx-sse`` (the project prefers a well-kept library): on our hot path its text
pipeline was the largest provider-side cost, and the budget for the whole runtime is ~1 ms
per request (1.5x a ~2 ms transport floor at 100 turns). It decodes every network chunk to
text (``aiter_text``), re-splits the text into lines in Python, ``rstrip``s and parses each
line, and yields through three nested async generators. Measured on the responses of a
100-turn ``bench/loop_overhead.py`` loop, their real chunks replayed through
``httpx.Response`` without network (best of 15, several runs), per response, excluding
reading the bytes and ``json.loads``: httpx-sse 115-135 us, this module 15-45 us (Chat
Completions, Responses, Anthropic; 9-15 chunks per response). End to end on
loopback, httpx-sse added 0.1-1.1 ms per request over raw bytes on our (noisy) VM, this
module 0-0.4 ms including ``json.loads``. This module splits each chunk with
``bytes.split`` (C), copies a ``data`` value once, decodes it once per event, and returns
a chunk's events as a list, so the caller awaits once per network read, not once per event.

Contract (https://html.spec.whatwg.org/multipage/server-sent-events.html#parsing-an-event-stream):
lines end in CRLF, LF or CR, also when a CRLF is split across chunks; one leading UTF-8 BOM
is dropped; ``field: value`` loses exactly one leading space; ``data`` lines join with
``"\\n"``; ``event`` sets the type (default ``"message"``), ``id`` the last event id (kept
across events, ignored when it contains NUL), ``retry`` the reconnection time (digits only);
lines starting with ``:`` are comments; unknown fields are ignored; a blank line dispatches;
an event without any ``data`` line is not dispatched, nor is a last event without its blank
line at end of stream. Text is UTF-8 with replacement, decoded per complete line, so a
multi-byte character split across chunks is intact (decoding waits for the line end).
"""

from __future__ import annotations

import json
from typing import Any

_BOM = b"\xef\xbb\xbf"


class ServerSentEvent:
    """One dispatched event (the attributes ``httpx_sse.ServerSentEvent`` has)."""

    __slots__ = ("data", "event", "id", "retry")

    def __init__(self, event: str = "message", data: str = "", id: str = "", retry: int | None = None) -> None:
        self.event = event
        self.data = data
        self.id = id
        self.retry = retry

    def json(self) -> Any:
        return json.loads(self.data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServerSentEvent):
            return NotImplemented
        return (self.event, self.data, self.id, self.retry) == (other.event, other.data, other.id, other.retry)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ServerSentEvent(event={self.event!r}, data={self.data!r}, id={self.id!r}, retry={self.retry!r})"


class SSEDecoder:
    """Incremental parser: ``feed`` each chunk of the body, get the events it completes.

    State between chunks is the unterminated last line (kept as parts, so an event spread
    over many chunks is joined once, not re-copied per chunk), whether the last chunk ended
    in CR (so a leading LF in the next one is the same line end), and the fields of the
    event under construction."""

    __slots__ = ("_data", "_event", "_last_id", "_pending_cr", "_retry", "_started", "_tail")

    def __init__(self) -> None:
        self._tail: list[bytes] = []
        self._pending_cr = False
        self._started = False
        self._event = b""
        self._data: list[bytes] = []
        self._last_id = ""
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        if self._pending_cr and chunk:
            self._pending_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if not chunk:
            return []
        if self._started and b"\n" not in chunk and b"\r" not in chunk:
            self._tail.append(chunk)  # no line ends here: nothing to parse yet
            return []
        if self._tail:
            self._tail.append(chunk)
            buffer = b"".join(self._tail)
        else:
            buffer = chunk
        if not self._started:
            if len(buffer) < 3 and _BOM.startswith(buffer):
                self._tail = [buffer]
                return []
            self._started = True
            if buffer.startswith(_BOM):
                buffer = buffer[3:]
        if b"\r" in buffer:
            if buffer[-1:] == b"\r":
                self._pending_cr = True
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buffer.split(b"\n")
        tail = lines.pop()
        self._tail = [tail] if tail else []
        events: list[ServerSentEvent] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append(self._dispatch())
                else:
                    self._event = b""
                continue
            if line.startswith(b"data: "):  # the common line, without partition's copies
                self._data.append(line[6:])
                continue
            field, colon, value = line.partition(b":")
            if not field:
                continue  # a comment
            if colon and value[:1] == b" ":
                value = value[1:]
            if field == b"data":
                self._data.append(value)
            elif field == b"event":
                self._event = value
            elif field == b"id":
                if b"\0" not in value:
                    self._last_id = value.decode("utf-8", "replace")
            elif field == b"retry":
                if value.isdigit():
                    self._retry = int(value)
        return events

    def _dispatch(self) -> ServerSentEvent:
        data = self._data
        text = (data[0] if len(data) == 1 else b"\n".join(data)).decode("utf-8", "replace")
        event = self._event.decode("utf-8", "replace") if self._event else "message"
        self._data = []
        self._event = b""
        return ServerSentEvent(event, text, self._last_id, self._retry)
