"""The host's ``ModelCatalog``: a store's opening decrypts no key and queries no model table
that the same version of the registered models already gave — and a model changed in the admin
reaches the very next store opened (SPEC W10, M1; issue 25)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from studio.models import RegisteredModel

pytestmark = pytest.mark.django_db(transaction=True)

PRICE = {"input": 1.0, "output": 2.0}


def _model() -> RegisteredModel:
    return RegisteredModel.objects.create(
        name="Keyed",
        provider="custom",
        model_id="keyed-1",
        base_url="http://127.0.0.1:9/v1",
        api_kind="openai-responses",
        api_key="first-key",
        attributes={"cost": PRICE},
    )


class KeyReads:
    """``RegisteredModel.plain_api_key`` calls (each one decrypts a stored key)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = RegisteredModel.plain_api_key

        def counted(model: RegisteredModel) -> str:
            self.calls += 1
            return real(model)

        monkeypatch.setattr(RegisteredModel, "plain_api_key", counted)


async def test_a_second_store_on_the_same_model_decrypts_no_key_again(
    user: Any, make_session: Any, host: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = await sync_to_async(_model)()
    first = await sync_to_async(make_session)(user, registered_model=model)
    second = await sync_to_async(make_session)(user, registered_model=model)
    reads = KeyReads(monkeypatch)
    await host.state(str(first.pk))
    assert reads.calls > 0
    reads.calls = 0
    await host.state(str(second.pk))
    assert reads.calls == 0
    hs = host._sessions[str(second.pk)]
    assert hs.config.model_options["api_key"] == "first-key"
    assert hs.config.models == {"keyed-1": {"cost": PRICE}}


async def test_a_model_changed_in_the_admin_reaches_the_next_store_opened(
    user: Any, make_session: Any, host: Any
) -> None:
    model = await sync_to_async(_model)()
    first = await sync_to_async(make_session)(user, registered_model=model)
    second = await sync_to_async(make_session)(user, registered_model=model)
    await host.state(str(first.pk))
    model.api_key = "second-key"
    model.attributes = {"cost": {"input": 3.0, "output": 4.0}}
    await sync_to_async(model.save)()
    await host.state(str(second.pk))
    hs = host._sessions[str(second.pk)]
    assert hs.config.model_options["api_key"] == "second-key"
    assert hs.config.models == {"keyed-1": {"cost": {"input": 3.0, "output": 4.0}}}
    assert host._sessions[str(first.pk)].config.model_options["api_key"] == "first-key"  # a copy each
