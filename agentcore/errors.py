"""Typed errors with stable codes.

Callers branch on ``error.code`` (a stable string), never on message text. ``field`` names
the offending option or attribute for ``input_validation`` so a UI can point at it.
"""

from __future__ import annotations

from typing import Any, Final

INPUT_VALIDATION: Final = "input_validation"
USER_INPUT_REQUIRED: Final = "user_input_required"
EXECUTION_ABORTED: Final = "execution_aborted"
MODEL_ERROR: Final = "model_error"
AGENT_NOT_READY: Final = "AGENT_NOT_READY"
SESSION_NOT_ENABLED: Final = "session_not_enabled"
STORE_LOCKED: Final = "store_locked"
STORE_FENCED: Final = "store_fenced"
STORE_INVALID: Final = "store_invalid"
STORE_EXISTS: Final = "store_exists"
STORE_UNAVAILABLE: Final = "store_unavailable"  # a database server unreachable or the connection lost
RUN_FAILED: Final = "run_failed"
TOOL_ERROR: Final = "tool_error"
BUSY: Final = "busy"
REQUEST_CONFLICT: Final = "request_conflict"
VERSION_CONFLICT: Final = "version_conflict"
UNKNOWN_TASK: Final = "unknown_task"


class AgentError(Exception):
    """Base error of agentcore: a stable ``code``, a human message and optional details."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.details = details or {}

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class InputValidationError(AgentError):
    """Invalid option, attribute, command or input; ``field`` names what was wrong."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(INPUT_VALIDATION, message, field=field)


class UserInputRequired(AgentError):
    """Raised by a host hook to pause the run until a person answers.

    ``payload`` is carried in the ``user_input_required`` final event so the host can show
    what is being asked (a tool call to approve, a plan, questions).
    """

    def __init__(self, message: str = "user input required", payload: dict[str, Any] | None = None) -> None:
        super().__init__(USER_INPUT_REQUIRED, message, details=payload or {})
        self.payload = payload or {}


class ExecutionAborted(AgentError):
    def __init__(self, message: str = "the run was cancelled") -> None:
        super().__init__(EXECUTION_ABORTED, message)


class StoreError(AgentError):
    """A store could not be opened or written; the runtime must be reopened after this."""


class ToolError(Exception):
    """Raised by a tool for a business error: the message goes back to the model as a tool result."""
