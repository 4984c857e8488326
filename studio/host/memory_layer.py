"""The channel layer of a Studio that runs in one process (the default: the host inside daphne).

Channels' ``InMemoryChannelLayer`` has the right contract and the wrong costs for a live stream:
every ``send``, ``group_send`` and ``receive`` first walks *every* channel's queue and every
group's members for expired entries (so one push costs O(all open pages)), ``group_send`` starts
a task per member and waits for them as they complete, each message is deep-copied, and a
channel's queue is thrown away whenever a receive empties it (a new queue per message). With 50
streaming sessions that was ~0.1 ms of daphne's CPU per push, two scans of 50 channels each.

``ProcessChannelLayer`` keeps the contract — per-channel capacity (``ChannelFull``), message
expiry, group membership expiry, ``flush`` — and does only the work of the channel at hand: a
message is checked for expiry when it is received, a group's memberships when the group is
sent to, a send is a ``put_nowait`` (no task), a channel's queue lives until the channel leaves
its last group with nobody waiting on it (a page's socket closed: what was left for it goes).
Messages are copied one level deep (Studio's pushes are flat dicts of immutable values; the
copy keeps a receiver from changing what the sender still holds).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer


class ProcessChannelLayer(InMemoryChannelLayer):
    """``InMemoryChannelLayer``'s contract at the cost of the channel at hand (see the module)."""

    extensions: ClassVar[list[str]] = ["groups", "flush"]

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        self._put(channel, message, time.time())

    def _put(self, channel: str, message: dict[str, Any], now: float) -> None:
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        try:
            queue.put_nowait((now + self.expiry, dict(message)))
        except asyncio.QueueFull:
            raise ChannelFull(channel) from None

    async def receive(self, channel: str) -> dict[str, Any]:
        """The next message of ``channel`` that has not expired (expired ones are dropped, and
        their channel leaves its groups, as Channels' layer does)."""
        self.require_valid_channel_name(channel)
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        while True:
            expires, message = await queue.get()
            if expires >= time.time():
                return dict(message)
            self._remove_from_groups(channel)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        members = self.groups.get(group)
        if not members:
            return
        now = time.time()
        oldest = int(now) - self.group_expiry
        for channel, joined in list(members.items()):
            if joined and joined < oldest:
                members.pop(channel, None)  # the membership expired
                continue
            try:
                self._put(channel, message, now)
            except ChannelFull:
                pass  # as Channels' layer: a full member misses this message (its page resyncs)

    async def group_discard(self, group: str, channel: str) -> None:
        await super().group_discard(group, channel)
        if not any(channel in members for members in self.groups.values()):
            queue = self.channels.get(channel)
            if queue is not None and not getattr(queue, "_getters", None):
                del self.channels[channel]  # it left its last group and nobody waits on it
