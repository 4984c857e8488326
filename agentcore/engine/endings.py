"""How an operation ends: the one terminal transaction (SPEC D1, D5, D7; DURABILITY 16).

Free functions over a ``ConversationLog`` — no engine, no model configuration — so the engine,
a superseding input and offline cancellation all end operations the same way: every unsettled
tool call of the current batch gets a result (the transcript stays valid), the receipt records
the outcome, and the program counter and cancel marker are removed in the same transaction.
"""

from __future__ import annotations

from typing import Any, Literal

from agentcore.engine.usage import run_usage_totals
from agentcore.errors import EXECUTION_ABORTED
from agentcore.events import RunEndEvent
from agentcore.harness.projection import ConversationLog, cancel_key
from agentcore.harness.storage import Commit, RegisterWrite
from agentcore.messages import AssistantMessage, TextContent, ToolResultMessage

Outcome = Literal["completed", "failed", "aborted"]


def call_key(request_id: str, step: int, index: int) -> str:
    return f"{request_id}/{step}/{index}"


def end_operation(
    log: ConversationLog,
    request_id: str,
    commit: Commit,
    status: Outcome,
    text: str,
    *,
    error_code: str | None = None,
    error: str | None = None,
) -> RunEndEvent:
    """Commit the terminal transaction of ``request_id``'s operation; returns its end event."""
    event = RunEndEvent(
        status=status,
        request_id=request_id,
        text=text,
        error_code=error_code,
        error=error,
        usage=run_usage_totals(log, request_id, extra=commit.usage),
    )
    receipt = log.receipts.get(request_id)
    payload = dict(receipt.payload if receipt else {}, status=status, final=event.model_dump(), pending=None)
    commit.receipts.append(log.receipt(request_id, payload))
    commit.registers.append(log.set_op(None))
    marker = cancel_key(log.conversation_id)
    if marker in log.registers:
        commit.registers.append(RegisterWrite(marker, None))
    log.commit(commit)
    return event


def settle_open_calls(log: ConversationLog, request_id: str, op: dict[str, Any], commit: Commit, reason: str) -> None:
    """Give every unsettled call of the current batch a result so the transcript stays valid."""
    if op.get("phase") not in ("tools", "paused") or not op.get("tool_calls"):
        return
    for call in op["tool_calls"]:
        key = call_key(request_id, op["step"], call["index"])
        if key in log.results:
            continue
        message = ToolResultMessage(call["id"], call["name"], [TextContent(reason)], is_error=True)
        commit.entries.append(log.message_entry(message, request_id, call_key=key))


def last_assistant_text(log: ConversationLog, request_id: str) -> str:
    """The operation's latest answer text (what its end event reports)."""
    for index in range(len(log.messages) - 1, -1, -1):
        if log.message_ops[index] != request_id:
            break
        message = log.messages[index]
        if isinstance(message, AssistantMessage) and message.text:
            return message.text
    return ""


def end_operation_aborted(
    log: ConversationLog, op: dict[str, Any], reason: str, commit: Commit | None = None
) -> RunEndEvent:
    """End ``op`` as ``aborted`` (a cancel, a superseding input, offline cancellation)."""
    commit = commit or Commit()
    request_id = op["request_id"]
    settle_open_calls(log, request_id, op, commit, "Not run: the run was cancelled.")
    text = last_assistant_text(log, request_id)
    return end_operation(log, request_id, commit, "aborted", text, error_code=EXECUTION_ABORTED, error=reason)
