"""Running a compaction plan: the model calls that write the summary (SPEC C3–C5).

The plan (what to summarize, chunking, oversize detection) is pure and lives in ``plan``;
this module only performs the summary requests. Summary
requests never carry tools or web search, reserve output space, and every attempt —
failed and cancelled ones included — is handed to ``on_attempt`` so its usage is recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from agentcore.clock import WallClock, system_clock
from agentcore.compaction.plan import CompactionPlan, build_merge_request, build_summary_request
from agentcore.harness.usage import AttemptTiming
from agentcore.messages import AssistantMessage, Message, user_text
from agentcore.models.attributes import ResolvedModel
from agentcore.providers.base import Provider, ProviderFailure, ProviderRequest, StreamEnd, TextDelta, ThinkingDelta


def summary_max_tokens(model: ResolvedModel, window: int) -> int:
    return max(256, min(model.max_tokens, 4_096, window // 4))


@dataclass(slots=True)
class SummaryOutcome:
    text: str = ""
    failure: ProviderFailure | None = None


Attempt = Callable[[AssistantMessage, ProviderFailure | None, AttemptTiming], Awaitable[None]]


async def _request(
    provider: Provider,
    model: ResolvedModel,
    system: str,
    prompt: str,
    *,
    abort: asyncio.Event,
    max_tokens: int,
    on_attempt: Attempt,
    clock: WallClock,
) -> SummaryOutcome:
    request = ProviderRequest(
        model=model,
        system_prompt=system,
        messages=[user_text(prompt)],
        tools=[],
        effort=None,
        max_tokens=max_tokens,
        web_search=False,  # C5/P2: compaction requests never carry the search tool
    )
    end: StreamEnd | None = None
    timing = AttemptTiming(clock())
    async for event in provider.stream(request, abort):
        if isinstance(event, StreamEnd):
            end = event
        elif timing.first_token_ms is None and isinstance(event, (TextDelta, ThinkingDelta)):
            timing.first_token_ms = clock()
    timing.ended_ms = clock()
    assert end is not None, "adapters always end with StreamEnd"
    failure = end.failure
    if failure is None and end.message.stop_reason == "length":
        failure = ProviderFailure("bad_request", "the summary was cut off at max_tokens")
    await on_attempt(end.message, failure, timing)
    text = end.message.text.strip()
    if failure is None and not text:
        failure = ProviderFailure("bad_request", "the model produced an empty summary")
    return SummaryOutcome(text, failure)


async def summarize(
    plan: CompactionPlan,
    provider: Provider,
    model: ResolvedModel,
    *,
    abort: asyncio.Event,
    max_tokens: int,
    on_attempt: Attempt,
    instructions: str | None = None,
    clock: WallClock = system_clock,
) -> SummaryOutcome:
    """Summarize ``plan.chunks`` (one request each) and merge the parts when there are several.
    ``clock`` times each attempt (handed to ``on_attempt``)."""
    summaries: list[str] = []
    for chunk in plan.chunks:
        system, prompt = build_summary_request(chunk, instructions=instructions)
        outcome = await _request(
            provider, model, system, prompt, abort=abort, max_tokens=max_tokens, on_attempt=on_attempt, clock=clock
        )
        if outcome.failure is not None:
            return outcome
        summaries.append(outcome.text)
    while len(summaries) > 1:
        system, prompt = build_merge_request(summaries, instructions=instructions)
        outcome = await _request(
            provider, model, system, prompt, abort=abort, max_tokens=max_tokens, on_attempt=on_attempt, clock=clock
        )
        if outcome.failure is not None:
            return outcome
        summaries = [outcome.text]
    return SummaryOutcome(summaries[0] if summaries else "")


def first_kept_entry(entry_ids: Sequence[str], messages: Sequence[Message], cut_index: int) -> str | None:
    return entry_ids[cut_index] if cut_index < len(messages) else None
