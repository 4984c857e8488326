"""Issue #22: a request is priced as the model that served it, and the header names that model
(S2 configure, M1 cost, W3 Usage, W10).

Two models registered on the same endpoint and key, each with its own price; the session starts
on A and is switched to B in the composer. The provider is the scripted fake server on loopback
(real ``openai-responses`` adapter), answering every request with 800 input and 300 output tokens.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.urls import reverse

from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import Step, Stop, Text, Usage
from studio import pages
from studio.host.contract import Regions
from studio.models import RegisteredModel, UsageRecord

pytestmark = pytest.mark.django_db(transaction=True)

PRICE_A = {"input": 1.2, "output": 20.0}  # 800 in + 300 out = $0.00096 + $0.006 = $0.00696
PRICE_B = {"input": 2.5, "output": 10.0}  # 800 in + 300 out = $0.002 + $0.003 = $0.005


def _answer(request: RecordedRequest) -> list[Step]:
    return [Text("Priced answer."), Usage(input=800, output=300), Stop("stop")]


@pytest.fixture
async def priced_server() -> AsyncIterator[FakeProviderServer]:
    server = FakeProviderServer(responder=_answer).start_in_thread()
    yield server
    server.stop_in_thread()


def _shared(server: FakeProviderServer) -> dict[str, str]:
    return {"provider": "custom", "base_url": server.base_url, "api_kind": "openai-responses", "api_key": "k1"}


async def _models(server: FakeProviderServer) -> tuple[RegisteredModel, RegisteredModel]:
    alpha = await RegisteredModel.objects.acreate(
        name="Alpha", model_id="alpha-1", attributes={"cost": PRICE_A}, **_shared(server)
    )
    beta = await RegisteredModel.objects.acreate(
        name="Beta", model_id="beta-2", attributes={"cost": PRICE_B}, **_shared(server)
    )
    return alpha, beta


async def _switch(user: Any, session: Any, model: RegisteredModel, version: int = 0) -> None:
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    switched = await client.post(
        reverse("studio:session_configure", args=[session.pk]),
        {"expected_version": str(version), "model": model.pk},
        headers={"HX-Request": "true"},
    )
    assert switched.status_code == 200 and switched.content == b""


async def _switched_to_beta(user: Any, make_session: Any, host: Any, server: FakeProviderServer) -> Any:
    """A session on A that answered once, then switched to B in the composer."""
    alpha, beta = await _models(server)
    session = await sync_to_async(make_session)(user, registered_model=alpha)
    await host.prompt(str(session.pk), prompt="first", agent="build")
    await host.wait_idle(str(session.pk))
    await _switch(user, session, beta)
    return session


async def test_after_a_switch_the_request_costs_the_price_of_the_model_that_served_it(
    user: Any, make_session: Any, host: Any, priced_server: FakeProviderServer
) -> None:
    """S2 configure + M1: A's turn costs A's price, B's turn after the switch costs B's (not 0)."""
    session = await _switched_to_beta(user, make_session, host, priced_server)
    sid = str(session.pk)
    await host.prompt(sid, prompt="second", agent="build")
    await host.wait_idle(sid)
    rows = [r async for r in UsageRecord.objects.filter(session=session).order_by("id")]
    assert [(r.model, r.input_tokens, r.output_tokens) for r in rows] == [("alpha-1", 800, 300), ("beta-2", 800, 300)]
    assert rows[0].cost == Decimal("0.006960")
    assert rows[1].cost == Decimal("0.005000")
    assert (rows[1].cost_input, rows[1].cost_output) == (Decimal("0.002000"), Decimal("0.003000"))


async def test_the_header_names_the_model_in_use_after_a_switch(
    user: Any, make_session: Any, host: Any, priced_server: FakeProviderServer
) -> None:
    """W1/W3: the session header's model badge is the configured model, on a reload and live."""
    session = await _switched_to_beta(user, make_session, host, priced_server)
    sid = str(session.pk)
    await host.wait_idle(sid)
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    page = (await client.get(reverse("studio:session_detail", args=[session.pk]))).content.decode()
    header = page.split('<div class="chat-title">', 1)[1].split("</div>", 1)[0]
    assert ">Beta<" in header and ">Alpha<" not in header
    push = await sync_to_async(pages.render_regions)(sid, await host.state(sid), Regions(controls=True))
    badge = push.split('id="session-model"', 1)[1].split("</span></span>", 1)[0]
    assert ">Beta<" in badge


async def test_a_model_registered_and_priced_after_the_runtime_opened_is_priced(
    user: Any, make_session: Any, host: Any, priced_server: FakeProviderServer
) -> None:
    """M1 + S2: the session's runtime is already open when B is registered with a price and A's
    price changes; the switch to B, then back to A, bills each at the price registered now."""
    alpha = await RegisteredModel.objects.acreate(
        name="Alpha", model_id="alpha-1", attributes={"cost": PRICE_B}, **_shared(priced_server)
    )
    session = await sync_to_async(make_session)(user, registered_model=alpha)
    sid = str(session.pk)
    await host.prompt(sid, prompt="first", agent="build")
    await host.wait_idle(sid)
    beta = await RegisteredModel.objects.acreate(
        name="Beta", model_id="beta-2", attributes={"cost": PRICE_B}, **_shared(priced_server)
    )
    alpha.attributes = {"cost": PRICE_A}
    await alpha.asave(update_fields=["attributes"])
    await _switch(user, session, beta)
    await host.prompt(sid, prompt="second", agent="build")
    await host.wait_idle(sid)
    await _switch(user, session, alpha, version=1)
    await host.prompt(sid, prompt="third", agent="build")
    await host.wait_idle(sid)
    rows = [r async for r in UsageRecord.objects.filter(session=session).order_by("id")]
    assert [(r.model, r.cost) for r in rows] == [
        ("alpha-1", Decimal("0.005000")),
        ("beta-2", Decimal("0.005000")),
        ("alpha-1", Decimal("0.006960")),
    ]
