"""W1/W2/W6: the session WebSocket — auth, ownership, live partials, gap recovery."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from studio.asgi import application
from studio.consumers import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED
from studio.host.session_host import SessionHost

pytestmark = pytest.mark.django_db(transaction=True)


def _cookie_for(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


async def _connect(session_id: Any, user: Any | None, query: str = "") -> tuple[WebsocketCommunicator, bool, Any]:
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if user is not None:
        headers.append((b"cookie", (await sync_to_async(_cookie_for)(user)).encode()))
    communicator = WebsocketCommunicator(application, f"/ws/sessions/{session_id}/{query}", headers=headers)
    connected, code = await communicator.connect(timeout=10)
    return communicator, connected, code


async def _receive_until(communicator: WebsocketCommunicator, predicate: Any, limit: int = 200) -> list[str]:
    """Collect frames until one satisfies ``predicate`` (bounded by count and by timeout)."""
    frames = []
    for _ in range(limit):
        frame = await communicator.receive_from(timeout=10)
        frames.append(frame)
        if predicate(frame):
            return frames
    raise AssertionError("condition never met")


async def test_anonymous_socket_is_refused(user: Any, make_session: Any) -> None:
    """W6: the consumer rejects anonymous connections (close code 4401)."""
    session = await sync_to_async(make_session)(user)
    _communicator, connected, code = await _connect(session.pk, None)
    assert not connected and code == CLOSE_UNAUTHENTICATED


async def test_other_users_socket_is_refused(user: Any, other_user: Any, make_session: Any) -> None:
    """W6: a user cannot watch someone else's session (close code 4403)."""
    session = await sync_to_async(make_session)(user)
    _communicator, connected, code = await _connect(session.pk, other_user)
    assert not connected and code == CLOSE_FORBIDDEN


async def test_socket_from_a_foreign_origin_is_refused(user: Any, make_session: Any) -> None:
    session = await sync_to_async(make_session)(user)
    cookie = (await sync_to_async(_cookie_for)(user)).encode()
    communicator = WebsocketCommunicator(
        application, f"/ws/sessions/{session.pk}/", headers=[(b"origin", b"https://evil.example"), (b"cookie", cookie)]
    )
    connected, _ = await communicator.connect(timeout=10)
    assert not connected


async def test_owner_gets_the_full_state_then_live_partials(user: Any, make_session: Any, host: SessionHost) -> None:
    """W1/W2: connect renders every region; a run streams partials and ends rendered from the store."""
    session = await sync_to_async(make_session)(user)
    communicator, connected, _ = await _connect(session.pk, user)
    assert connected
    first = await communicator.receive_from(timeout=10)
    for region in (
        "conversation",
        "pending",
        "session-status",
        "run-controls",
        "context-ring",
        "tab-tasks",
        "tab-usage",
    ):
        assert f'id="{region}"' in first
    await host.prompt(str(session.pk), prompt="what files are here?", agent="build")
    frames = await _receive_until(communicator, lambda f: "pill-idle" in f and "README" in f and "live-turn" not in f)
    joined = "".join(frames)
    assert "live-turn" in joined  # the run was shown live first
    assert 'hx-swap-oob="beforeend:#live-blocks"' in joined  # blocks arrived as partials
    assert "tool-name" in joined and ">ls<" in joined  # a tool call row
    assert "pill-running" in joined
    await communicator.disconnect()


async def test_closing_the_socket_never_stops_the_run(user: Any, make_session: Any, gated_host: Any) -> None:
    """W2: a browser disconnect leaves the turn going; reconnecting shows everything so far."""
    host, gate, _server = gated_host
    session = await sync_to_async(make_session)(user)
    communicator, _connected, _ = await _connect(session.pk, user)
    await communicator.receive_from(timeout=10)
    await host.prompt(str(session.pk), prompt="HOLD and greet", agent="build")
    await gate.entered.wait()
    await host.wait_live(str(session.pk))
    await communicator.disconnect()
    assert host._sessions[str(session.pk)].busy(0)
    # Reconnect mid-turn: the first frame already holds the turn so far (the running gate call).
    again, _connected, _ = await _connect(session.pk, user)
    first = await again.receive_from(timeout=10)
    assert 'id="live-turn"' in first and ">gate<" in first and "HOLD and greet" in first
    gate.release()
    frames = await _receive_until(again, lambda f: "Released: HOLD and greet" in f and "live-turn" not in f)
    assert frames
    await again.disconnect()


