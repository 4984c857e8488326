"""How an operation ends: the one terminal transaction (SPEC D1, D5, D7; DURABILITY 16).

Free functions over a ``ConversationLog`` — no engine, no model configuration — so the engine,
a superseding input and offline cancellation all end operations the same way: every unsettled
tool call of the current batch gets a result (the transcript stays valid), the receipt records
the outcome, and the program counter and cancel marker are removed in the same transaction.
"""

from __future__ import annotations

from typing import Literal

from agentcore.errors import EXECUTION_ABORTED
from agentcore.events import RunEndEvent
from agentcore.harness.op_state import OpState
from agentcore.harness.projection import ConversationLog, cancel_key
from agentcore.harness.storage import Commit, RegisterWrite
from agentcore.harness.usage import run_usage_totals
from agentcore.messages import AssistantMessage, TextContent, ToolResultMessage, UserMessage

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
    payload["ended_ms"] = log.now_ms()
    open_op = log.op
    pending = open_op.get("pending") if open_op is not None and open_op["request_id"] == request_id else None
    if isinstance(pending, dict):  # it ended while waiting for a person: the wait ends with it (Trace)
        keep = ("kind", "approval_id", "since_ms", "tool_call_id")
        payload["unanswered"] = {**{k: pending.get(k) for k in keep}, "until_ms": payload["ended_ms"]}
    commit.receipts.append(log.receipt(request_id, payload))
    commit.registers.append(log.set_op(None))
    marker = cancel_key(log.conversation_id)
    if marker in log.registers:
        commit.registers.append(RegisterWrite(marker, None))
    log.commit(commit)
    return event


def settle_open_calls(
    log: ConversationLog, request_id: str, op: OpState, commit: Commit, reason: str, *, outcome: Outcome
) -> None:
    """Give every unsettled call of the current batch a result so the transcript stays valid
    (``not_run``: the outcome of the run that ended before the call ran, for the Trace)."""
    if op.get("phase") not in ("tools", "paused") or not op.get("tool_calls"):
        return
    for call in op["tool_calls"]:
        key = call_key(request_id, op["step"], call["index"])
        if key in log.results:
            continue
        message = ToolResultMessage(call["id"], call["name"], [TextContent(reason)], is_error=True)
        entry = log.message_entry(message, request_id, call_key=key, ended_ms=log.now_ms(), not_run=outcome)
        commit.entries.append(entry)


CONTINUED_STOPS = frozenset({"error", "length", "tool_use", "pause_turn"})
"""Stop reasons of a reply the operation went on to continue when it has no tool call: an
interruption (the kept partial), the output limit, a lost call, a paused turn (SPEC L3–L5, P2)."""


def answer_text(log: ConversationLog, request_id: str, reply: AssistantMessage | None = None) -> str:
    """The whole answer of ``request_id``'s operation: what its end event and its plan carry.

    The answer is ``reply`` (the reply being settled, not committed yet) or else the operation's
    newest reply with text, joined — in the order they streamed — with every earlier reply it
    continues: a reply cut short by an interruption, a crash, the output limit, a lost call or a
    paused turn, with the runtime's continuation prompt after it. Replies before the last tool
    round are not part of it (the seed's rule for plans, PL3). Read from the committed
    transcript, so every store, and a reopen after any number of crashes, gives the same text.
    """
    messages, ops = log.messages, log.message_ops
    index = len(messages) - 1
    parts: list[str] = []
    if reply is not None:
        parts.append(reply.text)
    else:
        while index >= 0 and ops[index] == request_id:
            message = messages[index]
            index -= 1
            if isinstance(message, AssistantMessage) and message.text:
                parts.append(message.text)
                break
        else:
            return ""
    while index >= 0:
        continued = _continued_reply(log, index, request_id)
        if continued is not None:
            parts.append(continued.text)
            index -= 1
        elif _is_continuation_prompt(log, index, request_id):
            index -= 1
        else:
            break
    return "".join(reversed(parts))


def _is_continuation_prompt(log: ConversationLog, index: int, request_id: str) -> bool:
    """Whether the message at ``index`` is the runtime's prompt between two parts of the answer."""
    return (
        log.message_synthetic[index]
        and log.message_ops[index] == request_id
        and isinstance(log.messages[index], UserMessage)
        and _continued_reply(log, index - 1, request_id) is not None
    )


def _continued_reply(log: ConversationLog, index: int, request_id: str) -> AssistantMessage | None:
    """The operation's reply at ``index`` if the operation went on to continue it."""
    message = log.messages[index] if index >= 0 else None
    if (
        isinstance(message, AssistantMessage)
        and log.message_ops[index] == request_id
        and message.stop_reason in CONTINUED_STOPS
        and not message.tool_calls
    ):
        return message
    return None


def end_operation_aborted(
    log: ConversationLog, op: OpState, reason: str, commit: Commit | None = None
) -> RunEndEvent:
    """End ``op`` as ``aborted`` (a cancel, a superseding input, offline cancellation)."""
    commit = commit or Commit()
    request_id = op["request_id"]
    settle_open_calls(log, request_id, op, commit, "Not run: the run was cancelled.", outcome="aborted")
    text = answer_text(log, request_id)
    return end_operation(log, request_id, commit, "aborted", text, error_code=EXECUTION_ABORTED, error=reason)
