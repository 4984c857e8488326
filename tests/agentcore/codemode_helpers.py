"""Helpers for the code-mode tests: tools with visible side effects, reading results and entries,
and finding sandbox worker processes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentcore import AgentRuntime, AgentTool, ToolContext, ToolResult
from agentcore.events import AgentEvent
from agentcore.testing.steps import Text, ToolCall

WORKER_SCRIPT = "codemode/worker.py"


class Effects:
    """A ``never``-replay tool that counts its executions (the side effect a replay must not repeat)."""

    def __init__(self, name: str = "effect", replay: str = "never") -> None:
        self.name = name
        self.replay = replay
        self.calls: list[dict[str, Any]] = []

    def tool(self) -> AgentTool:
        async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
            self.calls.append(arguments)
            return ToolResult.text(f"{self.name} {arguments.get('tag', '')} #{len(self.calls)}")

        return AgentTool(
            name=self.name,
            description="Do something with a side effect.",
            parameters={"type": "object", "properties": {"tag": {"type": "string"}}, "additionalProperties": False},
            execute=execute,
            replay=self.replay,  # type: ignore[arg-type]
        )


def script_turn(code: str, answer: str = "done", call_id: str = "c1") -> list[list[Any]]:
    """The model's side of one turn: call codemode with ``code``, then answer."""
    return [[ToolCall("codemode", {"code": code}, id=call_id)], [Text(answer)]]


def codemode_end(events: list[AgentEvent]) -> Any:
    ends = [e for e in events if e.type == "tool" and e.name == "codemode" and e.phase == "end"]
    assert ends, "the codemode call ended"
    return ends[-1]


def entries_of(runtime: AgentRuntime, *kinds: str) -> list[Any]:
    """The store's entries of ``kinds``, in commit order."""
    return [e for e in runtime.log.storage.load().entries if e.kind in kinds]


def worker_pids(parent: int | None = None) -> list[int]:
    """Live sandbox workers (children of ``parent``, default this process)."""
    parent = os.getpid() if parent is None else parent
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == parent and WORKER_SCRIPT in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found
