"""Usage ledger rows and totals.

Each settled provider attempt (successful, failed or retried) gets exactly one ledger row
keyed by a stable ``record_id`` (DURABILITY invariant 5); totals are always sums over the
ledger, so a replayed settlement (ignored by the store) can never double count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentcore.harness.projection import ConversationLog
from agentcore.harness.storage import UsageRow
from agentcore.messages import AssistantMessage

TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_input_tokens", "cache_creation_tokens", "reasoning_tokens")


@dataclass(slots=True)
class AttemptTiming:
    """When one model request attempt started, streamed its first content (text, reasoning or
    tool-call arguments) and ended, in epoch ms of the store view's clock. Committed with the
    attempt's ledger row; the first fragment commit of an attempt carries the start too, so an
    attempt a crash interrupted still shows when it began."""

    started_ms: int
    first_token_ms: int | None = None
    ended_ms: int | None = None
    _stamped: bool = False

    def fields(self) -> dict[str, int | None]:
        return {"started_ms": self.started_ms, "first_token_ms": self.first_token_ms, "ended_ms": self.ended_ms}

    def stamp(self, fragments: list[dict[str, Any]], at_ms: int) -> None:
        """Mark fragment payloads about to be committed with their commit time (and the
        attempt's start and first token on the attempt's first fragment)."""
        for fragment in fragments:
            fragment["at_ms"] = at_ms
        if fragments and not self._stamped:
            self._stamped = True
            fragments[0]["started_ms"] = self.started_ms
            fragments[0]["first_token_ms"] = self.first_token_ms


def usage_payload(
    message: AssistantMessage, request_id: str, *, ok: bool, timing: AttemptTiming | None = None
) -> dict[str, Any]:
    """The ledger row of one settled attempt: tokens by class, cost, model, outcome and (with
    ``timing``) when it ran."""
    usage = message.usage
    payload: dict[str, Any] = {name: getattr(usage, name) if usage else 0 for name in TOKEN_FIELDS}
    cost = usage.cost if usage else None
    payload["cost"] = cost.total if cost else 0.0
    payload["cost_detail"] = (
        {"input": cost.input, "output": cost.output, "cache_read": cost.cache_read, "cache_write": cost.cache_write}
        if cost
        else {"input": 0.0, "output": 0.0, "cache_read": 0.0, "cache_write": 0.0}
    )
    payload["model"] = message.model
    payload["provider"] = message.provider
    payload["request_id"] = request_id
    payload["ok"] = ok
    payload["stop_reason"] = message.stop_reason
    if timing is not None:
        payload.update(timing.fields())
    return payload


def sum_usage(rows: list[UsageRow] | list[dict[str, Any]]) -> dict[str, Any]:
    totals: dict[str, Any] = {name: 0 for name in TOKEN_FIELDS}
    totals["cost"] = 0.0
    totals["calls"] = 0
    for row in rows:
        payload = row.payload if isinstance(row, UsageRow) else row
        for name in TOKEN_FIELDS:
            totals[name] += int(payload.get(name, 0))
        totals["cost"] += float(payload.get("cost", 0.0))
        totals["calls"] += 1
    totals["total_tokens"] = (
        totals["input_tokens"]
        + totals["output_tokens"]
        + totals["cached_input_tokens"]
        + totals["cache_creation_tokens"]
    )
    return totals


def run_usage_totals(log: ConversationLog, request_id: str, extra: list[UsageRow] | None = None) -> dict[str, Any]:
    rows = {row.record_id: row for row in log.usage.values() if row.payload.get("request_id") == request_id}
    for row in extra or []:
        rows.setdefault(row.record_id, row)
    return sum_usage(list(rows.values()))
