"""The sessions list's live status pills: one lightweight channel per person (SPEC W9, W12).

When the fold finds that views changed status (``StatusesChanged``: running, waiting for you,
failed, idle), ``publish`` sends the new statuses to their owners' groups and to the staff
group; each open sessions list (``studio.consumers.SessionListConsumer``, one socket per list
page, not one per row) turns them into its rows' pills. A list that misses a message still
shows the statuses Studio's rows hold on its next load.
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from studio.session_list import owners_of

STAFF_GROUP = "sessions-staff"


def user_group(user_id: int) -> str:
    return f"sessions-user-{int(user_id)}"


async def publish(statuses: dict[str, str], owner_id: int | None = None) -> None:
    """Tell every open list of the sessions' owners (and staff) their new statuses.
    ``owner_id``: the one owner of all of them when the caller knows it (the session host: a
    store's views are one person's), so no row is read."""
    if not statuses:
        return
    layer = get_channel_layer()
    if layer is None:
        return
    if owner_id is not None:
        owners = dict.fromkeys(statuses, owner_id)
    else:
        owners = await database_sync_to_async(owners_of)(list(statuses))
    by_owner: dict[int, dict[str, str]] = {}
    for session_id, status in statuses.items():
        if session_id in owners:
            by_owner.setdefault(owners[session_id], {})[session_id] = status
    for owner, part in by_owner.items():
        await layer.group_send(user_group(owner), {"type": "sessions.status", "statuses": part})
    await layer.group_send(STAFF_GROUP, {"type": "sessions.status", "statuses": statuses})
