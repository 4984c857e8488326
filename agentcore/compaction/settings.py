"""What compaction is asked to do: ``session.compaction`` (SPEC C5) and the manual commands (C3).

A leaf: the turn configuration, the session options and the compaction step all read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentcore.errors import InputValidationError

MANUAL_COMMANDS = ("/compact", "/summarize")


@dataclass(slots=True, frozen=True)
class CompactionSettings:
    """``session.compaction`` (C5). Defaults scale with the window so small models work too."""

    enabled: bool = True
    reserve_tokens: int | None = None
    keep_recent_tokens: int | None = None
    background_tokens: int | None = None

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> CompactionSettings:
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise InputValidationError("session.compaction must be an object", field="session.compaction")
        known = {"enabled", "reserve_tokens", "keep_recent_tokens", "background_tokens"}
        for key, value in raw.items():
            field = f"session.compaction.{key}"
            if key not in known:
                raise InputValidationError(f"{field}: unknown option", field=field)
            if key == "enabled" and not isinstance(value, bool):
                raise InputValidationError(f"{field} must be true or false", field=field)
            if key != "enabled" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise InputValidationError(f"{field} must be a non-negative integer", field=field)
        return cls(**raw)

    def reserve(self, window: int) -> int:
        return self.reserve_tokens if self.reserve_tokens is not None else min(16_384, window // 8)

    def keep_recent(self, window: int) -> int:
        return self.keep_recent_tokens if self.keep_recent_tokens is not None else min(20_000, window // 4)


def is_manual_command(prompt: str) -> bool:
    return prompt.strip() in MANUAL_COMMANDS
