"""W2/W6/W13: the composer's text prompt over the session's WebSocket (``studio.composer``).

The page sends a text prompt as one JSON frame on its already-open socket (what htmx's ws
extension sends for the ``ws-send`` composer) and gets ``#composer-error`` back out of band:
empty and marked accepted (or queued), or the same error the POST gives, naming the field. A
frame that is not a valid prompt changes nothing. The socket is Origin-checked and bound to one
session its user owns, which is what replaces the POST's CSRF check.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from studio.asgi import application
from studio.consumers import CLOSE_FORBIDDEN
from studio.host.session_host import SessionHost
from studio.models import Run, StudioSession
from tests.studio.test_consumers import _connect, _cookie_for, _receive_until

pytestmark = pytest.mark.django_db(transaction=True)

#: What htmx's ws extension adds to every frame: the form's CSRF token and its request headers.
_HTMX_EXTRAS = {
    "csrfmiddlewaretoken": "a-token-the-socket-ignores",
    "HEADERS": {"HX-Request": "true", "HX-Trigger": "composer", "HX-Target": "composer-error"},
}


_REPLY = '<div id="composer-error" hx-swap-oob="true"'


def _prompt_frame(prompt: str, **fields: Any) -> str:
    return json.dumps({"command": "prompt", "prompt": prompt, "agent": "build", **_HTMX_EXTRAS, **fields})


def _reply(frame: str) -> dict[str, str]:
    """The ``data-*`` marks and the error text of a ``#composer-error`` reply."""
    opening = re.match(re.escape(_REPLY) + r"[^>]*>", frame)
    assert opening is not None, frame[:200]
    marks = dict(re.findall(r'data-(\w+)="([^"]*)"', opening.group()))
    error = re.search(r'<div class="form-error" role="alert">(.*?)</div>', frame)
    return marks | {"error": error.group(1) if error else ""}


async def _opened(session: Any, user: Any) -> WebsocketCommunicator:
    communicator, connected, _code = await _connect(session.pk, user)
    assert connected
    await communicator.receive_from(timeout=10)  # the first full render
    return communicator


async def _reply_to(communicator: WebsocketCommunicator, frame: str | bytes) -> dict[str, str]:
    if isinstance(frame, bytes):
        await communicator.send_to(bytes_data=frame)
    else:
        await communicator.send_to(text_data=frame)
    frames = await _receive_until(communicator, lambda f: f.startswith(_REPLY) and "data-reply" in f)
    return _reply(frames[-1])


async def _nothing_ran(session_id: str, host: SessionHost) -> None:
    state = await host.state(session_id)
    assert state.transcript == [] and not state.running
    assert await Run.objects.filter(session_id=session_id).acount() == 0


async def test_a_text_prompt_over_the_socket_runs_its_turn(user: Any, make_session: Any, host: SessionHost) -> None:
    """W2/W13: the frame the composer sends is a prompt: the reply says accepted (empty
    ``#composer-error``), the turn streams on the same socket and its answer is in the store."""
    session = await sync_to_async(make_session)(user)
    communicator = await _opened(session, user)
    reply = await _reply_to(communicator, _prompt_frame("what files are here?"))
    assert reply == {"reply": "accepted", "error": ""}
    await _receive_until(communicator, lambda f: "pill-idle" in f and "README" in f and "live-turn" not in f)
    state = await host.state(str(session.pk))
    assert [m["role"] for m in state.transcript][:1] == ["user"]
    assert "what files are here?" in json.dumps(state.transcript[0])
    await communicator.disconnect()


async def test_a_prompt_while_the_agent_works_is_queued(user: Any, make_session: Any, gated_host: Any) -> None:
    """W13: while a turn runs, the next socket prompt is queued as a follow-up and says so."""
    host, gate, _server = gated_host
    session = await sync_to_async(make_session)(user)
    communicator = await _opened(session, user)
    assert (await _reply_to(communicator, _prompt_frame("HOLD and greet")))["reply"] == "accepted"
    await gate.entered.wait()
    assert (await _reply_to(communicator, _prompt_frame("and then this")))["reply"] == "queued"
    gate.release()
    await host.wait_idle(str(session.pk))
    await communicator.disconnect()


async def test_the_socket_refuses_a_bad_prompt_with_the_posts_words_naming_the_field(
    user: Any, make_session: Any, host: SessionHost
) -> None:
    """W13: an empty or over-long prompt, an unknown agent: the socket's reply names the field
    and says what the POST says, and nothing runs."""
    from studio.forms import MAX_PROMPT_CHARS

    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    client = Client(HTTP_HX_REQUEST="true")
    await sync_to_async(client.force_login)(user)
    communicator = await _opened(session, user)
    for fields, field in (
        ({"prompt": "   "}, "prompt"),
        ({"prompt": "x" * (MAX_PROMPT_CHARS + 1)}, "prompt"),
        ({"prompt": "hello", "agent": "chaos"}, "agent"),
    ):
        reply = await _reply_to(communicator, _prompt_frame(**{"agent": "build"} | fields))
        posted = await sync_to_async(client.post)(f"/sessions/{sid}/prompt/", {"agent": "build"} | fields)
        assert reply["reply"] == "refused" and reply["field"] == field and reply["error"]
        assert reply["error"] in posted.content.decode()
    await _nothing_ran(sid, host)
    await communicator.disconnect()


