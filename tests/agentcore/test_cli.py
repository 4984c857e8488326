"""The CLI end to end with the offline demo model (SPEC R5, P3)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from agentcore.demo import demo_responder
from agentcore.testing.fake_server import FakeProviderServer

ROOT = Path(__file__).resolve().parents[2]


def run_cli(
    *args: str, cwd: Path, unset: tuple[str, ...] = (), env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), AGENTCORE_DEMO_DELAY_MS="0", **(env_extra or {}))
    for name in unset:
        env.pop(name, None)
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


def test_durable_request_id_replays_from_the_store(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R5/D1/I1: --database + --request-id: a second run prints the stored outcome and never
    calls the model or the tools again. The demo brain answers on a fake server this test
    owns, so every model request of both processes is counted."""
    monkeypatch.setenv("AGENTCORE_DEMO_DELAY_MS", "0")
    db = tmp_path / "cli.sqlite"
    args = ("--prompt", "what files are here?", "--database", str(db), "--request-id", "r1")
    with FakeProviderServer(responder=demo_responder) as server:
        model = ("--provider", "gw", "--model", "demo-brain", "--base-url", server.base_url)
        first = run_cli(*args, *model, "--api-kind", "openai-responses", cwd=workspace)
        assert first.returncode == 0, first.stderr
        assert len(server.requests) == 3, "ls, read, then the answer"
        assert "⚙ ls" in first.stderr and "⚙ read" in first.stderr
        second = run_cli(*args, *model, "--api-kind", "openai-responses", cwd=workspace)
        assert second.returncode == 0, second.stderr
        assert len(server.requests) == 3, "the replay sent no model request"
    assert "⚙" not in second.stderr, "the replay ran no tool"
    assert "I listed the workspace" in first.stdout
    assert second.stdout == first.stdout, "the stored answer, word for word"
    assert "calls 3" in first.stderr and "calls 3" in second.stderr


def test_builtin_provider_without_key_fails_at_once_naming_the_variable(workspace: Path, tmp_path: Path) -> None:
    """R4: --provider anthropic with no ANTHROPIC_API_KEY is input_validation (exit 2) before any
    request or retry, and the --database file is not even created."""
    db = tmp_path / "never.sqlite"
    started = time.monotonic()
    result = run_cli(
        "--prompt", "hi", "--provider", "anthropic", "--database", str(db), cwd=workspace, unset=("ANTHROPIC_API_KEY",)
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    assert "input_validation" in result.stderr and "ANTHROPIC_API_KEY" in result.stderr
    assert "retry" not in result.stderr
    assert not db.exists()
    assert elapsed < 20, f"an up-front refusal, not a retry budget ({elapsed:.1f} s)"


def test_answers_for_an_unknown_request_name_it(workspace: Path, tmp_path: Path) -> None:
    """R5/I1: --answer for a request id the store does not hold paused says so (exit 2), changes
    nothing, and the paused request still resumes with its answers afterwards."""
    db = tmp_path / "plan.sqlite"
    paused = run_cli(
        "--prompt", "plan a todo app, ask me questions first", "--plan", "--database", str(db), "--request-id", "p1",
        cwd=workspace,
    )  # fmt: skip
    assert paused.returncode == 3, paused.stderr
    assert "--answer scope=" in paused.stderr

    wrong = run_cli("--database", str(db), "--request-id", "nosuch", "--answer", "scope=Small", cwd=workspace)
    assert wrong.returncode == 2, wrong.stderr
    assert "no paused request nosuch" in wrong.stderr and "prompt is empty" not in wrong.stderr

    missing = tmp_path / "missing.sqlite"
    no_store = run_cli("--database", str(missing), "--request-id", "p1", "--answer", "scope=Small", cwd=workspace)
    assert no_store.returncode == 2 and "no paused request p1" in no_store.stderr
    assert not missing.exists(), "a missing store is not created"

    resumed = run_cli(
        "--database", str(db), "--request-id", "p1", "--answer", "scope=Small", "--answer", "extras=Tests,Docs",
        cwd=workspace,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "Based on your answers" in resumed.stdout and "Small" in resumed.stdout


def test_a_postgres_store_pauses_resumes_and_is_never_created_by_an_answer(workspace: Path, postgres) -> None:
    """R5/D8: ``--database-url`` (here from ``AGENTCORE_DATABASE_URL``, so no password on the
    command line) makes the run durable in PostgreSQL: a plan pauses, answers resume it; answers
    for a store that does not exist are refused and create neither the store nor its row."""
    store = f"{postgres.dsn}?store=cli-{uuid.uuid4().hex[:8]}"
    env = {"AGENTCORE_DATABASE_URL": store}
    paused = run_cli(
        "--prompt", "plan a todo app, ask me questions first", "--plan", "--request-id", "p1",
        cwd=workspace, env_extra=env,
    )  # fmt: skip
    assert paused.returncode == 3, paused.stderr
    resumed = run_cli(
        "--request-id", "p1", "--answer", "scope=Small", "--answer", "extras=Tests,Docs", cwd=workspace, env_extra=env
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "Based on your answers" in resumed.stdout

    missing = f"{postgres.dsn}?store=cli-missing-{uuid.uuid4().hex[:8]}"
    refused = run_cli("--database-url", missing, "--request-id", "p1", "--answer", "scope=Small", cwd=workspace)
    assert refused.returncode != 0 and "store_invalid" in refused.stderr, refused.stderr
    with psycopg.connect(postgres.dsn) as conn:
        names = [row[0] for row in conn.execute("SELECT name FROM agentcore.stores").fetchall()]
    assert store.rsplit("=", 1)[1] in names and missing.rsplit("=", 1)[1] not in names

    both = run_cli("--prompt", "x", "--database", "a.sqlite", "--database-url", store, cwd=workspace)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_demo_counts_one_entry_in_the_singular(tmp_path: Path) -> None:
    """P3: the demo's listing summary speaks English: "1 entry", "2 entries"."""
    one = tmp_path / "one"
    one.mkdir()
    (one / "notes.txt").write_text("x\n")
    result = run_cli("--prompt", "what files are here?", cwd=one)
    assert result.returncode == 0, result.stderr
    assert "1 entry (notes.txt)" in result.stdout and "entries" not in result.stdout
    (one / "more.txt").write_text("y\n")
    result = run_cli("--prompt", "what files are here?", cwd=one)
    assert "2 entries" in result.stdout


def test_follow_up_prompts_are_answered_in_the_same_run_once(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R5/S2/S6: --follow-up queues prompts behind the first (session protocol); each is answered
    once, in order, in one run; re-running the same request id queues nothing twice."""
    monkeypatch.setenv("AGENTCORE_DEMO_DELAY_MS", "0")
    db = tmp_path / "follow.sqlite"
    args = ("--prompt", "hello there", "--database", str(db), "--request-id", "r1")
    follow = ("--follow-up", "second question", "--follow-up", "third question")
    with FakeProviderServer(responder=demo_responder) as server:
        model = ("--provider", "gw", "--model", "demo-brain", "--base-url", server.base_url)
        first = run_cli(*args, *follow, *model, "--api-kind", "openai-responses", cwd=workspace)
        assert first.returncode == 0, first.stderr
        asked = [str(r.json) for r in server.requests]
        assert len(asked) == 3
        assert "second question" in asked[1] and "third question" not in asked[1]
        assert "third question" in asked[2]
        assert first.stderr.count("[completed]") == 3
        again = run_cli(*args, *follow, *model, "--api-kind", "openai-responses", cwd=workspace)
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == 3, "nothing was asked twice"
