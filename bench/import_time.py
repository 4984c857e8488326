"""Import time of agentcore against ``import httpx, pydantic`` (the floor any user of ours pays).

    python bench/import_time.py [--runs 15]

Each measurement is a fresh interpreter (``python -c``) that times the import statement itself
with ``time.perf_counter`` (interpreter start-up is excluded). The statements run interleaved,
so load on the machine affects all of them alike, and the median of ``--runs`` rounds is shown
with its ratio to the baseline. Statements measured:

- ``import httpx, pydantic`` — the baseline.
- ``import httpx, pydantic`` plus one ``BaseModel`` subclass — the floor of any library that
  defines pydantic models at import: the first model class loads pydantic's schema generator
  and scans installed distributions for pydantic plugins.
- ``import agentcore`` — what the issue measured: the package with its public names resolved
  lazily on first use.
- ``from agentcore import create_agent, AgentInput`` — what a program that runs an agent pays
  (the runtime, engine, providers, tools and their pydantic models).
- ``import agentcore.cli`` — the CLI module, which adds ``argparse``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "import httpx, pydantic"
PYDANTIC_FLOOR = "import httpx, pydantic\nclass M(pydantic.BaseModel): x: int = 0"
STATEMENTS = (
    BASELINE,
    PYDANTIC_FLOOR,
    "import agentcore",
    "from agentcore import create_agent, AgentInput",
    "import agentcore.cli",
)
TIMER = "import time\nt = time.perf_counter()\n{statement}\nprint(time.perf_counter() - t)"


def measure(statement: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    result = subprocess.run(
        [sys.executable, "-c", TIMER.format(statement=statement)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(result.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    for statement in STATEMENTS:  # warm the bytecode cache and the page cache once
        measure(statement)
    samples: dict[str, list[float]] = {s: [] for s in STATEMENTS}
    for _ in range(args.runs):
        for statement in STATEMENTS:
            samples[statement].append(measure(statement))
    base = statistics.median(samples[BASELINE])
    print(f"median of {args.runs} fresh interpreters each, interleaved")
    print(f"{'statement':<66} {'median':>9} {'min':>9} {'ratio':>7}")
    for statement in STATEMENTS:
        median = statistics.median(samples[statement])
        label = statement.replace("\n", "; ")
        print(f"{label:<66} {median * 1000:7.1f}ms {min(samples[statement]) * 1000:7.1f}ms {median / base:6.2f}×")


if __name__ == "__main__":
    main()
