"""The 50 MB tool result (issue 22): time, store growth and peak RSS of one turn.

    python bench/tool_result_cap.py [--size BYTES] [--kind mcp|extra|raw-mcp]

``mcp``: a real stdio MCP server (``tests/fixtures/mcp_server.py``, tool ``big``) answers one
call of the model (the fake provider server, openai-completions) with ``--size`` bytes of text
(default 50 MB); the runtime commits to a fresh SQLite store. ``extra``: the same through an
extra tool that returns the text from memory (what agentcore itself spends, without the MCP
SDK's transport). ``raw-mcp``: only ``McpConnection.call_tool``, no runtime (what the SDK's
stdio transport spends). Prints the wall time, the turn's status, how much the store (file +
WAL) grew, the size of the tool event's result and the peak RSS of this process, as one line
of JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentcore import AgentTool, ToolContext, ToolResult, create_agent  # noqa: E402
from agentcore.extensions.mcp import connect_mcp_server, create_mcp_tools  # noqa: E402
from agentcore.testing.fake_server import FakeProviderServer  # noqa: E402
from agentcore.testing.steps import Text, ToolCall  # noqa: E402

SERVER = ROOT / "tests" / "fixtures" / "mcp_server.py"


def store_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


def text_of(size: int) -> str:
    line = "x" * 99 + "\n"
    return (line * (size // len(line) + 1))[:size]


def extra_tool(size: int) -> AgentTool:
    async def execute(arguments: dict[str, object], ctx: ToolContext) -> ToolResult:
        return ToolResult.text(text_of(size))

    return AgentTool("fx_big", "A big text.", {"type": "object", "properties": {"size": {"type": "integer"}}}, execute)


async def turn(size: int, tools: list[AgentTool]) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="cap-bench-"))
    db = work / "store.sqlite"
    async with FakeProviderServer() as fake:
        fake.enqueue([ToolCall("fx_big", {"size": size}, id="b1")], [Text("done")])
        runtime = await create_agent(
            provider="fake", model="fake-model", base_url=fake.base_url, api_key="k",
            api_kind="openai-completions", database_path=str(db), workdir=str(work), extra_tools=tools,
        )  # fmt: skip
        before = store_bytes(db)
        started = time.perf_counter()
        end = None
        result_chars = 0
        async for event in runtime.run({"prompt": "go", "request_id": "big"}):
            if event.type == "tool" and event.phase == "end":
                result_chars = len(event.result or "")
            end = event
        elapsed = time.perf_counter() - started
        await runtime.close()
    assert end is not None and end.type == "end"
    return {
        "status": end.status,
        "error": (end.error or "")[:120],
        "seconds": round(elapsed, 2),
        "store_growth_mb": round((store_bytes(db) - before) / 1e6, 2),
        "tool_event_result_chars": result_chars,
    }


async def main(size: int, kind: str) -> dict[str, object]:
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outcome: dict[str, object] = {"size": size, "kind": kind}
    if kind == "extra":
        outcome.update(await turn(size, [extra_tool(size)]))
    else:
        async with await connect_mcp_server(sys.executable, [str(SERVER)], server_id="fx") as conn:
            if kind == "raw-mcp":
                started = time.perf_counter()
                await conn.call_tool("big", {"size": size})
                outcome["seconds"] = round(time.perf_counter() - started, 2)
            else:
                outcome.update(await turn(size, await create_mcp_tools(conn, allowed_tools=["big"])))
    outcome["rss_before_mb"] = round(rss_before / 1024, 1)
    outcome["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return outcome


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=50_000_000)
    parser.add_argument("--kind", choices=["mcp", "extra", "raw-mcp"], default="mcp")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.size, args.kind))))
