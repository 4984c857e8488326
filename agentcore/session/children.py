"""Subagents (SPEC S5): child contexts that run one delegated task with a subset of the tools.

A child is created by the parent's ``subagent`` call in one transaction — its context
register (target id, owner call, tools = parent ∩ whitelist) and its first operation — under
a conversation id derived from the parent and the committed call. A replay of the call (after
a crash) therefore finds the child it started and waits for it again instead of spawning a
twin. A foreground child runs inside the call; a background child runs as its own activity
and its result is delivered to the parent once, as a queued input whose id is derived from
the child (a second delivery finds the receipt and does nothing). Usage rows carry the
child's conversation id, so each model call is counted once, for the context that made it.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from agentcore.engine.operations import start_op
from agentcore.errors import UserInputRequired
from agentcore.events import RunEndEvent
from agentcore.harness.op_state import OpState
from agentcore.harness.storage import Commit
from agentcore.host import AgentHost, call_hook
from agentcore.session.contexts import Context
from agentcore.session.options import SessionOptions
from agentcore.session.ports import ContextOperations, InputQueue, SessionStore
from agentcore.session.tools import SUBAGENT, UPDATE_PLAN, subagent_tool
from agentcore.tools.base import AgentTool, ToolContext, ToolResult

DELIVERY_SUFFIX = ":result"


class ChildrenHost(SessionStore, ContextOperations, InputQueue, Protocol):
    """What subagents need of the session: its store, contexts and options, the host a child's
    approvals go to, running a child (in the background as its own loop, in the foreground
    inside the parent's call), cancelling it, and queueing its result for the parent."""

    @property
    def options(self) -> SessionOptions: ...

    @property
    def host(self) -> AgentHost | None: ...

    def start_loop(self, context: Context) -> None: ...

    async def drive(self, context: Context, op: OpState) -> RunEndEvent | None: ...

    def cancel_foreground(self, context: Context, reason: str) -> str | None: ...


class Children:
    """The subagents of one session; see the module docstring."""

    def __init__(self, session: ChildrenHost) -> None:
        self.session = session
        self._tools: dict[str, AgentTool] = {}

    def tool(self, parent: Context) -> AgentTool:
        tool = self._tools.get(parent.conversation_id)
        if tool is None:
            options = self.session.options.subagents
            assert options is not None
            models = [m.as_dict() for m in options.models]

            async def run(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
                return await self.delegate(parent, arguments, ctx)

            tool = self._tools[parent.conversation_id] = subagent_tool(run, models=models)
        return tool

    def host_for(self, child: Context) -> AgentHost:
        """A child never pauses for a person: an approval that would pause is a denial."""
        parent_host = self.session.host or AgentHost()

        async def approve(payload: dict[str, Any]) -> Any:
            if parent_host.approve_tool_call is None:
                return None
            try:
                return await call_hook(parent_host.approve_tool_call, payload)
            except UserInputRequired as exc:
                raise PermissionError("a subagent cannot wait for approval; the call was denied") from exc

        return AgentHost(approve_tool_call=approve, report_usage=parent_host.report_usage)

    # --- delegation -----------------------------------------------------------------------

    async def delegate(self, parent: Context, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        session = self.session
        options = session.options.subagents
        assert options is not None
        conversation_id = f"{parent.conversation_id}/sub/{ctx.tool_call_id}"
        background = bool(arguments.get("background"))
        try:
            child = session.contexts.by_conversation(conversation_id)
        except Exception:
            child = None
        if child is None:
            refusal = self._refusal(parent, arguments)
            if refusal is not None:
                return ToolResult.text(refusal, is_error=True)
            child = self._create(parent, conversation_id, arguments, background)
        if child.background:
            session.start_loop(child)
            return ToolResult.text(
                f"Started subagent {child.target_id} in the background. Its result will arrive as a "
                "message when it finishes; continue with other work meanwhile."
            )
        return await self._run_foreground(child, ctx.abort)

    def _refusal(self, parent: Context, arguments: dict[str, Any]) -> str | None:
        session = self.session
        options = session.options.subagents
        assert options is not None
        if parent.kind == "subagent":
            return "A subagent cannot delegate further."
        active = [
            c for c in session.contexts.all() if c.kind == "subagent" and session.view.log(c.conversation_id).op
        ]
        if len(active) >= options.max_agents:
            return f"At most {options.max_agents} subagents may be active at once; wait for one to finish."
        model = arguments.get("model")
        if model is not None:
            allowed = {(m.provider, m.model_id) for m in options.models}
            if (model["provider"], model["model_id"]) not in allowed:
                listed = ", ".join(f"{p}/{m}" for p, m in sorted(allowed)) or "none"
                chosen = f"{model['provider']}/{model['model_id']}"
                return f"Model {chosen} is not allowed for subagents (allowed: {listed})."
        return None

    def _create(self, parent: Context, conversation_id: str, arguments: dict[str, Any], background: bool) -> Context:
        """The child's context and first operation, in one transaction."""
        session = self.session
        options = session.options.subagents
        assert options is not None
        parent_log = session.view.log(parent.conversation_id)
        parent_op = parent_log.op
        assert parent_op is not None, "a subagent is created by a call of its parent's open turn"
        parent_tools = {tool.name for tool in session.configure(parent_log, parent_op, parent).tools}
        tools = sorted((parent_tools & set(options.tools)) - {SUBAGENT})
        if UPDATE_PLAN not in options.tools:
            tools = [name for name in tools if name != UPDATE_PLAN]
        context, writes = session.contexts.create(
            conversation_id,
            "subagent",
            parent=parent,
            background=background,
            tools=tools,
            label=str(arguments["task"])[:80],
            owner_call=conversation_id.rsplit("/", 1)[-1],
            owner_request=parent_op.get("request_id"),  # the turn whose call made it (Trace)
        )
        log = session.view.new_log(conversation_id)
        settings = dict(parent_op.get("settings") or {})
        model = arguments.get("model")
        if model is not None:
            settings.update(provider=model["provider"], model=model["model_id"])
        request_id = f"{conversation_id}:task"
        op = session.new_op(log, request_id, settings, mode="build")
        if model is None and parent_op.get("pinned"):
            op["pinned"] = parent_op["pinned"]  # default: the parent's model, exactly
        try:
            start_op(
                log,
                op,
                prompt=str(arguments["task"]),
                images=[],
                receipt={"status": "running", "background": background},
                commit=Commit(registers=writes),
            )
        except BaseException:
            session.view.logs.pop(conversation_id, None)
            raise
        return context

    async def _run_foreground(self, child: Context, parent_abort: asyncio.Event) -> ToolResult:
        session = self.session
        log = session.view.log(child.conversation_id)

        async def forward_cancel() -> None:
            await parent_abort.wait()
            session.cancel_foreground(child, "the parent's turn was cancelled")

        watcher = asyncio.ensure_future(forward_cancel())
        try:
            final = None
            while (op := log.op) is not None and op.get("phase") != "paused":
                final = await session.drive(child, op)
        finally:
            watcher.cancel()
        return self._result(child, final.model_dump() if final is not None else self._final(child))

    def _final(self, child: Context) -> dict[str, Any]:
        receipt = self.session.view.receipts.get(f"{child.conversation_id}:task")
        return dict((receipt.payload.get("final") if receipt else None) or {"status": "running"})

    @staticmethod
    def _result(child: Context, final: dict[str, Any]) -> ToolResult:
        status = final.get("status")
        if status == "completed":
            return ToolResult.text(final.get("text") or "(the subagent finished without a text answer)")
        reason = final.get("error") or status
        return ToolResult.text(f"Subagent {child.target_id} did not complete ({status}): {reason}", is_error=True)

    # --- background results -----------------------------------------------------------------

    def deliver_finished(self) -> None:
        """Deliver each finished background child's result to its parent, exactly once."""
        session = self.session
        for child in session.contexts.all():
            if child.kind != "subagent" or not child.background:
                continue
            input_id = f"{child.conversation_id}{DELIVERY_SUFFIX}"
            if input_id in session.view.receipts:
                continue
            final = self._final(child)
            if final.get("status") not in ("completed", "failed", "aborted"):
                continue
            parent = session.contexts.by_target(child.parent_target_id or 0)
            result = self._result(child, final)
            text = "".join(getattr(block, "text", "") for block in result.content)
            prompt = f"[Background subagent {child.target_id} finished: {child.label}]\n\n{text}"
            parent_log = session.view.log(parent.conversation_id)
            session.enqueue(
                parent_log, input_id, prompt, [], mode="follow_up", receipt={"delivery": True}, kind="delivery"
            )