async def test_a_dropped_push_triggers_a_full_rerender(user: Any, make_session: Any, host: SessionHost) -> None:
    """A frame lost by a full channel costs a re-render, never content (seq gap → resync)."""
    session = await sync_to_async(make_session)(user)
    communicator, _connected, _ = await _connect(session.pk, user)
    first = await communicator.receive_from(timeout=10)
    assert 'id="conversation"' in first
    await host.wait_idle(str(session.pk))  # the host's own pushes after opening the store are out
    while not await communicator.receive_nothing(timeout=0.2):
        await communicator.receive_from(timeout=10)
    state = await host.state(str(session.pk))
    layer = get_channel_layer()
    await layer.group_send(
        f"session-{session.pk}",
        {"type": "session.push", "epoch": state.epoch, "seq": state.seq + 5, "full": False, "html": "<p>partial</p>"},
    )
    frame = await communicator.receive_from(timeout=10)
    assert "partial" not in frame
    assert 'id="conversation"' in frame and 'hx-swap-oob="true"' in frame
    # An old push (already part of the state) is skipped silently.
    await layer.group_send(
        f"session-{session.pk}",
        {"type": "session.push", "epoch": state.epoch, "seq": state.seq, "full": False, "html": "<p>stale</p>"},
    )
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_pushes_from_a_holder_that_lost_the_session_are_ignored(
    user: Any, make_session: Any, host: SessionHost
) -> None:
    """Worker mode: a new holder's first push is a full render under a higher lease term; after
    it, anything from the old holder (a lower term, whatever its epoch or seq) is dropped."""
    session = await sync_to_async(make_session)(user)
    communicator, _connected, _ = await _connect(session.pk, user)
    await communicator.receive_from(timeout=10)
    await host.wait_idle(str(session.pk))
    while not await communicator.receive_nothing(timeout=0.2):
        await communicator.receive_from(timeout=10)
    layer = get_channel_layer()
    group = f"session-{session.pk}"
    new = {"type": "session.push", "epoch": "new-holder", "term": 3, "seq": 1}
    await layer.group_send(group, {**new, "full": True, "html": "<p>new holder</p>"})
    assert "new holder" in await communicator.receive_from(timeout=10)
    old = {"type": "session.push", "epoch": "old-holder", "term": 2}
    await layer.group_send(group, {**old, "seq": 99, "full": True, "html": "<p>stale full</p>"})
    await layer.group_send(group, {**old, "seq": 100, "full": False, "html": "<p>stale patch</p>"})
    assert await communicator.receive_nothing(timeout=0.3)  # no frame, and no re-render either
    await layer.group_send(group, {**new, "seq": 2, "full": False, "html": "<p>next</p>"})
    assert "next" in await communicator.receive_from(timeout=10)
    await communicator.disconnect()


async def test_a_full_render_after_a_failed_resync_clears_the_notice(
    user: Any, make_session: Any, settings: Any
) -> None:
    """Worker mode while no worker answers (one being replaced): the page says why; the next
    holder's full render takes the notice away."""
    settings.STUDIO_HOST_MODE = "worker"
    settings.STUDIO_HOST_TIMEOUT = 0.3
    session = await sync_to_async(make_session)(user)
    communicator, _connected, _ = await _connect(session.pk, user)
    first = await communicator.receive_from(timeout=10)
    assert "No session host answered" in first and 'id="composer-error"' in first
    layer = get_channel_layer()
    push = {"type": "session.push", "epoch": "next", "term": 1, "seq": 1, "full": True, "html": "<p>whole</p>"}
    await layer.group_send(f"session-{session.pk}", push)
    frame = await communicator.receive_from(timeout=10)
    assert frame.startswith('<div id="composer-error" hx-swap-oob="true" class="composer-error" role="status"></div>')
    assert "<p>whole</p>" in frame
    await communicator.disconnect()


async def test_a_page_rendered_at_the_hosts_state_gets_no_second_render(
    user: Any, make_session: Any, host: SessionHost
) -> None:
    """W2: the page's socket says which state the page shows (its URL); when that is the host's
    state, the socket only says it listens (``#host-sync``) instead of rendering every region
    again; a page that is behind gets the full render."""
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    state = await host.state(sid)
    current = f"?epoch={state.epoch}&seq={state.seq}&term={state.term}"
    communicator, connected, _code = await _connect(sid, user, current)
    assert connected
    frame = await communicator.receive_from(timeout=10)
    assert frame.startswith('<span id="host-sync" hx-swap-oob="true"') and 'id="conversation"' not in frame
    await communicator.disconnect()
    behind = f"?epoch={state.epoch}&seq={state.seq - 1}&term={state.term}"
    communicator, connected, _code = await _connect(sid, user, behind)
    frame = await communicator.receive_from(timeout=10)
    assert 'id="conversation"' in frame and 'id="session-status"' in frame  # every region again
    await communicator.disconnect()
