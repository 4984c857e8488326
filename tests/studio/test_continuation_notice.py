"""Issue #22: after an interruption the answer reads as one piece, and the notice that says the
agent continued sits between blocks, never inside a sentence (L3, D3, W1, W14).

A real session (SQLite store, session protocol, ``openai-responses`` adapter) on the scripted
fake provider: the first response streams half a sentence and the connection drops; the
continuation streams the rest.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.urls import reverse

from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import Disconnect, Step, Stop, Text, ToolCall, Usage
from studio.models import RegisteredModel

pytestmark = pytest.mark.django_db(transaction=True)

NOTICE = "The agent continued after an interruption"


def _script(request: RecordedRequest) -> list[Step]:
    """First half, drop; on the continuation prompt, the second half (then a tool call and a
    closing line when the prompt asks for a tool)."""
    body = str(request.json.get("input"))
    wants_tool = "with a tool" in body
    if "interrupted" not in body:
        return [Text("The first half, "), Disconnect()]
    if wants_tool and "call_ls_1" not in body:
        return [
            Text("and the second half."),
            ToolCall("ls", {}, id="call_ls_1"),
            Usage(input=5, output=5),
            Stop("tool_use"),
        ]
    if wants_tool:
        return [Text("Listed."), Usage(input=5, output=5), Stop("stop")]
    return [Text("and the second half."), Usage(input=5, output=5), Stop("stop")]


@pytest.fixture
async def dropping_host() -> AsyncIterator[Any]:
    from studio.host.factory import agentcore_runtime_factory
    from studio.host.session_host import SessionHost, set_session_host

    server = FakeProviderServer(responder=_script).start_in_thread()

    async def no_backoff(seconds: float) -> None:
        await asyncio.sleep(0)

    async def factory(config: Any) -> Any:
        config.model_options["base_url"] = server.base_url
        return await agentcore_runtime_factory(config, sleep=no_backoff)

    host = SessionHost(runtime_factory=factory, flush_interval=0.01)
    set_session_host(host)
    yield host
    await host.close()
    set_session_host(None)
    server.stop_in_thread()


async def _answer_html(user: Any, make_session: Any, host: Any, prompt: str) -> str:
    model = await RegisteredModel.objects.acreate(
        name="Dropping",
        provider="custom",
        model_id="m",
        base_url="http://127.0.0.1:9/v1",
        api_key="k",
        api_kind="openai-responses",
    )
    session = await sync_to_async(make_session)(user, registered_model=model)
    sid = str(session.pk)
    await host.prompt(sid, prompt=prompt, agent="build")
    await host.wait_idle(sid)
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    page = (await client.get(reverse("studio:session_detail", args=[session.pk]))).content.decode()
    return page.split('id="conversation"', 1)[1]


def _text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


async def test_the_interrupted_sentence_is_whole_and_the_notice_follows_it(
    user: Any, make_session: Any, dropping_host: Any
) -> None:
    """L3/W1: one paragraph "The first half, and the second half.", then the notice."""
    html = await _answer_html(user, make_session, dropping_host, "say something")
    text = _text_of(html)
    assert "The first half, and the second half." in text
    assert text.index(NOTICE) > text.index("and the second half.")
    assert text.count(NOTICE) == 1


async def test_the_notice_lands_before_the_next_block_not_inside_the_text(
    user: Any, make_session: Any, dropping_host: Any
) -> None:
    """L3/W1: text, drop, continued text and a tool call: the notice sits between the whole
    text and the tool row; the drop's error is said once (the turn's "Recovered after …" line),
    not as a block of its own inside the sentence."""
    html = await _answer_html(user, make_session, dropping_host, "answer with a tool")
    text = _text_of(html)
    assert "The first half, and the second half." in text
    notice_at = text.index(NOTICE)
    assert text.index("and the second half.") < notice_at < text.index("Listed.")
    assert html.index(NOTICE) < html.index('class="block tool')
    assert text.count("peer closed connection") <= 1
