"""Which HTTP client a host should give its runtimes: agentcore CPU per turn, three ways, one process.

``bench/agentcore_sessions.py`` compares agentcore with a floor; this compares the clients a
host can give N session runtimes (Studio's options, the stamping provider in a child process),
all in ONE process so they run under the same load: a group on one
``agentcore.new_host_http_client()`` (lanes), a group each on its own client (no
``http_client``), and a group on one plain ``httpx.AsyncClient`` without a connection limit
(httpx's own pool). Each round runs one group's N turns at once; the groups' rounds
alternate. Printed per group: the first round (every runtime's first turn, connects
included) and the median of the others, CPU ms per turn (``process_time`` / N).

    python bench/agentcore_pools.py [--sessions 50] [--rounds 5] [--tokens 60] [--pace-ms 20]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

import httpx
from agentcore_sessions import agent_round, open_sessions, run_with_provider
from loopkit import ProviderProcess, machine

from agentcore import new_host_http_client


async def run(args: argparse.Namespace, provider: ProviderProcess) -> None:
    root = Path(tempfile.mkdtemp(prefix="agentcore-pools-"))
    lanes = new_host_http_client()
    plain = httpx.AsyncClient(limits=httpx.Limits(max_connections=None, max_keepalive_connections=256))
    clients = {"lanes": lanes, "own clients": None, "one httpx pool": plain}
    groups = {}
    for k, (name, client) in enumerate(clients.items()):
        (root / str(k)).mkdir()
        groups[name] = await open_sessions(args.sessions, provider.base_url, root / str(k), client)
    cpu: dict[str, list[float]] = {name: [] for name in groups}
    try:
        for r in range(args.rounds):
            for name, sessions in groups.items():
                cpu[name].append((await agent_round(sessions, args.tokens, f"{name}-{r}", 0.1)).cpu_ms)
    finally:
        for sessions in groups.values():
            for session in sessions:
                session.runtime.stop_serving()
            for session in sessions:
                if session.task is not None:
                    await session.task
                await session.runtime.close()
        await lanes.aclose()
        await plain.aclose()
        shutil.rmtree(root, ignore_errors=True)
    print(f"agentcore pools: {machine()}")
    print(f"{args.sessions} runtimes per group, {args.tokens} tokens {args.pace_ms:g} ms apart (CPU ms per turn)")
    for name, rounds in cpu.items():
        rest = statistics.median(rounds[1:]) if len(rounds) > 1 else float("nan")
        shown = [round(x, 1) for x in rounds]
        print(f"  {name:15s} first round {rounds[0]:5.1f}   others (median) {rest:5.1f}   {shown}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=50, help="runtimes per group (default 50)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per group (default 5)")
    parser.add_argument("--tokens", type=int, default=60, help="chunks per answer (default 60)")
    parser.add_argument("--pace-ms", type=float, default=20.0, help="between chunks (default 20)")
    run_with_provider(run, parser.parse_args())


if __name__ == "__main__":
    main()
