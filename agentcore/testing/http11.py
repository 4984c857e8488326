"""Just enough HTTP/1.1 for the fake provider server, on plain asyncio streams.

Why not a web framework: the fake server must control the socket byte by byte (cut a
chunked body mid-stream, hold a response, send headers then nothing), set ``TCP_NODELAY``,
and add no latency of its own, because benchmarks measure the adapters against it.
Keep-alive is supported because the adapters reuse pooled connections.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from http import HTTPStatus


@dataclass(slots=True)
class RawRequest:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


class Connection:
    """A reader with its own buffer, so watching for a hang-up never loses request bytes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.buffer = bytearray()

    async def fill(self) -> bool:
        """Read more bytes into the buffer; False when the peer closed the connection."""
        try:
            data = await self.reader.read(65536)
        except ConnectionError:
            return False
        if not data:
            return False
        self.buffer += data
        return True

    async def readuntil(self, separator: bytes) -> bytes | None:
        while True:
            at = self.buffer.find(separator)
            if at >= 0:
                end = at + len(separator)
                out = bytes(self.buffer[:end])
                del self.buffer[:end]
                return out
            if not await self.fill():
                return None

    async def readexactly(self, size: int) -> bytes | None:
        while len(self.buffer) < size:
            if not await self.fill():
                return None
        out = bytes(self.buffer[:size])
        del self.buffer[:size]
        return out


async def read_request(conn: Connection) -> RawRequest | None:
    """The next request on the connection, or ``None`` when the client closed it."""
    head = await conn.readuntil(b"\r\n\r\n")
    if head is None:
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) < 2:
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(conn)
    else:
        length = int(headers.get("content-length", "0") or 0)
        body = await conn.readexactly(length) if length else b""
    if body is None:
        return None
    return RawRequest(parts[0].upper(), parts[1], headers, body)


async def _read_chunked(conn: Connection) -> bytes | None:
    out = bytearray()
    while True:
        size_line = await conn.readuntil(b"\r\n")
        if size_line is None:
            return None
        size = int(size_line.split(b";")[0].strip(), 16)
        if size == 0:
            return bytes(out) if await conn.readuntil(b"\r\n") is not None else None
        data = await conn.readexactly(size + 2)
        if data is None:
            return None
        out += data[:-2]


def set_nodelay(writer: asyncio.StreamWriter) -> None:
    """Small SSE writes stall ~40 ms each without this (Nagle + delayed ACK)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _status_line(status: int) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Overloaded" if status == 529 else "Error"
    return f"HTTP/1.1 {status} {phrase}\r\n"


def response_head(status: int, headers: dict[str, str]) -> bytes:
    lines = [_status_line(status)]
    lines += [f"{name}: {value}\r\n" for name, value in headers.items()]
    lines.append("\r\n")
    return "".join(lines).encode("latin-1")


def full_response(status: int, body: bytes, headers: dict[str, str], content_type: str = "application/json") -> bytes:
    all_headers = {"content-type": content_type, "content-length": str(len(body)), **headers}
    return response_head(status, all_headers) + body


def sse_head(extra: dict[str, str]) -> bytes:
    headers = {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "transfer-encoding": "chunked",
        **extra,
    }
    return response_head(200, headers)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


LAST_CHUNK = b"0\r\n\r\n"
