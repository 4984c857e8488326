"""agentcore's tool loop against the raw transport floor, on all three wire protocols.

An N-turn loop: each turn is one streamed request answered with a short text and one call of
the benchmark's only tool (``increment``, a real function that bumps a counter), then one final
request answered with text: N + 1 requests whose history grows by a call and a result per turn.
The runtime is offered exactly that tool (``extra_tools=[increment]``, ``tools=["increment"]``),
and every run asserts that the tool ran N times with arguments 0..N-1, that the server answered
N + 1 requests and that the run ended ``completed``.

Variants, interleaved (the order rotates every repeat) and reported as medians:

- ``memory``: ``create_agent(...)`` without a database (in-memory store);
- ``sqlite``: ``database_path=`` a fresh SQLite file (durability on);
- ``floor``: raw ``httpx`` posting the runtime's exact request bytes (captured from an
  untimed SQLite run of the same N, headers included) on one pooled connection and reading
  every SSE byte unparsed;
- ``adapter``: the runtime's provider adapter alone streaming the same requests (the
  ``ProviderRequest`` objects captured from that untimed run): request encoding, SSE parsing,
  stream events and the stream bounds, no engine and no store. It splits the distance to the
  floor into the adapter's part and the engine's.

The fake provider runs in a child process (``bench/loopkit.py``), so the CPU columns are this
process's, i.e. the client's alone; "overhead" is the runtime's CPU per turn above the floor's.
Ratios are medians of per-repeat ratios (each repeat measures every variant back to back).

    python bench/loop_overhead.py [--turns 10 100 500] [--api-kind openai-completions ...]
                                  [--repeat 5] [--json results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from loopkit import (
    PATHS,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_PARAMETERS,
    Counter,
    ProviderProcess,
    RawRequest,
    Sample,
    loop_script,
    machine,
    replay_floor,
    timed,
)

from agentcore import AgentTool, ToolContext, ToolResult, create_agent
from agentcore.providers import ProviderRegistry
from agentcore.providers.base import ProviderRequest, StreamEnd

VARIANTS = ("memory", "sqlite", "floor", "adapter")


def counting_tool(counter: Counter) -> AgentTool:
    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.text(counter.bump(arguments["n"]))

    return AgentTool(name=TOOL_NAME, description=TOOL_DESCRIPTION, parameters=TOOL_PARAMETERS, execute=execute)


async def run_agentcore(
    provider: ProviderProcess,
    api_kind: str,
    turns: int,
    database: Path | None,
    workdir: Path,
    capture: list[ProviderRequest] | None = None,
) -> Sample:
    """One timed loop (``run()`` from the prompt to the end event); asserts it really looped.
    ``capture`` collects the provider requests the runtime made (for the ``adapter`` variant)."""
    counter = Counter()
    tool = counting_tool(counter)
    provider.script(loop_script(turns))
    options: dict[str, Any] = {
        "provider": "bench",
        "model": "bench-model",
        "base_url": provider.base_url,
        "api_key": "k",
        "api_kind": api_kind,
        "workdir": str(workdir),
        "extra_tools": [tool],
        "tools": [TOOL_NAME],
    }
    if database is not None:
        options["database_path"] = str(database)
    runtime = await create_agent(**options)
    if capture is not None:
        record_requests(runtime, api_kind, capture)
    last: list[Any] = []

    async def loop() -> None:
        async for event in runtime.run("Count with the increment tool."):
            last[:] = [event]

    try:
        sample = await timed(loop)
    finally:
        await runtime.close()
    end = last[0] if last else None
    if end is None or end.type != "end" or end.status != "completed":
        raise AssertionError(f"agentcore {api_kind}: the run did not complete: {end!r}")
    counter.check(f"agentcore {api_kind}", turns)
    served = provider.request_count()
    if served != turns + 1:
        raise AssertionError(f"agentcore {api_kind}: {served} requests, expected {turns + 1}")
    return sample


def record_requests(runtime: Any, api_kind: str, into: list[ProviderRequest]) -> None:
    """Wrap the runtime's adapter (a private attribute: a benchmark's privilege) so each request
    is kept with a copy of its message list, as the engine passed it."""
    adapter = runtime._providers.get(api_kind)
    stream = adapter.stream

    def recording(request: ProviderRequest, abort: Any = None) -> Any:
        into.append(dataclasses.replace(request, messages=list(request.messages)))
        return stream(request, abort)

    adapter.stream = recording


async def run_adapter(provider: ProviderProcess, api_kind: str, turns: int, requests: list[ProviderRequest]) -> Sample:
    """The adapter streaming the captured requests, one after another, each read to its end."""
    provider.script(loop_script(turns))
    registry = ProviderRegistry()
    adapter = registry.get(api_kind)
    failures: list[Any] = []

    async def replay() -> None:
        for request in requests:
            async for event in adapter.stream(request):
                if isinstance(event, StreamEnd) and event.failure is not None:
                    failures.append(event.failure)

    try:
        sample = await timed(replay)
    finally:
        await registry.aclose()
    if failures:
        raise AssertionError(f"adapter {api_kind}: {failures[:3]}")
    return sample


async def run_floor(provider: ProviderProcess, turns: int, requests: list[RawRequest]) -> Sample:
    provider.script(loop_script(turns))
    wall, cpu = await replay_floor(provider.url, requests)
    return Sample(wall, cpu)


async def measure(provider: ProviderProcess, api_kind: str, turns: int, repeat: int, tmp: Path) -> dict[str, Any]:
    workdir = tmp / "work"
    workdir.mkdir(exist_ok=True)
    runs = 0

    def fresh_db() -> Path:
        nonlocal runs
        runs += 1
        return tmp / f"{api_kind}-{turns}-{runs}.sqlite"

    captured: list[ProviderRequest] = []
    await run_agentcore(provider, api_kind, turns, fresh_db(), workdir, captured)  # warm-up; the floor's bytes
    if len(captured) != turns + 1:
        raise AssertionError(f"captured {len(captured)} provider requests, expected {turns + 1}")
    requests = provider.raw_requests()
    if any(r.path != PATHS[api_kind] for r in requests):
        raise AssertionError(f"unexpected request paths: {sorted({r.path for r in requests})}")
    samples: dict[str, list[Sample]] = {v: [] for v in VARIANTS}
    for attempt in range(repeat):
        shift = attempt % len(VARIANTS)
        for variant in VARIANTS[shift:] + VARIANTS[:shift]:
            if variant == "floor":
                sample = await run_floor(provider, turns, requests)
            elif variant == "adapter":
                sample = await run_adapter(provider, api_kind, turns, captured)
            else:
                database = fresh_db() if variant == "sqlite" else None
                sample = await run_agentcore(provider, api_kind, turns, database, workdir)
                if database is not None:
                    for path in database.parent.glob(database.name + "*"):
                        path.unlink()
            samples[variant].append(sample)
    return summarise(samples, turns)


def summarise(samples: dict[str, list[Sample]], turns: int) -> dict[str, Any]:
    def per_turn(variant: str, attr: str) -> float:
        return statistics.median(getattr(s, attr) for s in samples[variant]) / turns * 1000

    def ratio(variant: str, attr: str) -> float:
        pairs = zip(samples[variant], samples["floor"], strict=True)
        return statistics.median(getattr(a, attr) / getattr(f, attr) for a, f in pairs)

    result: dict[str, Any] = {"turns": turns, "repeat": len(samples["floor"])}
    for variant in VARIANTS:
        result[f"{variant}_ms"] = per_turn(variant, "wall")
        result[f"{variant}_cpu_ms"] = per_turn(variant, "cpu")
    for variant in ("memory", "sqlite", "adapter"):
        result[f"{variant}_ratio"] = ratio(variant, "wall")
        result[f"{variant}_best_ratio"] = min(s.wall for s in samples[variant]) / min(s.wall for s in samples["floor"])
        result[f"{variant}_cpu_overhead_ms"] = result[f"{variant}_cpu_ms"] - result["floor_cpu_ms"]
    return result


HEADER = (
    f"{'api kind':<20}{'N':>5}{'floor':>8}{'memory':>8}{'sqlite':>8}{'adapt ×':>8}{'mem ×':>7}{'sql ×':>7}"
    f"{'sql best×':>10}{'floor cpu':>10}{'adapt cpu':>10}{'mem cpu':>8}{'sql cpu':>8}{'sql cpu over':>13}"
)


def row(api_kind: str, r: dict[str, Any]) -> str:
    return (
        f"{api_kind:<20}{r['turns']:>5}{r['floor_ms']:>8.2f}{r['memory_ms']:>8.2f}{r['sqlite_ms']:>8.2f}"
        f"{r['adapter_ratio']:>8.2f}{r['memory_ratio']:>7.2f}{r['sqlite_ratio']:>7.2f}{r['sqlite_best_ratio']:>10.2f}"
        f"{r['floor_cpu_ms']:>10.2f}{r['adapter_cpu_ms']:>10.2f}{r['memory_cpu_ms']:>8.2f}{r['sqlite_cpu_ms']:>8.2f}"
        f"{r['sqlite_cpu_overhead_ms']:>13.2f}"
    )


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    print(machine())
    print("ms per turn (wall, medians); × = median of per-repeat ratios to the floor; cpu = this process only")
    print(HEADER, flush=True)
    with ProviderProcess() as provider, tempfile.TemporaryDirectory(prefix="loop-bench-") as tmp:
        for api_kind in args.api_kind:
            for turns in args.turns:
                result = await measure(provider, api_kind, turns, args.repeat, Path(tmp))
                result["api_kind"] = api_kind
                results.append(result)
                print(row(api_kind, result), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--api-kind", nargs="+", default=list(PATHS), choices=list(PATHS))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
