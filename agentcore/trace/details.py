"""A span's details, loaded from the store when a UI asks for them (SPEC W8: "what was sent and
received, from the store; never credentials").

The timeline carries only what it draws; ``span_details`` reads the records a span names in its
``refs``: a model request's context as it was sent (rebuilt from the conversation's entries up
to ``context_entry``, through the same projection the runtime uses) and its response, a tool
call's arguments and result, a script and its output, a nested call's arguments and value, a
wait's question and answer, a compaction's summary, a task's row, a resume's owners. The system
prompt and the tool definitions are not stored, so they are not part of it. Everything returned
has passed ``Redactor``.
"""

from __future__ import annotations

from typing import Any

from agentcore.errors import StoreError
from agentcore.harness.projection import StoreView
from agentcore.harness.storage import Entry, StoreState
from agentcore.messages import message_to_dict
from agentcore.trace.model import TraceSpan
from agentcore.trace.records import TraceRecords, TraceSource, open_trace_source
from agentcore.trace.redact import Redactor

_ENTRY_REFS = (
    "response_entry",
    "assistant_entry",
    "intent_entry",
    "result_entry",
    "code_run_entry",
    "code_run_end_entry",
    "compaction_entry",
    "resume_entry",
    "user_entry",
    "entry",
)


def span_details(source: Any, span: TraceSpan, *, redactor: Redactor | None = None) -> dict[str, Any]:
    """What ``span`` sent and received, read from ``source`` (see ``open_trace_source``)."""
    reader = open_trace_source(source)
    redact = redactor or Redactor()
    refs = span.refs
    wanted = [refs[name] for name in _ENTRY_REFS if name in refs]
    needs_all = span.kind == "model" and "context_entry" in refs
    indexed = hasattr(reader, "entries_by_id") and hasattr(reader, "row")
    records: TraceRecords | None = reader.read(0) if needs_all or not indexed else None
    entries = _entries(reader, records, wanted)
    out: dict[str, Any] = {"span_id": span.id, "kind": span.kind}
    payloads = {name: entries[refs[name]].payload for name in _ENTRY_REFS if name in refs and refs[name] in entries}
    if span.kind == "model":
        out.update(_model(span, records, payloads))
    elif span.kind in ("tool", "nested_call"):
        out.update(_call(payloads))
    elif span.kind == "script":
        header, end = payloads.get("code_run_entry") or {}, payloads.get("code_run_end_entry") or {}
        out.update(script=header.get("script"), limits=header.get("limits"), end=end)
    elif span.kind == "wait":
        out.update(entry=payloads.get("entry"), receipt=_receipt(reader, records, refs.get("receipt")))
    elif span.kind in ("turn", "subagent"):
        user = payloads.get("user_entry") or {}
        out.update(prompt=user.get("message"), receipt=_receipt(reader, records, refs.get("receipt")))
    elif span.kind == "compaction":
        out.update(compaction=payloads.get("compaction_entry"))
    elif span.kind == "gap":
        out.update(resume=payloads.get("resume_entry"))
    if "task_id" in refs:
        out["task"] = _task(reader, records, refs["task_id"])
    return dict(redact.value(out))


def _entries(reader: TraceSource, records: TraceRecords | None, ids: list[str]) -> dict[str, Entry]:
    if records is not None:
        wanted = set(ids)
        return {e.id: e for e in records.entries if e.id in wanted}
    return dict(reader.entries_by_id(ids))  # type: ignore[attr-defined]


def _model(span: TraceSpan, records: TraceRecords | None, payloads: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    response = payloads.get("response_entry")
    out["response"] = response.get("message") if response else None
    if records is not None:
        row = next((u for u in records.usage if u.record_id == span.refs.get("usage_record")), None)
        out["usage"] = row.payload if row is not None else None
        out["messages"] = _context(records, span.conversation_id, span.refs.get("context_entry"))
    return out


def _context(records: TraceRecords, conversation_id: str, until: str | None) -> list[dict[str, Any]] | None:
    """The model-visible messages of ``conversation_id`` as of entry ``until``: the projection a
    fork from that entry would start with (compactions and resets applied)."""
    if until is None:
        return None
    state = StoreState(
        owner_id="",
        fence=0,
        last_seq=records.last_seq,
        entries=records.entries,
        registers={r.key: r for r in records.registers},
        usage=records.usage,
        receipts={r.request_id: r for r in records.receipts},
        tasks={t.task_id: t for t in records.tasks},
    )
    view = StoreView(_Unwritable(), state)
    try:
        log = view.fork_log("\x00trace", {"conversation": conversation_id, "entry": until})
    except StoreError:
        return None
    return [message_to_dict(message) for message in log.messages]


def _call(payloads: dict[str, dict[str, Any]]) -> dict[str, Any]:
    intent = payloads.get("intent_entry") or {}
    result = payloads.get("result_entry") or {}
    assistant = payloads.get("assistant_entry") or {}
    arguments = intent.get("arguments")
    if arguments is None:
        arguments = result.get("arguments")
    if arguments is None:  # no intent (refused, or a question): the model's own call
        calls = [b for b in (assistant.get("message") or {}).get("content") or [] if b.get("type") == "tool_call"]
        call_id = (result.get("message") or {}).get("tool_call_id")
        arguments = next((b.get("arguments") for b in calls if b.get("id") == call_id), None)
    out: dict[str, Any] = {"arguments": arguments, "replay": intent.get("replay")}
    if "message" in result:
        out["result"] = result["message"]
    elif result:
        out["result"] = {k: result.get(k) for k in ("status", "ok", "value", "error") if k in result}
    return out


def _receipt(reader: TraceSource, records: TraceRecords | None, request_id: str | None) -> dict[str, Any] | None:
    if request_id is None:
        return None
    if records is None:
        row = reader.row("receipts", request_id)  # type: ignore[attr-defined]
    else:
        row = next((r for r in records.receipts if r.request_id == request_id), None)
    return row.payload if row is not None else None


def _task(reader: TraceSource, records: TraceRecords | None, task_id: str) -> dict[str, Any] | None:
    if records is None:
        row = reader.row("tasks", task_id)  # type: ignore[attr-defined]
    else:
        row = next((t for t in records.tasks if t.task_id == task_id), None)
    return row.payload if row is not None else None


class _Unwritable:
    """The storage of a view that only replays entries: it never commits."""

    label = "trace"

    def load(self) -> StoreState:  # pragma: no cover - never called: the view is given its state
        raise StoreError("store_invalid", "the trace view has no storage")

    def commit(self, commit: Any) -> int:  # pragma: no cover - the trace never writes
        raise StoreError("store_invalid", "the trace view is read-only")

    def close(self) -> None:  # pragma: no cover
        return None
