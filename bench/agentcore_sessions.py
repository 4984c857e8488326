"""agentcore's CPU per streamed turn in session mode, N sessions in one process, against a floor.

Studio runs every session's runtime the same way: ``create_agent(..., session={...})`` on its
own SQLite store, held by ``serve()``, every prompt a ``submit`` control command followed by
one ``session_snapshot(published=True)`` (``studio/host/session_host.py``). This benchmark does
exactly that for N runtimes in ONE process (the session options are Studio's: its extension
registry from ``studio.extensions.example`` and subagents on), with none of Studio's own work
(no Django, no fold, no rendering), so the CPU it measures is agentcore's share of a Studio
turn. The provider is the stamping fake provider of ``bench/studio_overhead.py --serve`` in a
child process (``bench/loopkit.py ProviderProcess``): each answer is ``--tokens`` chunks
``--pace-ms`` apart, over Chat Completions SSE, so the server's CPU is not in the numbers.

Per round all N prompts are submitted together and are in flight together: ``overlap`` is the
largest number of turns open at one instant (N when they truly overlap). A turn is the
``submit`` to its ``end`` event; the round's CPU is ``time.process_time`` from the first
submit until every turn ended and the sessions went quiet (``--settle-ms`` after the last end,
so trailing snapshots and commits are counted), divided by N.

The **floor** is measured in the same run, interleaved with agentcore's rounds: N raw
``httpx`` streams at once (one client per stream, configured like the runtime's), posting a
Chat Completions request for the same answer and parsing every SSE event with agentcore's own
decoder (``agentcore.providers.sse.SSEDecoder``) and ``json.loads``: the transport and parsing
no runtime can avoid. A second floor line, **floor on host lanes**, runs the same raw streams
through one ``new_host_http_client()`` shared by all N (the client the runtimes use: its
lanes read through ``agentcore.providers.asyncio_network``, not httpx's anyio backend), so
the report shows what that network path alone saves against plain httpx; the ratio and
"agentcore's own" stay relative to the plain-httpx floor. The runtimes share one pooled
client (``create_agent(http_client=...)``, ``agentcore.new_host_http_client``), as in Studio;
``--own-clients`` gives each its own.
Reported per stream window (``--window-ms``, set with the supported
``AgentRuntime.set_stream_window``): agentcore's CPU per turn, the floor's, their ratio, and
the difference (agentcore's own work), with the medians over ``--rounds`` rounds (the first
round, which connects and builds each runtime's first request, is reported apart); commits per
turn and the CPU spent inside them (``SqliteStorage.commit``: the count follows the window and how
far the event loop lags, and dominates at 20 ms), and events per turn by type.

``--profile out.txt`` samples this process with py-spy (``--gil``, raw collapsed stacks; read
it with ``bench/profile_top.py out.txt --match agentcore/``) during agentcore's measured rounds;
``--cprofile N`` prints cProfile's top N functions (by own time) over those rounds instead.

    python bench/agentcore_sessions.py [--sessions 50] [--tokens 60] [--pace-ms 20]
                                       [--window-ms 20 60] [--rounds 3] [--settle-ms 100]
                                       [--own-clients] [--profile out.txt | --cprofile 40]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopkit import PATHS, ProviderProcess, machine, py_spy, stop_py_spy

from agentcore import create_agent, new_host_http_client
from agentcore.events import RunEndEvent
from agentcore.harness.sqlite_store import SqliteStorage
from agentcore.host import AgentHost
from agentcore.providers.shared import new_http_client
from agentcore.providers.sse import SSEDecoder

HERE = Path(__file__).resolve().parent
MODEL = "bench-model"
ATTRIBUTES = {"context_window": 128000, "max_tokens": 4096, "reasoning": False}


def prompt(k: int, tokens: int) -> str:
    """What the stamping provider answers with ``tokens`` chunks for session ``k``."""
    return f"bench session {k}: answer in {tokens} tokens"


def session_options() -> dict[str, Any]:
    """Studio's ``session={...}`` for a session on a custom model (``runtime_options.session_options``
    with the default settings: the example extension, subagents on, no code mode, no catalogs)."""
    from studio.extensions import build_registry

    return {
        "registry": build_registry(["studio.extensions.example"]),
        "subagents": {"tools": ["read", "grep", "find", "ls", "write", "edit", "bash"], "max_agents": 4},
    }


def _pause(payload: dict[str, Any]) -> None:  # Studio's approve_plan hook (never reached here)
    from agentcore.errors import UserInputRequired

    raise UserInputRequired("plan review", payload={"kind": "plan", **payload})


@dataclass
class Session:
    """One runtime held by ``serve()``, as Studio's lease task holds it."""

    k: int
    runtime: Any
    ends: dict[str, asyncio.Future[float]] = field(default_factory=dict)
    events: Counter[str] = field(default_factory=Counter)
    task: asyncio.Task[None] | None = None

    async def serve(self) -> None:
        async for event in self.runtime.serve(AgentHost(approve_plan=_pause)):
            self.events[event.type] += 1
            if isinstance(event, RunEndEvent):
                done = self.ends.get(event.request_id)
                if done is not None and not done.done():
                    done.set_result(time.perf_counter())

    async def turn(self, request_id: str, tokens: int) -> tuple[float, float]:
        """Submit a prompt the way Studio's host does; (submitted, ended) perf-counter times."""
        done = self.ends[request_id] = asyncio.get_running_loop().create_future()
        started = time.perf_counter()
        command = {"type": "submit", "prompt": prompt(self.k, tokens), "mode": "follow_up", "request_id": request_id}
        receipt = await self.runtime.control(command)
        if receipt.get("status") != "accepted":
            raise AssertionError(f"session {self.k}: the prompt was not accepted: {receipt}")
        self.runtime.session_snapshot(published=True)  # the host folds the command's snapshot
        ended = await done
        return started, ended


