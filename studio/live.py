"""The in-progress turn, folded from run events (pure: no I/O, no Django).

A run's events arrive as deltas; the browser must never depend on seeing every delta. So the
live turn keeps the *full* state of every block (the whole text so far, a tool call's current
status and result) and remembers which blocks were added or changed since the last flush. A
push then carries whole blocks, never deltas: applying any later push, or a full render, gives
the same page whatever was lost in between.

Blocks are keyed by (response number, kind, index): provider indices restart with every model
response, and a new response begins after a tool finished or a usage record settled.

In session mode one runtime serves several conversations (the main one, forks, subagents) and
turns follow each other without a caller in between (queued follow-ups start by themselves).
``ContextLive`` tracks one conversation: which transcript messages are settled (rendered from
the store) and which turn is live (rendered from events). Events carry no request id, so the
start of a live turn is found in the transcript: the first turn-starting user message after
the previous live turn's start — preferring the one whose text is the expected prompt.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

#: A tool result longer than this is cut for display (the store keeps the full text).
MAX_RESULT_CHARS = 20_000


@dataclass(slots=True)
class LiveBlock:
    key: str
    kind: str  # text | thinking | tool | retry | notice | steer (a message that joined the turn)
    text: str = ""
    index: int | None = None
    response: int = 0
    tool_call_id: str = ""
    name: str = ""
    arguments: dict[str, Any] | None = None
    status: str = ""  # tool: running | ok | error; notice: info | error | warning
    partial: str = ""
    result: str = ""
    duration_ms: float | None = None
    attempt: int = 0
    max_attempts: int = 0


@dataclass(slots=True)
class LiveTurn:
    """Everything shown for a run that has not ended yet."""

    request_id: str
    prompt: str | None = None  # None for a resume (no new user message)
    agent: str = "build"
    blocks: list[LiveBlock] = field(default_factory=list)
    response: int = 0
    boundary: bool = False
    added: list[str] = field(default_factory=list)
    changed: set[str] = field(default_factory=set)
    context_changed: bool = False
    trace_changed: bool = False
    context_usage: dict[str, int] | None = None

    # -- folding events ------------------------------------------------------------------

    def apply(self, event: dict[str, Any]) -> None:
        """Fold one event (``event.model_dump()``) into the turn."""
        kind = event.get("type")
        if kind in ("text_delta", "thinking_delta"):
            self._delta("text" if kind == "text_delta" else "thinking", int(event.get("index") or 0), event["delta"])
        elif kind == "tool":
            self._tool(event)
        elif kind == "retry":
            self.boundary = True
            if event.get("kind") == "dropped":
                block = self._new_block("retry")
                block.attempt = int(event.get("attempt") or 0)
                block.max_attempts = int(event.get("max_attempts") or 0)
                block.text = str(event.get("reason") or "")
        elif kind == "usage":
            self.boundary = True
            self.trace_changed = True
        elif kind == "context_usage":
            self.context_usage = {"used": int(event["used"]), "total": int(event["total"])}
            self.context_changed = True
        elif kind == "compaction":
            if event.get("phase") == "start":
                block = self._new_block("notice")
                block.status = "info"
                block.text = "Compacting the context…" if not event.get("auto") else "Auto-compacting the context…"
            else:
                block = self._new_block("notice")
                block.status = "info"
                block.text = "Context compacted."
            self.boundary = True
        elif kind in ("plan", "approval"):
            self.trace_changed = True
            if kind == "approval":
                block = self._new_block("notice")
                block.status = "info" if event.get("decision") == "approved" else "warning"
                notes = event.get("notes") or ""
                if event.get("decision") == "approved":
                    block.text = "Plan approved — building it now."
                else:
                    block.text = f"Plan rejected: {notes}" if notes else "Plan rejected."

    def _new_block(self, kind: str, index: int | None = None) -> LiveBlock:
        block = LiveBlock(key=f"b{len(self.blocks)}", kind=kind, index=index, response=self.response)
        self.blocks.append(block)
        self.added.append(block.key)
        return block

    def _delta(self, kind: str, index: int, delta: str) -> None:
        if self.boundary:
            self.response += 1
            self.boundary = False
        for block in reversed(self.blocks):
            if block.response != self.response:
                break
            if block.kind == kind and block.index == index:
                block.text += delta
                self.changed.add(block.key)
                return
        block = self._new_block(kind, index)
        block.text = delta

    def _tool(self, event: dict[str, Any]) -> None:
        call_id = str(event["tool_call_id"])
        block = next((b for b in self.blocks if b.kind == "tool" and b.tool_call_id == call_id), None)
        if block is None:
            block = self._new_block("tool", event.get("index"))
            block.tool_call_id = call_id
            block.status = "running"
        else:
            self.changed.add(block.key)
        block.name = str(event.get("name") or block.name)
        if event.get("arguments") is not None:
            block.arguments = dict(event["arguments"])
        phase = event.get("phase")
        if phase == "update" and event.get("partial") is not None:
            block.partial = clip(str(event["partial"]))
        elif phase == "end":
            block.status = "error" if event.get("is_error") else "ok"
            block.result = clip(str(event.get("result") or ""))
            block.partial = ""
            block.duration_ms = event.get("duration_ms")
            self.boundary = True
        self.trace_changed = True

    # -- flushing ------------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        return bool(self.added or self.changed or self.context_changed or self.trace_changed)

    def take_changes(self) -> tuple[list[LiveBlock], list[LiveBlock], bool, bool]:
        """Return (added, changed, context_changed, trace_changed) and reset the marks."""
        by_key = {b.key: b for b in self.blocks}
        added = [by_key[k] for k in self.added]
        changed = [by_key[k] for k in sorted(self.changed - set(self.added), key=lambda k: int(k[1:]))]
        result = (added, changed, self.context_changed, self.trace_changed)
        self.added = []
        self.changed = set()
        self.context_changed = False
        self.trace_changed = False
        return result

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the channel layer (scale mode) and for rendering."""
        return {
            "request_id": self.request_id,
            "prompt": self.prompt,
            "agent": self.agent,
            "blocks": [asdict(b) for b in self.blocks],
            "context_usage": self.context_usage,
        }


