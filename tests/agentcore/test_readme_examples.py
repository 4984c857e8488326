"""The README's runnable examples run (offline, with the demo model)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def python_block_after(heading: str) -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"no python example under {heading!r}"
    return match.group(1)


def test_session_protocol_example_runs(workspace: Path) -> None:
    """S1–S3: the Session protocol example queues, steers, forks and reads the snapshot."""
    script = workspace / "example.py"
    script.write_text(python_block_after("## Session protocol"))
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
    script.write_text(python_block_after("## Extensions and durable tasks"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), AGENTCORE_DEMO_DELAY_MS="0")
    result = subprocess.run(
        [sys.executable, str(script)], cwd=workspace, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["timer: completed awake", "pair: completed ['awake', 'awake']"]
