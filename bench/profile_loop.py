"""Run agentcore's N-turn tool loop (the one ``loop_overhead.py`` measures) for a profiler.

Only the runtime runs in this process (the fake provider is a child process), so every
sample or call counted is the client's. Each run is checked like the benchmark's (N tool
calls, N + 1 requests, ``completed``).

    python bench/profile_loop.py --api-kind openai-completions --turns 100 --runs 5 [--memory]
    python bench/profile_loop.py ... --cprofile loop.prof       # cProfile, prints the top 40
    py-spy record --format raw -o loop.txt -- python bench/profile_loop.py ...   # sampling
    python bench/profile_top.py loop.txt --under profiled_run

See ``docs/profiling.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

from loop_overhead import run_agentcore
from loopkit import PATHS, ProviderProcess, Sample


async def warm_up(provider: ProviderProcess, args: argparse.Namespace, base: Path) -> None:
    """An untimed first run (imports, TLS context, caches); ``--under profiled_run`` leaves it out."""
    await run_agentcore(provider, args.api_kind, args.turns, None if args.memory else base / "warm.sqlite", base)


async def profiled_run(
    provider: ProviderProcess, args: argparse.Namespace, database: Path | None, base: Path
) -> Sample:
    return await run_agentcore(provider, args.api_kind, args.turns, database, base)


async def loop(args: argparse.Namespace, profiler: cProfile.Profile | None) -> None:
    with ProviderProcess() as provider, tempfile.TemporaryDirectory(prefix="profile-loop-") as tmp:
        base = Path(tmp)
        await warm_up(provider, args, base)
        total = 0.0
        for run in range(args.runs):
            database = None if args.memory else base / f"run-{run}.sqlite"
            if profiler is not None:
                profiler.enable()
            sample = await profiled_run(provider, args, database, base)
            if profiler is not None:
                profiler.disable()
            total += sample.wall
        print(f"{args.api_kind}: {total / args.runs / args.turns * 1000:.2f} ms per turn over {args.runs} runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api-kind", default="openai-completions", choices=list(PATHS))
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--memory", action="store_true", help="in-memory store instead of SQLite")
    parser.add_argument("--cprofile", type=Path, help="profile the timed runs with cProfile into this file")
    args = parser.parse_args()
    profiler = cProfile.Profile(time.process_time) if args.cprofile else None
    asyncio.run(loop(args, profiler))
    if profiler is not None and args.cprofile:
        profiler.dump_stats(args.cprofile)
        stats = pstats.Stats(str(args.cprofile))
        stats.sort_stats("tottime").print_stats(40)


if __name__ == "__main__":
    main()
