"""Issue #27 through the session host and the views: images, Compact now, Retry, Regenerate,
Edit and resend, a missed steer, web search per session, the endpoint check (W13, W14, I1,
C3, P2, S2).

Real runtimes in session mode on the scripted provider server (the demo's brain, ``HOLD`` and
``FAIL_WITH_400`` from ``fakes``, plus ``STREAM_THEN_HOLD``: text, then a wait until the test
lets it finish without a tool call). The server records every request, so a test checks what
the model was sent.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.urls import reverse

from agentcore.demo import _conversation, _usage
from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import Hang, Step, Stop, Text
from studio import pages
from studio.models import RegisteredModel, Run, SessionKind, StudioSession
from tests.studio import fakes

pytestmark = pytest.mark.django_db(transaction=True)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture
async def chat_host() -> AsyncIterator[tuple[Any, FakeProviderServer, threading.Event]]:
    """A session host on the scripted server: ``(host, server, hold)``; ``hold`` lets a
    ``STREAM_THEN_HOLD`` turn finish."""
    from studio.host.session_host import SessionHost, set_session_host

    hold = threading.Event()

    def responder(request: RecordedRequest) -> list[Step]:
        user, _calls, _outputs = _conversation(request.json)
        if "STREAM_THEN_HOLD" in user:
            return [Text("part one. "), Hang(event=hold), Text("part two."), _usage(request.json, "x"), Stop("stop")]
        return fakes.responder(request)

    server = FakeProviderServer(responder=responder).start_in_thread()
    host = SessionHost(runtime_factory=fakes.gated_factory(server, fakes.Gate()), flush_interval=0.01)
    set_session_host(host)
    yield host, server, hold
    hold.set()
    await host.close()
    set_session_host(None)
    server.stop_in_thread()


async def _client(user: Any) -> AsyncClient:
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    return client


def _htmx() -> dict[str, str]:
    return {"HX-Request": "true"}


async def _page(session: StudioSession, host: Any) -> dict[str, Any]:
    fresh = await StudioSession.objects.select_related("registered_model", "owner", "root").aget(pk=session.pk)
    return await sync_to_async(pages.session_page_context)(fresh, await host.state(str(session.pk)))


def _user_texts(transcript: list[dict[str, Any]]) -> list[str]:
    return [
        " ".join(c.get("text", "") for c in m["content"] if c["type"] == "text")
        for m in transcript
        if m["role"] == "user" and not m.get("synthetic")
    ]


async def test_a_prompt_of_images_alone_is_sent_kept_and_served_from_the_store(
    user: Any, other_user: Any, make_session: Any, chat_host: Any
) -> None:
    """I1/W13: an image-only message is a turn; the model gets the image; the page shows it from
    the store (after a reload too), to its owner only."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    host, server, _hold = chat_host
    session = await sync_to_async(make_session)(user)
    client = await _client(user)
    image = SimpleUploadedFile("photo.png", PNG, content_type="image/png")
    response = await client.post(
        reverse("studio:session_prompt", args=[session.pk]), {"prompt": "", "images": image}, headers=_htmx()
    )
    assert response.content == b"", response.content
    await host.wait_idle(str(session.pk))
    assert "input_image" in json.dumps(server.requests[-1].json), "the model was sent the image"
    (turn,) = (await _page(session, host))["turns"]
    (ref,) = turn.images
    url = reverse("studio:session_image", args=[session.pk]) + f"?entry={ref.entry_id}&n=0"
    served = await client.get(url)
    assert served.status_code == 200 and served["Content-Type"] == "image/png" and served.content == PNG
    assert "immutable" in served["Cache-Control"]
    assert (await client.get(url.replace("n=0", "n=1"))).status_code == 404
    stranger = await _client(other_user)
    assert (await stranger.get(url)).status_code == 404
    page = (await client.get(reverse("studio:session_detail", args=[session.pk]))).content.decode()
    assert f"?entry={ref.entry_id}&amp;n=0" in page and 'alt="Image 1 of your message"' in page


