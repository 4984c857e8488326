"""W5: the admin validates model attributes (SPEC M3) and never shows an API key back."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from studio.admin import RegisteredModelForm
from studio.models import RegisteredModel

pytestmark = pytest.mark.django_db


def _form(**overrides: Any) -> RegisteredModelForm:
    data = {
        "name": "GPT",
        "provider": "openai",
        "model_id": "gpt-5-mini",
        "base_url": "",
        "api_kind": "",
        "api_key": "sk-test-SECRET",
        "attributes": "",
        "enabled": "on",
    } | overrides
    return RegisteredModelForm(data=data, instance=overrides.pop("instance", None))


def test_attributes_are_validated_and_the_error_names_the_field() -> None:
    form = _form(attributes='{"context_window": 200000, "cost": {"input": -1}}')
    assert not form.is_valid()
    assert "attributes.cost.input" in form.errors["attributes"][0]
    form = _form(attributes='{"contxt_window": 5}')
    assert not form.is_valid()
    assert "contxt_window" in form.errors["attributes"][0]
    form = _form(attributes="{not json")
    assert not form.is_valid()
    assert "JSON" in form.errors["attributes"][0]


def test_every_bad_attribute_is_reported_not_only_the_first() -> None:
    """Issue #15: two bad fields give two errors, each naming its field; nothing is saved."""
    form = _form(attributes='{"context_window": -5, "cost": {"input": "free"}, "reasoningg": true}')
    assert not form.is_valid()
    errors = form.errors["attributes"]
    assert len(errors) == 3, errors
    assert any(e.startswith("attributes.context_window:") for e in errors)
    assert any(e.startswith("attributes.cost.input:") for e in errors)
    assert any(e.startswith("attributes.reasoningg:") for e in errors)
    assert not RegisteredModel.objects.exists()


def test_valid_attributes_are_stored_as_json() -> None:
    form = _form(attributes='{"context_window": 200000, "cost": {"input": 3, "output": 15}}')
    assert form.is_valid(), form.errors
    model = form.save()
    assert model.attributes == {
        "context_window": 200000,
        "cost": {"input": 3.0, "output": 15.0, "cache_read": 0.0, "cache_write": 0.0},
    }


def test_api_key_is_write_only_and_kept_when_left_blank() -> None:
    model = _form().save()
    assert model.plain_api_key() == "sk-test-SECRET" and "SECRET" not in model.api_key  # stored encrypted
    form = RegisteredModelForm(instance=model)
    assert "SECRET" not in str(form["api_key"])  # the PasswordInput never renders the value
    edit = _form(api_key="", name="GPT renamed", instance=model)
    assert edit.is_valid(), edit.errors
    assert edit.save().plain_api_key() == "sk-test-SECRET"
    clear = _form(api_key="", clear_api_key="on", instance=model)
    assert clear.is_valid()
    assert clear.save().api_key == ""


def test_custom_endpoint_needs_a_base_url() -> None:
    form = _form(provider="custom", base_url="")
    assert not form.is_valid()
    assert "base_url" in form.errors


def test_admin_change_page_never_shows_the_key(admin_client: Client) -> None:
    model = RegisteredModel.objects.create(
        name="Claude", provider="anthropic", model_id="claude", api_key="sk-ant-SECRET"
    )
    page = admin_client.get(reverse("admin:studio_registeredmodel_change", args=[model.pk]))
    assert page.status_code == 200
    assert "SECRET" not in page.content.decode()
    listing = admin_client.get(reverse("admin:studio_registeredmodel_changelist"))
    assert "SECRET" not in listing.content.decode()


def test_model_repr_and_runtime_options_for_the_host() -> None:
    model = RegisteredModel(
        name="X", provider="openai", model_id="gpt", api_key="sk-SECRET", api_kind="openai-responses"
    )
    assert "SECRET" not in repr(model)
    assert model.runtime_options()["api_key"] == "sk-SECRET"  # only the host gets it
    assert "SECRET" not in str(model.public_description())


def test_store_admin_lists_session_stores(admin_client: Client, admin_user: Any, make_session: Any) -> None:
    session = make_session(admin_user, title="Store me")
    page = admin_client.get(reverse("admin:studio_sessionstore_changelist"))
    assert page.status_code == 200
    assert f"{session.pk}.sqlite" in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_store_export_action_copies_the_store(
    admin_client: Client, admin_user: Any, make_session: Any, studio_data_dir: Any
) -> None:
    import asyncio

    from agentcore import create_agent

    session = make_session(admin_user)

    async def write_store() -> None:
        runtime = await create_agent(database_path=session.store_path, workdir=session.workdir, provider="demo")
        async for _ in runtime.run("hello"):
            pass
        await runtime.close()

    asyncio.run(write_store())
    response = admin_client.post(
        reverse("admin:studio_sessionstore_changelist"),
        {"action": "export_store", "_selected_action": [str(session.pk)]},
        follow=True,
    )
    assert "exported to" in response.content.decode()
    exports = list((studio_data_dir / "exports").glob(f"{session.pk}-*.sqlite"))
    assert len(exports) == 1 and exports[0].stat().st_size > 0


def test_test_connection_action_reports_success_for_the_demo(admin_client: Client, demo_model: RegisteredModel) -> None:
    response = admin_client.post(
        reverse("admin:studio_registeredmodel_changelist"),
        {"action": "test_connection", "_selected_action": [str(demo_model.pk)]},
        follow=True,
    )
    assert "connection works" in response.content.decode()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _test_connection(admin_client: Client, model: RegisteredModel) -> tuple[str, float]:
    import time

    started = time.monotonic()
    response = admin_client.post(
        reverse("admin:studio_registeredmodel_changelist"),
        {"action": "test_connection", "_selected_action": [str(model.pk)]},
        follow=True,
    )
    return response.content.decode(), time.monotonic() - started


def test_test_connection_to_an_unreachable_endpoint_answers_at_once(admin_client: Client) -> None:
    """Issue #15: no network must not block the admin page for a minute (10 retries with
    backoff); the first failure ends the probe with a clear reason."""
    model = RegisteredModel.objects.create(
        name="Nowhere",
        provider="custom",
        model_id="m",
        api_kind="openai-completions",
        base_url=f"http://127.0.0.1:{_free_port()}/v1",
        api_key="k",
    )
    page, took = _test_connection(admin_client, model)
    assert took < 5, took
    assert "Nowhere: connection failed after" in page and "did not answer" in page


def test_test_connection_to_a_silent_endpoint_is_bounded(admin_client: Client, monkeypatch: Any) -> None:
    """An endpoint that accepts the request and never answers: the probe's own deadline."""
    from agentcore.testing.fake_server import FakeProviderServer
    from agentcore.testing.steps import Hang

    monkeypatch.setattr("studio.admin.PROBE_TIMEOUT_S", 1.5)
    server = FakeProviderServer().start_in_thread()
    try:
        server.enqueue([Hang()])
        model = RegisteredModel.objects.create(
            name="Silent", provider="custom", model_id="m", api_kind="openai-completions", base_url=server.base_url
        )
        page, took = _test_connection(admin_client, model)
    finally:
        server.stop_in_thread()
    assert 1.5 <= took < 6, took
    assert "Silent: connection failed" in page and "no answer within 1.5 s" in page
