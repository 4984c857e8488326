"""``compact_agent_messages``: compaction of a transcript outside a runtime (SPEC C3).

For hosts that keep their own transcript (gateways, exports): the same plan and summary
requests the runtime uses, with no store involved. ``on_usage`` receives every summary
request's usage — failed and cancelled attempts included — before the summary is checked,
so billing never misses an attempt.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from agentcore.compaction.plan import plan_compaction, should_compact, summary_message
from agentcore.compaction.settings import CompactionSettings
from agentcore.compaction.summary import summarize, summary_max_tokens
from agentcore.context.estimate import estimate_agent_context_tokens
from agentcore.errors import MODEL_ERROR, AgentError, ExecutionAborted
from agentcore.harness.usage import AttemptTiming, usage_payload
from agentcore.messages import AssistantMessage, Message, message_to_dict, parse_messages
from agentcore.models import resolve_model
from agentcore.models.attributes import ResolvedModel, parse_model_attributes
from agentcore.providers.base import ProviderFailure
from agentcore.providers.registry import ProviderRegistry


async def compact_agent_messages(
    messages: Sequence[Message | dict[str, Any]],
    *,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    api_kind: str | None = None,
    model_attributes: Any = None,
    resolved_model: ResolvedModel | None = None,
    force: bool = True,
    instructions: str | None = None,
    compaction: dict[str, Any] | None = None,
    on_usage: Callable[[dict[str, Any]], Any] | None = None,
    abort: asyncio.Event | None = None,
) -> list[dict[str, Any]]:
    """Return the compacted transcript as message dicts.

    ``force=True`` (manual, C3) summarizes everything; ``force=False`` summarizes only the
    older part when the 90% threshold logic would (C4) and otherwise returns the messages
    unchanged. Raises ``AgentError`` (``model_error``) when the summary request fails, is cut
    off or comes back empty, and ``ExecutionAborted`` when ``abort`` is set; nothing is lost —
    the caller still has its original messages.
    """
    transcript = parse_messages(messages)
    target = resolved_model or resolve_model(
        provider=provider,
        model=model,
        base_url=base_url,
        api_key=api_key,
        api_kind=api_kind,
        runtime_attributes=parse_model_attributes(model_attributes),
    )
    settings = CompactionSettings.parse(compaction)
    window = target.context_window
    used = estimate_agent_context_tokens(transcript)
    if not force and not should_compact(used, window, reserve_tokens=settings.reserve(window)):
        return [message_to_dict(m) for m in transcript]
    max_tokens = summary_max_tokens(target, window)
    plan = plan_compaction(
        transcript,
        window=window,
        reserve_tokens=settings.reserve(window),
        keep_recent_tokens=settings.keep_recent(window),
        max_summary_tokens=max_tokens,
        force=force,
    )
    if plan.oversize:
        raise AgentError(MODEL_ERROR, plan.oversize_error() or "a message is larger than the window")
    if not plan.to_summarize:
        return [message_to_dict(m) for m in transcript]

    async def on_attempt(message: AssistantMessage, failure: ProviderFailure | None, timing: AttemptTiming) -> None:
        if on_usage is not None:
            result = on_usage(usage_payload(message, "compact", ok=failure is None, timing=timing))
            if inspect.isawaitable(result):
                await result

    providers = ProviderRegistry()
    try:
        outcome = await summarize(
            plan,
            providers.get(target.api_kind),
            target,
            abort=abort or asyncio.Event(),
            max_tokens=max_tokens,
            on_attempt=on_attempt,
            instructions=instructions,
        )
    finally:
        await providers.aclose()
    if outcome.failure is not None:
        if outcome.failure.kind == "cancelled":
            raise ExecutionAborted("the compaction was cancelled")
        raise AgentError(MODEL_ERROR, f"compaction failed: {outcome.failure.message}")
    return [message_to_dict(summary_message(outcome.text)), *(message_to_dict(m) for m in plan.kept)]
