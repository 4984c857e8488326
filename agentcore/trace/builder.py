"""Building the Trace's spans from a store's records, incrementally (SPEC W8).

``TraceBuilder`` folds records (``TraceRecords``) into spans in commit order, one pass, O(records):
each record touches at most a couple of spans found by id. ``add()`` takes any later batch (a
reader's rows after the last ``seq`` it saw), so a live view rebuilds only what changed after
each commit; ``trace()`` filters and orders the spans (for a turn, a conversation or the whole
store) and ``changed_since(seq)`` lists those a batch touched.

Where each span's facts come from (the timing fields are documented in
``docs/pending/i26-trace-core.md``): a turn from its receipt (``started_ms`` / ``ended_ms``,
status) and its user message; a model attempt from its ledger row (and, for an attempt a crash
cut short, from its first fragment); a tool call from its intent and result entries; a script and
its nested calls from the code-mode execution log; a wait from the pending request of a paused
receipt and the entry that resolved it; a gap from a ``resume`` entry; a compaction from its
entry and its attempts' rows; tasks from their rows (``agentcore.trace.tasks``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any

from agentcore.harness.storage import Entry, Receipt, Register, TaskRow, UsageRow
from agentcore.trace.model import SpanKind, SpanStatus, Trace, TraceConversation, TraceSpan
from agentcore.trace.records import TraceRecords
from agentcore.trace.redact import Redactor
from agentcore.trace.tasks import task_spans

PREVIEW = 200
_TURN_STATUS: dict[str, SpanStatus] = {
    "completed": "ok",
    "failed": "error",
    "aborted": "cancelled",
    "running": "running",
    "paused": "waiting",
    "queued": "queued",
}
_TERMINAL = frozenset({"completed", "failed", "aborted"})
_COMPACTION_STATUS: dict[str, SpanStatus] = {"completed": "ok", "failed": "error", "aborted": "cancelled"}
_NESTED_ERRORS = frozenset({"failed", "blocked", "invalid", "denied", "unknown"})
_TOKENS = ("input_tokens", "output_tokens", "cached_input_tokens", "cache_creation_tokens", "reasoning_tokens")


class TraceBuilder:
    """The spans of one store, kept current by ``add()``; see the module docstring."""

    def __init__(self, label: str = "", *, redactor: Redactor | None = None) -> None:
        self.label = label
        self._redact = redactor or Redactor()
        self.last_seq = 0
        self._spans: dict[str, TraceSpan] = {}
        self._contexts: dict[str, dict[str, Any]] = {}  # conversation id -> its ``conv:`` register
        self._calls: dict[tuple[str, str], tuple[str, str, Any]] = {}  # (conv, call id) -> entry, name, args
        self._tool_by_display: dict[tuple[str, str], str] = {}  # (conv, tool_call_id) -> tool span id
        self._task_spans: dict[str, list[str]] = {}  # task id -> the span ids its row made
        self._last_ms: dict[str, int] = {}  # request id -> the newest time any of its records holds
        self._resume_seq: dict[str, int] = {}  # request id -> seq of its newest resume
        self._turn_status: dict[str, str] = {}  # request id -> its receipt's status
        self._touched: list[str] = []

    # --- folding records ---------------------------------------------------------------------

    def add(self, records: TraceRecords) -> list[str]:
        """Fold ``records`` (rows after ``last_seq``) in; returns the ids of the spans touched."""
        self._touched = []
        for _, _, kind, row in _in_commit_order(records):
            if kind == 0:
                self._entry(row)
            elif kind == 1:
                self._usage(row)
            elif kind == 2:
                self._receipt(row)
            elif kind == 3:
                self._register(row)
            else:
                self._task(row)
        self.last_seq = max(self.last_seq, records.last_seq)
        return list(dict.fromkeys(self._touched))

    def _span(
        self,
        span_id: str,
        kind: SpanKind,
        conversation_id: str,
        seq: int,
        request_id: str | None = None,
        parent_id: str | None = None,
        name: str | None = None,
    ) -> TraceSpan:
        """The span ``span_id`` (made on first use), marked as touched by the record at ``seq``."""
        span = self._spans.get(span_id)
        if span is None:
            span = TraceSpan(span_id, kind, name or kind, conversation_id, parent_id, request_id)
            self._spans[span_id] = span
        else:
            if parent_id is not None:
                span.parent_id = parent_id
            if name is not None:
                span.name = name
        if seq > span.seq:
            span.seq = seq
        self._touched.append(span_id)
        return span

    def _text(self, payload: dict[str, Any], key: str) -> str | None:
        """A free-text field of a record (an error, a reason), without credentials."""
        value = payload.get(key)
        return self._redact.text(value) if isinstance(value, str) else None

    def _turn(self, conversation_id: str, request_id: str, seq: int) -> TraceSpan:
        return self._span(f"turn:{request_id}", "turn", conversation_id, seq, request_id)

    def _seen(self, request_id: str | None, at: Any) -> None:
        """Note a time a record of ``request_id`` holds (the latest one starts a resume's gap)."""
        if request_id is not None and isinstance(at, int) and at > self._last_ms.get(request_id, 0):
            self._last_ms[request_id] = at

    def _register(self, row: Register) -> None:
        if row.key.startswith("conv:"):
            self._contexts[row.key[len("conv:") :]] = row.value
        elif row.key.startswith("op:") and row.value.get("request_id"):
            self._seen(str(row.value["request_id"]), row.value.get("at_ms"))

    def _entry(self, entry: Entry) -> None:
        kind = entry.kind
        if kind == "message":
            self._message(entry)
        elif kind == "fragment":
            self._fragment(entry)
        elif kind == "tool_intent":
            self._intent(entry)
        elif kind in ("code_run", "nested_intent", "nested_result", "code_run_end"):
            self._code(entry)
        elif kind == "compaction":
            self._compaction(entry)
        elif kind == "resume" and entry.payload.get("op"):
            self._resume(entry)

    def _fragment(self, entry: Entry) -> None:
        p = entry.payload
        request_id = str(p.get("op"))
        self._seen(request_id, p.get("at_ms"))
        if "started_ms" not in p:
            return  # only an attempt's first fragment carries its start
        record_id = f"{request_id}:{p.get('step')}:{p.get('attempt')}"
        span = self._spans.get(f"model:{record_id}")
        if span is not None and span.end_ms is not None:
            return  # already settled (its ledger row has everything)
        span = self._model_span(entry.conversation_id, record_id, request_id, f"turn:{request_id}", entry.seq)
        span.start_ms = _int(p.get("started_ms"))
        span.attributes.update(step=p.get("step"), attempt=p.get("attempt"))
        span.attributes["first_token_ms"] = _int(p.get("first_token_ms"))
        span.status = "running"
        self._turn(entry.conversation_id, request_id, entry.seq)

    def _model_span(self, conversation_id: str, record_id: str, request_id: str, parent: str, seq: int) -> TraceSpan:
        return self._span(f"model:{record_id}", "model", conversation_id, seq, request_id, parent)

    def _message(self, entry: Entry) -> None:
        p = entry.payload
        message = p.get("message") or {}
        role = message.get("role")
        request_id = p.get("op")
        conversation = entry.conversation_id
        if role == "assistant":
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_call":
                    self._calls[(conversation, str(block.get("id")))] = (entry.id, str(block.get("name")), block)
            return
        if role == "user" and request_id:
            turn = self._turn(conversation, str(request_id), entry.seq)
            if p.get("synthetic"):
                wait = p.get("wait")
                if isinstance(wait, dict):
                    self._wait(conversation, str(request_id), wait, turn.id, entry)
            elif "user_entry" not in turn.refs:
                turn.refs["user_entry"] = entry.id
                turn.attributes["prompt"] = self._redact.text(_preview(message))
            return
        call_key = p.get("call_key")
        if role != "tool_result" or not call_key:
            return
        request_id = str(request_id) if request_id else _request_of_call(str(call_key))
        span = self._tool(conversation, str(call_key), request_id, entry.seq, str(message.get("tool_call_id") or ""))
        span.name = f"execute_tool {message.get('tool_name') or span.attributes.get('tool')}"
        span.attributes["tool"] = message.get("tool_name") or span.attributes.get("tool")
        started = _int(p.get("started_ms"))
        if started is not None:
            span.start_ms = started
        span.end_ms = _int(p.get("ended_ms"))
        span.status = "error" if message.get("is_error") else "ok"
        if p.get("recovery"):
            span.attributes["recovery"] = p["recovery"]
            if p["recovery"] == "interrupted":
                span.status = "interrupted"
        if p.get("not_run"):  # the run ended before the call ran
            span.attributes["not_run"] = p["not_run"]
            span.status = "cancelled" if p["not_run"] == "aborted" else "error"
        span.attributes["result_preview"] = self._redact.text(_preview(message))
        span.refs["result_entry"] = entry.id
        self._seen(request_id, p.get("ended_ms"))
        wait = p.get("wait")
        if isinstance(wait, dict):
            self._wait(conversation, request_id, wait, span.id, entry)

    def _tool(self, conversation: str, call_key: str, request_id: str, seq: int, call_id: str) -> TraceSpan:
        span = self._span(f"tool:{call_key}", "tool", conversation, seq, request_id, f"turn:{request_id}")
        if "call_key" not in span.attributes:
            span.attributes["call_key"] = call_key
            call = self._calls.pop((conversation, call_id), None)
            if call is not None:
                assistant, name, _block = call
                display = f"{assistant[:12]}:{call_id}"
                span.attributes.update(tool=name, tool_call_id=display)
                span.refs["assistant_entry"] = assistant
                span.name = f"execute_tool {name}"
                self._tool_by_display[(conversation, display)] = span.id
            self._turn(conversation, request_id, seq)
        return span

    def _intent(self, entry: Entry) -> None:
        p = entry.payload
        call_key = str(p.get("call_key"))
        request_id = _request_of_call(call_key)
        span = self._tool(entry.conversation_id, call_key, request_id, entry.seq, str(p.get("id") or ""))
        span.attributes.setdefault("tool", p.get("name"))
        span.attributes["replay"] = p.get("replay")
        if span.name == "tool":
            span.name = f"execute_tool {p.get('name')}"
        if span.start_ms is None:
            span.start_ms = _int(p.get("at_ms"))
        if span.end_ms is None:
            span.status = "running"
        span.refs["intent_entry"] = entry.id
        self._seen(request_id, p.get("at_ms"))

    def _wait(self, conversation: str, request_id: str, wait: dict[str, Any], parent: str, entry: Entry) -> None:
        kind = str(wait.get("kind"))
        name = f"wait for {kind.replace('_', ' ')}"
        span = self._span(f"wait:{wait.get('approval_id')}", "wait", conversation, entry.seq, request_id, parent, name)
        span.start_ms, span.end_ms, span.status = _int(wait.get("since_ms")), _int(wait.get("until_ms")), "ok"
        span.attributes.update(wait_kind=kind, approval_id=wait.get("approval_id"))
        if wait.get("decision"):
            span.attributes["decision"] = wait["decision"]
        span.refs["entry"] = entry.id
        self._seen(request_id, span.end_ms)

    def _code(self, entry: Entry) -> None:
        p = entry.payload
        parent = str(p.get("parent"))
        request_id = _request_of_call(parent)
        conversation = entry.conversation_id
        script_id = f"script:{parent}"
        if entry.kind in ("code_run", "code_run_end"):
            name = "codemode script"
            script = self._span(script_id, "script", conversation, entry.seq, request_id, f"tool:{parent}", name)
            if entry.kind == "code_run":
                script.start_ms = _int(p.get("clock_ms"))
                script.status = "running" if script.end_ms is None else script.status
                script.attributes.update(engine=p.get("engine"), limits=p.get("limits"), task_id=p.get("task_id"))
                script.refs["code_run_entry"] = entry.id
            else:
                script.end_ms = _int(p.get("ended_ms"))
                status = str(p.get("status"))
                script.status = "ok" if status == "completed" else "cancelled" if status == "cancelled" else "error"
                script.attributes.update(end_status=status, calls=p.get("calls"), replayed=p.get("replayed") or [])
                script.attributes["error"] = self._text(p, "error")
                script.refs["code_run_end_entry"] = entry.id
                for index in p.get("replayed") or []:
                    nested = self._spans.get(f"nested:{parent}/n{index}")
                    if nested is not None:
                        nested.attributes["replayed"] = True
            self._seen(request_id, p.get("ended_ms") or p.get("clock_ms"))
            return
        key = str(p.get("key") or f"{parent}/n{p.get('index')}")
        name = f"execute_tool {p.get('name')}"
        nested = self._span(f"nested:{key}", "nested_call", conversation, entry.seq, request_id, script_id, name)
        nested.attributes.update(tool=p.get("name"), index=p.get("index"), script_ms=p.get("at_ms"))
        if entry.kind == "nested_intent":
            nested.start_ms = _int(p.get("started_ms"))
            nested.status = "running" if nested.end_ms is None else nested.status
            nested.attributes["replay"] = p.get("replay")
            nested.refs["intent_entry"] = entry.id
        else:
            if _int(p.get("started_ms")) is not None:
                nested.start_ms = _int(p.get("started_ms"))
            nested.end_ms = _int(p.get("ended_ms"))
            status = str(p.get("status"))
            nested.status = "error" if status in _NESTED_ERRORS else "cancelled" if status == "cancelled" else "ok"
            nested.attributes.update(call_status=status, duration_ms=p.get("duration_ms"), rerun=bool(p.get("rerun")))
            nested.refs["result_entry"] = entry.id
        self._seen(request_id, p.get("ended_ms") or p.get("started_ms"))

    def _compaction(self, entry: Entry) -> None:
        p = entry.payload
        if p.get("task_id"):
            span_id, request_id, parent = f"compaction:{p['task_id']}", None, None
        elif p.get("op"):
            request_id = str(p["op"])
            span_id, parent = f"compaction:{request_id}:{p.get('step')}", f"turn:{request_id}"
            self._turn(entry.conversation_id, request_id, entry.seq)
        else:  # written before compactions recorded their operation
            span_id, request_id, parent = f"compaction:{entry.id}", None, None
        span = self._span(span_id, "compaction", entry.conversation_id, entry.seq, request_id, parent)
        span.status = "ok"
        if _int(p.get("started_ms")) is not None:
            span.start_ms = _int(p.get("started_ms"))
        span.end_ms = _int(p.get("ended_ms"))
        span.attributes.update(auto=bool(p.get("auto")), background=bool(p.get("background")))
        span.attributes["summarized"] = p.get("summarized")
        span.refs["compaction_entry"] = entry.id
        self._seen(request_id, p.get("ended_ms"))

    def _resume(self, entry: Entry) -> None:
        p = entry.payload
        request_id = str(p["op"])
        since = _int(p.get("since_ms"))
        last = self._last_ms.get(request_id)
        start = max(t for t in (since, last) if t is not None) if since is not None or last is not None else None
        span = self._span(
            f"gap:{entry.id}", "gap", entry.conversation_id, entry.seq, request_id, f"turn:{request_id}", "not running"
        )
        span.start_ms, span.end_ms, span.status = start, _int(p.get("at_ms")), "ok"
        span.attributes.update(
            owner_id=p.get("owner_id"), previous_owner=p.get("previous_owner"), phase=p.get("phase"), step=p.get("step")
        )
        span.refs["resume_entry"] = entry.id
        self._resume_seq[request_id] = entry.seq
        self._turn(entry.conversation_id, request_id, entry.seq)
        self._seen(request_id, p.get("at_ms"))

    def _usage(self, row: UsageRow) -> None:
        p = row.payload
        request_id = str(p.get("request_id") or row.record_id.rsplit(":", 2)[0])
        parent = f"turn:{request_id}"
        if p.get("purpose") == "compaction":
            parent = self._compaction_of(row, request_id)
        span = self._model_span(row.conversation_id, row.record_id, request_id, parent, row.seq)
        model = p.get("model") or ""
        span.name = f"chat {model}".strip()
        span.start_ms = _int(p.get("started_ms"))
        span.end_ms = _int(p.get("ended_ms"))
        span.status = "ok" if p.get("ok", True) else "error"
        first = _int(p.get("first_token_ms"))
        attributes: dict[str, Any] = {name: int(p.get(name) or 0) for name in _TOKENS}
        attributes.update(
            model=model,
            provider=p.get("provider"),
            cost=float(p.get("cost") or 0.0),
            cost_detail=p.get("cost_detail"),
            stop_reason=p.get("stop_reason"),
            purpose=p.get("purpose") or "turn",
            first_token_ms=first,
            time_to_first_token_ms=first - span.start_ms if first is not None and span.start_ms is not None else None,
        )
        step, attempt = p.get("step"), p.get("attempt")
        if step is None and p.get("purpose") != "compaction":  # rows written before they said so
            parts = row.record_id.rsplit(":", 2)
            step, attempt = (_int_text(parts[1]), _int_text(parts[2])) if len(parts) == 3 else (None, None)
        attributes.update(step=step, attempt=attempt)
        for key in ("retry", "error"):
            if isinstance(p.get(key), dict):
                attributes[key] = self._redact.value(p[key])
        span.attributes.update(attributes)
        span.refs["usage_record"] = row.record_id
        for key in ("context_entry", "response_entry"):
            if p.get(key):
                span.refs[key] = str(p[key])
        self._seen(request_id, p.get("ended_ms"))
        if parent.startswith("turn:"):
            self._turn(row.conversation_id, request_id, row.seq)

    def _compaction_of(self, row: UsageRow, request_id: str) -> str:
        """The compaction span a summary attempt belongs to (made here when it failed and so
        never wrote its entry)."""
        p = row.payload
        if p.get("background"):
            span_id, parent, request = f"compaction:{request_id}", None, None
        elif p.get("step") is not None:
            span_id, parent, request = f"compaction:{request_id}:{p['step']}", f"turn:{request_id}", request_id
            self._turn(row.conversation_id, request_id, row.seq)
        else:
            return f"turn:{request_id}"
        span = self._span(span_id, "compaction", row.conversation_id, row.seq, request, parent)
        if span.start_ms is None:
            started = _int(p.get("compaction_started_ms"))
            span.start_ms = started if started is not None else _int(p.get("started_ms"))
        if span.end_ms is None and not p.get("ok", True):
            span.end_ms, span.status = _int(p.get("ended_ms")), "error"
        span.attributes.update(auto=bool(p.get("auto")), background=bool(p.get("background")))
        return span_id

    def _receipt(self, row: Receipt) -> None:
        p = row.payload
        request_id = row.request_id
        known = f"turn:{request_id}" in self._spans
        if not known and not any(key in p for key in ("started_ms", "final", "input_hash", "queued_ms")):
            return  # a control command's receipt, not a turn
        turn = self._turn(row.conversation_id, request_id, row.seq)
        status = str(p.get("status") or "")
        self._turn_status[request_id] = status
        turn.status = _TURN_STATUS.get(status, "unknown")
        turn.start_ms = _int(p.get("started_ms")) if "started_ms" in p else _int(p.get("queued_ms"))
        turn.end_ms = _int(p.get("ended_ms"))
        final: dict[str, Any] = p["final"] if isinstance(p.get("final"), dict) else {}
        turn.attributes.update(status=status, error_code=final.get("error_code"))
        turn.attributes["error"] = self._text(final, "error")
        if isinstance(final.get("usage"), dict):
            turn.attributes["usage"] = final["usage"]
        if p.get("queued_ms") is not None:
            turn.attributes["queued_ms"] = p["queued_ms"]
        turn.refs["receipt"] = request_id
        if isinstance(p.get("trace"), dict):
            turn.attributes["trace_anchor"] = p["trace"]  # the live spans' trace (agentcore.tracing)
        self._seen(request_id, p.get("ended_ms") or p.get("started_ms"))
        pending = p.get("pending")
        if isinstance(pending, dict) and pending.get("approval_id"):
            self._open_wait(row, pending)
        unanswered = p.get("unanswered")
        if isinstance(unanswered, dict) and unanswered.get("approval_id"):
            self._open_wait(row, unanswered)  # the run ended while it waited: the wait ends with it
            wait = self._spans[f"wait:{unanswered['approval_id']}"]
            wait.end_ms = _int(unanswered.get("until_ms"))
            wait.status = "cancelled" if status == "aborted" else "interrupted"

    def _open_wait(self, row: Receipt, pending: dict[str, Any]) -> None:
        """A paused turn's request for a person, still unanswered (its answer closes it)."""
        key = str(pending["approval_id"])
        kind = str(pending.get("kind"))
        parent = f"turn:{row.request_id}"
        if kind == "ask_user" and pending.get("tool_call_id"):  # the question is a tool call, still open
            call = self._tool(row.conversation_id, key, row.request_id, row.seq, str(pending["tool_call_id"]))
            if call.start_ms is None:
                call.start_ms = _int(pending.get("since_ms"))
            if call.end_ms is None:
                call.status = "waiting"
            parent = call.id
        elif kind == "tool_approval" and f"tool:{key}" in self._spans:
            parent = f"tool:{key}"
        name = f"wait for {kind.replace('_', ' ')}"
        span = self._span(f"wait:{key}", "wait", row.conversation_id, row.seq, row.request_id, parent, name)
        if span.end_ms is None:
            span.start_ms, span.status = _int(pending.get("since_ms")), "waiting"
        span.attributes.update(wait_kind=kind, approval_id=key)
        span.refs["receipt"] = row.request_id

    def _task(self, row: TaskRow) -> None:
        kind = row.payload.get("kind", "task")
        for stale in self._task_spans.pop(row.task_id, []):
            self._spans.pop(stale, None)
        if kind == "compaction":
            self._background_compaction(row)
            return
        if kind != "task":
            return
        parent_task = row.payload.get("parent_id")
        parent = f"task:{parent_task}" if parent_task else None
        made = task_spans(row, parent, self._redact)
        if parent is None and row.payload.get("request_id"):
            made[0].attributes["started_by"] = row.payload["request_id"]  # a tool call's id, or a command's
        for span in made:
            self._spans[span.id] = span
            self._touched.append(span.id)
        self._task_spans[row.task_id] = [span.id for span in made]

    def _background_compaction(self, row: TaskRow) -> None:
        p = row.payload
        span = self._span(f"compaction:{row.task_id}", "compaction", row.conversation_id, row.seq)
        span.start_ms = _int(p.get("created_ms"))
        status = str(p.get("status") or "")
        if status != "running":
            span.end_ms = _int(p.get("ended_ms"))
        span.status = _COMPACTION_STATUS.get(status, "running")
        span.attributes.update(background=True, auto=bool(p.get("auto")), task_id=row.task_id)
        span.attributes["error"] = self._text(p, "error")
        span.refs["task_id"] = row.task_id

    # --- reading the trace -------------------------------------------------------------------

    def conversations(self) -> list[TraceConversation]:
        """The store's conversations the session protocol registered (forks and subagents); the
        main conversation has no register and appears as the one its spans name."""
        out: list[TraceConversation] = []
        for conversation_id, value in sorted(self._contexts.items(), key=lambda kv: int(kv[1].get("target_id", 0))):
            kind = value.get("kind")
            if kind not in ("fork", "subagent"):
                continue
            base = value.get("base") if isinstance(value.get("base"), dict) else None
            parent = conversation_id.rsplit("/sub/", 1)[0] if kind == "subagent" else (base or {}).get("conversation")
            out.append(
                TraceConversation(
                    conversation_id=conversation_id,
                    kind=kind,
                    target_id=int(value.get("target_id", 0)),
                    parent_conversation_id=parent,
                    base=base,
                    owner_request=value.get("owner_request"),
                    owner_call=value.get("owner_call"),
                    label=str(value.get("label") or ""),
                    created_ms=_int(value.get("created_ms")),
                    deleted=bool(value.get("deleted")),
                )
            )
        return out

    def trace(self, *, request_id: str | None = None, conversation_id: str | None = None) -> Trace:
        """The spans of one turn (and everything under it: its calls' subagents and tasks), of one
        conversation (and its subagents), or of the whole store, in timeline order."""
        spans = [self._resolved(span) for span in self._spans.values()]
        if request_id is not None or conversation_id is not None:
            spans = _subtree(spans, request_id, conversation_id)
        _fill_turn_times(spans)
        spans.sort(key=lambda s: (s.start_ms is None, s.start_ms or 0, s.seq, s.id))
        return Trace(tuple(spans), tuple(self.conversations()), self.last_seq, self.label)

    def changed_since(self, seq: int) -> list[TraceSpan]:
        """The spans built from records committed after ``seq``."""
        return [self._resolved(span) for span in self._spans.values() if span.seq > seq]

    def _resolved(self, span: TraceSpan) -> TraceSpan:
        """A copy with what depends on later records: subagent turns under their call, tasks
        under the call that started them, and open spans of a finished or resumed request
        marked ``interrupted``."""
        out = TraceSpan(
            span.id, span.kind, span.name, span.conversation_id, span.parent_id, span.request_id, span.start_ms,
            span.end_ms, span.status, dict(span.attributes), dict(span.refs), span.seq,
        )  # fmt: skip
        if span.kind == "turn":
            context = self._contexts.get(span.conversation_id) or {}
            if context.get("kind") == "subagent":
                out.kind = "subagent"
                out.name = f"subagent {context.get('label') or ''}".strip()
                parent_conversation = span.conversation_id.rsplit("/sub/", 1)[0]
                out.parent_id = self._tool_by_display.get((parent_conversation, str(context.get("owner_call"))))
        elif span.kind == "task" and span.parent_id is None and span.attributes.get("started_by"):
            out.parent_id = self._tool_by_display.get((span.conversation_id, str(span.attributes["started_by"])))
        if out.end_ms is None and out.status in ("running", "waiting", "unknown") and out.request_id is not None:
            turn = self._turn_status.get(out.request_id)
            if turn == "aborted":
                out.status = "cancelled"
            elif turn in _TERMINAL or self._resume_seq.get(out.request_id, 0) > out.seq:
                out.status = "interrupted"
        return out


def _in_commit_order(records: TraceRecords) -> Iterator[tuple[int, int, int, Any]]:
    """Every row, ordered by commit; inside a commit: entries, ledger, receipts, registers, tasks.
    Registers come after the entries of their commit: a resume's entry must see the times
    written before it, not the program counter its own commit re-stamps."""
    tables: list[list[Any]] = [records.entries, records.usage, records.receipts, records.registers, records.tasks]
    return heapq.merge(*(_ranked(rows, rank) for rank, rows in enumerate(tables)), key=lambda item: item[:2])


def _ranked(rows: list[Any], rank: int) -> Iterator[tuple[int, int, int, Any]]:
    for row in rows:
        yield row.seq, rank, rank, row


def _subtree(spans: list[TraceSpan], request_id: str | None, conversation_id: str | None) -> list[TraceSpan]:
    children: dict[str | None, list[TraceSpan]] = {}
    for span in spans:
        children.setdefault(span.parent_id, []).append(span)
    if request_id is not None:
        roots = [s for s in spans if s.request_id == request_id and (s.kind == "turn" or s.parent_id is None)]
    else:
        roots = [s for s in spans if s.conversation_id == conversation_id and (s.parent_id is None or s.kind == "turn")]
    seen: dict[str, TraceSpan] = {}
    stack = list(roots)
    while stack:
        span = stack.pop()
        if span.id in seen:
            continue
        seen[span.id] = span
        stack.extend(children.get(span.id, ()))
    return list(seen.values())


def _fill_turn_times(spans: list[TraceSpan]) -> None:
    """A turn whose receipt holds no times (an older store) spans its children's known times."""
    bounds: dict[str, list[int]] = {}
    for span in spans:
        if span.kind != "turn" and span.request_id is not None:
            times = [t for t in (span.start_ms, span.end_ms) if t is not None]
            if times:
                known = bounds.setdefault(f"turn:{span.request_id}", [min(times), max(times)])
                known[0], known[1] = min(known[0], *times), max(known[1], *times)
    for span in spans:
        if span.kind in ("turn", "subagent") and span.id in bounds:
            if span.start_ms is None:
                span.start_ms = bounds[span.id][0]
                span.attributes["times_from_children"] = True
            if span.end_ms is None and span.status in ("ok", "error", "cancelled"):
                span.end_ms = bounds[span.id][1]
                span.attributes["times_from_children"] = True


def _request_of_call(call_key: str) -> str:
    """The request id in a call key ``<request>/<step>/<index>`` (request ids may hold slashes)."""
    return call_key.rsplit("/", 2)[0]


def _preview(message: dict[str, Any]) -> str:
    """The start of a message's text (a tool's output may be megabytes: joined only up to PREVIEW)."""
    parts: list[str] = []
    size = 0
    for block in message.get("content") or []:
        text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, str):
            parts.append(text[: PREVIEW - size])
            size += len(parts[-1])
            if size >= PREVIEW:
                break
    return "".join(parts)


def _int(value: Any) -> int | None:
    """A stored time or count, or None (absent in an older record, or not a number)."""
    if type(value) is int:
        return value
    return int(value) if type(value) is float else None


def _int_text(value: str) -> int | None:
    return int(value) if value.isdigit() else None


def build_trace(
    source: Any, *, request_id: str | None = None, conversation_id: str | None = None, after_seq: int = 0
) -> Trace:
    """Read ``source`` (``agentcore.trace.records.open_trace_source``) and build its trace."""
    from agentcore.trace.records import open_trace_source

    reader = open_trace_source(source)
    builder = TraceBuilder(reader.label)
    builder.add(reader.read(after_seq))
    return builder.trace(request_id=request_id, conversation_id=conversation_id)
