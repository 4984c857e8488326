"""``records["code_mode"]`` of the session snapshot: what the Studio Trace shows (SPEC X4, W3).

Built from the execution logs the projection keeps (``ConversationLog.code_runs`` /
``code_history``): the script, its limits and sandbox fingerprint, every nested call in order
(name, arguments, status, a preview of the result, duration, script time, whether it was
answered from the log after a restart or re-run), the output and how the run ended. Previews
are short because the snapshot is rebuilt after every commit; the full records stay in the
store's entries.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agentcore.extensions.codemode.options import CodeModeOptions
from agentcore.extensions.codemode.protocol import MAX_CALLS, MAX_OUTPUT_CHARS
from agentcore.harness.projection import CodeRun, ConversationLog

EXECUTIONS_SHOWN = 5
CALLS_SHOWN = 50
SCRIPT_SHOWN = 20_000
OUTPUT_SHOWN = 4_000
RESULT_SHOWN = 300


def code_mode_record(
    options: CodeModeOptions,
    sandbox: dict[str, str],
    logs: Iterable[tuple[int, ConversationLog]],
    running: set[str],
) -> dict[str, Any]:
    """The record: settings, sandbox identity and the newest executions (oldest first)."""
    found: list[tuple[int, CodeRun, bool]] = []
    for target_id, log in logs:
        found.extend((target_id, run, True) for run in log.code_history)
        found.extend((target_id, run, False) for run in log.code_runs.values())
    found.sort(key=lambda item: int(item[1].header.get("clock_ms") or 0))
    return {
        "enabled": True,
        **sandbox,
        "limits": {
            "memory_limit_bytes": options.memory_limit_bytes,
            "timeout_ms": options.timeout_ms,
            "max_calls": MAX_CALLS,
            "max_output_chars": MAX_OUTPUT_CHARS,
        },
        "executions_total": len(found),
        "executions": [_execution(t, run, settled, running) for t, run, settled in found[-EXECUTIONS_SHOWN:]],
    }


def code_mode_executions(target_id: int, log: ConversationLog, running: set[str]) -> list[dict[str, Any]]:
    """Every execution the log keeps for one context (the newest settled ones and the open ones)."""
    return [
        *(_execution(target_id, run, True, running) for run in log.code_history),
        *(_execution(target_id, run, False, running) for run in log.code_runs.values()),
    ]


def _execution(target_id: int, run: CodeRun, settled: bool, running: set[str]) -> dict[str, Any]:
    header, end = run.header, run.end or {}
    task_id = str(header.get("task_id") or "")
    if end:
        status = str(end.get("status"))
    elif not settled:
        status = "running" if task_id in running else "interrupted"  # a restart resumes it
    else:
        status = "stopped"  # the turn ended (failed, cancelled) before the script did
    replayed = set(end.get("replayed") or ())
    indices = sorted(set(run.intents) | set(run.results))
    calls = [_call(index, run, index in replayed) for index in indices[:CALLS_SHOWN]]
    script = str(header.get("script") or "")
    output = str(end.get("output") or "")
    return {
        "task_id": task_id,
        "call_key": run.parent,
        "request_id": run.parent.rsplit("/", 2)[0],
        "target_id": target_id,
        "status": status,
        "script": script[:SCRIPT_SHOWN],
        "script_truncated": len(script) > SCRIPT_SHOWN,
        "engine": header.get("engine"),
        "fingerprint": header.get("fingerprint"),
        "limits": header.get("limits"),
        "started_ms": header.get("clock_ms"),
        "output": output[:OUTPUT_SHOWN],
        "output_truncated": len(output) > OUTPUT_SHOWN or bool(end.get("dropped_chars")),
        "return_json": (end.get("return_json") or None) and str(end["return_json"])[:OUTPUT_SHOWN],
        "error": (end.get("error") or None) and str(end["error"])[:OUTPUT_SHOWN],
        "elapsed_ms": end.get("elapsed_ms"),
        "duration_ms": end.get("duration_ms"),
        "worker_start_ms": end.get("worker_start_ms"),
        "stored": end.get("stored") or [],
        "replayed": sorted(replayed),
        "calls": calls,
        "calls_total": len(indices),
    }


def _call(index: int, run: CodeRun, replayed: bool) -> dict[str, Any]:
    intent, result = run.intents.get(index) or {}, run.results.get(index) or {}
    shown = result.get("value") if result.get("ok") else result.get("error")
    if shown is not None and not isinstance(shown, str):
        shown = json.dumps(shown, ensure_ascii=False)
    return {
        "index": index,
        "name": intent.get("name") or result.get("name"),
        "arguments": intent["arguments"] if "arguments" in intent else result.get("arguments"),
        "status": result.get("status") or "in_flight",
        "ok": result.get("ok"),
        "result": shown[:RESULT_SHOWN] if isinstance(shown, str) else None,
        "duration_ms": result.get("duration_ms"),
        "at_ms": intent.get("at_ms", result.get("at_ms")),
        "replayed": replayed,
        "rerun": bool(result.get("rerun")),
        "replay": intent.get("replay"),
    }
