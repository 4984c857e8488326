"""Reasoning effort: normalising and clamping (SPEC M5).

``None`` means "no choice" (use the runtime/project default); ``""`` and ``"off"`` mean no
reasoning request at all; ``"ultra"`` is an alias of ``"max"``. A level the model does not
support clamps to the nearest supported one and never fails — a user who picks "max" for a
model that tops out at "high" gets "high".
"""

from __future__ import annotations

from agentcore.errors import InputValidationError
from agentcore.models.attributes import EFFORT_LEVELS, THINKING_LEVELS, ResolvedModel

DEFAULT_EFFORT = "medium"


def normalize_effort(effort: str | None) -> str | None:
    """Map user input to a level name: None stays None, "" → "off", "ultra" → "max"."""
    if effort is None:
        return None
    if effort in ("", "off"):
        return "off"
    if effort == "ultra":
        return "max"
    if effort not in EFFORT_LEVELS:
        raise InputValidationError(f"effort: unknown level {effort!r}", field="effort")
    return effort


def supported_levels(model: ResolvedModel) -> tuple[str, ...]:
    """Levels the model accepts: its declared levels (or all) minus those mapped to null."""
    if not model.reasoning:
        return ()
    levels = model.effort_levels if model.effort_levels is not None else THINKING_LEVELS
    mapped_off = {level for level, value in model.thinking_level_map.items() if value is None}
    return tuple(level for level in levels if level not in mapped_off)


def clamp_effort(level: str | None, supported: tuple[str, ...]) -> str | None:
    """Return the supported level nearest to ``level`` (ties go up), or None for off."""
    if level is None or level == "off" or not supported:
        return None
    if level in supported:
        return level
    wanted = EFFORT_LEVELS.index(level)
    return min(supported, key=lambda s: (abs(EFFORT_LEVELS.index(s) - wanted), -EFFORT_LEVELS.index(s)))


def resolve_effort(
    run_effort: str | None,
    runtime_effort: str | None,
    model: ResolvedModel,
) -> str | None:
    """The clamped level to send for this request, or None for no reasoning parameters."""
    chosen = normalize_effort(run_effort)
    if chosen is None:
        chosen = normalize_effort(runtime_effort)
    if chosen is None:
        chosen = DEFAULT_EFFORT if model.reasoning else "off"
    return clamp_effort(chosen, supported_levels(model))
