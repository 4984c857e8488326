"""Context usage: how full the window is (SPEC C1, C2).

``estimate`` measures the context (estimates calibrated by real usage) and ``meter`` keeps a
runtime's live reading. No I/O. Deciding what to summarize when it is full is compaction's
(``agentcore.compaction``).
"""

from __future__ import annotations

from agentcore.context.estimate import (
    DEFAULT_IMAGE_TOKENS,
    ContextTracker,
    StreamingUsage,
    ToolSpec,
    UsageThrottle,
    estimate_agent_context_tokens,
    estimate_image_tokens,
    estimate_message_tokens,
    estimate_static_context_tokens,
    estimate_text_tokens,
    estimate_tool_tokens,
)

__all__ = [
    "DEFAULT_IMAGE_TOKENS",
    "ContextTracker",
    "StreamingUsage",
    "ToolSpec",
    "UsageThrottle",
    "estimate_agent_context_tokens",
    "estimate_image_tokens",
    "estimate_message_tokens",
    "estimate_static_context_tokens",
    "estimate_text_tokens",
    "estimate_tool_tokens",
]