def clip(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters not shown)"


def key_argument(name: str, arguments: dict[str, Any] | None) -> str:
    """The one argument that says what a tool call is about, for its compact row."""
    if not arguments:
        return ""
    for key in ("path", "file_path", "command", "pattern", "query", "url", "task", "name"):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value if len(value) <= 120 else value[:117] + "…"
    if name == "ask_user":
        questions = arguments.get("questions")
        if isinstance(questions, list):
            return f"{len(questions)} question(s)"
    text = json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "…"


# --- one conversation of a session ----------------------------------------------------------------

DELIVERY_PREFIX = "[Background subagent"


def message_text(message: dict[str, Any]) -> str:
    return "\n".join(str(c.get("text", "")) for c in message.get("content", []) if c.get("type") == "text")


def is_turn_start(message: dict[str, Any]) -> bool:
    """A user message that opens a turn: the person's own, or a subagent's delivered result."""
    if message.get("role") != "user":
        return False
    if not message.get("synthetic"):
        return True
    return message_text(message).startswith(DELIVERY_PREFIX)


def entry_index(transcript: list[dict[str, Any]], entry_id: str | None) -> int | None:
    if entry_id is None:
        return None
    for index in range(len(transcript) - 1, -1, -1):
        if transcript[index].get("entry_id") == entry_id:
            return index
    return None


