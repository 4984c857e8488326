"""How long the Trace of a 1,000-span turn takes to build, against reading its records raw.

One real run makes the store: a single turn of N tool rounds (each a streamed model request
answered with a tool call, then the tool), against the fake provider server on loopback, in a
SQLite store — N = 500 gives 1,002 spans (the turn, 501 model requests, 500 tool calls). Then,
each measured ``--repeat`` times in the same process and reported as medians:

- ``read``: the baseline — ``SqliteSource.read(0)``, every committed row of the store read and
  decoded (what any reader of the records pays);
- ``fold``: ``TraceBuilder.add()`` of those records plus ``trace(request_id=...)`` (the spans in
  timeline order), from records already read;
- ``build``: ``build_trace(path, request_id=...)``, read and fold, as a caller gets it;
- ``next``: the live case — after one more commit, reading the rows after the last seq and
  folding them into the existing builder;
- ``json`` / ``otlp``: the two exports of the built trace.

Each is reported as the best and the median of the repeats, with its ratio to ``read`` of the
same kind (the machine is shared: the best is what the work costs).

    python bench/trace_build.py [--rounds 500] [--repeat 9]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing it
    sys.path.insert(0, str(ROOT))

from agentcore import AgentTool, ToolContext, ToolResult, create_agent  # noqa: E402
from agentcore.harness import Commit  # noqa: E402
from agentcore.testing.fake_server import FakeProviderServer  # noqa: E402
from agentcore.testing.steps import Text, ToolCall  # noqa: E402
from agentcore.trace import TraceBuilder, build_trace, otlp_document, trace_document  # noqa: E402
from agentcore.trace.records import SqliteSource  # noqa: E402


def increment() -> AgentTool:
    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.text(str(arguments.get("n", 0) + 1))

    parameters = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    return AgentTool("increment", "Add one.", parameters, execute)


async def make_store(path: Path, rounds: int) -> None:
    async with FakeProviderServer() as server:
        server.enqueue(*[[ToolCall("increment", {"n": n}, id=f"c{n}")] for n in range(rounds)], [Text("counted")])
        runtime = await create_agent(
            provider="bench",
            model="bench-model",
            base_url=server.base_url,
            api_key="k",
            api_kind="openai-completions",
            database_path=str(path),
            extra_tools=[increment()],
            tools=["increment"],
        )
        try:
            async for event in runtime.run({"prompt": "count", "request_id": "bench"}):
                last = event
            if last.type != "end" or last.status != "completed":
                raise AssertionError(f"the run did not complete: {last!r}")
        finally:
            await runtime.close()


def timings_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(best, median) of ``repeat`` runs: on a shared machine the best is the cost, the median
    what a caller saw."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return min(times), statistics.median(times)


async def append_one(path: Path) -> None:
    """One more commit on the store (an entry in the main conversation), as a live turn makes."""
    runtime = await create_agent(provider="demo", database_path=str(path))
    try:
        runtime.log.commit(Commit(entries=[runtime.log.entry("plan", {"version": 1, "items": []})]))
    finally:
        await runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        asyncio.run(make_store(path, args.rounds))
        source = SqliteSource(path)
        records = source.read(0)
        spans = len(build_trace(path, request_id="bench").spans)
        rows = len(records.entries) + len(records.usage) + len(records.receipts) + len(records.registers)

        def fold() -> None:
            builder = TraceBuilder()
            builder.add(records)
            builder.trace(request_id="bench")

        read_ms = timings_ms(lambda: source.read(0), args.repeat)
        fold_ms = timings_ms(fold, args.repeat)
        build_ms = timings_ms(lambda: build_trace(path, request_id="bench"), args.repeat)
        trace = build_trace(path, request_id="bench")
        json_ms = timings_ms(lambda: trace_document(trace), args.repeat)
        otlp_ms = timings_ms(lambda: otlp_document(trace), args.repeat)
        live = TraceBuilder()
        live.add(records)
        asyncio.run(append_one(path))

        def next_commit() -> None:
            builder = TraceBuilder()
            builder.last_seq = live.last_seq
            builder.add(source.read(live.last_seq))

        next_ms = timings_ms(next_commit, args.repeat)
    print(f"{spans} spans in one turn, from {rows} store rows ({args.rounds} tool rounds); {args.repeat} repeats")
    print(f"{'':8}{'best ms':>9}{'× read':>9}{'median ms':>11}{'× read':>9}")
    for name, (best, median) in (
        ("read", read_ms),
        ("fold", fold_ms),
        ("build", build_ms),
        ("next", next_ms),
        ("json", json_ms),
        ("otlp", otlp_ms),
    ):
        print(f"{name:8}{best:9.2f}{best / read_ms[0]:9.2f}{median:11.2f}{median / read_ms[1]:9.2f}")


if __name__ == "__main__":
    main()
