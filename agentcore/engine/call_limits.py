"""Tool calls too large for the context window (SPEC C5; issue: oversized call arguments).

A tool call's arguments stay in the conversation: every later request carries them. A call
whose arguments alone would take more than half of the window can never be answered usefully
(and an invalid one repeated in a loop grows every request by its size), so the engine refuses
it before it enters the transcript: the committed assistant message keeps the call with its
arguments replaced by a short note, the call is not run, and the model gets an error result
asking for smaller pieces. Pure functions; the engine decides when to apply them.
"""

from __future__ import annotations

import json
from dataclasses import replace

from agentcore.context.estimate import estimate_text_tokens
from agentcore.messages import AssistantMessage, ToolCall

OMITTED_KEY = "omitted"


def argument_token_limit(window: int) -> int:
    """The largest argument size (estimated tokens) one call may occupy: half the window."""
    return max(1, window // 2)


def _argument_tokens(call: ToolCall) -> int:
    text = json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"), default=str)
    if len(text) <= 64:  # far below any window: skip the estimate on the hot path
        return 0
    return estimate_text_tokens(text)


def refuse_oversized_calls(message: AssistantMessage, window: int) -> tuple[AssistantMessage, dict[str, int]]:
    """``message`` with oversized calls' arguments elided, and ``{call id: estimated tokens}``.

    Returns the message unchanged (the same object) when no call is too large.
    """
    limit = argument_token_limit(window)
    oversized: dict[str, int] = {}
    for call in message.tool_calls:
        tokens = _argument_tokens(call)
        if tokens > limit:
            oversized[call.id] = tokens
    if not oversized:
        return message, oversized
    content = [
        replace(block, arguments={OMITTED_KEY: oversize_note(oversized[block.id], window)})
        if isinstance(block, ToolCall) and block.id in oversized
        else block
        for block in message.content
    ]
    return replace(message, content=content), oversized


def oversize_note(tokens: int, window: int) -> str:
    return f"arguments of about {tokens:,} tokens removed: they do not fit the {window:,}-token context window"


def oversize_result(tokens: int, window: int) -> str:
    return (
        f"This call was not run: its arguments (about {tokens:,} tokens) are too large for the "
        f"{window:,}-token context window, so they were removed from the conversation. "
        "Send the content in smaller pieces (several calls, or write it in parts)."
    )
