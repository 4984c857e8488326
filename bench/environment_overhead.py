"""Benchmark: the per-call overhead of the remote execution environment over the local one (SPEC X5).

Run: ``python bench/environment_overhead.py [--calls N]``. Calls ``read`` (a 20-line file),
``ls`` (a 20-entry directory) and ``bash true`` through the real tool path (prepare → validate
→ execute) on this machine and through a worker process (JSON lines over a pipe), interleaved
in rounds so machine load hits both alike, and prints medians, the added milliseconds and the
ratio. Also times the worker's start (spawn + import + handshake).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from agentcore.extensions.environment.remote import RemoteExecutionEnv, start_worker
from agentcore.tools import PathGuard, ToolContext, builtin_tools, execute_call, prepare_call

CASES = {"read": {"path": "f0.txt"}, "ls": {}, "bash true": {"command": "true"}}


def context(root: Path, env: RemoteExecutionEnv | None) -> ToolContext:
    return ToolContext(workdir=root, guard=PathGuard(root), abort=asyncio.Event(), tool_call_id="b", env=env)


async def one(ctx: ToolContext, case: str) -> float:
    name = case.split()[0]
    tool = next(t for t in builtin_tools() if t.name == name)
    prepared = prepare_call(tool, CASES[case])
    assert isinstance(prepared, dict)
    start = time.perf_counter()
    result = await execute_call(tool, prepared, ctx)
    elapsed = time.perf_counter() - start
    assert not result.is_error, result
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200, help="calls per tool and side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for n in range(20):
            (root / f"f{n}.txt").write_text("".join(f"line {i}\n" for i in range(20)))
        starts = []
        for _ in range(5):
            begin = time.perf_counter()
            env = await start_worker(root)
            starts.append(time.perf_counter() - begin)
            await env.cleanup()
        env = await start_worker(root)
        local, remote = context(root, None), context(root, env)
        times: dict[tuple[str, str], list[float]] = {(c, s): [] for c in CASES for s in ("local", "remote")}
        for case in CASES:  # warm up both sides
            await one(local, case)
            await one(remote, case)
        for _ in range(args.calls):
            for case in CASES:
                times[(case, "local")].append(await one(local, case))
                times[(case, "remote")].append(await one(remote, case))
        await env.cleanup()
    print(f"worker start (spawn + import + handshake): median {statistics.median(starts) * 1000:.0f} ms of 5")
    print(f"{'call':<10} {'local ms':>9} {'remote ms':>10} {'added ms':>9} {'ratio':>6}   (medians of {args.calls})")
    for case in CASES:
        lo = statistics.median(times[(case, "local")]) * 1000
        re_ = statistics.median(times[(case, "remote")]) * 1000
        print(f"{case:<10} {lo:>9.3f} {re_:>10.3f} {re_ - lo:>9.3f} {re_ / lo:>5.2f}×")


if __name__ == "__main__":
    asyncio.run(main())
