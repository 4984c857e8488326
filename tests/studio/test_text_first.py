"""Text first: a turn's streamed text never waits for Studio's rows (issue 25, the p95 tail).

A push that reads Studio's rows (the controls at a turn's start, the settled conversation at its
end, the Usage tab) renders on Django's one database thread, where every session's writes and
renders queue. The live turn's work — its opening, its text, a tool's progress, the ring — is
rendered on the event loop from the host's memory. These tests hold that thread (a render or a
write waits on a ``threading.Event``) and check that the text still reaches the page, that the
pushes stay in order (one ``seq`` after another, the turn's end after its last tokens), and that
once the thread is let go the page the pushes built is the page a reload renders (W1, W2, W3).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from django.test import AsyncClient
from django.urls import reverse

from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import Step, Stop, Text, Usage
from studio import pages, services
from studio.host.session_host import SessionHost, set_session_host
from tests.studio.fakes import scripted_session
from tests.studio.oob import Node, apply, parse

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = ["Hello", " there,", " how can", " I help?"]


def _script(request: RecordedRequest) -> list[Step]:
    return [Text("", chunks=ANSWER), Usage(input=20, output=6), Stop("stop")]


@pytest.fixture
async def server() -> AsyncIterator[FakeProviderServer]:
    fake = FakeProviderServer(responder=_script).start_in_thread()
    yield fake
    fake.stop_in_thread()


class Hold:
    """Makes a function wait, when Django's database thread calls it (never on the event loop),
    until the test lets it go: ``entered`` says a call is waiting."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        loop_thread = threading.get_ident()

        def held(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != loop_thread:
                self.entered.set()
                assert self.released.wait(30), "the test never let the database thread go"
            return fn(*args, **kwargs)

        return held


class Watch:
    """The pushes of one view, read off the channel layer group its pages listen to, applied to
    the page its GET rendered (as htmx swaps them)."""

    def __init__(self, host: SessionHost, sid: str, page: Node, channel: str) -> None:
        self.host, self.sid, self.page, self.channel = host, sid, page, channel
        self.pushes: list[dict[str, Any]] = []

    @classmethod
    async def open(cls, host: SessionHost, sid: str, client: AsyncClient) -> Watch:
        page = parse((await client.get(reverse("studio:session_detail", args=[sid]))).content.decode())
        await host.wait_pushed(sid)  # the page shows the host's state; nothing is being pushed
        channel = await host.layer.new_channel()
        await host.layer.group_add(f"session-{sid}", channel)
        return cls(host, sid, page, channel)

    async def until(self, condition: Callable[[], bool], bound: float = 10) -> None:
        """Apply pushes until ``condition`` holds for the page (a bound, not a pause)."""
        while not condition():
            push = await asyncio.wait_for(self.host.layer.receive(self.channel), bound)
            self.pushes.append(push)
            apply(self.page, push["html"])

    async def all_sent(self) -> None:
        """Apply every push the host has sent the view."""
        _epoch, seq, _term = await self.host.position(self.sid)
        await self.until(lambda: bool(self.pushes) and int(self.pushes[-1]["seq"]) >= seq)


def _conversation_text(page: Node) -> str:
    conversation = page.find("conversation")
    assert conversation is not None

    def text(node: Node) -> str:
        return "".join(
            c if isinstance(c, str) else text(c) for c in node.children if getattr(c, "tag", "") != "template"
        )

    return re.sub(r"\s+", " ", text(conversation))


def _main(page: Node) -> str:
    from tests.studio.test_page_pushes import _main as main_of

    return main_of(page)


async def _fresh(client: AsyncClient, sid: str) -> str:
    return _main(parse((await client.get(reverse("studio:session_detail", args=[sid]))).content.decode()))


def _in_order(pushes: list[dict[str, Any]]) -> None:
    """One seq after another (a watcher re-renders the whole page on a gap), none full."""
    seqs = [int(p["seq"]) for p in pushes]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
    assert not any(p["full"] for p in pushes)


async def test_a_turns_text_reaches_the_page_while_the_database_thread_is_held(
    user: Any, host: SessionHost, server: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """W1 (issue 25: text never queues behind rows): the turn's first row-reading render (its
    controls) holds Django's database thread, and with it every later write of the turn (its
    usage, its end); the turn's opening and its whole answer still reach the page, as patches
    rendered on the event loop. Let go, the remaining pushes follow in order and the page
    they built is the page a reload renders."""
    session, client = await scripted_session(user, server)
    sid = str(session.pk)
    watch = await Watch.open(host, sid, client)
    hold = Hold()
    monkeypatch.setattr(pages, "render_regions", hold.wrap(pages.render_regions))
    prompt = asyncio.create_task(host.prompt(sid, prompt="hello", agent="build"))
    try:
        await asyncio.to_thread(hold.entered.wait, 10)
        assert hold.entered.is_set(), "no render read rows at the turn's start"
        await watch.until(lambda: "Hello there, how can I help?" in _conversation_text(watch.page))
        assert not any('id="conversation"' in p["html"] for p in watch.pushes)  # the end waits
    finally:
        hold.released.set()
    await prompt
    await host.wait_idle(sid)
    await watch.all_sent()
    _in_order(watch.pushes)
    patched, expected = _main(watch.page), await _fresh(client, sid)
    assert patched == expected


async def test_a_turns_last_tokens_are_pushed_before_its_end_is_recorded(
    user: Any, server: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """W1 (issue 25: a turn's end goes after its text): Studio's row of the turn's end is held,
    and the flush window is far longer than the turn, so only the host's rule can bring the last
    tokens out — before a turn's end is folded, the live turn's unsent text is pushed; the end
    (the settled conversation, rendered from that row) follows it, one seq later."""
    hold = Hold()
    monkeypatch.setattr(services, "run_end", hold.wrap(services.run_end))
    host = SessionHost(flush_interval=30.0)
    set_session_host(host)
    try:
        session, client = await scripted_session(user, server)
        sid = str(session.pk)
        watch = await Watch.open(host, sid, client)
        try:
            await host.prompt(sid, prompt="hello", agent="build")
            await watch.until(lambda: "Hello there, how can I help?" in _conversation_text(watch.page))
            text_pushes = len(watch.pushes)
            assert not any('id="conversation"' in p["html"] for p in watch.pushes)  # the end is not out
        finally:
            hold.released.set()
        await host.wait_idle(sid)
        await watch.all_sent()
        _in_order(watch.pushes)
        assert any('id="conversation"' in p["html"] for p in watch.pushes[text_pushes:])
        patched, expected = _main(watch.page), await _fresh(client, sid)
        assert patched == expected
    finally:
        await host.close()
        set_session_host(None)
