"""Pauses and human decisions: ask_user answers, tool approvals, plan review (SPEC PL2–PL4, H1).

A pause is durable: the program counter moves to ``paused`` with the pending request, and the
receipt says ``paused``, in one transaction. A decision is applied by the next ``run()`` with
the same request id, again in one transaction, and the operation continues where it stopped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agentcore.engine.base import EngineBase, display_id
from agentcore.engine.endings import call_key
from agentcore.errors import USER_INPUT_REQUIRED, UserInputRequired
from agentcore.events import (
    AgentEvent,
    ApprovalEvent,
    PlanEvent,
    RunEndEvent,
    ToolEvent,
)
from agentcore.harness.op_state import OpState, ToolCallState
from agentcore.harness.storage import Commit
from agentcore.harness.usage import run_usage_totals
from agentcore.host import call_hook
from agentcore.messages import (
    TextContent,
    ToolResultMessage,
    user_text,
)
from agentcore.prompts import load_prompt
from agentcore.tools.ask_user import ASK_USER, format_answers, normalize_questions
from agentcore.tools.display import clean_text
from agentcore.tracing import trace_anchor


class Decisions(EngineBase):
    def _pause(self, op: OpState, pending: dict[str, Any]) -> None:
        pending = dict(pending, since_ms=self.log.now_ms())  # the wait for a person starts (Trace)
        value: OpState = {**(self.log.op or op), "phase": "paused", "pending": pending}
        receipt = self.log.receipts.get(self.request_id)
        receipt_payload = dict(receipt.payload if receipt else {}, status="paused", pending=pending)
        self.log.commit(
            Commit(registers=[self.log.set_op(value)], receipts=[self.log.receipt(self.request_id, receipt_payload)])
        )

    def _pause_for_questions(
        self, op: OpState, call: ToolCallState, arguments: dict[str, Any], key: str
    ) -> None:
        questions = normalize_questions(arguments)
        self._pause(
            op,
            {"kind": "ask_user", "approval_id": key, "questions": questions, "tool_call_id": call["id"]},
        )

    def paused_event(self, op: OpState) -> RunEndEvent:
        self.final = RunEndEvent(
            status="paused",
            request_id=self.request_id,
            error_code=USER_INPUT_REQUIRED,
            error="the run is waiting for user input",
            pending=op.get("pending"),
            usage=run_usage_totals(self.log, self.request_id),
        )
        return self.final

    async def _plan_review(self, op: OpState) -> AsyncIterator[AgentEvent]:
        plan = op["plan"]
        approval_id, text = plan["approval_id"], plan["text"]
        yield PlanEvent(phase="start", approval_id=approval_id)
        yield PlanEvent(phase="end", approval_id=approval_id, text=text)
        if self.host.approve_plan is None:
            yield self.finish_completed(op, Commit(), text)  # SPEC H1: no host → never pauses
            return
        payload = {"approval_id": approval_id, "plan": text, "request_id": self.request_id}
        since_ms = self.log.now_ms()
        try:
            verdict = await call_hook(self.host.approve_plan, payload)
        except UserInputRequired:
            self._pause(op, {"kind": "plan", "approval_id": approval_id, "plan": text})
            yield self.paused_event(self.log.op or op)
            return
        except Exception as exc:
            verdict = {"approved": False, "notes": str(exc)}
        approved, notes = _plan_verdict(verdict)
        notes = clean_text(notes)  # the host's own text (or its exception's): committed with the decision
        async for event in self.apply_plan_decision(approval_id, approved, text, notes, since_ms=since_ms):
            yield event

    async def apply_plan_decision(
        self, approval_id: str, approved: bool, plan_text: str, notes: str, *, since_ms: int | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Approve → switch to build and execute; reject → revise in plan mode (PL4).

        The decision's entry records the review as a wait (``wait``: since the plan was shown,
        until now); ``since_ms`` is when the host was asked, else when the run paused."""
        op = self.log.op
        assert op is not None
        if since_ms is None:
            since_ms = (op.get("pending") or {}).get("since_ms")
        wait = {
            "kind": "plan",
            "approval_id": approval_id,
            "since_ms": since_ms,
            "until_ms": self.log.now_ms(),
            "decision": "approved" if approved else "rejected",
        }
        if self.tracer is not None:
            anchor = trace_anchor(op, self.log.storage.label, self.log.conversation_id, self.request_id)
            self.tracer.decision(self.op_span or anchor, approval_id=approval_id, approved=approved, notes=notes)
        history = [*op.get("plan_history", []), {"approval_id": approval_id, "approved": approved, "notes": notes}]
        if approved:
            prompt = load_prompt("plan_approved.md").format(plan=plan_text)
            if notes:
                prompt += f"\n\nReviewer's notes:\n{notes}"
            mode = "build"
        else:
            prompt = load_prompt("plan_rejected.md").format(plan=plan_text, notes=notes or "(no notes)")
            mode = "plan"
        value: OpState = {**op, "phase": "model", "mode": mode, "step": op["step"] + 1, "attempt": 0}
        value["plan_history"] = history
        value.pop("pending", None)
        value.pop("plan", None)
        value.pop("tool_calls", None)
        self.log.commit(
            Commit(
                entries=[self.log.message_entry(user_text(prompt), self.request_id, synthetic=True, wait=wait)],
                registers=[self.log.set_op(value)],
            )
        )
        yield ApprovalEvent(
            approval_id=approval_id, decision="approved" if approved else "rejected", notes=notes or None
        )

    def apply_answers(self, answers: dict[str, list[str] | str]) -> ToolEvent:
        """Settle a paused ``ask_user`` call with the answers; the same turn continues (PL2).
        Returns the call's ``end`` event (its ``start`` was emitted when the run paused)."""
        op = self.log.op
        assert op is not None
        pending = op["pending"]
        key = pending["approval_id"]
        call = next(c for c in op["tool_calls"] if call_key(self.request_id, op["step"], c["index"]) == key)
        text = format_answers(pending["questions"], answers)
        message = ToolResultMessage(tool_call_id=call["id"], tool_name=ASK_USER, content=[TextContent(text)])
        resolved = [
            *op.get("resolved_user_inputs", []),
            {"approval_id": key, "questions": pending["questions"], "answers": answers},
        ]
        value: OpState = {**op, "phase": "tools", "resolved_user_inputs": resolved}
        value.pop("pending", None)
        receipt = self.log.receipts[self.request_id]
        now = self.log.now_ms()
        wait = {"kind": "ask_user", "approval_id": key, "since_ms": pending.get("since_ms"), "until_ms": now}
        timing = {"started_ms": pending.get("since_ms"), "ended_ms": now, "wait": wait}
        self.log.commit(
            Commit(
                entries=[self.log.message_entry(message, self.request_id, call_key=key, **timing)],
                registers=[self.log.set_op(value)],
                receipts=[self.log.receipt(self.request_id, dict(receipt.payload, status="running", pending=None))],
            )
        )
        return ToolEvent(
            phase="end",
            tool_call_id=display_id(op, call),
            name=ASK_USER,
            index=call["index"],
            arguments=call["arguments"],
            result=text,
        )

    def apply_tool_decision(self, approved: bool, message: str) -> None:
        op = self.log.op
        assert op is not None
        pending = op["pending"]
        key = pending["approval_id"]
        approvals = dict(op.get("approvals") or {})
        wait = {"kind": "tool_approval", "approval_id": key, "since_ms": pending.get("since_ms")}
        approvals[key] = {"approved": approved, "message": message, "wait": dict(wait, until_ms=self.log.now_ms())}
        value: OpState = {**op, "phase": "tools", "approvals": approvals}
        value.pop("pending", None)
        receipt = self.log.receipts[self.request_id]
        self.log.commit(
            Commit(
                registers=[self.log.set_op(value)],
                receipts=[self.log.receipt(self.request_id, dict(receipt.payload, status="running", pending=None))],
            )
        )


def _plan_verdict(verdict: Any) -> tuple[bool, str]:
    if verdict is None or verdict is True:
        return True, ""
    if verdict is False:
        return False, ""
    if isinstance(verdict, dict):
        return bool(verdict.get("approved", False)), str(verdict.get("notes", "") or "")
    return bool(verdict), ""
