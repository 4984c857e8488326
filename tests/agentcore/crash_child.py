"""Child process for the crash tests: runs one agent input against a file store (``--db`` may also
be a ``postgresql://`` URL naming a PostgreSQL store).

Prints every event as one JSON line (flushed), so the parent can synchronise on what the
runtime has committed and shown. Not collected by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agentcore import AgentHost, AgentTool, ToolContext, ToolResult, UserInputRequired, create_agent
from tests.child_guard import die_with_parent


def probe_tool(workdir: Path) -> AgentTool:
    """A replay-safe tool with a visible side effect: it appends a line, and on its first
    execution it blocks (the parent kills the process there)."""

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        log = workdir / "probe.txt"
        before = log.read_text().count("\n") if log.exists() else 0
        with log.open("a") as handle:
            handle.write("probe\n")
        if before == 0:
            await asyncio.Event().wait()  # first run: hang until killed
        return ToolResult.text(f"probe ran {before + 1} times")

    return AgentTool(
        name="probe",
        description="Probe something.",
        parameters={"type": "object", "properties": {}},
        execute=execute,
        replay="safe",
    )


def stall_tool() -> AgentTool:
    """A replay-safe tool that never finishes and ignores the abort signal: it keeps a
    cancelled run from reaching its terminal transaction until the process dies."""

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await asyncio.Event().wait()
        return ToolResult.text("unreachable")

    return AgentTool(
        name="stall",
        description="Wait.",
        parameters={"type": "object", "properties": {}},
        execute=execute,
        replay="safe",
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--request-id", required=True)
    parser.add_argument("--prompt", default="go")
    parser.add_argument("--api-kind", default="openai-completions")
    parser.add_argument("--plan", action="store_true", help="plan mode; every plan pauses for review")
    parser.add_argument("--approve", help="resume: approve this approval id")
    parser.add_argument("--hold", action="store_true", help="after the run ends, wait to be killed")
    parser.add_argument("--cancel-on-tool", help="set the abort signal when this tool starts")
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--max-tokens", type=int, default=None)
    args = parser.parse_args()
    workdir = Path(args.workdir)
    runtime = await create_agent(
        provider="fake",
        model=args.model,
        max_tokens=args.max_tokens,
        base_url=args.base_url,
        api_key="k",
        api_kind=args.api_kind,
        **({"database_url": args.db} if args.db.startswith("postgresql://") else {"database_path": args.db}),
        workdir=str(workdir),
        extra_tools=[probe_tool(workdir), stall_tool()],
        sleep=_no_sleep,
    )
    run_input: dict[str, Any] = {"prompt": args.prompt, "request_id": args.request_id}
    if args.plan:
        run_input["agent"] = "plan"
    if args.approve:
        run_input = {"request_id": args.request_id, "plan_resume": {"approval_id": args.approve, "approved": True}}
    abort = asyncio.Event()
    host = AgentHost(approve_plan=_pause_for_review, abort_signal=abort)
    try:
        async for event in runtime.run(run_input, host):
            sys.stdout.write(json.dumps(event.model_dump()) + "\n")
            sys.stdout.flush()
            if event.type == "tool" and event.phase == "start" and event.name == args.cancel_on_tool:
                abort.set()
        if args.hold:
            await asyncio.Event().wait()  # the parent kills us here
    finally:
        await runtime.close()


def _pause_for_review(payload: dict[str, Any]) -> None:
    raise UserInputRequired("plan review", payload)


async def _no_sleep(seconds: float) -> None:
    return None


if __name__ == "__main__":
    die_with_parent()
    asyncio.run(main())
