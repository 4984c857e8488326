"""The in-progress turn of each conversation, folded from typed run events (pure: no I/O).

A run's events arrive as deltas; the browser must never depend on seeing every delta. So the
live turn keeps the *full* state of every block (the whole text so far, a tool call's current
status and result) and remembers which blocks were added or changed since the last flush. A
push then carries whole blocks (or, for streaming text, the part not yet sent): applying any
later push, or a full render, gives the same page whatever was lost in between.

Blocks are keyed by (response number, kind, index): provider indices restart with every model
response, and a new response begins after a tool finished or a usage record settled.

One runtime serves several conversations (the main one, forks, subagents), and turns follow
each other without a caller in between (queued follow-ups start by themselves). ``ContextLive``
tracks one conversation. Every event carries the ``request_id`` of the turn it belongs to and
every transcript message the ``request_id`` of the operation that wrote it, so the live turn is
*keyed by its request*: the messages of that request are the live turn's, everything before is
settled and rendered from the store. Nothing is guessed from texts or from the snapshot's turns.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from agentcore.events import (
    AgentEvent,
    ApprovalEvent,
    CompactionEvent,
    ContextUsageEvent,
    RetryEvent,
    SourcesEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolEvent,
    UsageEvent,
    WebSearchEvent,
)

#: A tool result longer than this is cut for display (the store keeps the full text).
MAX_RESULT_CHARS = 20_000
#: Events that open a live turn (a turn's first visible work). ``context_usage`` and ``usage``
#: also arrive between turns, so they never open one.
OPENING_EVENTS = (
    "text_delta",
    "thinking_delta",
    "tool",
    "retry",
    "compaction",
    "web_search",
    "sources",
    "plan",
    "approval",
)
DELIVERY_PREFIX = "[Background subagent"
#: A steer whose turn ended before it could join (it ran as the next turn instead, SPEC S2).
STEER_MISSED = "The turn ended before a tool call, so your steer was sent as the next message."


@dataclass(slots=True)
class LiveBlock:
    key: str
    # text | thinking | tool | retry | notice | steer (a message that joined the turn) | search
    # (a web search: ``text`` its query) | sources (what the answer cited) | compaction (``text``
    # the summary, empty while it is written)
    kind: str
    text: str = ""
    index: int | None = None
    response: int = 0
    tool_call_id: str = ""
    name: str = ""
    arguments: dict[str, Any] | None = None
    # tool: running | ok | error; notice: info | error | warning; retry: dropped | connect;
    # search: running | success | failed; compaction: running | auto | manual
    status: str = ""
    partial: str = ""
    result: str = ""
    duration_ms: float | None = None
    attempt: int = 0
    max_attempts: int = 0
    delay_s: float = 0.0  # retry: the backoff before the next attempt
    endpoint: str = ""  # retry of kind connect: the host:port that could not be reached
    sources: list[dict[str, Any]] = field(default_factory=list)  # search results, cited sources


@dataclass(slots=True)
class LiveTurn:
    """Everything shown for a run that has not ended yet (its request's events)."""

    request_id: str
    agent: str = "build"
    blocks: list[LiveBlock] = field(default_factory=list)
    response: int = 0
    boundary: bool = False
    added: list[str] = field(default_factory=list)
    changed: set[str] = field(default_factory=set)
    context_changed: bool = False
    context_usage: dict[str, int] | None = None
    resumed: bool = False  # continues a request whose earlier messages are already settled

    # -- folding events ------------------------------------------------------------------

    def apply(self, event: AgentEvent) -> None:
        """Fold one typed event into the turn."""
        if isinstance(event, TextDeltaEvent):
            self._delta("text", event.index, event.delta)
        elif isinstance(event, ThinkingDeltaEvent):
            self._delta("thinking", event.index, event.delta)
        elif isinstance(event, ToolEvent):
            self._tool(event)
        elif isinstance(event, RetryEvent):
            self.boundary = True
            if event.kind in ("dropped", "connect"):
                block = self._new_block("retry")
                block.status = event.kind
                block.attempt = event.attempt
                block.max_attempts = event.max_attempts
                block.delay_s = event.delay_s
                block.endpoint = event.endpoint or ""
                # The block names the endpoint itself: keep only what the OS said.
                block.text = event.reason.removeprefix(f"cannot connect to {block.endpoint}: ")
        elif isinstance(event, UsageEvent):
            self.boundary = True
        elif isinstance(event, ContextUsageEvent):
            self.context_usage = {"used": event.used, "total": event.total}
            self.context_changed = True
        elif isinstance(event, WebSearchEvent):
            self._search(event.search)
        elif isinstance(event, SourcesEvent):
            self._sources(event.sources)
        elif isinstance(event, CompactionEvent):
            self._compaction(event)
            self.boundary = True
        elif isinstance(event, ApprovalEvent):
            block = self._new_block("notice")
            if event.decision == "approved":
                block.status = "info"
                block.text = "Plan approved — building it now."
            else:
                block.status = "warning"
                block.text = f"Plan rejected: {event.notes}" if event.notes else "Plan rejected."

    def note(self, kind: str, text: str, status: str = "info") -> LiveBlock:
        """A block the host adds itself (a steer that joined the turn, a delivery notice)."""
        block = self._new_block(kind)
        block.text = text
        block.status = status
        return block

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

    def _search(self, search: dict[str, Any]) -> None:
        """A web search (P2): one block per search id, updated from running to its outcome."""
        search_id = str(search.get("id") or "")
        block = next((b for b in self.blocks if b.kind == "search" and b.tool_call_id == search_id), None)
        if block is None:
            block = self._new_block("search")
            block.tool_call_id = search_id
        else:
            self.changed.add(block.key)
        block.status = str(search.get("status") or block.status or "running")
        block.text = str(search.get("query") or block.text)
        block.sources = [dict(s) for s in search.get("sources") or []] or block.sources
        block.result = str(search.get("error") or "")

    def _sources(self, sources: list[dict[str, Any]]) -> None:
        """Cited sources join the response's sources block (one per response, links deduplicated)."""
        block = next((b for b in reversed(self.blocks) if b.kind == "sources" and b.response == self.response), None)
        if block is None:
            block = self._new_block("sources")
        else:
            self.changed.add(block.key)
        known = {s.get("url") for s in block.sources}
        block.sources.extend(dict(s) for s in sources if s.get("url") not in known)

    def _compaction(self, event: CompactionEvent) -> None:
        """A compaction in the turn: a divider that says it runs, then holds the summary."""
        block = next((b for b in reversed(self.blocks) if b.kind == "compaction" and b.status == "running"), None)
        if event.phase == "start" or block is None:
            block = self._new_block("compaction")
            block.status = "running"
        else:
            self.changed.add(block.key)
        if event.phase == "end":
            block.status = "auto" if event.auto else "manual"
            block.text = event.summary or ""

    def _tool(self, event: ToolEvent) -> None:
        call_id = event.tool_call_id
        block = next((b for b in self.blocks if b.kind == "tool" and b.tool_call_id == call_id), None)
        if block is None:
            block = self._new_block("tool", event.index)
            block.tool_call_id = call_id
            block.status = "running"
        else:
            self.changed.add(block.key)
        block.name = event.name or block.name
        if event.arguments is not None:
            block.arguments = dict(event.arguments)
        if event.phase == "update" and event.partial is not None:
            block.partial = clip(event.partial)
        elif event.phase == "end":
            block.status = "error" if event.is_error else "ok"
            block.result = clip(event.result or "")
            block.partial = ""
            block.duration_ms = event.duration_ms
            self.boundary = True

    # -- flushing ------------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        return bool(self.added or self.changed or self.context_changed)

    def take_changes(self) -> tuple[list[LiveBlock], list[LiveBlock], bool]:
        """Return (added, changed, context_changed) and reset the marks."""
        by_key = {b.key: b for b in self.blocks}
        added = [by_key[k] for k in self.added]
        changed = [by_key[k] for k in sorted(self.changed - set(self.added), key=lambda k: int(k[1:]))]
        result = (added, changed, self.context_changed)
        self.added = []
        self.changed = set()
        self.context_changed = False
        return result

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the channel layer (worker mode) and for rendering."""
        return {
            "request_id": self.request_id,
            "agent": self.agent,
            "blocks": [asdict(b) for b in self.blocks],
            "context_usage": self.context_usage,
            "resumed": self.resumed,
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


def message_text(message: dict[str, Any]) -> str:
    return "\n".join(str(c.get("text", "")) for c in message.get("content", []) if c.get("type") == "text")


def entry_index(transcript: list[dict[str, Any]], entry_id: str | None) -> int | None:
    if entry_id is None:
        return None
    for index in range(len(transcript) - 1, -1, -1):
        if transcript[index].get("entry_id") == entry_id:
            return index
    return None


def request_start(transcript: list[dict[str, Any]], request_id: str) -> int:
    """Where the newest run of ``request_id``'s messages begins (its user message): the live
    turn is the newest, so its messages are the transcript's tail. ``len(transcript)`` when
    the store has none of them yet."""
    index = len(transcript)
    while index > 0 and transcript[index - 1].get("request_id") == request_id:
        index -= 1
    return index


@dataclass(slots=True)
class ContextLive:
    """The live state of one conversation (``target_id``) of a session.

    While a turn is live, the transcript's messages of its request are the live turn's (its
    user message first); a *resumed* request (a plan decision, answers: no new user message)
    continues after ``after_entry``, the last message settled when it resumed.
    """

    target_id: int
    live: LiveTurn | None = None
    after_entry: str | None = None
    after_len: int = 0
    context_usage: dict[str, int] | None = None
    ended: set[str] = field(default_factory=set)  # request ids whose end event was seen
    paused: bool = False  # the last turn that ended here paused (for a review or answers)

    def begin(self, request_id: str, *, agent: str = "build") -> LiveTurn:
        """Open the live turn of ``request_id`` (accepted now, or its first event arrived)."""
        self.paused = False
        self.ended.discard(request_id)
        self.after_entry = None
        self.live = LiveTurn(request_id=request_id, agent=agent)
        return self.live

    def begin_after(self, transcript: list[dict[str, Any]], *, request_id: str, agent: str = "build") -> LiveTurn:
        """Open a live turn that continues ``request_id`` after everything now in the transcript."""
        live = self.begin(request_id, agent=agent)
        live.resumed = True
        self.after_entry = transcript[-1].get("entry_id") if transcript else None
        self.after_len = len(transcript)
        return live

    def end(self, request_id: str | None) -> None:
        if request_id:
            self.ended.add(request_id)
        self.live = None
        self.after_entry = None

    def settled_len(self, transcript: list[dict[str, Any]]) -> int:
        """How many transcript messages precede the live turn (all of them when none is live)."""
        if self.live is None:
            return len(transcript)
        if self.live.resumed:
            index = entry_index(transcript, self.after_entry)
            return index + 1 if index is not None else min(self.after_len, len(transcript))
        return request_start(transcript, self.live.request_id)
