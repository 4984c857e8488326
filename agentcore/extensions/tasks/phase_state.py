"""What a phase may commit (SPEC X1, X2): its next state, checked whole before anything is written.

``runtime.commit(fn)`` hands the scheduler the state ``fn`` returns, and the scheduler writes
it into the task's row. A value the store cannot hold — a set, NaN, text with a lone
surrogate — would fail that write, and since the phase runs again after every reopen, every
reopen would fail the same way while the task stays ``running``. A next phase the definition
does not declare would leave the task ``blocked`` for good (no reinstall of the same
definition can provide it). So ``read_phase_state`` checks every value the state carries —
the next phase, the checkpoint, the children to wait on, a terminal outcome's result and
error — before the scheduler writes anything: values with the one strict-JSON check every
task value goes through (``check_strict_json``: finite numbers, string keys, plain containers,
valid UTF-8, at most ``MAX_JSON_DEPTH`` levels and ``MAX_VALUE_BYTES`` encoded), phase names
against the definition the phase runs under. A problem is ``InputValidationError`` naming the
field; the phase gets it from ``commit``, and its task fails with it unless the phase commits
something else. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, TypeAlias

from agentcore.errors import InputValidationError
from agentcore.extensions.tasks.definitions import AgentTaskDefinition
from agentcore.session.commands import check_strict_json

OUTCOMES = ("completed", "failed", "aborted")
MAX_VALUE_BYTES = 1024 * 1024  # a checkpoint, a result or an error, as JSON


@dataclass(slots=True, frozen=True)
class Running:
    """Run ``phase`` next with ``checkpoint``."""

    phase: str
    checkpoint: Any


@dataclass(slots=True, frozen=True)
class Waiting:
    """Wait until every task in ``on`` has ended (``all_settled``), then run ``phase``."""

    on: tuple[str, ...]
    phase: str
    checkpoint: Any


@dataclass(slots=True, frozen=True)
class Terminal:
    """The task ends with ``status``; ``error`` says why it did not complete."""

    status: str
    result: Any
    error: str | None


PhaseState: TypeAlias = Running | Waiting | Terminal


def read_phase_state(
    state: Any,
    definition: AgentTaskDefinition,
    *,
    phase: str,
    checkpoint: Any,
    children: Collection[str],
) -> PhaseState:
    """The state a phase of ``definition`` committed, every value checked (module docstring).

    ``phase`` and ``checkpoint`` are the task's current ones (a wait resumes the current phase
    and keeps the checkpoint unless the state names others); ``children`` are the task's
    children, those created in this commit included (a task waits only on its own).
    """
    if not isinstance(state, dict) or state.get("status") not in ("running", "waiting", "terminal"):
        raise InputValidationError(
            "commit must return {'status': 'running' | 'waiting' | 'terminal', ...}", field="status"
        )
    if state["status"] == "terminal":
        return read_terminal(state)
    checkpoint = state.get("checkpoint", checkpoint)
    check_strict_json(checkpoint, "checkpoint", limit=MAX_VALUE_BYTES)
    if state["status"] == "running":
        if not isinstance(state.get("phase"), str) or not state["phase"]:
            raise InputValidationError("a running state needs the next 'phase'", field="phase")
        return Running(_declared(state["phase"], definition), checkpoint)
    on = state.get("on")
    if not isinstance(on, list) or not all(isinstance(x, str) for x in on):
        raise InputValidationError("a waiting state needs 'on': a list of task ids", field="on")
    unknown = [x for x in on if x not in children]
    if unknown:
        raise InputValidationError(f"a task can only wait on its own children; not {unknown}", field="on")
    if state.get("policy", "all_settled") != "all_settled":
        raise InputValidationError("the only waiting policy is 'all_settled'", field="policy")
    return Waiting(tuple(on), _declared(state.get("phase") or phase, definition), checkpoint)


def read_terminal(state: dict[str, Any]) -> Terminal:
    """The outcome of a ``terminal`` state, checked (what an offline ``abort`` may commit too)."""
    outcome = state.get("outcome")
    if not isinstance(outcome, dict) or outcome.get("status") not in OUTCOMES:
        raise InputValidationError(
            "a terminal state needs outcome {'status': 'completed' | 'failed' | 'aborted'}", field="outcome.status"
        )
    result, error = outcome.get("result"), outcome.get("error")
    check_strict_json(result, "outcome.result", limit=MAX_VALUE_BYTES)
    if error is not None and not isinstance(error, str):
        raise InputValidationError(
            f"outcome.error: the reason must be text, got {type(error).__name__}", field="outcome.error"
        )
    check_strict_json(error, "outcome.error", limit=MAX_VALUE_BYTES)
    status = str(outcome["status"])
    return Terminal(status, result, error if status != "completed" else None)


def _declared(phase: Any, definition: AgentTaskDefinition) -> str:
    if not isinstance(phase, str) or phase not in definition.phases:
        declared = ", ".join(repr(name) for name in definition.phases)
        raise InputValidationError(
            f"phase {phase!r} is not a phase of task {definition.name!r} version {definition.version} "
            f"(its phases: {declared})",
            field="phase",
        )
    return phase
