"""Context usage and compaction: the pure parts (SPEC C1–C5).

``estimate`` measures how full the window is (estimates calibrated by real usage);
``compaction`` decides what to summarize and builds the summary prompts. Neither does I/O:
the engine streams model calls and emits events around them.
"""

from __future__ import annotations

from agentcore.context.compaction import (
    CompactionPlan,
    build_merge_request,
    build_summary_request,
    find_cut_point,
    is_summary_message,
    plan_compaction,
    render_transcript,
    should_compact,
    summary_message,
    summary_text_of,
    touched_paths,
)
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
    "CompactionPlan",
    "ContextTracker",
    "StreamingUsage",
    "ToolSpec",
    "UsageThrottle",
    "build_merge_request",
    "build_summary_request",
    "estimate_agent_context_tokens",
    "estimate_image_tokens",
    "estimate_message_tokens",
    "estimate_static_context_tokens",
    "estimate_text_tokens",
    "estimate_tool_tokens",
    "find_cut_point",
    "is_summary_message",
    "plan_compaction",
    "render_transcript",
    "should_compact",
    "summary_message",
    "summary_text_of",
    "touched_paths",
]
