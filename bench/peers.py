"""The same N-turn tool loop run by agentcore and by its peers, against the raw transport floor.

Every participant talks Chat Completions (streaming) to the same fake provider (a child
process, ``bench/loopkit.py``), which answers N requests with a short text and one call of the
one tool, ``increment`` (a real function bumping a counter), then a final answer. Each run
asserts that the tool ran N times with arguments 0..N-1 and that N + 1 requests were served.

Participants (``--only`` picks some), each with and without its own persistence:

- ``floor``: raw ``httpx`` posting the smallest request bodies of this loop (pre-encoded) and
  reading the SSE bytes unparsed; ``floor-agentcore-bodies`` replays agentcore's exact bytes
  instead (its default system prompt makes them larger);
- ``agentcore`` (in-memory / ``database_path=`` SQLite);
- ``openai-agents`` (no session / ``SQLiteSession``);
- ``pydantic-ai`` (no persistence: it ships no SQLite or file conversation store);
- ``langgraph`` (``create_react_agent`` + ``ChatOpenAI``; no checkpointer / ``AsyncSqliteSaver``).

A peer that is not installed or fails is reported and skipped; the others still run. Install
the peers with the ``bench`` extra (``pip install -e '.[bench]'``). Every framework gets the same
short system prompt. Prints ms per turn (median of ``--repeat`` interleaved runs), the ratio to
the floor (median of per-repeat ratios) and this process's CPU ms per turn.

    python bench/peers.py [--turns 10 100 500] [--repeat 3] [--only agentcore langgraph] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import traceback
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopkit import (
    PROMPT,
    SYSTEM_PROMPT,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_PARAMETERS,
    Counter,
    ProviderProcess,
    RawRequest,
    Sample,
    completions_bodies,
    loop_script,
    machine,
    replay_floor,
    timed,
)

API_KIND = "openai-completions"
MODEL = "bench-model"


@dataclass
class Context:
    provider: ProviderProcess
    tmp: Path
    runs: int = 0
    agentcore_bodies: dict[int, list[RawRequest]] = field(default_factory=dict)

    def fresh(self, name: str) -> Path:
        self.runs += 1
        return self.tmp / f"{name}-{self.runs}.sqlite"


Runner = Callable[[Context, int], Awaitable[Sample]]


def _served(ctx: Context, who: str, turns: int) -> None:
    served = ctx.provider.request_count()
    if served != turns + 1:
        raise AssertionError(f"{who}: {served} requests served, expected {turns + 1}")


def _checked(ctx: Context, who: str, turns: int, counter: Counter) -> None:
    counter.check(who, turns)
    _served(ctx, who, turns)


# --- the floor ----------------------------------------------------------------------------


async def floor(ctx: Context, turns: int) -> Sample:
    ctx.provider.script(loop_script(turns))
    wall, cpu = await replay_floor(ctx.provider.url, completions_bodies(turns, MODEL))
    _served(ctx, "floor", turns)
    return Sample(wall, cpu)


async def floor_agentcore_bodies(ctx: Context, turns: int) -> Sample:
    if turns not in ctx.agentcore_bodies:
        await agentcore(ctx, turns, persist=True)
        ctx.agentcore_bodies[turns] = ctx.provider.raw_requests()
    ctx.provider.script(loop_script(turns))
    wall, cpu = await replay_floor(ctx.provider.url, ctx.agentcore_bodies[turns])
    _served(ctx, "floor-agentcore-bodies", turns)
    return Sample(wall, cpu)


# --- agentcore ------------------------------------------------------------------------------


async def agentcore(ctx: Context, turns: int, *, persist: bool) -> Sample:
    from agentcore import AgentTool, ToolContext, ToolResult, create_agent

    counter = Counter()

    async def execute(arguments: dict[str, Any], tool_ctx: ToolContext) -> ToolResult:
        return ToolResult.text(counter.bump(arguments["n"]))

    tool = AgentTool(name=TOOL_NAME, description=TOOL_DESCRIPTION, parameters=TOOL_PARAMETERS, execute=execute)
    ctx.provider.script(loop_script(turns))
    options: dict[str, Any] = {
        "provider": "bench",
        "model": MODEL,
        "base_url": ctx.provider.base_url,
        "api_key": "k",
        "api_kind": API_KIND,
        "workdir": str(ctx.tmp),
        "system_prompt": SYSTEM_PROMPT,
        "extra_tools": [tool],
        "tools": [TOOL_NAME],
    }
    if persist:
        options["database_path"] = str(ctx.fresh("agentcore"))
    runtime = await create_agent(**options)
    ends: list[Any] = []

    async def loop() -> None:
        async for event in runtime.run(PROMPT):
            if event.type == "end":
                ends.append(event)

    try:
        sample = await timed(loop)
    finally:
        await runtime.close()
    if not ends or ends[-1].status != "completed" or ends[-1].text != "All done.":
        raise AssertionError(f"agentcore: the run did not complete: {ends!r}")
    _checked(ctx, "agentcore", turns, counter)
    return sample


# --- openai-agents ----------------------------------------------------------------------------


async def openai_agents(ctx: Context, turns: int, *, persist: bool) -> Sample:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        SQLiteSession,
        function_tool,
        set_tracing_disabled,
    )
    from agents import Runner as AgentsRunner
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    counter = Counter()

    @function_tool(name_override=TOOL_NAME, description_override=TOOL_DESCRIPTION)
    def increment(n: int) -> str:
        return counter.bump(n)

    client = AsyncOpenAI(base_url=ctx.provider.base_url, api_key="k", max_retries=0)
    agent = Agent(
        name="bench",
        instructions=SYSTEM_PROMPT,
        model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        tools=[increment],
    )
    session = SQLiteSession("bench", str(ctx.fresh("openai-agents"))) if persist else None
    ctx.provider.script(loop_script(turns))
    outputs: list[Any] = []

    async def loop() -> None:
        result = AgentsRunner.run_streamed(agent, PROMPT, max_turns=turns + 5, session=session)
        async for _event in result.stream_events():
            pass
        outputs.append(result.final_output)

    try:
        sample = await timed(loop)
    finally:
        if session is not None:
            session.close()
        await client.close()
    if outputs != ["All done."]:
        raise AssertionError(f"openai-agents: final output {outputs!r}")
    _checked(ctx, "openai-agents", turns, counter)
    return sample


# --- pydantic-ai ------------------------------------------------------------------------------


async def pydantic_ai(ctx: Context, turns: int, *, persist: bool) -> Sample:
    from openai import AsyncOpenAI
    from pydantic_ai import Agent, UsageLimits
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    counter = Counter()
    client = AsyncOpenAI(base_url=ctx.provider.base_url, api_key="k", max_retries=0)
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, system_prompt=SYSTEM_PROMPT)

    @agent.tool_plain(name=TOOL_NAME, description=TOOL_DESCRIPTION)
    def increment(n: int) -> str:
        return counter.bump(n)

    ctx.provider.script(loop_script(turns))
    outputs: list[Any] = []

    async def loop() -> None:
        async with agent.run_stream_events(PROMPT, usage_limits=UsageLimits(request_limit=None)) as events:
            async for event in events:
                result = getattr(event, "result", None)
                if result is not None:
                    outputs.append(result.output)

    try:
        sample = await timed(loop)
    finally:
        await client.close()
    if outputs != ["All done."]:
        raise AssertionError(f"pydantic-ai: final output {outputs!r}")
    _checked(ctx, "pydantic-ai", turns, counter)
    return sample


# --- LangGraph --------------------------------------------------------------------------------


async def langgraph(ctx: Context, turns: int, *, persist: bool) -> Sample:
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of langchain.agents
        from langgraph.prebuilt import create_react_agent

    counter = Counter()

    def increment(n: int) -> str:
        return counter.bump(n)

    tool = StructuredTool.from_function(increment, name=TOOL_NAME, description=TOOL_DESCRIPTION)
    llm = ChatOpenAI(
        model=MODEL,
        base_url=ctx.provider.base_url,
        api_key="k",  # type: ignore[arg-type]
        streaming=True,
        stream_usage=True,
        max_retries=0,
        use_responses_api=False,
    )
    config: dict[str, Any] = {"recursion_limit": 2 * turns + 10, "configurable": {"thread_id": "bench"}}
    ctx.provider.script(loop_script(turns))
    finals: list[Any] = []

    async def drive(checkpointer: Any) -> Sample:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = create_react_agent(llm, [tool], prompt=SYSTEM_PROMPT, checkpointer=checkpointer)

        async def loop() -> None:
            last: Any = None
            async for chunk in graph.astream(
                {"messages": [("user", PROMPT)]}, config, stream_mode=["messages", "values"]
            ):
                mode, payload = chunk
                if mode == "values":
                    last = payload
            finals.append(last["messages"][-1].content if last else None)

        return await timed(loop)

    if persist:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(ctx.fresh("langgraph"))) as saver:
            sample = await drive(saver)
    else:
        sample = await drive(None)
    if finals != ["All done."]:
        raise AssertionError(f"langgraph: final message {finals!r}")
    _checked(ctx, "langgraph", turns, counter)
    return sample


# --- the table ----------------------------------------------------------------------------------


def _persisting(run: Callable[..., Awaitable[Sample]], persist: bool) -> Runner:
    async def runner(ctx: Context, turns: int) -> Sample:
        return await run(ctx, turns, persist=persist)

    return runner


PARTICIPANTS: dict[str, tuple[str, Runner]] = {
    "floor": ("floor", floor),
    "floor-agentcore-bodies": ("floor", floor_agentcore_bodies),
    "agentcore memory": ("agentcore", _persisting(agentcore, False)),
    "agentcore sqlite": ("agentcore", _persisting(agentcore, True)),
    "openai-agents memory": ("openai-agents", _persisting(openai_agents, False)),
    "openai-agents SQLiteSession": ("openai-agents", _persisting(openai_agents, True)),
    "pydantic-ai memory": ("pydantic-ai", _persisting(pydantic_ai, False)),
    "langgraph memory": ("langgraph", _persisting(langgraph, False)),
    "langgraph AsyncSqliteSaver": ("langgraph", _persisting(langgraph, True)),
}
NOT_OFFERED = {"pydantic-ai sqlite": "pydantic-ai ships no SQLite/file conversation store (only in-memory)"}


def _failure(exc: BaseException) -> str:
    if isinstance(exc, ImportError):
        return f"not installed ({exc.name or exc}); pip install -e '.[bench]'"
    last = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {Path(last.filename).name}:{last.lineno}" if last else ""
    return f"failed: {type(exc).__name__}: {str(exc)[:300]}{where}"


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    names = [n for n in PARTICIPANTS if PARTICIPANTS[n][0] in args.only]
    if "floor" not in names:
        names.insert(0, "floor")
    failed: dict[str, str] = {}
    results: list[dict[str, Any]] = []
    print(machine())
    for name, why in NOT_OFFERED.items():
        print(f"  n/a  {name}: {why}")
    with ProviderProcess() as provider, tempfile.TemporaryDirectory(prefix="peers-bench-") as tmp:
        ctx = Context(provider, Path(tmp))
        for name in names:  # warm-up: imports, first connections, schema building
            try:
                await PARTICIPANTS[name][1](ctx, 3)
            except Exception as exc:
                failed[name] = _failure(exc)
                print(f"  skip {name}: {failed[name]}", flush=True)
        for turns in args.turns:
            samples: dict[str, list[Sample]] = {n: [] for n in names if n not in failed}
            for attempt in range(args.repeat):
                live = [n for n in names if n not in failed]
                order = live[attempt % len(live) :] + live[: attempt % len(live)]
                for name in order:
                    try:
                        samples[name].append(await PARTICIPANTS[name][1](ctx, turns))
                    except Exception as exc:
                        failed[name] = _failure(exc)
                        print(f"  skip {name}: {failed[name]}", flush=True)
            floor_samples = samples["floor"]
            print(f"\nN = {turns}: ms per turn (median of {args.repeat}), × the floor, client CPU ms per turn")
            print(f"  {'participant':<30}{'ms/turn':>9}{'× floor':>9}{'cpu ms/turn':>13}")
            for name, got in samples.items():
                if name in failed or len(got) != len(floor_samples):
                    continue
                wall = statistics.median(s.wall for s in got) / turns * 1000
                cpu = statistics.median(s.cpu for s in got) / turns * 1000
                ratio = statistics.median(a.wall / f.wall for a, f in zip(got, floor_samples, strict=True))
                results.append(
                    {"participant": name, "turns": turns, "ms_per_turn": wall, "ratio": ratio, "cpu_ms_per_turn": cpu}
                )
                print(f"  {name:<30}{wall:>9.2f}{ratio:>9.2f}{cpu:>13.2f}", flush=True)
    return {"machine": machine(), "results": results, "failed": failed, "not_offered": NOT_OFFERED}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--repeat", type=int, default=3)
    groups = sorted({group for group, _ in PARTICIPANTS.values()})
    parser.add_argument("--only", nargs="+", default=groups, choices=groups)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    report = asyncio.run(main_async(args))
    if report["failed"]:
        print("\nnot measured:")
        for name, why in report["failed"].items():
            print(f"  {name}: {why}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
