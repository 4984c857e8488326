"""Usage ledger rows and totals.

Each settled provider attempt (successful, failed or retried) gets exactly one ledger row
keyed by a stable ``record_id`` (DURABILITY invariant 5); totals are always sums over the
ledger, so a replayed settlement (ignored by the store) can never double count.
"""

from __future__ import annotations

from typing import Any

from agentcore.harness.projection import ConversationLog
from agentcore.harness.storage import UsageRow
from agentcore.messages import AssistantMessage

TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_input_tokens", "cache_creation_tokens", "reasoning_tokens")


def usage_payload(message: AssistantMessage, request_id: str, *, ok: bool) -> dict[str, Any]:
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
