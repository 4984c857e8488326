"""The remote environment's wire format: JSON lines on the worker's stdin and stdout.

Every message is one JSON object on one line (``ensure_ascii``, so the line is ASCII and lone
surrogates — names that are not UTF-8 — survive the trip), at most ``MAX_MESSAGE_BYTES``.

Client → worker::

    {"id": 1, "op": "hello"}                                   → {"protocol", "root", "scratch", "pid"}
    {"id": 2, "op": "file", "scope": {...}, "operation": {"name": "read", "args": {...}}, "hooks": [...]}
    {"id": 3, "op": "bash", "scope": {...}, "command": "...", "timeout": 120, "call_token": "...",
     "call_id": "..."}                                          (streams {"id": 3, "event": "output", "text"})
    {"id": 4, "op": "reap", "token": "..."}                     → {"killed": n}
    {"op": "cancel", "target": 3}                               (no reply: the call ends as cancelled)
    (a request with "cancel": true starts cancelled — the caller's abort was set before it was sent)
    {"op": "resume", "target": 2}                               (after a ``before_open`` event)

Worker → client: ``{"id", "result": ...}``, ``{"id", "error": "message"}`` (a ``ToolError`` on
the target) or ``{"id", "event": "output" | "before_open", ...}``. A worker that exits (end of
stdin) stops its commands first; the client treats the end of stdout as the end of every call
in flight.

``before_open`` is a test seam, the remote twin of ``PathGuard(before_open=...)``: with
``"hooks": ["before_open"]`` the worker reports the checked path right before it opens it and
waits for ``resume``, so a test can swap in a symlink at exactly that moment.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any, Final

from agentcore.errors import ToolError
from agentcore.messages import ImageContent, TextContent, UserContent
from agentcore.tools.base import ToolResult
from agentcore.tools.edit import EditFile
from agentcore.tools.environment import FileOperation
from agentcore.tools.guard import PERMISSION_POLICIES, PathScope
from agentcore.tools.ls import ListDirectory
from agentcore.tools.read import ReadFile
from agentcore.tools.search import FindFiles, GrepFiles
from agentcore.tools.write import WriteFile

PROTOCOL_VERSION: Final = 1
MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024

FILE_OPERATIONS: Final[dict[str, type[Any]]] = {
    "read": ReadFile,
    "write": WriteFile,
    "edit": EditFile,
    "ls": ListDirectory,
    "grep": GrepFiles,
    "find": FindFiles,
}

_FIELD_TYPES: Final = {name: typing.get_type_hints(cls) for name, cls in FILE_OPERATIONS.items()}


class ProtocolError(Exception):
    """A message that does not follow the protocol (the other side is broken or hostile)."""


def encode(message: dict[str, Any]) -> bytes:
    line = json.dumps(message, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii") + b"\n"
    if len(line) > MAX_MESSAGE_BYTES:
        raise ToolError(
            f"the message for the execution environment is too large ({len(line)} bytes; the limit is "
            f"{MAX_MESSAGE_BYTES})"
        )
    return line


def decode(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"not a JSON line: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("a message must be a JSON object")
    return message


def operation_to_json(operation: FileOperation) -> dict[str, Any]:
    if not dataclasses.is_dataclass(operation) or FILE_OPERATIONS.get(operation.name) is not type(operation):
        raise ToolError(f"file operation {operation.name!r} cannot run in a remote execution environment")
    return {"name": operation.name, "args": dataclasses.asdict(operation)}


def operation_from_json(data: Any) -> FileOperation:
    if not isinstance(data, dict) or not isinstance(data.get("args"), dict):
        raise ProtocolError("operation must be {name, args}")
    cls = FILE_OPERATIONS.get(data.get("name"))  # type: ignore[arg-type]
    if cls is None:
        raise ProtocolError(f"unknown file operation {data.get('name')!r}")
    hints = _FIELD_TYPES[data["name"]]
    args = data["args"]
    unknown = set(args) - set(hints)
    if unknown:
        raise ProtocolError(f"unknown arguments for {data['name']}: {sorted(unknown)}")
    for key, value in args.items():
        allowed = typing.get_args(hints[key]) or (hints[key],)
        if type(value) not in allowed:  # exact: a bool is not an int here, nor an int a float
            raise ProtocolError(f"{data['name']}.{key} has the wrong type ({type(value).__name__})")
    try:
        operation: FileOperation = cls(**args)
    except TypeError as exc:
        raise ProtocolError(f"{data['name']}: {exc}") from None
    return operation


def scope_to_json(scope: PathScope) -> dict[str, Any]:
    return {"workdir": scope.workdir, "policy": scope.policy, "allowed_directories": list(scope.allowed_directories)}


def scope_from_json(data: Any) -> PathScope:
    if not isinstance(data, dict) or not isinstance(data.get("workdir"), str) or not data["workdir"]:
        raise ProtocolError("scope must be {workdir, policy, allowed_directories}")
    policy = data.get("policy", "workspace")
    if policy not in PERMISSION_POLICIES:
        raise ProtocolError(f"unknown permission policy {policy!r}")
    allowed = data.get("allowed_directories", [])
    if not isinstance(allowed, list) or not all(isinstance(item, str) for item in allowed):
        raise ProtocolError("allowed_directories must be a list of strings")
    return PathScope(data["workdir"], policy, tuple(allowed))


def result_to_json(result: ToolResult) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for block in result.content:
        if isinstance(block, TextContent):
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageContent):
            content.append({"type": "image", "data": block.data, "mime_type": block.mime_type})
    return {
        "content": content,
        "is_error": result.is_error,
        "structured_content": result.structured_content,
        "terminate": result.terminate,
    }


def result_from_json(data: Any) -> ToolResult:
    """A ``ToolResult`` from the worker; anything malformed is a ``ProtocolError`` (the executor
    still checks what the content holds)."""
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise ProtocolError("result must be {content, is_error, structured_content}")
    content: list[UserContent] = []
    for block in data["content"]:
        if not isinstance(block, dict):
            raise ProtocolError("a content block must be an object")
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            content.append(TextContent(block["text"]))
        elif (
            block.get("type") == "image"
            and isinstance(block.get("data"), str)
            and isinstance(block.get("mime_type"), str)
        ):
            content.append(ImageContent(block["data"], block["mime_type"]))
        else:
            raise ProtocolError(f"unknown content block {str(block.get('type'))[:40]!r}")
    return ToolResult(
        content,
        is_error=bool(data.get("is_error", False)),
        structured_content=data.get("structured_content"),
        terminate=bool(data.get("terminate", False)),
    )
