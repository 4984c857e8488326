"""Tool-loop overhead against the raw transport floor (issue 2 benchmark).

Runs an N-turn tool loop (each turn: one streamed request whose history grows by a tool call
and its result) through the real runtime with durability on (SQLite store), against the
fake provider server on loopback. Then, in the same run, replays the *same request bodies*
with raw ``httpx`` streaming and reads the same SSE bytes: that is the floor. Prints the
ratio runtime/floor per request, and events per second.

The server shares the event loop (and thread) with the client, so process CPU time covers
both sides of both runs; the CPU columns are the steadier signal on a busy machine, where
wall time also counts waiting for a core.

    python bench/loop_overhead.py [--turns 50 100] [--api-kind openai-completions] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from agentcore import AgentTool, ToolResult, create_agent
from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Text, ToolCall, Usage

PATHS = {
    "openai-completions": "/chat/completions",
    "openai-responses": "/responses",
    "anthropic-messages": "/messages",
}


async def _echo(arguments: dict[str, Any], ctx: Any) -> ToolResult:
    return ToolResult.text(f"echo {arguments.get('n')}")


ECHO = AgentTool(
    name="echo",
    description="Echo a number back.",
    parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    execute=_echo,
    read_only=True,
    replay="safe",
)


def _script(turns: int) -> list[list[Any]]:
    script: list[list[Any]] = [
        [Text("Working on it."), ToolCall("echo", {"n": i}, id=f"call_{i}"), Usage(input=100 + i, output=20)]
        for i in range(turns - 1)
    ]
    script.append([Text("All done."), Usage(input=200, output=5)])
    return script


async def run_agent(
    server: FakeProviderServer, api_kind: str, turns: int, db: Path, cpu_times: list[float] | None = None
) -> tuple[float, int]:
    """(wall seconds, events) of one loop; its process CPU seconds are appended to ``cpu_times``."""
    server.reset()
    server.enqueue(*_script(turns))
    runtime = await create_agent(
        provider="bench",
        model="bench-model",
        base_url=server.base_url,
        api_key="k",
        api_kind=api_kind,
        database_path=str(db),
        extra_tools=[ECHO],
        tools=[],
    )
    events = 0
    cpu_start = time.process_time()
    start = time.perf_counter()
    async for _event in runtime.run(f"count to {turns}"):
        events += 1
    elapsed = time.perf_counter() - start
    if cpu_times is not None:
        cpu_times.append(time.process_time() - cpu_start)
    await runtime.close()
    return elapsed, events


async def run_raw(
    server: FakeProviderServer, api_kind: str, turns: int, bodies: list[bytes], cpu_times: list[float] | None = None
) -> float:
    server.reset()
    server.enqueue(*_script(turns))
    url = server.base_url + PATHS[api_kind]
    headers = {"authorization": "Bearer k", "content-type": "application/json", "anthropic-version": "2023-06-01"}
    async with httpx.AsyncClient(timeout=30) as client:
        cpu_start = time.process_time()
        start = time.perf_counter()
        for body in bodies:
            async with client.stream("POST", url, content=body, headers=headers) as response:
                async for _chunk in response.aiter_raw():
                    pass
        elapsed = time.perf_counter() - start
        if cpu_times is not None:
            cpu_times.append(time.process_time() - cpu_start)
        return elapsed


async def measure(api_kind: str, turns: int, repeat: int) -> dict[str, float]:
    ratios, agent_times, raw_times, rates = [], [], [], []
    agent_cpu: list[float] = []
    raw_cpu: list[float] = []
    async with FakeProviderServer() as server:
        with tempfile.TemporaryDirectory() as tmp:
            for attempt in range(repeat):
                db = Path(tmp) / f"bench-{attempt}.sqlite"
                agent_s, events = await run_agent(server, api_kind, turns, db, agent_cpu)
                bodies = [
                    request.raw_body if hasattr(request, "raw_body") else _encode(request.body)
                    for request in server.requests
                ]
                raw_s = await run_raw(server, api_kind, turns, bodies, raw_cpu)
                agent_times.append(agent_s)
                raw_times.append(raw_s)
                ratios.append(agent_s / raw_s)
                rates.append(events / agent_s)
    return {
        "agent_ms_per_turn": statistics.median(agent_times) / turns * 1000,
        "raw_ms_per_turn": statistics.median(raw_times) / turns * 1000,
        "ratio": statistics.median(ratios),
        "events_per_s": statistics.median(rates),
        "agent_cpu_ms_per_turn": statistics.median(agent_cpu) / turns * 1000,
        "raw_cpu_ms_per_turn": statistics.median(raw_cpu) / turns * 1000,
        "cpu_ratio": statistics.median(a / r for a, r in zip(agent_cpu, raw_cpu, strict=True)),
        # Best-of-N on each side (as timeit reports): the intrinsic cost with the VM's
        # neighbours' noise removed; on a shared 2-core VM single runs swing by ±20%.
        "best_ratio": min(agent_times) / min(raw_times),
    }


def _encode(body: Any) -> bytes:
    import json

    return json.dumps(body, separators=(",", ":")).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, nargs="+", default=[50, 100])
    parser.add_argument(
        "--api-kind", nargs="+", default=["openai-completions", "openai-responses", "anthropic-messages"]
    )
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(
        f"{'api kind':<22}{'turns':>6}{'agent ms/turn':>15}{'raw ms/turn':>13}{'ratio':>8}{'events/s':>11}"
        f"{'agent cpu':>11}{'raw cpu':>9}{'cpu ratio':>11}{'best-of ratio':>15}"
    )
    for api_kind in args.api_kind:
        for turns in args.turns:
            result = asyncio.run(measure(api_kind, turns, args.repeat))
            print(
                f"{api_kind:<22}{turns:>6}{result['agent_ms_per_turn']:>15.2f}{result['raw_ms_per_turn']:>13.2f}"
                f"{result['ratio']:>8.2f}{result['events_per_s']:>11.0f}"
                f"{result['agent_cpu_ms_per_turn']:>11.2f}{result['raw_cpu_ms_per_turn']:>9.2f}{result['cpu_ratio']:>11.2f}"
                f"{result['best_ratio']:>15.2f}"
            )


if __name__ == "__main__":
    main()
