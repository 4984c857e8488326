"""Usage totals per context and per turn, kept current from the usage ledger (SPEC S3).

Totals are sums over the ledger rows (DURABILITY 5), indexed once at open and then updated
from each commit, so a snapshot never rescans a long session's ledger. A row is counted
once: the ledger itself ignores a second write of a ``record_id``, and so does this index.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentcore.harness.projection import StoreView
from agentcore.harness.storage import Commit, UsageRow
from agentcore.harness.usage import TOKEN_FIELDS


def empty_totals() -> dict[str, Any]:
    totals: dict[str, Any] = dict.fromkeys(TOKEN_FIELDS, 0)
    totals.update(total_tokens=0, calls=0, cost=0.0)
    return totals


def add_row(totals: dict[str, Any], payload: dict[str, Any]) -> None:
    for name in TOKEN_FIELDS:
        totals[name] += max(0, int(payload.get(name, 0) or 0))
    totals["total_tokens"] = (
        totals["input_tokens"]
        + totals["output_tokens"]
        + totals["cached_input_tokens"]
        + totals["cache_creation_tokens"]
    )
    totals["calls"] += 1
    totals["cost"] += max(0.0, float(payload.get("cost", 0.0) or 0.0))


def merged(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    out = empty_totals()
    for part in parts:
        for key, value in part.items():
            out[key] += value
    return out


class UsageLedgerIndex:
    """``by_conversation[c]`` and ``by_request[r]`` totals, updated on every commit."""

    def __init__(self, view: StoreView) -> None:
        self.by_conversation: dict[str, dict[str, Any]] = {}
        self.by_request: dict[str, dict[str, Any]] = {}
        self._seen: set[str] = set()
        self._add(view.usage.values())
        view.on_commit(self._on_commit)

    def conversation(self, conversation_id: str) -> dict[str, Any]:
        return dict(self.by_conversation.get(conversation_id) or empty_totals())

    def request(self, request_id: str) -> dict[str, Any]:
        return dict(self.by_request.get(request_id) or empty_totals())

    def _on_commit(self, commit: Commit, seq: int) -> None:
        if commit.usage:
            self._add(commit.usage)

    def _add(self, rows: Iterable[UsageRow]) -> None:
        for row in rows:
            if row.record_id in self._seen:
                continue
            self._seen.add(row.record_id)
            add_row(self.by_conversation.setdefault(row.conversation_id, empty_totals()), row.payload)
            request_id = row.payload.get("request_id")
            if isinstance(request_id, str):
                add_row(self.by_request.setdefault(request_id, empty_totals()), row.payload)
