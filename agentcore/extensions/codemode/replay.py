"""The execution log's header and the checks a recovery makes before it re-runs a script (SPEC X4).

A script that was running when the process died is run again from the start, and the nested
results already committed are fed back in order instead of being executed again. That is only
sound if the re-run is the same computation, so before starting it a recovery checks:

- the script is the one in the log (its SHA-256), and the log's script matches its own digest;
- the sandbox fingerprint (worker program, prelude and QuickJS version) is unchanged;
- the values ``load()`` returns are the ones the first run started from;
- the log itself: calls numbered 0…n-1 without gaps, every executed call has its intent, at
  most the last call is in flight, timestamps never go back, and the deadline had not passed.

The first run's clock (``Date``) and random seed come from the header, so the re-run sees the
same values; while it runs, each call is checked against the log (``engine.nested``). Any
failure is reported to the model as a clear error and nothing more runs.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agentcore.extensions.codemode.options import CodeModeOptions
from agentcore.extensions.codemode.protocol import MAX_CALLS, MAX_OUTPUT_CHARS
from agentcore.harness.projection import CodeRun

HEADER_VERSION = 1
STORE_PREFIX = "codemode:store:"
REFUSED = frozenset({"blocked", "invalid", "denied"})  # statuses that never had an intent


def store_key(conversation_id: str) -> str:
    """The register holding a conversation's ``store()`` values."""
    return f"{STORE_PREFIX}{conversation_id}"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def store_digest(values: dict[str, str]) -> str:
    return sha256(json.dumps(values, sort_keys=True, ensure_ascii=True))[:32]


def new_header(
    *,
    script: str,
    options: CodeModeOptions,
    sandbox: dict[str, str],
    store_sha: str,
    seed: int,
    clock_ms: int,
) -> dict[str, Any]:
    return {
        "version": HEADER_VERSION,
        "script": script,
        "script_sha256": sha256(script),
        "engine": sandbox["engine"],
        "fingerprint": sandbox["fingerprint"],
        "limits": {
            "memory_limit_bytes": options.memory_limit_bytes,
            "timeout_ms": options.timeout_ms,
            "max_calls": MAX_CALLS,
            "max_output_chars": MAX_OUTPUT_CHARS,
        },
        "seed": seed,
        "clock_ms": clock_ms,
        "store_sha256": store_sha,
    }


def recovery_problem(run: CodeRun, *, script: str, sandbox: dict[str, str], store_sha: str) -> str | None:
    """Why the recorded run cannot be resumed by re-running ``script`` here, or None."""
    header = run.header
    if not header:
        return "the execution log has nested calls but no header"
    if header.get("version") != HEADER_VERSION:
        return f"the execution log was written by another version of code mode ({header.get('version')!r})"
    if sha256(str(header.get("script", ""))) != header.get("script_sha256"):
        return "the script in the execution log does not match its recorded SHA-256"
    if sha256(script) != header["script_sha256"]:
        return "the script differs from the one recorded in the execution log"
    if header.get("fingerprint") != sandbox["fingerprint"] or header.get("engine") != sandbox["engine"]:
        return (
            f"the sandbox changed since the script started (the log has {header.get('engine')} "
            f"{header.get('fingerprint')}, this process has {sandbox['engine']} {sandbox['fingerprint']})"
        )
    if header.get("store_sha256") != store_sha:
        return "the values saved with store() changed since the script started"
    return _log_problem(run)


def _log_problem(run: CodeRun) -> str | None:
    indices = sorted(set(run.intents) | set(run.results))
    if indices != list(range(len(indices))):
        missing = next(i for i in range(len(indices) + 1) if i not in indices)
        return f"the execution log skips call {missing}"
    in_flight = [i for i in indices if i not in run.results]
    if in_flight and in_flight != [indices[-1]]:
        return f"the execution log has calls {in_flight} in flight; at most the last call can be"
    timeout = int(header_limits(run)["timeout_ms"])
    last = 0
    for index in indices:
        intent, result = run.intents.get(index), run.results.get(index)
        if result is not None and intent is None and result.get("status") not in REFUSED:
            return f"call {index} has a result ({result.get('status')}) but no intent in the execution log"
        if result is not None and intent is not None:
            if (result.get("name"), result.get("digest")) != (intent.get("name"), intent.get("digest")):
                return f"call {index}'s result does not belong to its intent in the execution log"
        for record in (intent, result):
            if record is None:
                continue
            at = int(record.get("at_ms") or 0)
            if at < last:
                return f"the execution log's clock goes back at call {index}"
            last = at
    if last >= timeout:
        return f"the script's deadline ({timeout} ms) had passed when the process stopped ({last} ms)"
    return None


def header_limits(run: CodeRun) -> dict[str, Any]:
    return dict(run.header.get("limits") or {})
