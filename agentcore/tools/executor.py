"""Preparing, validating and executing tool calls (SPEC T3).

The engine calls ``prepare_call`` with the model's raw arguments, then ``execute_call``.
Everything that can go wrong with a call becomes a ``ToolResult`` with ``is_error=True`` the
model can read and correct — invalid JSON, a schema violation (naming the field), a
``ToolError`` or any other exception from the tool, structured content that does not match
``output_schema``. Only ``asyncio.CancelledError`` (and exception types the caller lists in
``propagate``, such as ``UserInputRequired`` for a tool that pauses the run) escape. A call that
runs longer than its tool's ``timeout_s`` is stopped (cancelled) and gets an error result saying
it may be retried.

Concurrency: independent ``read_only`` calls from one model response may run at the same
time; a call that is not read-only runs alone, after everything before it and before
everything after it. ``run_concurrently`` does exactly that and returns results in the
model's order.

The executor is also the boundary where tool output becomes durable text, so everything that
crosses it is made safe to commit and to send to a provider, whatever the tool (built-in,
extra or MCP): text, partial output, prepared arguments and ``structured_content`` strings are
valid UTF-8 (``display.clean_text``: undecodable bytes as ``\\xNN``); ``structured_content`` must
be JSON (no NaN, no bytes) or the call is an error; an image block must be real (strict base64,
a PNG/JPEG/GIF/WebP whose content matches its ``mime_type``) or it is replaced by a note. A
result that could not be committed would fail the run — and, for a replay-safe tool, every
resume of it — so nothing of the kind may pass. And every result is bounded there
(``result_cap``): the text is cut to ``ctx.max_result_bytes``, oversized structured content is
not kept, the rest is saved to a file the model is told about; a progress update is cut to the
same size.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

from agentcore.errors import ToolError
from agentcore.inputs import check_image_data
from agentcore.messages import ImageContent, TextContent, UserContent
from agentcore.tools.base import AgentTool, ToolContext, ToolResult
from agentcore.tools.display import clean_text, clean_value
from agentcore.tools.result_cap import cap_result, cap_update

MAX_REPORTED_ERRORS: Final = 5
_STRICT_JSON: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def _field_of(error: ValidationError) -> str:
    """The argument a validation error is about, as a dotted path (``$`` for the whole object)."""
    path = [str(part) for part in error.absolute_path]
    required = error.validator_value
    if error.validator == "required" and isinstance(error.instance, dict) and isinstance(required, list):
        missing = [name for name in required if name not in error.instance]
        if missing:
            path.append(str(missing[0]))
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set((error.schema.get("properties") or {}) if isinstance(error.schema, dict) else ())
        extra = [name for name in error.instance if name not in allowed]
        if extra:
            path.append(str(extra[0]))
    return ".".join(path) or "$"


def describe_validation_errors(errors: Sequence[ValidationError]) -> str:
    ordered = sorted(errors, key=lambda e: (list(map(str, e.absolute_path)), str(e.message)))
    lines = [f"- {_field_of(error)}: {error.message}" for error in ordered[:MAX_REPORTED_ERRORS]]
    if len(ordered) > MAX_REPORTED_ERRORS:
        lines.append(f"- … and {len(ordered) - MAX_REPORTED_ERRORS} more")
    return "\n".join(lines)


class InvalidSchema(Exception):
    """A tool's parameter or output schema is not a valid JSON schema."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Validators:
    """One checked validator per schema object, reused for every call.

    Checking a schema and building its validator costs far more than validating one call (it
    was half of the engine's time in a fast tool loop), and a tool's schema is a long-lived
    object. Keyed by identity, holding the schema so the id cannot be reused while cached;
    a schema mutated after its first use is not supported (tools are immutable by contract).
    """

    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int = 512) -> None:
        self._entries: OrderedDict[int, tuple[dict[str, Any], Any]] = OrderedDict()
        self._limit = limit

    def get(self, schema: dict[str, Any]) -> Any:
        entry = self._entries.get(id(schema))
        if entry is not None and entry[0] is schema:
            self._entries.move_to_end(id(schema))
            return entry[1]
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise InvalidSchema(exc.message) from None
        validator = Draft202012Validator(schema)
        self._entries[id(schema)] = (schema, validator)
        if len(self._entries) > self._limit:
            self._entries.popitem(last=False)
        return validator