class CommitCounter:
    """Counts SQLite commits (every runtime's store) and their CPU while installed."""

    def __init__(self) -> None:
        self.count = 0
        self.cpu = 0.0
        self._inner = SqliteStorage.commit

    def __enter__(self) -> CommitCounter:
        inner = self._inner

        def counted(storage: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            started = time.process_time()
            try:
                return inner(storage, *args, **kwargs)
            finally:
                self.cpu += time.process_time() - started

        SqliteStorage.commit = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        SqliteStorage.commit = self._inner  # type: ignore[method-assign]


@dataclass
class Round:
    cpu_ms: float  # per turn
    overlap: int = 0
    commits: float = 0.0  # per turn
    commit_ms: float = 0.0  # CPU in SqliteStorage.commit per turn
    events: dict[str, float] = field(default_factory=dict)  # per turn, by type


async def agent_round(sessions: list[Session], tokens: int, tag: str, settle: float) -> Round:
    from studio_overhead import max_overlap

    before = [Counter(s.events) for s in sessions]
    with CommitCounter() as commits:
        cpu = time.process_time()
        spans = await asyncio.gather(*(s.turn(f"{tag}-{s.k}", tokens) for s in sessions))
        await asyncio.sleep(settle)  # the sessions' trailing work after the last end event
        used = time.process_time() - cpu
    n = len(sessions)
    events: Counter[str] = Counter()
    for session, seen in zip(sessions, before, strict=True):
        events.update(session.events - seen)
    per_type = {k: v / n for k, v in events.items()}
    return Round(used * 1000 / n, max_overlap(spans), commits.count / n, commits.cpu * 1000 / n, per_type)


async def floor_round(url: str, clients: list[Any], tokens: int, settle: float, first: int = 0) -> Round:
    """N raw streams at once: post, read the bytes, split the SSE events, ``json.loads`` each
    (``clients``: one per stream, or the same shared client N times; ``first``: the session
    number of the first stream, so its answers' stamps stay apart from other sessions')."""

    async def one(k: int, client: Any) -> tuple[float, float]:
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": prompt(first + k, tokens)}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        started = time.perf_counter()
        headers = {"authorization": "Bearer k", "content-type": "application/json"}
        async with client.stream("POST", url, content=json.dumps(body).encode(), headers=headers) as response:
            decoder = SSEDecoder()
            chunks = 0
            async for raw in response.aiter_raw():
                for sse in decoder.feed(raw):
                    if sse.data != "[DONE]":
                        json.loads(sse.data)
                        chunks += 1
        if chunks < tokens:
            raise AssertionError(f"floor: {chunks} chunks for session {k}, wanted at least {tokens}")
        return started, time.perf_counter()

    cpu = time.process_time()
    spans = await asyncio.gather(*(one(k, c) for k, c in enumerate(clients)))
    await asyncio.sleep(settle)
    from studio_overhead import max_overlap

    return Round((time.process_time() - cpu) * 1000 / len(clients), max_overlap(spans))


class Profiler:
    """py-spy (``--profile``) or cProfile (``--cprofile``) over agentcore's measured rounds."""

    def __init__(self, out: Path | None, top: int | None) -> None:
        self.out, self.top = out, top
        self.cprofile = cProfile.Profile() if top else None
        self._spy: Any = None
        self._parts: list[Path] = []

    @contextlib.contextmanager
    def sampling(self) -> Any:
        if self.cprofile is not None:
            self.cprofile.enable()
        elif self.out is not None:
            part = self.out.with_suffix(f".part{len(self._parts)}")
            self._parts.append(part)
            self._spy = py_spy(part)
        try:
            yield
        finally:
            if self.cprofile is not None:
                self.cprofile.disable()
            elif self._spy is not None:
                stop_py_spy(self._spy)
                self._spy = None

    def report(self) -> None:
        if self.cprofile is not None:
            stats = pstats.Stats(self.cprofile)
            stats.sort_stats("tottime").print_stats(self.top)
        elif self.out is not None:
            with self.out.open("w") as out:
                for part in self._parts:
                    if part.exists():
                        out.write(part.read_text())
                        part.unlink()
            print(f"py-spy samples: {self.out} (python bench/profile_top.py {self.out} --match agentcore/)")


async def open_sessions(n: int, base_url: str, root: Path, http_client: Any = None) -> list[Session]:
    """``http_client``: the pool every runtime shares, as Studio's host passes one (None: each
    runtime makes its own, as before issue 25's shared pool)."""
    options = session_options()
    extra = {"http_client": http_client} if http_client is not None else {}
    sessions = []
    for k in range(n):
        workdir = root / f"work-{k}"
        workdir.mkdir()
        runtime = await create_agent(
            database_path=str(root / f"session-{k}.db"),
            workdir=str(workdir),
            model=MODEL,
            base_url=base_url,
            api_kind="openai-completions",
            api_key="k",
            model_attributes=ATTRIBUTES,
            permission_policy="read-only",
            effort="low",
            mode="build",
            session=dict(options),
            **extra,
        )
        session = Session(k, runtime)
        session.task = asyncio.create_task(session.serve())
        sessions.append(session)
    return sessions


async def run(args: argparse.Namespace, provider: ProviderProcess) -> None:
    root = Path(tempfile.mkdtemp(prefix="agentcore-sessions-"))
    profiler = Profiler(args.profile, args.cprofile)
    shared = None if args.own_clients else new_host_http_client()  # what Studio's host passes
    sessions = await open_sessions(args.sessions, provider.base_url, root, shared)
    clients = [new_http_client() for _ in range(args.sessions)]
    lanes_client = new_host_http_client()
    lanes_clients = [lanes_client] * args.sessions
    url = provider.base_url + PATHS["openai-completions"][len("/v1") :]
    settle = args.settle_ms / 1000
    results: dict[float, dict[str, list[Round]]] = {}
    try:
        for w, window in enumerate(args.window_ms):
            for session in sessions:
                session.runtime.set_stream_window(window / 1000)
            rounds: dict[str, list[Round]] = {"agent": [], "floor": [], "lanes": []}
            for r in range(args.rounds):
                first = w == 0 and r == 0  # connects, first request of every runtime: apart
                order = ("floor", "lanes", "agent") if r % 2 else ("agent", "lanes", "floor")
                for variant in order:
                    if variant == "floor":
                        rounds["floor"].append(await floor_round(url, clients, args.tokens, settle))
                    elif variant == "lanes":
                        rounds["lanes"].append(await floor_round(url, lanes_clients, args.tokens, settle))
                    else:
                        with profiler.sampling() if not first else contextlib.nullcontext():
                            rounds["agent"].append(await agent_round(sessions, args.tokens, f"w{w}r{r}", settle))
            results[window] = rounds
    finally:
        for session in sessions:
            session.runtime.stop_serving()
        for session in sessions:
            if session.task is not None:
                with contextlib.suppress(Exception):
                    await session.task
            await session.runtime.close()
        for client in clients:
            await client.aclose()
        await lanes_client.aclose()
        if shared is not None:
            await shared.aclose()
        shutil.rmtree(root, ignore_errors=True)
    report(args, results)
    profiler.report()


def report(args: argparse.Namespace, results: dict[float, dict[str, list[Round]]]) -> None:
    print(f"agentcore sessions: {machine()}")
    print(
        f"{args.sessions} sessions in one process, {args.tokens} tokens {args.pace_ms:g} ms apart, "
        f"{args.rounds} rounds per window (CPU ms per turn, process_time)"
    )
    for w, (window, rounds) in enumerate(results.items()):
        agent, floor, lanes = rounds["agent"], rounds["floor"], rounds["lanes"]
        measured = agent[1:] if w == 0 and len(agent) > 1 else agent
        floors = floor[1:] if w == 0 and len(floor) > 1 else floor
        lane_floors = lanes[1:] if w == 0 and len(lanes) > 1 else lanes
        a = statistics.median(r.cpu_ms for r in measured)
        f = statistics.median(r.cpu_ms for r in floors)
        fl = statistics.median(r.cpu_ms for r in lane_floors)
        print(f"window {window:g} ms:")
        print(
            f"  agentcore {a:6.2f} ms/turn   floor {f:5.2f} ms/turn   ratio {a / f:4.1f}x   "
            f"agentcore's own {a - f:6.2f} ms/turn"
        )
        print(f"  floor on host lanes {fl:5.2f} ms/turn (the same raw streams on new_host_http_client)")
        rows = ", ".join(f"{r.cpu_ms:.1f}" for r in agent)
        lane_rows = ", ".join(f"{r.cpu_ms:.1f}" for r in lanes)
        print(f"  rounds: agentcore {rows}; floor {', '.join(f'{r.cpu_ms:.1f}' for r in floor)}; lanes {lane_rows}")
        overlaps = f"agentcore {[r.overlap for r in agent]}, floor {[r.overlap for r in floor]}"
        print(f"  overlap: {overlaps} of {args.sessions}")
        last = agent[-1]
        kinds = ", ".join(f"{k} {v:.1f}" for k, v in sorted(last.events.items(), key=lambda kv: -kv[1]))
        commit_ms = statistics.median(r.commit_ms for r in measured)
        commits = statistics.median(r.commits for r in measured)
        print(
            f"  per turn: {commits:.1f} commits, {commit_ms:.2f} ms CPU in them "
            f"(agentcore's own without them {a - f - commit_ms:.2f} ms); events {kinds}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=50, help="runtimes in this process (default 50)")
    parser.add_argument("--tokens", type=int, default=60, help="chunks per answer (default 60)")
    parser.add_argument("--pace-ms", type=float, default=20.0, help="between chunks (default 20)")
    parser.add_argument("--window-ms", type=float, nargs="+", default=[20.0, 60.0], help="stream windows")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per window (default 3)")
    parser.add_argument("--settle-ms", type=float, default=100.0, help="counted after the last end (default 100)")
    parser.add_argument(
        "--own-clients", action="store_true", help="a client per runtime (default: one pool shared, as in Studio)"
    )
    parser.add_argument("--profile", type=Path, help="py-spy raw samples of agentcore's rounds to this file")
    parser.add_argument("--cprofile", type=int, metavar="N", help="print cProfile's top N functions instead")
    run_with_provider(run, parser.parse_args())


async def lanes_floor(base_url: str, sessions: int, tokens: int, rounds: int, first: int) -> list[float]:
    """The floor on host lanes alone (``bench/studio_overhead.py`` measures it after each size, in
    a child process, as the machine's speed in that run): CPU ms per stream of each round."""
    client = new_host_http_client()
    url = base_url + PATHS["openai-completions"][len("/v1") :]
    try:
        return [(await floor_round(url, [client] * sessions, tokens, 0.1, first)).cpu_ms for _ in range(rounds)]
    finally:
        await client.aclose()


def floor_only() -> None:
    """``--floor-only BASE_URL SESSIONS TOKENS ROUNDS FIRST``: prints the rounds' CPU as JSON."""
    base_url, sessions, tokens, rounds, first = sys.argv[2], *map(int, sys.argv[3:7])
    print(json.dumps(asyncio.run(lanes_floor(base_url, sessions, tokens, rounds, first))))


def run_with_provider(body: Any, args: argparse.Namespace) -> None:
    """``asyncio.run(body(args, provider))`` with the stamping provider (``--tokens``,
    ``--pace-ms``) in a child process."""
    server = [str(HERE / "studio_overhead.py"), "--serve", str(args.tokens), str(args.pace_ms)]
    with ProviderProcess(server) as provider:
        asyncio.run(body(args, provider))


if __name__ == "__main__":
    floor_only() if sys.argv[1:2] == ["--floor-only"] else main()