@dataclass(slots=True)
class ContextLive:
    """The live state of one context (``target_id``) of a session.

    ``start_entry`` is the entry id of the live turn's first message (its user message), or
    ``after_entry`` the last settled message when the live turn continues an earlier request
    (a resumed plan review: no new user message). Everything before is rendered from the
    transcript; the live turn from events. ``prev_start`` remembers where the last live turn
    began, so the next one is looked for after it.
    """

    target_id: int
    live: LiveTurn | None = None
    start_entry: str | None = None
    after_entry: str | None = None
    prev_start: str | None = None
    context_usage: dict[str, int] | None = None
    steer_entries: set[str] = field(default_factory=set)
    ended: set[str] = field(default_factory=set)  # request ids whose end event was seen
    fallback_len: int = 0

    def begin(
        self, transcript: list[dict[str, Any]], *, request_id: str = "", expected_prompt: str | None = None
    ) -> LiveTurn:
        """Open the live turn whose first event just arrived (its user message is committed)."""
        index = find_turn_start(transcript, self.prev_start, self.steer_entries, expected_prompt)
        prompt: str | None = None
        live = LiveTurn(request_id=request_id)
        if index is None:
            self.start_entry = None
            self.fallback_len = len(transcript)
        else:
            message = transcript[index]
            self.start_entry = message.get("entry_id")
            self.prev_start = self.start_entry
            self.fallback_len = index
            text = message_text(message)
            if message.get("synthetic"):
                notice = live._new_block("notice")
                notice.status = "info"
                notice.text = text.split("]", 1)[0].lstrip("[") + "." if text.startswith(DELIVERY_PREFIX) else text
            else:
                prompt = text
        live.prompt = prompt
        live.added = []
        self.after_entry = None
        self.live = live
        return live

    def begin_after(self, transcript: list[dict[str, Any]], *, request_id: str, agent: str = "build") -> LiveTurn:
        """Open a live turn that continues ``request_id`` after everything now in the transcript."""
        self.after_entry = transcript[-1].get("entry_id") if transcript else None
        self.start_entry = None
        self.fallback_len = len(transcript)
        self.ended.discard(request_id)
        self.live = LiveTurn(request_id=request_id, agent=agent)
        return self.live

    def end(self, request_id: str | None) -> None:
        if request_id:
            self.ended.add(request_id)
        self.live = None
        self.start_entry = None
        self.after_entry = None

    def settled_len(self, transcript: list[dict[str, Any]]) -> int:
        """How many transcript messages precede the live turn (all of them when none is live)."""
        if self.live is None:
            return len(transcript)
        if self.after_entry is not None:
            index = entry_index(transcript, self.after_entry)
            return index + 1 if index is not None else min(self.fallback_len, len(transcript))
        if self.start_entry is not None:
            index = entry_index(transcript, self.start_entry)
            if index is not None:
                return index
        return min(self.fallback_len, len(transcript))

    def note_steer(self, transcript: list[dict[str, Any]], prompt: str) -> None:
        """A queued steer joined the live turn: show it there, and never take it for a turn start."""
        if self.live is None:
            return
        start = self.settled_len(transcript)
        for message in transcript[start:]:
            entry = message.get("entry_id")
            if message.get("role") == "user" and entry not in self.steer_entries and message_text(message) == prompt:
                self.steer_entries.add(str(entry))
                break
        block = self.live._new_block("steer")
        block.text = prompt


def find_turn_start(
    transcript: list[dict[str, Any]],
    prev_start: str | None,
    steer_entries: set[str],
    expected_prompt: str | None,
) -> int | None:
    """The index of the user message that opened the turn now going live.

    Turns start in order, so it is the first turn-starting message after the previous live
    turn's start; one whose text is the expected prompt wins. Without a previous start (the
    host just opened the store) the newest candidate is taken.
    """
    prev = entry_index(transcript, prev_start)
    first = prev + 1 if prev is not None else 0
    candidates = [
        index
        for index in range(first, len(transcript))
        if is_turn_start(transcript[index]) and transcript[index].get("entry_id") not in steer_entries
    ]
    if not candidates:
        return None
    if expected_prompt is not None:
        for index in candidates:
            if message_text(transcript[index]) == expected_prompt:
                return index
    return candidates[0] if prev is not None else candidates[-1]
