"""What a code-mode recovery checks before re-running a script (SPEC X4): the pure checks of
``replay.recovery_problem`` on execution logs, one per rule, plus the log a real run writes."""

from __future__ import annotations

from typing import Any

import pytest

from agentcore.extensions.codemode.options import CodeModeOptions
from agentcore.extensions.codemode.replay import new_header, recovery_problem, sha256, store_digest
from agentcore.harness.projection import CodeRun

SANDBOX = {"engine": "quickjs 1.19.4", "fingerprint": "sha256:" + "a" * 32}
SCRIPT = "await tools.ls({}); await tools.read({path: 'x'});"
STORE = store_digest({})


def header(**changes: Any) -> dict[str, Any]:
    value = new_header(
        script=SCRIPT, options=CodeModeOptions(timeout_ms=10_000), sandbox=SANDBOX, store_sha=STORE, seed=7, clock_ms=1
    )
    value.update(changes)
    return value


def intent(index: int, name: str = "ls", at_ms: int = 0) -> dict[str, Any]:
    return {"index": index, "name": name, "digest": f"d{index}", "replay": "never", "at_ms": at_ms}


def result(index: int, name: str = "ls", at_ms: int = 0, status: str = "completed") -> dict[str, Any]:
    return {"index": index, "name": name, "digest": f"d{index}", "status": status, "ok": True, "at_ms": at_ms}


def run_of(head: dict[str, Any], intents: list[dict[str, Any]], results: list[dict[str, Any]]) -> CodeRun:
    return CodeRun("r/0/0", head, intents={i["index"]: i for i in intents}, results={r["index"]: r for r in results})


def problem(run: CodeRun, *, script: str = SCRIPT, sandbox: dict[str, str] = SANDBOX, store: str = STORE) -> Any:
    return recovery_problem(run, script=script, sandbox=sandbox, store_sha=store)


def test_a_consistent_log_with_the_last_call_in_flight_resumes() -> None:
    """X4: committed calls, a refused call (result, no intent) and one call in flight: fine."""
    run = run_of(
        header(),
        [intent(0, at_ms=5), intent(2, "read", at_ms=30)],
        [result(0, at_ms=9), result(1, "nope", at_ms=12, status="blocked")],
    )
    assert problem(run) is None


@pytest.mark.parametrize(
    ("run", "kwargs", "reason"),
    [
        (run_of({}, [intent(0)], []), {}, "has nested calls but no header"),
        (run_of(header(version=2), [], []), {}, "another version of code mode"),
        (run_of(header(script="other"), [], []), {}, "does not match its recorded SHA-256"),
        (run_of(header(), [], []), {"script": SCRIPT + " "}, "the script differs"),
        (run_of(header(), [], []), {"sandbox": {**SANDBOX, "fingerprint": "sha256:b"}}, "the sandbox changed"),
        (run_of(header(), [], []), {"sandbox": {**SANDBOX, "engine": "quickjs 2"}}, "the sandbox changed"),
        (run_of(header(), [], []), {"store": store_digest({"k": "1"})}, "saved with store() changed"),
        (run_of(header(), [intent(0)], [result(0), result(2)]), {}, "skips call 1"),
        (run_of(header(), [intent(0), intent(1)], []), {}, "at most the last call can be"),
        (run_of(header(), [], [result(0)]), {}, "has a result (completed) but no intent"),
        (run_of(header(), [intent(0)], [result(0, "read")]), {}, "does not belong to its intent"),
        (run_of(header(), [intent(0, at_ms=50), intent(1, at_ms=40)], [result(0, at_ms=60)]), {}, "clock goes back"),
        (run_of(header(), [intent(0, at_ms=10_000)], []), {}, "deadline (10000 ms) had passed"),
    ],
)
def test_a_log_that_cannot_be_replayed_is_refused_with_its_reason(run: CodeRun, kwargs: Any, reason: str) -> None:
    """X4: each rule of the recovery check names what is wrong."""
    found = problem(run, **kwargs)
    assert found is not None and reason in found


def test_the_header_pins_script_sandbox_limits_clock_and_seed() -> None:
    """X4: what the header records is what a recovery re-uses (limits of the first run, not
    today's options)."""
    value = header()
    assert value["script_sha256"] == sha256(SCRIPT)
    assert value["limits"]["timeout_ms"] == 10_000 and value["limits"]["memory_limit_bytes"] == 64 << 20
    assert (value["seed"], value["clock_ms"], value["fingerprint"]) == (7, 1, SANDBOX["fingerprint"])
