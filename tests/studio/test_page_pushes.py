"""Zulip's verify_action for the whole session page: pushes applied to a page equal a fresh page.

A page is opened (its GET, then its socket at the state the page shows), turns run, and every
frame the socket sends is applied to the page the way htmx swaps out-of-band fragments
(``tests/studio/oob.py``). After each turn, the patched page must be the page a fresh GET renders
from the store at the same state — whatever the pushes skipped, merged or rendered only in part
(W1, W2, W3; issue 25: pushes render only what changed).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient, Client
from django.urls import reverse

from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import Step, Stop, Text, ToolCall, Usage
from studio.asgi import application
from studio.host.session_host import SessionHost
from tests.studio.fakes import gated_host, scripted_session
from tests.studio.oob import Node, apply, parse

pytestmark = pytest.mark.django_db(transaction=True)


def _script(request: RecordedRequest) -> list[Step]:
    """By the newest prompt: plain text, a tool call then text, or a long Markdown answer."""
    items = request.json.get("input") or []
    prompts = [i for i in items if i.get("role") == "user"]
    last = str(prompts[-1].get("content")) if prompts else ""
    since = items[items.index(prompts[-1]) :] if prompts else []
    tool_done = any(i.get("type") == "function_call_output" for i in since)
    if "files" in last and not tool_done:
        return [ToolCall("ls", {}, id="call_ls"), Usage(input=40, output=8), Stop("tool_use")]
    if "files" in last:
        return [Text("Here are the files: README.md."), Usage(input=60, output=9), Stop("stop")]
    if "long" in last:
        chunks = [f"Paragraph {i} with **bold** and `code` " * 3 + "\n\n" for i in range(12)]
        return [Text("", chunks=chunks), Usage(input=30, output=400), Stop("stop")]
    return [Text("", chunks=["Hello", " there,", " how can", " I help?"]), Usage(input=20, output=6), Stop("stop")]


@pytest.fixture
async def server() -> AsyncIterator[FakeProviderServer]:
    fake = FakeProviderServer(responder=_script).start_in_thread()
    yield fake
    fake.stop_in_thread()


def _gated_script(request: RecordedRequest) -> list[Step]:
    """Streams Markdown (closed blocks and a long open paragraph), then calls the ``gate`` tool,
    which holds the turn live until the test opens it; then a short answer."""
    items = request.json.get("input") or []
    if not any(i.get("type") == "function_call_output" for i in items):
        text = "## Plan\n\n- one\n- two\n\n" + "A long paragraph with `code` and **bold** words " * 12
        return [
            Text("", chunks=[text[i : i + 23] for i in range(0, len(text), 23)]),
            ToolCall("gate", {}, id="call_gate"),
            Usage(input=30, output=120),
            Stop("tool_use"),
        ]
    return [Text("Through the gate."), Usage(input=50, output=5), Stop("stop")]


def _cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


_VOLATILE = (
    (re.compile(r'name="csrfmiddlewaretoken" value="[^"]*"'), 'name="csrfmiddlewaretoken" value=""'),
    (re.compile(r'ws-connect="[^"]*"'), 'ws-connect=""'),
    (re.compile(r' data-seq="\d+"'), ""),
    # The Records tab reads the store's size once per settings version, not on every push.
    (re.compile(r"<dt>Size</dt>\s*<dd>[^<]*</dd>"), "<dt>Size</dt><dd></dd>"),
)


def _main(page: Node) -> str:
    """The page's ``<main>`` as HTML, minus what differs between two renders of one state (CSRF
    tokens are masked afresh per render; the socket URL and sync mark name the state shown; the
    store's size on the Records tab is read once per settings version)."""
    main = next(n for n in _walk(page) if n.tag == "main")
    html = main.html()
    for pattern, replacement in _VOLATILE:
        html = pattern.sub(replacement, html)
    return re.sub(r">\s+<", "><", html).strip()


def _diff(patched: str, fresh: str) -> str:
    import difflib

    lines = difflib.unified_diff(fresh.split("><"), patched.split("><"), "fresh", "patched", lineterm="", n=2)
    return "\n".join(lines)


def _walk(node: Node) -> Any:
    yield node
    for child in node.children:
        if isinstance(child, Node):
            yield from _walk(child)