async def test_compact_now_summarizes_the_whole_context_with_the_persons_instructions(
    user: Any, make_session: Any, chat_host: Any
) -> None:
    """C3: "Compact now" runs the session's ``compact`` command with the instructions; the
    summary replaces the context, shows as the conversation's divider, and the ring shrinks."""
    host, server, _hold = chat_host
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    for prompt in ("What files are here? Read the README.", "Show me a Markdown sample with a table."):
        await host.prompt(sid, prompt=prompt)
        await host.wait_idle(sid)
    before = (await host.state(sid)).context_usage
    client = await _client(user)
    response = await client.post(
        reverse("studio:session_compact", args=[session.pk]),
        {"instructions": "keep the README's title"},
        headers=_htmx(),
    )
    assert response.content == b""
    await host.wait_quiet(sid)
    await host.wait_idle(sid)
    summaries = [r for r in server.requests if "keep the README's title" in json.dumps(r.json)]
    assert len(summaries) == 1, "one summary request, carrying the instructions"
    state = await host.state(sid)
    assert state.transcript[0].get("synthetic") and len(state.transcript) == 1
    context = await _page(session, host)
    assert context["turns"][0].blocks[0].kind == "compaction" and context["turns"][0].blocks[0].text
    estimate = state.context()["context_usage"]  # the runtime's estimate of the compacted context
    assert state.context_usage == estimate and estimate != before, "the ring follows the compaction"


async def test_retry_and_regenerate_send_the_prompt_again_as_a_new_request_on_a_chosen_model(
    user: Any, make_session: Any, chat_host: Any
) -> None:
    """W13/W14: a failed turn offers Retry (a new request with the same prompt; optionally on
    another of the session's models), the last answer Regenerate (the same, on the same model)."""
    host, server, _hold = chat_host
    shared = {"provider": "custom", "base_url": server.base_url, "api_kind": "openai-responses", "api_key": "k"}
    alpha = await RegisteredModel.objects.acreate(name="Alpha", model_id="alpha-1", **shared)
    beta = await RegisteredModel.objects.acreate(name="Beta", model_id="beta-2", **shared)
    session = await sync_to_async(make_session)(user, registered_model=alpha)
    sid = str(session.pk)
    await host.prompt(sid, prompt="FAIL_WITH_400 please")
    await host.wait_idle(sid)
    (failed,) = (await _page(session, host))["turns"]
    assert failed.notice["level"] == "error" and failed.prompt_entry
    client = await _client(user)
    url = reverse("studio:session_resend", args=[session.pk])
    response = await client.post(url, {"entry_id": failed.prompt_entry, "model": beta.pk}, headers=_htmx())
    assert response.content == b""
    await host.wait_idle(sid)
    assert server.requests[-1].json["model"] == "beta-2" and "FAIL_WITH_400 please" in json.dumps(
        server.requests[-1].json
    )
    prompts = [r.prompt async for r in Run.objects.filter(session=session).order_by("id")]
    assert prompts == ["FAIL_WITH_400 please"] * 2
    await host.prompt(sid, prompt="What files are here?")
    await host.wait_idle(sid)
    last = (await _page(session, host))["turns"][-1]
    await client.post(url, {"entry_id": last.prompt_entry}, headers=_htmx())
    await host.wait_idle(sid)
    assert _user_texts((await host.state(sid)).transcript)[-2:] == ["What files are here?"] * 2
    assert server.requests[-1].json["model"] == "beta-2", "regenerate keeps the model in use"
    refused = await client.post(url, {"entry_id": "no-such-entry"}, headers=_htmx())
    assert "no longer in this conversation" in refused.content.decode()


async def test_edit_and_resend_forks_from_before_the_prompt_and_the_first_one_opens_a_new_session(
    user: Any, make_session: Any, chat_host: Any
) -> None:
    """W13: editing a past prompt runs the new text in a fork from the message before it (the
    conversation itself stays as it was); the first prompt has nothing before it, so its edit
    opens a new session with the same settings."""
    host, _server, _hold = chat_host
    session = await sync_to_async(make_session)(user, title="Garden")
    sid = str(session.pk)
    for prompt in ("remember the tulips", "what did I say?"):
        await host.prompt(sid, prompt=prompt)
        await host.wait_idle(sid)
    first, second = (await _page(session, host))["turns"]
    client = await _client(user)
    url = reverse("studio:session_edit", args=[session.pk])
    response = await client.post(
        url, {"entry_id": second.prompt_entry, "prompt": "what did I say, again?"}, headers=_htmx()
    )
    fork = await StudioSession.objects.aget(root=session, kind=SessionKind.FORK)
    assert response["HX-Redirect"] == reverse("studio:session_detail", args=[fork.pk])
    await host.wait_idle(str(fork.pk))
    assert _user_texts((await host.state(str(fork.pk))).transcript) == ["remember the tulips", "what did I say, again?"]
    assert _user_texts((await host.state(sid)).transcript) == ["remember the tulips", "what did I say?"]
    response = await client.post(
        url, {"entry_id": first.prompt_entry, "prompt": "forget the tulips", "first": "on"}, headers=_htmx()
    )
    copy = await StudioSession.objects.exclude(pk=session.pk).aget(kind=SessionKind.MAIN, title="Edit of Garden")
    assert response["HX-Redirect"] == reverse("studio:session_detail", args=[copy.pk])
    assert (copy.workdir, copy.registered_model_id) == (session.workdir, session.registered_model_id)
    await host.wait_idle(str(copy.pk))
    assert _user_texts((await host.state(str(copy.pk))).transcript) == ["forget the tulips"]