_VALIDATORS = _Validators()


def validate_against(schema: dict[str, Any], instance: Any) -> list[ValidationError]:
    """All errors of ``instance`` against a Draft 2020-12 ``schema``; a broken schema raises ``InvalidSchema``.

    ``jsonschema`` is imported on first use: it is a large part of ``import agentcore``'s cost
    and a runtime that never validates a tool call should not pay it.
    """
    return list(_VALIDATORS.get(schema).iter_errors(instance))


def prepare_call(tool: AgentTool, raw_arguments: Any) -> dict[str, Any] | ToolResult:
    """Repair (``prepare_arguments``) and validate the model's arguments for ``tool``.

    Returns the arguments to execute with, or an error ``ToolResult`` that tells the model
    which field was wrong so it can call again.
    """
    arguments = raw_arguments
    if isinstance(arguments, str | bytes):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return ToolResult.text(f"Invalid arguments for tool {tool.name!r}: not valid JSON ({exc})", is_error=True)
    if arguments is None:
        arguments = {}
    arguments = clean_value(arguments)  # committed with the intent: must be valid UTF-8 text
    if not isinstance(arguments, dict):
        return ToolResult.text(
            f"Invalid arguments for tool {tool.name!r}: expected a JSON object, got {type(arguments).__name__}",
            is_error=True,
        )
    if tool.prepare_arguments is not None:
        try:
            arguments = clean_value(tool.prepare_arguments(dict(arguments)))
        except Exception as exc:
            return ToolResult.text(f"Invalid arguments for tool {tool.name!r}: {_message(exc)}", is_error=True)
        if not isinstance(arguments, dict):
            return ToolResult.text(
                f"Tool {tool.name!r}: prepare_arguments returned {type(arguments).__name__}, not an object",
                is_error=True,
            )
    try:
        errors = validate_against(tool.parameters, arguments)
    except InvalidSchema as exc:
        return ToolResult.text(f"Tool {tool.name!r} has an invalid parameter schema: {exc.message}", is_error=True)
    if errors:
        return ToolResult.text(
            f"Invalid arguments for tool {tool.name!r}:\n{describe_validation_errors(errors)}\n"
            "Fix these fields and call the tool again.",
            is_error=True,
        )
    return dict(arguments)


