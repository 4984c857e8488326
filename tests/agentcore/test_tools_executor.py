"""The tool executor: argument repair and validation, error capture, output schemas, concurrency (SPEC T3)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentcore.errors import ToolError, UserInputRequired
from agentcore.tools import (
    AgentTool,
    PathGuard,
    PendingCall,
    ToolContext,
    ToolResult,
    execute_call,
    prepare_call,
    run_concurrently,
)
from tests.agentcore.tool_helpers import text

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 0},
        "items": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["count"],
    "additionalProperties": False,
}


def make_ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workdir=tmp_path, guard=PathGuard(tmp_path), abort=asyncio.Event(), tool_call_id="t1")


def make_tool(execute: Any = None, **kwargs: Any) -> AgentTool:
    async def echo(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.text(f"count={args['count']}")

    return AgentTool(name="demo", description="demo", parameters=SCHEMA, execute=execute or echo, **kwargs)


def test_prepare_accepts_dict_and_json_text() -> None:
    """T3: arguments arrive as an object or JSON text."""
    tool = make_tool()
    assert prepare_call(tool, {"count": 1}) == {"count": 1}
    assert prepare_call(tool, '{"count": 2}') == {"count": 2}


def test_prepare_rejects_bad_json_and_non_objects() -> None:
    """T3: malformed JSON or a non-object is an error result, not an exception."""
    bad_json = prepare_call(make_tool(), '{"count": ')
    assert isinstance(bad_json, ToolResult) and bad_json.is_error and "not valid JSON" in text(bad_json)
    not_object = prepare_call(make_tool(), [1, 2])
    assert isinstance(not_object, ToolResult) and "expected a JSON object" in text(not_object)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({}, "count"),  # missing required
        ({"count": "many"}, "count"),  # wrong type
        ({"count": -1}, "count"),  # out of range
        ({"count": 1, "items": ["a", 2]}, "items.1"),  # nested
        ({"count": 1, "colour": "red"}, "colour"),  # unexpected property
    ],
)
def test_validation_errors_name_the_field(arguments: dict[str, Any], field: str) -> None:
    """T3: a Draft 2020-12 validation failure names the failing field so the model can correct it."""
    result = prepare_call(make_tool(), arguments)
    assert isinstance(result, ToolResult) and result.is_error
    assert f"- {field}:" in text(result)


def test_prepare_arguments_repairs_before_validation() -> None:
    """T3: prepare_arguments runs before validation and may repair the model's arguments."""

    def repair(args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "count": int(args["count"])} if isinstance(args.get("count"), str) else args

    assert prepare_call(make_tool(prepare_arguments=repair), {"count": "3"}) == {"count": 3}


def test_prepare_arguments_failure_is_an_error_result() -> None:
    """T3: a failing prepare_arguments becomes an error result."""

    def broken(args: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("cannot repair")

    result = prepare_call(make_tool(prepare_arguments=broken), {"count": 1})
    assert isinstance(result, ToolResult) and result.is_error and "cannot repair" in text(result)


def test_invalid_parameter_schema_reported() -> None:
    """T3: an extra tool with a broken schema yields an error result, not a crash."""
    tool = AgentTool(name="x", description="", parameters={"type": "nonsense"}, execute=make_tool().execute)
    result = prepare_call(tool, {})
    assert isinstance(result, ToolResult) and "invalid parameter schema" in text(result)


async def test_execute_catches_tool_error_and_exceptions(tmp_path: Path) -> None:
    """T3: ToolError and any other exception become is_error results carrying the message."""

    async def business(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise ToolError("the widget is locked")

    async def crash(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise KeyError("boom")

    ctx = make_ctx(tmp_path)
    first = await execute_call(make_tool(business), {"count": 1}, ctx)
    assert first.is_error and text(first) == "the widget is locked"
    second = await execute_call(make_tool(crash), {"count": 1}, ctx)
    assert second.is_error and "KeyError" in text(second) and "boom" in text(second)


async def test_execute_rejects_non_result(tmp_path: Path) -> None:
    """T3: a tool returning something other than a ToolResult is an error result."""

    async def wrong(args: dict[str, Any], ctx: ToolContext) -> Any:
        return "just a string"

    result = await execute_call(make_tool(wrong), {"count": 1}, make_ctx(tmp_path))
    assert result.is_error and "instead of a ToolResult" in text(result)


async def test_output_schema_validates_structured_content(tmp_path: Path) -> None:
    """T3: structured_content is validated against output_schema; a mismatch is an error result."""
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}

    def returning(value: Any) -> Any:
        async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            result = ToolResult.text("done", terminate=True)
            result.structured_content = value
            return result

        return execute

    ctx = make_ctx(tmp_path)
    good = await execute_call(make_tool(returning({"total": 3}), output_schema=schema), {"count": 1}, ctx)
    assert not good.is_error and good.structured_content == {"total": 3} and good.terminate
    bad = await execute_call(make_tool(returning({"total": "x"}), output_schema=schema), {"count": 1}, ctx)
    assert bad.is_error and "output schema" in text(bad) and "total" in text(bad) and bad.terminate


async def test_cancellation_propagates(tmp_path: Path) -> None:
    """T3: asyncio.CancelledError is never swallowed."""
    started = asyncio.Event()

    async def forever(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    task = asyncio.create_task(execute_call(make_tool(forever), {"count": 1}, make_ctx(tmp_path)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_propagate_lets_listed_exceptions_through(tmp_path: Path) -> None:
    """T3: exception types listed in propagate (e.g. a pausing UserInputRequired) escape; by default they don't."""

    async def pause(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise UserInputRequired("need an answer")

    ctx = make_ctx(tmp_path)
    captured = await execute_call(make_tool(pause), {"count": 1}, ctx)
    assert captured.is_error
    with pytest.raises(UserInputRequired):
        await execute_call(make_tool(pause), {"count": 1}, ctx, propagate=(UserInputRequired,))


async def test_run_concurrently_overlaps_reads_serialises_writes(tmp_path: Path) -> None:
    """T3: consecutive read-only calls overlap, a write call runs alone, results keep the model's order."""
    log: list[str] = []
    both_started = asyncio.Event()
    running = 0

    def reader(label: str) -> AgentTool:
        async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            nonlocal running
            log.append(f"start {label}")
            running += 1
            if running == 2:
                both_started.set()
            await both_started.wait()  # deadlocks unless the two reads really overlap
            running -= 1
            log.append(f"end {label}")
            return ToolResult.text(label)

        return make_tool(execute, read_only=True)

    def writer(label: str) -> AgentTool:
        async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            log.append(f"start {label}")
            assert running == 0
            log.append(f"end {label}")
            return ToolResult.text(label)

        return make_tool(execute)

    ctx = make_ctx(tmp_path)
    calls = [PendingCall(tool, {"count": 1}, ctx) for tool in (reader("r1"), reader("r2"), writer("w"))]
    results = await asyncio.wait_for(run_concurrently(calls), 10)
    assert [text(result) for result in results] == ["r1", "r2", "w"]
    assert log.index("start r2") < log.index("end r1")
    assert log[-2:] == ["start w", "end w"]