async def test_a_steer_the_turn_ended_before_says_it_was_sent_as_the_next_message(
    user: Any, make_session: Any, chat_host: Any
) -> None:
    """S2/W14: the chip said "steer · next tool call", but the turn ended without one: the
    steer's own turn says so (instead of silently being a plain new message)."""
    host, _server, hold = chat_host
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    await host.prompt(sid, prompt="STREAM_THEN_HOLD tell me")
    await host.wait_live(sid)
    queued = await host.prompt(sid, prompt="and add a moral", mode="steer")
    assert queued["status"] == "queued"
    hold.set()
    await host.wait_idle(sid)
    turns = (await _page(session, host))["turns"]
    steered = next(t for t in turns if t.prompt == "and add a moral")
    assert steered.notice is not None and steered.notice["title"] == "Sent as the next message"
    assert "ended before a tool call" in steered.notice["text"]
    assert turns[0].notice is None


async def test_web_search_per_session_and_where_the_model_cannot_search(
    user: Any, make_session: Any, chat_host: Any
) -> None:
    """P2/W13: the composer offers web search auto / on / off where the model's API kind has a
    search tool (the demo: auto means on); ``off`` reaches the next request; a model on Chat
    Completions gets the runtime's reason instead, and ``on`` is refused with it."""
    host, server, _hold = chat_host
    session = await sync_to_async(make_session)(user)
    client = await _client(user)
    page = (await client.get(reverse("studio:session_detail", args=[session.pk]))).content.decode()
    assert 'id="config-web-search"' in page and '<option value="auto" selected>auto (on)</option>' in page
    url = reverse("studio:session_configure", args=[session.pk])
    assert (await client.post(url, {"expected_version": "0", "web_search": "off"}, headers=_htmx())).content == b""
    await host.prompt(str(session.pk), prompt="Search the web for tulips.")
    await host.wait_idle(str(session.pk))
    assert not any(t.get("type") == "web_search" for t in server.requests[-1].json.get("tools") or [])
    assert (await host.state(str(session.pk))).context()["config"]["web_search"] == "off"
    completions = await RegisteredModel.objects.acreate(
        name="Chat",
        provider="custom",
        model_id="c",
        base_url=server.base_url,
        api_kind="openai-completions",
        api_key="k",
    )
    chat = await sync_to_async(make_session)(user, registered_model=completions)
    page = (await client.get(reverse("studio:session_detail", args=[chat.pk]))).content.decode()
    assert 'id="config-web-search"' not in page
    assert "No web search: web_search is not available with the openai-completions api_kind" in page
    refused = await client.post(
        reverse("studio:session_configure", args=[chat.pk]),
        {"expected_version": "0", "web_search": "on"},
        headers=_htmx(),
    )
    assert "web_search is not available with the openai-completions api_kind" in refused.content.decode()


async def test_the_new_session_form_checks_the_endpoint_and_a_failed_turn_links_staff_to_the_model(
    user: Any, make_session: Any, chat_host: Any, django_user_model: Any
) -> None:
    """W14: picking a model checks its endpoint at once; a failed turn offers Retry, and staff
    get a link to the model's settings (people who are not staff do not)."""
    host, _server, _hold = chat_host
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = await RegisteredModel.objects.acreate(
        name="Dead",
        provider="custom",
        model_id="m",
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key="k",
        api_kind="openai-responses",
    )
    client = await _client(user)
    listing = (await client.get(reverse("studio:session_list"))).content.decode()
    assert f'hx-get="{reverse("studio:model_check")}"' in listing and 'id="endpoint-check"' in listing
    check = await client.get(reverse("studio:model_check"), {"registered_model": dead.pk})
    assert f"Cannot connect to 127.0.0.1:{port}: connection refused" in check.content.decode()
    staff = await django_user_model.objects.acreate(username="sam", is_staff=True)
    for owner, linked in ((staff, True), (user, False)):
        session = await sync_to_async(make_session)(owner, registered_model=dead)
        await host.prompt(str(session.pk), prompt="FAIL_WITH_400 hi")
        await host.wait_idle(str(session.pk))
        page = (await (await _client(owner)).get(reverse("studio:session_detail", args=[session.pk]))).content.decode()
        assert "retry-button" in page
        assert (reverse("admin:studio_registeredmodel_change", args=[dead.pk]) in page) is linked