def _message(exc: BaseException) -> str:
    if isinstance(exc, ToolError):
        return clean_text(str(exc)) or "tool failed"
    text = clean_text(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _timed_out(tool: AgentTool) -> str:
    return (
        f"Tool {tool.name!r} did not finish within {tool.timeout_s:g} s and was stopped (its service may be stuck "
        "or slow). This may be temporary: call the tool again to retry."
    )


def _clean_image(block: ImageContent) -> UserContent:
    try:
        check_image_data(block.data, block.mime_type)
    except (TypeError, ValueError) as exc:
        label = clean_text(block.mime_type) if isinstance(block.mime_type, str) else "?"
        return TextContent(f"[image ({label}) omitted: {clean_text(str(exc))}]")
    return block


def _safe_result(tool: AgentTool, result: ToolResult) -> tuple[ToolResult, str | None]:
    """``result`` with only committable content (see the module docstring), or an error result;
    with its structured content as JSON text (None when it has none)."""
    content: list[UserContent] = []
    for block in result.content:
        if isinstance(block, TextContent) and isinstance(block.text, str):
            text = clean_text(block.text)
            content.append(block if text is block.text else TextContent(text))
        elif isinstance(block, ImageContent):
            content.append(_clean_image(block))
        else:
            return ToolResult.text(
                f"Tool {tool.name!r} returned a content block of type {type(block).__name__}; "
                "expected TextContent or ImageContent",
                is_error=True,
            ), None
    structured = result.structured_content
    encoded = None
    if structured is not None:
        structured = clean_value(structured)
        try:
            encoded = _STRICT_JSON.encode(structured)
        except (TypeError, ValueError) as exc:
            return ToolResult.text(
                f"Tool {tool.name!r} returned structured content that is not JSON: {clean_text(str(exc))}",
                is_error=True,
            ), None
    if structured is result.structured_content and all(a is b for a, b in zip(content, result.content, strict=True)):
        return result, encoded
    safe = ToolResult(content, is_error=result.is_error, structured_content=structured, terminate=result.terminate)
    return safe, encoded


async def execute_call(
    tool: AgentTool,
    arguments: dict[str, Any],
    ctx: ToolContext,
    *,
    propagate: tuple[type[BaseException], ...] = (),
) -> ToolResult:
    """Run ``tool`` with prepared ``arguments``; never raises except CancelledError and ``propagate``.

    The result (and every partial update passed to ``ctx.on_update``) is valid UTF-8 text and
    committable JSON, whatever the tool returned, and within the result cap (see the module
    docstring).
    """
    result, structured_json = await _checked_result(tool, arguments, ctx, propagate)
    return cap_result(result, ctx, tool.name, structured_json)


async def _checked_result(
    tool: AgentTool, arguments: dict[str, Any], ctx: ToolContext, propagate: tuple[type[BaseException], ...]
) -> tuple[ToolResult, str | None]:
    forward = ctx.on_update
    if forward is not None:
        update_cap = ctx.max_result_bytes
        ctx.on_update = lambda partial: forward(
            cap_update(clean_text(partial) if isinstance(partial, str) else str(partial), update_cap)
        )
    limit = asyncio.timeout(tool.timeout_s)  # None: no limit
    try:
        async with limit:
            result = await tool.execute(arguments, ctx)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if propagate and isinstance(exc, propagate):
            raise
        if isinstance(exc, TimeoutError) and limit.expired():
            return ToolResult.text(_timed_out(tool), is_error=True), None
        return ToolResult.text(_message(exc), is_error=True), None
    finally:
        ctx.on_update = forward
    if not isinstance(result, ToolResult):
        return ToolResult.text(
            f"Tool {tool.name!r} returned {type(result).__name__} instead of a ToolResult", is_error=True
        ), None
    result, structured_json = _safe_result(tool, result)
    if tool.output_schema is not None and not result.is_error:
        try:
            errors = validate_against(tool.output_schema, result.structured_content)
        except InvalidSchema as exc:
            message = f"Tool {tool.name!r} has an invalid output schema: {exc.message}"
            return ToolResult.text(message, is_error=True), None
        if errors:
            return ToolResult.text(
                f"Tool {tool.name!r} returned structured content that does not match its output schema:\n"
                f"{describe_validation_errors(errors)}",
                is_error=True,
                terminate=result.terminate,
            ), None
    return result, structured_json


@dataclass(slots=True)
class PendingCall:
    """One call of a model response, ready to run (arguments already prepared)."""

    tool: AgentTool
    arguments: dict[str, Any]
    ctx: ToolContext


async def run_concurrently(
    calls: Sequence[PendingCall],
    *,
    max_concurrency: int = 8,
    propagate: tuple[type[BaseException], ...] = (),
) -> list[ToolResult]:
    """Run a response's calls: consecutive read-only calls together, others one at a time, in order.

    Results come back in the order of ``calls`` regardless of completion order.
    """
    results: list[ToolResult | None] = [None] * len(calls)
    limit = asyncio.Semaphore(max(1, max_concurrency))

    async def run(index: int) -> None:
        call = calls[index]
        async with limit:
            results[index] = await execute_call(call.tool, call.arguments, call.ctx, propagate=propagate)

    index = 0
    while index < len(calls):
        if not calls[index].tool.read_only:
            await run(index)
            index += 1
            continue
        batch_end = index
        while batch_end < len(calls) and calls[batch_end].tool.read_only:
            batch_end += 1
        try:
            async with asyncio.TaskGroup() as group:
                for position in range(index, batch_end):
                    group.create_task(run(position))
        except BaseExceptionGroup as failed:  # only `propagate` exceptions get here
            raise failed.exceptions[0] from None
        index = batch_end
    return [result for result in results if result is not None]
