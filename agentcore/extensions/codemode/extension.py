"""Code mode as a session extension (SPEC X4): the ``codemode`` tool for main and fork
contexts, the ``records["code_mode"]`` entry, and stopping scripts on ``cancel`` and close.

Subagents never get ``codemode`` (the session gives them no extension tools), and a script
never gets ``ask_user`` or ``subagent``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from agentcore.extensions.codemode.options import CodeModeOptions
from agentcore.extensions.codemode.sandbox import sandbox_fingerprint
from agentcore.extensions.codemode.tool import ScriptRun, codemode_tool
from agentcore.extensions.codemode.trace import code_mode_executions, code_mode_record
from agentcore.session.extension import BaseExtension, ExtensionHost
from agentcore.tools.base import AgentTool

if TYPE_CHECKING:
    from agentcore.session.contexts import Context


class CodeModeExtension(BaseExtension):
    def __init__(self, session: ExtensionHost, options: CodeModeOptions) -> None:
        super().__init__(session)
        self.options = options
        self.running: dict[str, ScriptRun] = {}  # by task id
        self._tool = codemode_tool(options, self.running)

    def tools(self, context: Context) -> list[AgentTool]:
        return [self._tool]

    def records(self) -> dict[str, Any]:
        session = self.session
        logs = [(c.target_id, session.view.log(c.conversation_id)) for c in session.contexts.all()]
        return {"code_mode": code_mode_record(self.options, sandbox_fingerprint(), logs, set(self.running))}

    def tool_details(self, context: Context) -> dict[str, dict[str, Any]]:
        """Each codemode call's execution (script, nested calls, output) on its tool task."""
        log = self.session.view.log(context.conversation_id)
        return {
            execution["task_id"]: execution
            for execution in code_mode_executions(context.target_id, log, set(self.running))
        }

    def cancel_task(self, context: Context, task_id: str, owned_targets: set[int]) -> list[str] | None:
        """``cancel`` of a running script's task: the script stops, the turn goes on with its
        result (an error saying it was cancelled)."""
        script = self.running.get(task_id)
        if script is None:
            return None
        script.stop("cancelled", "The script was cancelled by a cancel command.")
        return [task_id]

    async def aclose(self) -> None:
        """Closing pauses: scripts still running are stopped without a result (a reopen re-runs
        them from their execution log), and their workers are killed."""
        tasks = [script.task for script in self.running.values() if script.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await asyncio.shield(task)
