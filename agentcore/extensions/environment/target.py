"""What a session tells the host's ``open`` about where its tools should run (SPEC X5): the
execution target and the session asking. A leaf, so the environments that ship
(``remote``, ``sandbox``) and the session option (the package) all import it one way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agentcore.tools.environment import AgentExecutionEnv


@dataclass(frozen=True, slots=True)
class ExecutionTarget:
    """Where the session's tools should run, as the runtime was configured (paths on the target)."""

    cwd: str
    allowed_directories: tuple[str, ...]
    permission_policy: str


@dataclass(frozen=True, slots=True)
class EnvironmentContext:
    """What ``open`` learns about the session asking for the environment."""

    session_id: str
    owner_id: str


OpenEnvironment = Callable[[ExecutionTarget, EnvironmentContext], Awaitable[AgentExecutionEnv]]
