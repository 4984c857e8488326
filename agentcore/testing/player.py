"""Plays one scripted response onto a socket: timing, faults and chunked framing.

Protocol bytes come from an ``Encoder``; this module decides *when* bytes are written and
how a response goes wrong (abrupt close, missing terminal event, hang, in-stream error), so
every fault behaves identically in all three protocols.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agentcore.testing import http11
from agentcore.testing.encoder import COMMENT_FRAME, Encoder, ErrorResponse
from agentcore.testing.steps import (
    Aborted,
    Delay,
    Disconnect,
    Endless,
    GatewayCut,
    Hang,
    HttpError,
    NoTerminal,
    Overflow,
    Step,
    Stop,
    StreamError,
    Text,
    Thinking,
    ToolCall,
    Usage,
    WebSearch,
)


class ConnectionCut(Exception):
    """The script closed the connection; the caller must not reuse it."""


@dataclass(slots=True)
class PlayResult:
    status: int
    keep_alive: bool


def plan_usage(steps: list[Step], request_size: int) -> Usage:
    """The scripted usage, or a plausible one (≈4 bytes per token) when none was scripted."""
    for step in steps:
        if isinstance(step, Usage):
            return step
    produced = 0
    for step in steps:
        if isinstance(step, Text | Thinking):
            produced += len(step.text)
        elif isinstance(step, ToolCall):
            produced += len(json.dumps(step.arguments)) + len(step.name)
    return Usage(input=max(1, request_size // 4), output=max(1, produced // 4))


def plan_stop(steps: list[Step]) -> str:
    for step in steps:
        if isinstance(step, Stop):
            return step.reason
    return "tool_use" if any(isinstance(s, ToolCall) for s in steps) else "stop"


HangWaiter = Callable[[Hang], Awaitable[None]]


class Player:
    def __init__(
        self,
        encoder: Encoder,
        writer: asyncio.StreamWriter,
        steps: list[Step],
        hang: HangWaiter,
        request_id: str,
        on_endless_frame: Callable[[], None] | None = None,
    ) -> None:
        self.encoder = encoder
        self.writer = writer
        self.steps = steps
        self.hang = hang
        self.request_id = request_id
        self.on_endless_frame = on_endless_frame
        self.started = False
        self.sent_events = 0
        self.cut_after = next(
            (s.after_events for s in steps if isinstance(s, Disconnect) and s.after_events is not None), None
        )

    async def _write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def _emit(self, frames: list[bytes]) -> None:
        cut = False
        if self.cut_after is not None and self.sent_events + len(frames) >= self.cut_after:
            frames = frames[: max(0, self.cut_after - self.sent_events)]
            cut = True
        if frames:
            await self._write(b"".join(http11.chunk(f) for f in frames))
            self.sent_events += len(frames)
        if cut:
            raise ConnectionCut

    async def _start(self) -> None:
        if self.started:
            return
        self.started = True
        await self._write(http11.sse_head({"x-request-id": self.request_id, "request-id": self.request_id}))
        await self._emit(self.encoder.preamble())

    async def _error_response(self, error: ErrorResponse) -> PlayResult:
        headers = {"x-request-id": self.request_id, **error.headers}
        await self._write(http11.full_response(error.status, error.body, headers))
        return PlayResult(error.status, keep_alive=True)

    async def play(self) -> PlayResult:
        """Write the whole response. Raises ``ConnectionCut`` when the script drops the socket."""
        stop = plan_stop(self.steps)
        if self.cut_after == 0:
            raise ConnectionCut
        ended = False
        linger = next((s for s in self.steps if isinstance(s, Hang) and s.after_terminal), None)
        for step in self.steps:
            if isinstance(step, Hang) and step.after_terminal:
                continue
            if isinstance(step, Delay):
                await asyncio.sleep(step.seconds)
            elif isinstance(step, Usage | Stop):
                continue
            elif isinstance(step, Disconnect):
                if step.after_events is None:
                    raise ConnectionCut
            elif isinstance(step, HttpError):
                if not self.started:
                    return await self._error_response(self.encoder.http_error(step))
                await self._emit(self.encoder.stream_error(StreamError(step.message, step.error_type, step.code)))
                ended = True
                break
            elif isinstance(step, Overflow):
                if not self.started:
                    return await self._error_response(self.encoder.overflow(step))
                message = f"prompt is too long: {step.tokens} tokens > {step.limit} maximum"
                await self._emit(
                    self.encoder.stream_error(StreamError(message, "invalid_request_error", "context_length_exceeded"))
                )
                ended = True
                break
            elif isinstance(step, Hang):
                if not step.before_headers:
                    await self._start()
                await self.hang(step)
            else:
                await self._start()
                ended = await self._content(step, stop)
                if ended:
                    break
        await self._start()
        if not ended:
            await self._emit(self.encoder.finish(stop, terminal=True))
        if linger is not None:
            await self.hang(linger)
        await self._write(http11.LAST_CHUNK)
        return PlayResult(200, keep_alive=True)

    async def _content(self, step: Step, stop: str) -> bool:
        """Emit one content or in-stream fault step; True when it ended the stream."""
        encoder = self.encoder
        if isinstance(step, Text | Thinking) and step.pace_s > 0:
            for frame in encoder.text(step) if isinstance(step, Text) else encoder.thinking(step):
                await self._emit([frame])
                await asyncio.sleep(step.pace_s)  # server pacing, not synchronisation
        elif isinstance(step, Text):
            await self._emit(encoder.text(step))
        elif isinstance(step, Thinking):
            await self._emit(encoder.thinking(step))
        elif isinstance(step, ToolCall):
            await self._emit(encoder.tool_call(step))
        elif isinstance(step, WebSearch):
            await self._emit(encoder.web_search(step))
        elif isinstance(step, StreamError):
            await self._emit(encoder.stream_error(step))
            return True
        elif isinstance(step, Aborted):
            await self._emit(encoder.aborted(step))
            return True
        elif isinstance(step, NoTerminal):
            frames = encoder.done_marker_end(stop) if step.done_marker else encoder.finish(stop, terminal=False)
            await self._emit(frames)
            return True
        elif isinstance(step, GatewayCut):
            await self._emit(encoder.gateway_cut())
            return True
        elif isinstance(step, Endless):
            await self._endless(step)
        return False

    async def _endless(self, step: Endless) -> None:
        """Write frames until the client hangs up (the write fails, or the server's
        hang-up watch cancels this response)."""
        if step.kind == "text":
            await self._emit(self.encoder.open_text())
        frame = self.encoder.keepalive() if step.kind == "pings" else COMMENT_FRAME
        while True:
            if step.kind == "text":
                frame = self.encoder.text_delta(step.chunk)
            await self._write(http11.chunk(frame))
            if self.on_endless_frame is not None:
                self.on_endless_frame()
            await asyncio.sleep(step.interval_s)  # server pacing, not synchronisation


async def wait_threading_event(event: threading.Event) -> None:
    """Wait for a ``threading.Event`` without blocking the server loop or leaking a thread."""
    while not event.is_set():
        await asyncio.to_thread(event.wait, 0.05)
