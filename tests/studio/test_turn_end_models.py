"""The models a turn's pushes offer ("Retry on model", the model form) come from the host's
catalog, per version of the registered models: a turn's end decrypts no key that version
already gave, and a key changed or a model enabled in the admin shows at the next turn's end
(SPEC W10, M1; issue 25: contexts that change only with settings are not rebuilt per turn)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agentcore.testing.fake_server import FakeProviderServer
from studio.host.session_host import SessionHost
from tests.studio.fakes import FAIL, responder, scripted_model, scripted_session
from tests.studio.test_model_catalog import KeyReads

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server() -> Any:
    fake = FakeProviderServer(responder=responder).start_in_thread()
    yield fake
    fake.stop_in_thread()


class Pushes:
    """Every push of one view, read off the channel layer group its pages listen to."""

    def __init__(self, host: SessionHost, sid: str, channel: str) -> None:
        self.host, self.sid, self.channel = host, sid, channel

    @classmethod
    async def listen(cls, host: SessionHost, sid: str) -> Pushes:
        await host.state(sid)
        await host.wait_pushed(sid)
        channel = await host.layer.new_channel()
        await host.layer.group_add(f"session-{sid}", channel)
        return cls(host, sid, channel)

    async def turn(self, prompt: str) -> str:
        """Run a turn; every push it sent, as one string."""
        _epoch, before, _term = await self.host.position(self.sid)
        await self.host.prompt(self.sid, prompt=prompt, agent="build")
        await self.host.wait_idle(self.sid)
        _epoch, after, _term = await self.host.position(self.sid)
        return "".join([(await self.host.layer.receive(self.channel))["html"] for _ in range(after - before)])


def _retry_menu(html: str) -> list[str]:
    """The models the failed turns' "Retry on model" menus offer (none: one model, no menu)."""
    assert 'id="conversation"' in html, "the turn's end was not pushed"
    menus = re.findall(r'<select name="model" aria-label="Retry on model">(.*?)</select>', html, re.S)
    offered = {tuple(re.findall(r"<option [^>]*>([^<]*)</option>", menu)) for menu in menus}
    assert len(offered) <= 1, offered  # every turn offers the same models
    return list(offered.pop()) if offered else []


async def test_a_second_sessions_turn_on_the_same_models_decrypts_no_key(
    user: Any, host: SessionHost, server: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's catalog built the menu for this version of the registered models at the
    first session's turn; the second session's turn reads no key again."""
    alpha = await scripted_model(server, name="Alpha")
    await scripted_model(server, name="Bravo", model_id="m2")
    first, _client = await scripted_session(user, server, model=alpha)
    second, _client = await scripted_session(user, server, model=alpha)
    one = await Pushes.listen(host, str(first.pk))
    two = await Pushes.listen(host, str(second.pk))
    assert _retry_menu(await one.turn(f"{FAIL} hello")) == ["Alpha", "Bravo"]
    reads = KeyReads(monkeypatch)
    assert _retry_menu(await two.turn(f"{FAIL} hello")) == ["Alpha", "Bravo"]
    assert reads.calls == 0


async def test_a_key_changed_or_a_model_enabled_shows_at_the_next_turns_end(
    user: Any, host: SessionHost, server: FakeProviderServer
) -> None:
    """A model whose key no longer matches leaves the menu, a model enabled with the same key
    joins it — at the next turn, with the page left open (no reload)."""
    alpha = await scripted_model(server, name="Alpha")
    bravo = await scripted_model(server, name="Bravo", model_id="m2")
    charlie = await scripted_model(server, name="Charlie", model_id="m3", enabled=False)
    session, _client = await scripted_session(user, server, model=alpha)
    pushes = await Pushes.listen(host, str(session.pk))
    assert _retry_menu(await pushes.turn(f"{FAIL} hello")) == ["Alpha", "Bravo"]
    bravo.api_key = "another key"
    await sync_to_async(bravo.save)()
    assert _retry_menu(await pushes.turn(f"{FAIL} hello again")) == []  # one model left: no menu options
    charlie.enabled = True
    await sync_to_async(charlie.save)()
    assert _retry_menu(await pushes.turn(f"{FAIL} and again")) == ["Alpha", "Charlie"]


async def test_a_sessions_first_turn_decrypts_no_key_its_opening_read(
    user: Any, host: SessionHost, server: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host keeps one catalog for its openings and its pushes: the models the opening
    read for this version (its own key, the ones it may switch to) are what the first turn's
    menu offers, without reading a key again."""
    alpha = await scripted_model(server, name="Alpha")
    await scripted_model(server, name="Bravo", model_id="m2")
    session, _client = await scripted_session(user, server, model=alpha)
    pushes = await Pushes.listen(host, str(session.pk))
    reads = KeyReads(monkeypatch)
    assert _retry_menu(await pushes.turn(f"{FAIL} hello")) == ["Alpha", "Bravo"]
    assert reads.calls == 0
