"""Starting and settling operations on a conversation (SPEC I1, D1, D5, PL2–PL4, C3).

An operation is one input's run: the program counter register ``op:<conversation>``, the
receipt under its request id and (except for compactions) the user message, all written in
one transaction. The plain runtime path and the session protocol start operations the same
way; this module is that one way, plus the resume dispatch for paused operations and the
endings that do not need a running engine (superseded, failed).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

from agentcore.compaction.settings import is_manual_command
from agentcore.engine.base import Configure
from agentcore.engine.endings import end_operation_aborted
from agentcore.engine.turn import TurnEngine
from agentcore.errors import RUN_FAILED, InputValidationError
from agentcore.events import AgentEvent
from agentcore.harness.op_state import OpState
from agentcore.harness.projection import ConversationLog
from agentcore.harness.storage import Commit, Receipt, RegisterWrite
from agentcore.inputs import AgentInput
from agentcore.messages import ImageContent, user_text
from agentcore.tracing import new_trace_anchor

RUN_SETTINGS = (
    "model_attributes",
    "web_search",
    "workdir",
    "allowed_directories",
    "system_prompt",
    "provider",
    "model",
    "base_url",
    "effort",
    "permission_policy",
    "context_window",
    "max_tokens",
)
STYLE_OFF_PHRASES = ("stop adhd mode", "normal mode")
STYLE_ON_PHRASES = ("start adhd mode", "adhd mode on", "use adhd mode", "turn on adhd mode")


def style_key(conversation_id: str) -> str:
    return f"style:{conversation_id}"


def style_change(prompt: str) -> bool | None:
    """K1: "stop adhd mode" / "normal mode" turn the style off, "start adhd mode" on again."""
    lowered = prompt.lower()
    if any(phrase in lowered for phrase in STYLE_OFF_PHRASES):
        return False
    if any(phrase in lowered for phrase in STYLE_ON_PHRASES):
        return True
    return None


def style_on(log: ConversationLog) -> bool:
    value = log.view.register(style_key(log.conversation_id))
    return True if value is None else bool(value.get("adhd", True))


def run_settings(input: AgentInput) -> dict[str, Any]:
    """The per-run overrides (I2) of ``input`` as plain JSON."""
    return {name: _dump(getattr(input, name)) for name in RUN_SETTINGS if getattr(input, name) is not None}


def new_op(
    request_id: str, *, compaction: bool, mode: str, settings: dict[str, Any], pinned: dict[str, Any]
) -> OpState:
    return {
        "request_id": request_id,
        "phase": "compact" if compaction else "model",
        "mode": mode,
        "step": 0,
        "attempt": 0,
        "budgets": {"connection": 0, "length": 0},
        "settings": settings,
        "pinned": pinned,
        "trace": new_trace_anchor(),  # this request's own trace, kept across resumes
    }


def start_op(
    log: ConversationLog,
    op: OpState,
    *,
    prompt: str,
    images: list[ImageContent],
    receipt: dict[str, Any],
    commit: Commit | None = None,
    message_extra: dict[str, Any] | None = None,
) -> None:
    """Open ``op`` in one transaction: user message, receipt, program counter (and ``commit``'s
    own writes, e.g. taking the input off a queue). The receipt records when it started
    (``started_ms``; the terminal transaction adds ``ended_ms``) and the request's trace anchor,
    which outlives the program counter, so an exported trace joins the live spans."""
    commit = commit or Commit()
    receipt = dict(receipt, started_ms=log.now_ms())
    if op.get("trace") is not None:
        receipt["trace"] = op["trace"]
    style = style_change(prompt)
    if style is not None:
        commit.registers.append(RegisterWrite(style_key(log.conversation_id), {"adhd": style}))
    if op["phase"] != "compact":  # a compaction run adds no user message (C3)
        commit.entries.append(log.message_entry(user_text(prompt, images), op["request_id"], **(message_extra or {})))
    commit.receipts.append(Receipt(op["request_id"], log.conversation_id, receipt))
    commit.registers.append(log.set_op(op))
    log.commit(commit)


def supersede(log: ConversationLog, op: OpState) -> None:
    """A new input while an older operation is unfinished: end the old one as aborted."""
    end_operation_aborted(log, op, "superseded by a newer request")


def record_failure(log: ConversationLog, request_id: str, exc: BaseException, configure: Configure) -> None:
    """D5: a run that failed records its reason and does not auto-continue on reopen."""
    if log.faulted is not None:
        return
    op = log.op
    if op is None or op["request_id"] != request_id:
        return
    engine = TurnEngine(log, request_id, configure, None, asyncio.Event())
    engine.finish_failed(op, RUN_FAILED, f"{type(exc).__name__}: {exc}")


def mark_running(log: ConversationLog, request_id: str) -> None:
    receipt = log.receipts[request_id]
    log.commit(Commit(receipts=[log.receipt(request_id, dict(receipt.payload, status="running", pending=None))]))


def apply_resume(engine: TurnEngine, op: OpState, input: AgentInput) -> AsyncIterator[AgentEvent] | None:
    """Apply the decision ``input`` carries to a paused ``op``; None when it carries none."""
    pending = op.get("pending") or {}
    kind = pending.get("kind")
    if kind == "plan" and input.plan_resume is not None:
        decision = input.plan_resume
        if decision.approval_id != pending["approval_id"]:
            raise InputValidationError(
                f"plan_resume.approval_id {decision.approval_id!r} does not match the pending plan "
                f"{pending['approval_id']!r}",
                field="plan_resume.approval_id",
            )
        plan_text = decision.plan or pending.get("plan", "")
        mark_running(engine.log, engine.request_id)
        return engine.apply_plan_decision(decision.approval_id, decision.approved, plan_text, decision.notes)
    if kind == "ask_user" and input.ask_resume is not None:
        return _one(engine.apply_answers(input.ask_resume.answers))
    if kind == "tool_approval" and input.tool_resume is not None:
        if input.tool_resume.approval_id != pending["approval_id"]:
            raise InputValidationError("tool_resume.approval_id does not match", field="tool_resume.approval_id")
        engine.apply_tool_decision(input.tool_resume.approved, input.tool_resume.message)
        return _empty()
    return None


def input_hash(input: AgentInput) -> str:
    data = input.model_dump(exclude={"request_id", "plan_resume", "ask_resume", "tool_resume"}, exclude_none=True)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:32]


def is_compaction(input: AgentInput) -> bool:
    return input.compact or is_manual_command(input.prompt)


def is_resume(input: AgentInput) -> bool:
    """A decision payload, or a bare request id (no prompt, no images): continue that request."""
    if input.plan_resume is not None or input.ask_resume is not None or input.tool_resume is not None:
        return True
    return not input.prompt and not input.images and not input.image_files


def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    return value


async def _one(event: AgentEvent) -> AsyncIterator[AgentEvent]:
    yield event


async def _empty() -> AsyncIterator[AgentEvent]:
    return
    yield  # pragma: no cover
