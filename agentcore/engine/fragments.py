"""Batching of streamed fragments into commits (SPEC D1, D3).

One transaction per token would cost more than the model stream itself, so deltas are
merged per content block and committed at most every ``FLUSH_INTERVAL_S`` (or when the
buffer grows past ``FLUSH_CHARS``; a host may widen the window: ``StreamWindow``). The events
describing a fragment are released only after its commit, so the durable window a crash can
lose is the text of the last window — and no client has seen that text either. A stream's
first fragment is committed at once, without waiting for a window: the first token is what a
person waits for (it waited a whole window, 20 ms alone and up to 60 ms under a host's load),
and one more commit per answer is the price. After it, and after every commit, text waits at
most one window.

The events of a window are released together, after its commit, so ``PendingEvents`` merges a
window's consecutive deltas of one block into one event: the same text at the same moment as one
event per token, for a fraction of the work in every layer that handles events (the engine's
generators, the session bus, a host's fold and render).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentcore.events import AgentEvent, TextDeltaEvent, ThinkingDeltaEvent
from agentcore.messages import AssistantMessage, TextContent, ThinkingContent

FLUSH_INTERVAL_S = 0.02
FLUSH_CHARS = 16_384
#: The widest window a host may set (``AgentRuntime.set_stream_window``).
MAX_WINDOW_S = 1.0


@dataclass(slots=True)
class StreamWindow:
    """How long streamed fragments may wait for their commit (and their events with them): one
    per runtime, shared by its turns, read at every check so a host's change applies at once.
    A host running many streams in one process widens it — fewer commits and fewer batches of
    events per answer — at the price of that much more delay before text is shown."""

    seconds: float = FLUSH_INTERVAL_S


@dataclass(slots=True)
class FragmentBuffer:
    step: int
    attempt: int
    clock: Callable[[], float] = time.monotonic
    window: StreamWindow = field(default_factory=StreamWindow)
    _parts: list[list[Any]] = field(default_factory=list)  # [index, kind, text]
    _chars: int = 0
    _last_flush: float = 0.0

    def __post_init__(self) -> None:
        self._last_flush = -math.inf  # a stream's first fragment waits for no window

    def add(self, index: int, kind: str, text: str) -> None:
        if self._parts and self._parts[-1][0] == index and self._parts[-1][1] == kind:
            self._parts[-1][2] += text
        else:
            self._parts.append([index, kind, text])
        self._chars += len(text)

    def due(self) -> bool:
        """The window's deadline has passed (or the buffer is full) with fragments buffered."""
        if not self._parts:
            return False
        return self._chars >= FLUSH_CHARS or self.clock() - self._last_flush >= self.window.seconds

    def full(self) -> bool:
        """So much text is buffered that it is committed now, whatever the window."""
        return self._chars >= FLUSH_CHARS

    def deadline(self) -> float | None:
        """When buffered fragments must be flushed, or None when nothing is buffered."""
        return self._last_flush + self.window.seconds if self._parts else None

    def drain(self, op: str) -> list[dict[str, Any]]:
        """Fragment payloads to commit now; the buffer is empty afterwards."""
        payloads = [
            {"op": op, "step": self.step, "attempt": self.attempt, "index": i, "kind": k, "text": t}
            for i, k, t in self._parts
        ]
        self._parts = []
        self._chars = 0
        self._last_flush = self.clock()
        return payloads


@dataclass(slots=True)
class _Delta:
    kind: str  # "text" | "thinking"
    index: int
    parts: list[str]


@dataclass(slots=True)
class PendingEvents:
    """The events waiting for the commit of the fragments they carry, in stream order.

    Consecutive deltas of one block and kind become one ``text_delta`` / ``thinking_delta``
    (any other event in between starts a new one, so the order of everything is kept)."""

    request_id: str | None
    _items: list[AgentEvent | _Delta] = field(default_factory=list)

    def delta(self, kind: str, index: int, text: str) -> None:
        items = self._items
        if items:
            last = items[-1]
            if type(last) is _Delta and last.index == index and last.kind == kind:
                last.parts.append(text)
                return
        items.append(_Delta(kind, index, [text]))

    def add(self, event: AgentEvent) -> None:
        self._items.append(event)

    def drain(self) -> list[AgentEvent]:
        """The events to emit now (after the commit); empty afterwards."""
        items, self._items = self._items, []
        rid = self.request_id
        events: list[AgentEvent] = []
        for item in items:
            if type(item) is _Delta:
                text = item.parts[0] if len(item.parts) == 1 else "".join(item.parts)
                model = TextDeltaEvent if item.kind == "text" else ThinkingDeltaEvent
                events.append(model(index=item.index, delta=text, request_id=rid))  # faster than model_construct
            else:
                events.append(item)  # type: ignore[arg-type]
        return events


def assemble_partial(fragments: list[Any], *, api_kind: str, provider: str, model: str) -> AssistantMessage:
    """Rebuild the committed part of an interrupted reply (text and thinking only, D3)."""
    blocks: dict[tuple[int, str], list[str]] = {}
    order: list[tuple[int, str]] = []
    for fragment in fragments:
        key = (fragment.index, fragment.kind)
        if key not in blocks:
            blocks[key] = []
            order.append(key)
        blocks[key].append(fragment.text)
    content: list[Any] = []
    for index, kind in sorted(order):
        text = "".join(blocks[(index, kind)])
        content.append(ThinkingContent(text) if kind == "thinking" else TextContent(text))
    return AssistantMessage(content, api_kind=api_kind, provider=provider, model=model, stop_reason="error")
