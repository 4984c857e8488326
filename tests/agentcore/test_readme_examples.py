"""The documentation's runnable examples run (offline, with the demo model): the README's first
program and the examples of the docs pages."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.docs import ROOT, python_example


def test_session_protocol_example_runs(workspace: Path) -> None:
    """S1–S3: the Session protocol example queues, steers, forks and reads the snapshot."""
    script = workspace / "example.py"
    script.write_text(python_example("docs/session-protocol.md", "# Session protocol"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), AGENTCORE_DEMO_DELAY_MS="0")
    result = subprocess.run(
        [sys.executable, str(script)], cwd=workspace, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("[q1] completed: I listed the workspace")
    assert lines[1].startswith("[q2] completed")
    assert any(line.startswith("1 fork idle") for line in lines)
    assert any(line.startswith("q4 completed") for line in lines)


def test_durable_tasks_example_runs(workspace: Path) -> None:
    """X1: the README's timer and two-level tasks run to completion."""
    script = workspace / "tasks_example.py"
    script.write_text(python_example("docs/extensions-and-tasks.md", "# Extensions and durable tasks"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), AGENTCORE_DEMO_DELAY_MS="0")
    result = subprocess.run(
        [sys.executable, str(script)], cwd=workspace, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["timer: completed awake", "pair: completed ['awake', 'awake']"]


def test_readme_first_program_runs_and_replays_its_request(workspace: Path) -> None:
    """R1/I1/D1: the README's first program answers with the demo model, and run again on the
    same store with the same ``request_id`` it prints the stored answer (``replayed``)."""
    script = workspace / "first.py"
    script.write_text(python_example("README.md", "## A first program"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), AGENTCORE_DEMO_DELAY_MS="0")

    def run() -> list[str]:
        result = subprocess.run(
            [sys.executable, str(script)], cwd=workspace, env=env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        return [line for line in result.stdout.splitlines() if line]

    first = run()
    tools = [line for line in first if re.fullmatch(r"\[\w+: (ok|error)\]", line)]
    assert tools and tools[0] == "[ls: ok]"
    assert re.fullmatch(r"\[completed\] \d+ tokens in, \d+ out", first[-1])
    again = run()
    # No tool ran: the stored answer, printed because the end is replayed, and the same usage.
    assert again == [line for line in first if line not in tools]
