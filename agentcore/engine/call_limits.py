"""Tool calls the conversation cannot carry: too large or nested too deep (SPEC C5, T3; issue 22).

A tool call's arguments stay in the conversation: every later request carries them, the store
commits them, the session snapshot shows them. Two kinds of call can never be answered usefully
and are refused before they enter the transcript — the committed assistant message keeps the
call with its arguments replaced by a short note, the call is not run, and the model gets an
error result saying what to send instead:

- **too large**: arguments alone would take more than half of the window (and an invalid one
  repeated in a loop grows every request by its size);
- **too deep**: arguments nest containers more than ``MAX_ARGUMENT_DEPTH`` levels. Everything
  that walks a value (cleaning, JSON encoding, schema validation, pydantic) recurses, so 900
  levels failed the whole run with ``RecursionError``. ``too_deep`` measures without recursion.

A code-mode script's nested calls are checked with the same ``too_deep`` at their entry
(``engine.nested``), before their execution log is written. Pure functions; the engine decides
when to apply them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from agentcore.context.estimate import estimate_text_tokens
from agentcore.json_depth import text_nests_deeper_than, value_nests_deeper_than
from agentcore.messages import AssistantMessage, ToolCall
from agentcore.providers.shared import RAW_ARGUMENTS_KEY

OMITTED_KEY = "omitted"
MAX_ARGUMENT_DEPTH: Final = 100  # containers on the deepest path; far below Python's recursion limit


def argument_token_limit(window: int) -> int:
    """The largest argument size (estimated tokens) one call may occupy: half the window."""
    return max(1, window // 2)


def too_deep(arguments: Any, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether a call's arguments nest more than ``limit`` levels — decoded, or kept as raw text
    because the decoder could not take them (a text deep enough makes it raise)."""
    raw = arguments.get(RAW_ARGUMENTS_KEY) if isinstance(arguments, dict) else None
    if isinstance(raw, str) and text_nests_deeper_than(raw, limit):
        return True
    return value_nests_deeper_than(arguments, limit)


def _argument_tokens(call: ToolCall) -> int:
    text = json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"), default=str)
    if len(text) <= 64:  # far below any window: skip the estimate on the hot path
        return 0
    return estimate_text_tokens(text)


def refuse_unfit_calls(message: AssistantMessage, window: int) -> tuple[AssistantMessage, dict[str, str]]:
    """``message`` with the arguments of calls it cannot carry elided, and ``{call id: the error
    result the model gets}`` for those calls.

    Returns the message unchanged (the same object) when every call fits.
    """
    limit = argument_token_limit(window)
    notes: dict[str, str] = {}
    refusals: dict[str, str] = {}
    for call in message.tool_calls:
        if too_deep(call.arguments):
            notes[call.id] = too_deep_note()
            refusals[call.id] = too_deep_result()
            continue
        tokens = _argument_tokens(call)
        if tokens > limit:
            notes[call.id] = oversize_note(tokens, window)
            refusals[call.id] = oversize_result(tokens, window)
    if not refusals:
        return message, refusals
    content = [
        replace(block, arguments={OMITTED_KEY: notes[block.id]})
        if isinstance(block, ToolCall) and block.id in notes
        else block
        for block in message.content
    ]
    return replace(message, content=content), refusals


def refusal_of(call: Mapping[str, Any], window: int) -> str | None:
    """The error result of a committed call refused before it entered the transcript, or None.
    (``oversize_tokens``: how an operation register written before issue 22 marks one.)"""
    if "refusal" in call:
        return str(call["refusal"])
    if "oversize_tokens" in call:
        return oversize_result(int(call["oversize_tokens"]), window)
    return None


def oversize_note(tokens: int, window: int) -> str:
    return f"arguments of about {tokens:,} tokens removed: they do not fit the {window:,}-token context window"


def oversize_result(tokens: int, window: int) -> str:
    return (
        f"This call was not run: its arguments (about {tokens:,} tokens) are too large for the "
        f"{window:,}-token context window, so they were removed from the conversation. "
        "Send the content in smaller pieces (several calls, or write it in parts)."
    )


def too_deep_note() -> str:
    return f"arguments removed: nested more than {MAX_ARGUMENT_DEPTH} levels deep"


def too_deep_result() -> str:
    return (
        f"This call was not run: its arguments are nested more than {MAX_ARGUMENT_DEPTH} levels deep, "
        "more than a tool call may carry, so they were removed. Send a flatter structure "
        "(for example a deeply nested document as JSON text in a string field)."
    )