@pytest.mark.parametrize(
    ("frame", "field", "code"),
    [
        ("not json at all", "message", "malformed"),
        ('["prompt", "hello"]', "message", "malformed"),
        ('{"prompt": "hello"}', "command", "malformed"),
        ('{"command": "stop"}', "command", "unknown_command"),
        ('{"command": "prompt", "prompt": 42}', "prompt", "malformed"),
        ('{"command": "prompt", "prompt": "hi", "agent": {"plan": true}}', "agent", "malformed"),
        (b'{"command": "prompt", "prompt": "hi"}', "message", "malformed"),
        ("oversized", "message", "too_large"),
        ("[" * 200_000, "message", "malformed"),  # deeper than the JSON parser recurses
    ],
)
async def test_a_malformed_or_oversized_frame_gets_a_typed_error_and_changes_nothing(
    user: Any, make_session: Any, host: SessionHost, frame: str | bytes, field: str, code: str
) -> None:
    """W6: a frame that is not JSON (or nested too deep to parse), not an object, names no (or
    another) command, carries a non-text field, is binary, or is larger than
    ``MAX_SOCKET_FRAME_CHARS`` gets a typed error
    (its field and code) and no turn; the socket stays usable."""
    from studio.composer import MAX_SOCKET_FRAME_CHARS

    if frame == "oversized":
        frame = _prompt_frame("x" * MAX_SOCKET_FRAME_CHARS)
    session = await sync_to_async(make_session)(user)
    communicator = await _opened(session, user)
    reply = await _reply_to(communicator, frame)
    assert (reply["reply"], reply["field"], reply["code"]) == ("refused", field, code) and reply["error"]
    await _nothing_ran(str(session.pk), host)
    assert (await StudioSession.objects.aget(pk=session.pk)).mode == "build"
    assert (await _reply_to(communicator, _prompt_frame("still listening?")))["reply"] == "accepted"
    await host.wait_idle(str(session.pk))
    await communicator.disconnect()


@pytest.mark.parametrize("origin", [b"https://evil.example", None])
async def test_a_cross_origin_socket_cannot_send_a_prompt(
    user: Any, make_session: Any, host: SessionHost, origin: bytes | None
) -> None:
    """W6: another site's page (or a client with no Origin) opening the socket with the
    person's cookie is refused at the handshake, so its prompt reaches nobody: the Origin
    check is what stands in for CSRF on the socket."""
    session = await sync_to_async(make_session)(user)
    cookie = (await sync_to_async(_cookie_for)(user)).encode()
    headers = [(b"cookie", cookie), (b"host", b"127.0.0.1")] + ([(b"origin", origin)] if origin else [])
    communicator = WebsocketCommunicator(application, f"/ws/sessions/{session.pk}/", headers=headers)
    connected, _code = await communicator.connect(timeout=10)
    assert not connected
    await communicator.send_to(text_data=_prompt_frame("exfiltrate the workspace"))
    await communicator.wait(timeout=10)  # the application has ended: no consumer ever read the frame
    await _nothing_ran(str(session.pk), host)


async def test_a_socket_prompts_only_its_own_session(
    user: Any, other_user: Any, make_session: Any, host: SessionHost
) -> None:
    """W6: someone else's session's socket is refused (4403); a frame on one's own socket that
    names another session still prompts only the socket's own session."""
    alices = await sync_to_async(make_session)(user)
    mallorys = await sync_to_async(make_session)(other_user)
    _communicator, connected, code = await _connect(alices.pk, other_user)
    assert not connected and code == CLOSE_FORBIDDEN
    communicator = await _opened(mallorys, other_user)
    frame = _prompt_frame("say hello", session_id=str(alices.pk), session=str(alices.pk))
    assert (await _reply_to(communicator, frame))["reply"] == "accepted"
    await host.wait_idle(str(mallorys.pk))
    assert "say hello" in json.dumps((await host.state(str(mallorys.pk))).transcript)
    await _nothing_ran(str(alices.pk), host)
    await communicator.disconnect()


async def test_the_agent_chosen_in_the_composer_becomes_the_sessions_default(
    user: Any, make_session: Any, host: SessionHost
) -> None:
    """W13: as with the POST, the build/plan toggle of a socket prompt is remembered."""
    session = await sync_to_async(make_session)(user)
    communicator = await _opened(session, user)
    assert (await _reply_to(communicator, _prompt_frame("plan a todo app", agent="plan")))["reply"] == "accepted"
    assert (await StudioSession.objects.aget(pk=session.pk)).mode == "plan"
    await communicator.disconnect()


async def test_the_default_follows_the_last_prompt_when_another_tab_changed_it(
    user: Any, make_session: Any, host: SessionHost
) -> None:
    """W13: two tabs on one session whose default is plan. The second tab's build prompt makes
    build the default; the first tab's socket (connected while the default was plan) then sends
    a plan prompt, and plan is the default again: the host records each prompt's build/plan
    choice with its run, not a socket's memory of the row from when it connected."""
    session = await sync_to_async(make_session)(user)
    await StudioSession.objects.filter(pk=session.pk).aupdate(mode="plan")
    first = await _opened(session, user)
    second = await _opened(session, user)
    assert (await _reply_to(second, _prompt_frame("say hello", agent="build")))["reply"] == "accepted"
    await host.wait_idle(str(session.pk))
    assert (await StudioSession.objects.aget(pk=session.pk)).mode == "build"
    reply = await _reply_to(first, _prompt_frame("plan a todo app", agent="plan"))
    assert reply["reply"] == "accepted", reply
    assert (await StudioSession.objects.aget(pk=session.pk)).mode == "plan"
    await first.disconnect()
    await second.disconnect()
