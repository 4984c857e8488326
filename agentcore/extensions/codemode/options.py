"""``session={"code_mode": {...}}``: the options of code mode (SPEC X4), parsed strictly.

``{}`` turns code mode on with the defaults; an unknown key, a wrong type or a value out of
range is ``input_validation`` naming ``session.code_mode.<field>``, raised before anything
is opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentcore.errors import InputValidationError

MIB = 1 << 20
DEFAULT_MEMORY_LIMIT = 64 * MIB
MAX_MEMORY_LIMIT = 256 * MIB
MIN_MEMORY_LIMIT = 1 * MIB
DEFAULT_TIMEOUT_MS = 300_000
MAX_TIMEOUT_MS = 300_000
WHERE = "session.code_mode"


@dataclass(slots=True, frozen=True)
class CodeModeOptions:
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT
    timeout_ms: int = DEFAULT_TIMEOUT_MS


def parse_option(raw: Any) -> CodeModeOptions:
    if not isinstance(raw, dict):
        raise InputValidationError(f"{WHERE} must be an object ({{}} for the defaults)", field=WHERE)
    for key in raw:
        if key not in ("memory_limit_bytes", "timeout_ms"):
            raise InputValidationError(f"{WHERE}.{key}: unknown option", field=f"{WHERE}.{key}")
    memory = _integer(raw, "memory_limit_bytes", DEFAULT_MEMORY_LIMIT, MIN_MEMORY_LIMIT, MAX_MEMORY_LIMIT)
    timeout = _integer(raw, "timeout_ms", DEFAULT_TIMEOUT_MS, 1, MAX_TIMEOUT_MS)
    return CodeModeOptions(memory_limit_bytes=memory, timeout_ms=timeout)


def _integer(raw: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputValidationError(
            f"{WHERE}.{key} must be an integer from {low} to {high}; got {value!r}", field=f"{WHERE}.{key}"
        )
    return value
