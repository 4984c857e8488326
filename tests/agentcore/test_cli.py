"""The CLI end to end with the offline demo model (SPEC R5, P3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "agentcore", "run", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_demo_lists_files_and_answers(workspace: Path) -> None:
    """R5/P3: no flags → the demo model calls ls (and read), then summarises; exit 0."""
    result = run_cli("--prompt", "what files are here?", cwd=workspace)
    assert result.returncode == 0, result.stderr
    assert "⚙ ls" in result.stderr
    assert "offline demo model" in result.stderr, "every UI labels the demo"
    assert "README.md" in result.stdout and "main.py" in result.stdout
    assert "Demo project" in result.stdout
    assert "[completed]" in result.stderr and "calls 3" in result.stderr


def test_demo_plan_mode_writes_a_numbered_plan(workspace: Path) -> None:
    result = run_cli("--prompt", "add a test", "--plan", cwd=workspace)
    assert result.returncode == 0, result.stderr
    assert "1. " in result.stdout and "2. " in result.stdout
    assert "— plan" in result.stderr


def test_invalid_model_attributes_exit_2_naming_the_field(workspace: Path) -> None:
    """M3: --model-attributes is validated strictly; the error names the field."""
    result = run_cli(
        "--prompt",
        "x",
        "--provider",
        "gw",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model-attributes",
        '{"context_window": "big"}',
        cwd=workspace,
    )
    assert result.returncode == 2
    assert "model_attributes.context_window" in result.stderr
    assert "input_validation" in result.stderr


def test_durable_request_id_replays_from_the_store(workspace: Path, tmp_path: Path) -> None:
    """R5/D1: --database + --request-id: a second run returns the stored outcome."""
    db = tmp_path / "cli.sqlite"
    first = run_cli("--prompt", "hello", "--database", str(db), "--request-id", "r1", cwd=workspace)
    second = run_cli("--prompt", "hello", "--database", str(db), "--request-id", "r1", cwd=workspace)
    assert first.returncode == 0 and second.returncode == 0
    assert "offline demo model" in first.stdout and "offline demo model" in second.stdout
    assert "calls 1" in first.stderr and "calls 1" in second.stderr
