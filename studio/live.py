"""The in-progress turn, folded from run events (pure: no I/O, no Django).

A run's events arrive as deltas; the browser must never depend on seeing every delta. So the
live turn keeps the *full* state of every block (the whole text so far, a tool call's current
status and result) and remembers which blocks were added or changed since the last flush. A
push then carries whole blocks, never deltas: applying any later push, or a full render, gives
the same page whatever was lost in between.

Blocks are keyed by (response number, kind, index): provider indices restart with every model
response, and a new response begins after a tool finished or a usage record settled.
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
    kind: str  # text | thinking | tool | retry | notice
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