@dataclass
class PushedPage:
    """A page as a browser holds it: its first render, then every push its socket received
    applied to it (``tests/studio/oob.py``), to compare with a fresh render of the same page."""

    host: SessionHost
    sid: str
    client: AsyncClient
    page: Node
    socket: WebsocketCommunicator
    shown: int = 0

    @classmethod
    async def open(cls, host: SessionHost, user: Any, session: Any, client: AsyncClient) -> PushedPage:
        sid = str(session.pk)
        first = (await client.get(reverse("studio:session_detail", args=[sid]))).content.decode()
        query = re.search(r'ws-connect="[^"?]*(\?[^"]*)"', first)
        assert query is not None
        cookie = (await sync_to_async(_cookie)(user)).encode()
        headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", cookie)]
        path = f"/ws/sessions/{sid}/{query.group(1).replace('&amp;', '&')}"
        socket = WebsocketCommunicator(application, path, headers=headers)
        assert (await socket.connect(timeout=10))[0]
        opened = cls(host, sid, client, parse(first), socket)
        apply(opened.page, await socket.receive_from(timeout=10))
        _epoch, opened.shown, _term = await host.position(sid)
        return opened

    async def catch_up(self) -> None:
        """Apply every push the host sent so far (one frame per push)."""
        _epoch, seq, _term = await self.host.position(self.sid)
        for _ in range(seq - self.shown):
            apply(self.page, await self.socket.receive_from(timeout=10))
        self.shown = seq

    async def fresh(self) -> str:
        """A reload's ``<main>``."""
        url = reverse("studio:session_detail", args=[self.sid])
        return _main(parse((await self.client.get(url)).content.decode()))


async def test_pushes_applied_to_the_page_equal_a_fresh_page_after_every_turn(
    user: Any, tmp_path: Any, host: SessionHost, server: FakeProviderServer
) -> None:
    """W1/W2/W3: text, a tool call, a long Markdown answer and a queued follow-up: after each
    turn the page the pushes built is the page a reload shows."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "README.md").write_text("# hi\n")
    session, client = await scripted_session(user, server, workdir=str(workdir), permission_policy="workspace")
    sid = str(session.pk)
    pushed = await PushedPage.open(host, user, session, client)

    async def settle() -> None:
        """Wait until the host is idle, then apply every push it sent."""
        await host.wait_idle(sid)
        await pushed.catch_up()
        patched, expected = _main(pushed.page), await pushed.fresh()
        assert patched == expected, _diff(patched, expected)

    await host.prompt(sid, prompt="hello", agent="build")
    await settle()
    await host.prompt(sid, prompt="which files are here?", agent="build")
    await settle()
    await host.prompt(sid, prompt="a long answer please", agent="build")
    await host.prompt(sid, prompt="hello again", agent="build")  # queued behind the long one
    await settle()
    await pushed.socket.disconnect()


async def test_a_live_turn_patched_by_pushes_equals_a_fresh_page_while_it_runs(user: Any, tmp_path: Any) -> None:
    """W1/W2: mid-turn — streamed Markdown and a tool call still running — the page the pushes
    built is the page a reload renders from the host's state (the live patches are not hidden
    by the turn's final render)."""
    async with gated_host(_gated_script) as (host, gate, server):
        session, client = await scripted_session(user, server)
        sid = str(session.pk)
        pushed = await PushedPage.open(host, user, session, client)
        await host.prompt(sid, prompt="stream, then wait at the gate", agent="build")
        await asyncio.wait_for(gate.entered.wait(), 10)
        await host.wait_pushed(sid)
        await pushed.catch_up()
        patched, expected = _main(pushed.page), await pushed.fresh()
        assert "live-turn" in expected and "A long paragraph" in expected
        assert patched == expected, _diff(patched, expected)
        gate.release()
        await host.wait_idle(sid)
        await pushed.catch_up()
        patched, expected = _main(pushed.page), await pushed.fresh()
        assert patched == expected, _diff(patched, expected)
        await pushed.socket.disconnect()


async def test_a_turns_pushes_leave_out_the_controls_the_page_already_shows(
    user: Any, tmp_path: Any, host: SessionHost, server: FakeProviderServer
) -> None:
    """W1/W2 (issue 25: pushes render only what changed): a second turn's pushes change the
    status pill and the run buttons, not the title, the model badge or the empty queue — those
    are not sent again; the page they build is still the page a reload shows. A page load drops
    what the host remembers it sent: the next push sends every control again."""
    session, client = await scripted_session(user, server)
    sid = str(session.pk)
    pushed = await PushedPage.open(host, user, session, client)

    async def frames_of_a_turn(prompt: str) -> list[str]:
        await host.prompt(sid, prompt=prompt, agent="build")
        await host.wait_idle(sid)
        _epoch, seq, _term = await host.position(sid)
        frames = [await pushed.socket.receive_from(timeout=10) for _ in range(seq - pushed.shown)]
        for frame in frames:
            apply(pushed.page, frame)
        pushed.shown = seq
        return frames

    first = "".join(await frames_of_a_turn("hello"))
    assert 'id="session-title"' in first  # the first prompt names the session
    second = "".join(await frames_of_a_turn("hello again"))
    assert 'id="session-status"' in second and 'id="run-controls"' in second
    for unchanged in ('id="session-title"', 'id="session-model"', 'id="queue"'):
        assert unchanged not in second, unchanged
    patched, expected = _main(pushed.page), await pushed.fresh()  # the reload drops the memory
    assert patched == expected, _diff(patched, expected)
    third = "".join(await frames_of_a_turn("and once more"))
    assert 'id="session-title"' in third and 'id="session-model"' in third and 'id="queue"' in third
    patched, expected = _main(pushed.page), await pushed.fresh()
    assert patched == expected, _diff(patched, expected)
    await pushed.socket.disconnect()
