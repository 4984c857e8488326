"""Child process for the code-mode crash tests: one session ``run()`` with code mode on a file store.

Prints every event as one JSON line (flushed). Its tools leave visible side effects in the
workdir, so the parent can kill it inside a nested call and later count what really ran:
``effect`` (replay ``never``) appends its tag to ``effects.txt`` and, with ``hang``, blocks the
first time that tag runs; ``probe`` (replay ``safe``) appends to ``probe.txt`` and blocks on its
first run. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agentcore import AgentTool, ToolContext, ToolResult, create_agent
from tests.child_guard import die_with_parent


def effect_tool(workdir: Path) -> AgentTool:
    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        log = workdir / "effects.txt"
        before = log.read_text().splitlines() if log.exists() else []
        with log.open("a") as handle:
            handle.write(f"{arguments['tag']}\n")
        if arguments.get("hang") and arguments["tag"] not in before:
            await asyncio.Event().wait()  # the parent kills us here
        return ToolResult.text(f"{arguments['tag']} ran")

    return AgentTool(
        name="effect",
        description="Do something that must not happen twice.",
        parameters={"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]},
        execute=execute,
    )


def probe_tool(workdir: Path) -> AgentTool:
    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        log = workdir / "probe.txt"
        before = log.read_text().count("\n") if log.exists() else 0
        with log.open("a") as handle:
            handle.write("probe\n")
        if before == 0:
            await asyncio.Event().wait()
        return ToolResult.text(f"probe ran {before + 1} times")

    return AgentTool(
        name="probe",
        description="Look at something (safe to repeat).",
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
    args = parser.parse_args()
    workdir = Path(args.workdir)
    runtime = await create_agent(
        provider="fake",
        model="fake-model",
        base_url=args.base_url,
        api_key="k",
        api_kind="openai-completions",
        database_path=args.db,
        workdir=str(workdir),
        extra_tools=[effect_tool(workdir), probe_tool(workdir)],
        session={"code_mode": {"timeout_ms": 60_000}},
        sleep=_no_sleep,
    )
    try:
        async for event in runtime.run({"prompt": "go", "request_id": args.request_id}):
            sys.stdout.write(json.dumps(event.model_dump()) + "\n")
            sys.stdout.flush()
    finally:
        await runtime.close()


async def _no_sleep(seconds: float) -> None:
    return None


if __name__ == "__main__":
    die_with_parent()
    asyncio.run(main())
