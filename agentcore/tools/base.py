"""The tool contract shared by built-in tools, extra tools and MCP tools (SPEC T3).

A tool is plain data plus an async ``execute``. The engine validates arguments against
``parameters`` with a real JSON-schema validator after ``prepare_arguments`` repaired them,
so ``execute`` may trust its input shape. Business failures raise ``ToolError`` (or return
``is_error=True``); the message goes back to the model as a tool result it can act on.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeAlias, runtime_checkable

from agentcore.errors import InputValidationError
from agentcore.inputs import MAX_TOOL_RESULT_BYTES
from agentcore.messages import ImageContent, TextContent, UserContent

if TYPE_CHECKING:
    from agentcore.tools.guard import PathGuard

Replay: TypeAlias = Literal["never", "safe"]

DEFAULT_CALL_TIMEOUT_S: Final = 600.0  # MCP tools and catalog tools: generous, a call may be slow
MAX_CALL_TIMEOUT_S: Final = 86_400.0


def check_call_timeout(value: Any, field: str) -> float | None:
    """A tool call's time limit in seconds (None = no limit), or ``input_validation`` naming ``field``."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_CALL_TIMEOUT_S
    ):
        raise InputValidationError(
            f"{field} must be a number of seconds above 0 and at most {MAX_CALL_TIMEOUT_S:g}, or None for no limit; "
            f"got {value!r}",
            field=field,
        )
    return float(value)


@dataclass(slots=True)
class ToolResult:
    content: list[UserContent]
    is_error: bool = False
    structured_content: Any = None
    terminate: bool = False

    @classmethod
    def text(cls, text: str, *, is_error: bool = False, terminate: bool = False) -> ToolResult:
        return cls([TextContent(text)], is_error=is_error, terminate=terminate)

    @classmethod
    def image(cls, data: str, mime_type: str, note: str = "") -> ToolResult:
        content: list[UserContent] = [TextContent(note)] if note else []
        content.append(ImageContent(data, mime_type))
        return cls(content)


@dataclass(slots=True)
class ToolContext:
    """What a running tool may use.

    ``guard`` is the permission policy for paths; ``env`` is where the built-in tools run
    (``agentcore.tools.environment``): None means this machine, with ``guard`` enforcing the
    policy here; an environment enforces ``guard.scope`` on its target. ``workdir`` is a path
    on that target.
    """

    workdir: Path
    guard: PathGuard
    abort: asyncio.Event
    tool_call_id: str
    accepts_images: bool = True
    scratch_dir: Path | None = None  # where bash saves full output of truncated commands
    on_update: Callable[[str], None] | None = None  # partial progress → `tool` update events
    # The call's durable identity, exported to bash commands as AGENTCORE_CALL_TOKEN so that
    # recovery can find what an interrupted call left running (``lifeline.reap_orphaned_call``).
    # The engine should store it with the call's intent; None → bash makes up a random one.
    call_token: str | None = None
    env: AgentExecutionEnv | None = None
    # The cap on this call's result (``result_cap``): ``create_agent(max_tool_result_bytes=...)``.
    max_result_bytes: int = MAX_TOOL_RESULT_BYTES


class FileOperation(Protocol):
    """One target-side file operation; its dataclass fields are its JSON form."""

    @property
    def name(self) -> str: ...

    def run(self, guard: PathGuard, should_stop: Callable[[], bool]) -> ToolResult:
        """Do the work under ``guard`` (blocking; bounded time and memory except for grep/find,
        which poll ``should_stop``). Raises ``ToolError`` for the model."""
        ...


@runtime_checkable
class AgentExecutionEnv(Protocol):
    """An execution environment the built-in tools run against (see the module docstring).

    ``id`` is the stable identity a session is bound to; ``label`` is for people; ``kind`` is
    ``local`` or ``remote``. Every method may be called concurrently (read-only tools of one
    response run together, and several contexts of a session share one environment).
    """

    @property
    def id(self) -> str: ...

    @property
    def label(self) -> str: ...

    @property
    def kind(self) -> str: ...

    async def run_file_operation(self, ctx: ToolContext, operation: FileOperation) -> ToolResult: ...

    async def run_command(self, ctx: ToolContext, command: str, timeout: float) -> ToolResult: ...  # noqa: ASYNC109

    async def reap_call(self, token: str) -> int: ...

    def status(self) -> dict[str, Any]: ...

    async def cleanup(self) -> None: ...


ToolExecute: TypeAlias = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]


@dataclass(slots=True)
class AgentTool:
    """One tool the model may call.

    ``replay`` says what recovery may do when the process died after the call started but
    before its result was committed: ``never`` (default) → the model is told the outcome is
    unknown; ``safe`` → the call is executed again with the persisted arguments.
    ``read_only`` tools from one model response may run concurrently. ``timeout_s`` bounds one
    call (None: no limit of the engine's; MCP and catalog tools get ``DEFAULT_CALL_TIMEOUT_S``):
    the executor stops a call that runs longer and gives it an error result saying it may be
    retried.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    execute: ToolExecute
    prepare_arguments: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    output_schema: dict[str, Any] | None = None
    replay: Replay = "never"
    read_only: bool = False
    builtin: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        self.timeout_s = check_call_timeout(self.timeout_s, "timeout_s")


@dataclass(slots=True, frozen=True)
class ToolDefinition:
    """The host's governance of an extra tool: exposed at all, and approved automatically?"""

    name: str
    enabled: bool = True
    auto_approve: bool = True
