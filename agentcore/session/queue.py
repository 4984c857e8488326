"""The input queue of a context (SPEC S2): follow-ups, steers, pending resets and deliveries.

The queue is one register per conversation, ``queue:<conversation_id>``, written with
compare-and-swap. An input leaves the queue in the same transaction that places it — as the
user message of a new operation (a follow-up), inside the running turn at a tool boundary (a
steer) — so "withdraw vs consumption" has exactly one winner and an accepted input is never
lost or placed twice.

Items are plain JSON: ``{"input_id", "kind": "input" | "reset" | "delivery", "mode":
"follow_up" | "steer", "prompt", "images": [{data, mime_type}], "handoff", "agent": "build" |
"plan" (only when the submit named one)}``.
"""

from __future__ import annotations

from typing import Any

from agentcore.harness.projection import StoreView
from agentcore.harness.storage import RegisterWrite

QueueItem = dict[str, Any]


def queue_key(conversation_id: str) -> str:
    return f"queue:{conversation_id}"


def read_queue(view: StoreView, conversation_id: str) -> list[QueueItem]:
    value = view.register(queue_key(conversation_id))
    return list(value["items"]) if value else []


def write_queue(view: StoreView, conversation_id: str, items: list[QueueItem]) -> RegisterWrite:
    key = queue_key(conversation_id)
    return RegisterWrite(key, {"items": items} if items else None, expected_seq=view.register_seq(key))


def find(items: list[QueueItem], input_id: str) -> int | None:
    for index, item in enumerate(items):
        if item.get("input_id") == input_id:
            return index
    return None


def next_item(items: list[QueueItem]) -> int | None:
    """Which item starts the next turn: a steer first (it was meant for the turn that just
    ended), else the oldest item."""
    for index, item in enumerate(items):
        if item.get("mode") == "steer" and item.get("kind") == "input":
            return index
    return 0 if items else None


def steers(items: list[QueueItem]) -> tuple[list[QueueItem], list[QueueItem]]:
    """(steer inputs to place at a tool boundary, the items that stay queued)."""
    taken = [item for item in items if item.get("kind") == "input" and item.get("mode") == "steer"]
    kept = [item for item in items if not (item.get("kind") == "input" and item.get("mode") == "steer")]
    return taken, kept


def preview(item: QueueItem) -> dict[str, Any]:
    """What a snapshot shows of a queued item (no image data)."""
    text = str(item.get("prompt") or item.get("handoff") or "")
    return {
        "input_id": item["input_id"],
        "kind": item.get("kind", "input"),
        "mode": item.get("mode", "follow_up"),
        "agent": item.get("agent"),
        "prompt": text[:500],
        "images": len(item.get("images") or []),
    }
