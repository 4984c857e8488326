"""The single-process channel layer keeps Channels' in-memory contract at the cost of one channel
(W1, W7; issue 25): order, capacity, expiry, groups — and a push costs the same however many
other pages are open (Channels' layer walked every channel and group on every send)."""

from __future__ import annotations

from typing import Any

import pytest
from channels.exceptions import ChannelFull

from studio.host.memory_layer import ProcessChannelLayer


class Clock:
    """``time.time`` for the layer, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr("studio.host.memory_layer.time.time", fake)
    return fake


async def test_group_members_get_each_message_once_in_order_and_a_copy() -> None:
    layer = ProcessChannelLayer(capacity=10)
    a, b = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("session-1", a)
    await layer.group_add("session-1", b)
    await layer.group_add("session-2", b)
    pushed = {"type": "session.push", "seq": 1}
    await layer.group_send("session-1", pushed)
    await layer.group_send("session-1", {"type": "session.push", "seq": 2})
    await layer.group_send("session-2", {"type": "session.push", "seq": 3})
    first = await layer.receive(a)
    assert first == pushed and first is not pushed
    assert [await layer.receive(a)] == [{"type": "session.push", "seq": 2}]
    assert [(await layer.receive(b))["seq"] for _ in range(3)] == [1, 2, 3]
    await layer.group_discard("session-1", a)
    await layer.group_send("session-1", {"type": "session.push", "seq": 4})
    assert (await layer.receive(b))["seq"] == 4
    assert a not in layer.channels, "a channel that left its last group keeps no queue"


async def test_a_full_channel_refuses_a_send_and_a_group_send_skips_it() -> None:
    layer = ProcessChannelLayer(capacity=2)
    full, other = await layer.new_channel(), await layer.new_channel()
    for seq in (1, 2):
        await layer.send(full, {"type": "m", "seq": seq})
    with pytest.raises(ChannelFull):
        await layer.send(full, {"type": "m", "seq": 3})
    await layer.group_add("g", full)
    await layer.group_add("g", other)
    await layer.group_send("g", {"type": "m", "seq": 4})
    assert (await layer.receive(other))["seq"] == 4
    assert [(await layer.receive(full))["seq"] for _ in range(2)] == [1, 2]


async def test_expired_messages_are_dropped_on_receive_and_their_channel_leaves_its_groups(clock: Clock) -> None:
    layer = ProcessChannelLayer(expiry=60, capacity=10)
    stale = await layer.new_channel()
    await layer.group_add("g", stale)
    await layer.send(stale, {"type": "m", "seq": 1})
    clock.now += 61
    await layer.send(stale, {"type": "m", "seq": 2})
    assert (await layer.receive(stale))["seq"] == 2
    assert stale not in layer.groups.get("g", {})


async def test_group_memberships_expire(clock: Clock) -> None:
    layer = ProcessChannelLayer(group_expiry=100, capacity=10)
    old, new = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("g", old)
    clock.now += 101
    await layer.group_add("g", new)
    await layer.group_send("g", {"type": "m"})
    assert await layer.receive(new) == {"type": "m"}
    assert old not in layer.groups["g"] and old not in layer.channels


async def test_a_send_does_not_look_at_other_channels() -> None:
    """The cost of one push is its own channel's: with thousands of channels holding messages,
    a send touches none of them (Channels' layer scanned them all for expired messages)."""

    class Watched(dict[str, Any]):
        touched = 0

        def items(self) -> Any:
            Watched.touched += 1
            return super().items()

        def values(self) -> Any:
            Watched.touched += 1
            return super().values()

    layer = ProcessChannelLayer(capacity=10)
    for n in range(2000):
        await layer.send(f"idle.{n}", {"type": "m"})
    target = await layer.new_channel()
    await layer.group_add("g", target)
    layer.channels = Watched(layer.channels)
    layer.groups = Watched(layer.groups)
    await layer.group_send("g", {"type": "m"})
    await layer.send(target, {"type": "m"})
    await layer.receive(target)
    assert Watched.touched == 0
