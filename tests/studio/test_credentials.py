"""Issue #22: API keys at rest are encrypted with a key that is not in the database (W5, W15).

The key is the data dir's ``credentials_key`` file (0600) or ``STUDIO_CREDENTIALS_KEY``. Checked
the way someone holding a copy of the database would: the whole Studio database dumped as SQL,
the session's agent store file, the pages, the snapshot — none holds the key. Plaintext keys of
an older Studio are encrypted by a real migration run; a lost or wrong credentials key is a
clear message where the key is needed, never a crash.
"""

from __future__ import annotations

import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import AsyncClient
from django.urls import reverse

from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Stop, Text, Usage
from studio import credentials, services
from studio.models import RegisteredModel
from tests.studio.fakes import scripted_model

SECRET = "sk-live-VERY-SECRET-KEY-123"


def _database_dump() -> str:
    """Every row of every table of Studio's database, as SQL."""
    connection.ensure_connection()
    return "\n".join(connection.connection.iterdump())


@pytest.mark.django_db
def test_a_key_is_stored_encrypted_and_the_key_that_opens_it_is_a_0600_file(studio_data_dir: Path) -> None:
    """W5: the column holds a Fernet token; the key file is in the data dir, readable by Studio only."""
    model = RegisteredModel.objects.create(name="M", provider="openai", model_id="gpt", api_key=SECRET)
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM studio_registeredmodel WHERE id = %s", [model.pk])
        (stored,) = cursor.fetchone()
    assert stored.startswith("fernet:") and SECRET not in stored
    assert SECRET not in _database_dump()
    key_file = studio_data_dir / "credentials_key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key_file.read_text().strip() not in _database_dump()
    assert RegisteredModel.objects.get(pk=model.pk).plain_api_key() == SECRET
    assert RegisteredModel.objects.get(pk=model.pk).runtime_options()["api_key"] == SECRET


@pytest.mark.django_db(transaction=True)
def test_the_migration_encrypts_the_plaintext_keys_of_an_older_studio(studio_data_dir: Path) -> None:
    """W5: rows written before encryption (plain text) are encrypted by ``migrate``; going back
    decrypts them."""
    executor = MigrationExecutor(connection)
    executor.migrate([("studio", "0005_tool_isolation_and_encrypted_keys")])
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO studio_registeredmodel (name, provider, model_id, base_url, api_kind, api_key, attributes, "
            "enabled, created_at, tool_isolation) VALUES ('Old', 'openai', 'gpt', '', '', %s, '{}', 1, "
            "'2026-01-01 00:00:00', '')",
            [SECRET],
        )
    MigrationExecutor(connection).migrate([("studio", "0006_encrypt_api_keys")])
    assert SECRET not in _database_dump()
    assert RegisteredModel.objects.get(name="Old").plain_api_key() == SECRET
    MigrationExecutor(connection).migrate([("studio", "0005_tool_isolation_and_encrypted_keys")])
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM studio_registeredmodel WHERE name = 'Old'")
        assert cursor.fetchone() == (SECRET,)
    MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.mark.django_db
def test_a_lost_or_wrong_credentials_key_is_a_clear_error(
    user: Any, studio_data_dir: Path, settings: Any, tmp_path: Path
) -> None:
    """W15: the session cannot open its model (the host says why); nothing crashes, and the
    message names where the key comes from but never the stored value."""
    from studio.host.contract import HostError
    from studio.selectors import session_config

    model = RegisteredModel.objects.create(name="M", provider="openai", model_id="gpt", api_key=SECRET)
    workdir = tmp_path / "w"
    workdir.mkdir()
    session = services.session_create(
        owner=user,
        registered_model=model,
        workdir=str(workdir),
        permission_policy="workspace",
        effort="low",
        mode="build",
        tool_isolation="host",
    )
    (studio_data_dir / "credentials_key").unlink()
    with pytest.raises(HostError) as lost:
        session_config(str(session.pk))
    assert lost.value.code == "credentials" and "no credentials key" in lost.value.message
    settings.STUDIO_CREDENTIALS_KEY = Fernet.generate_key().decode()
    with pytest.raises(HostError) as wrong:
        session_config(str(session.pk))
    assert "cannot be decrypted with the credentials key in use (STUDIO_CREDENTIALS_KEY)" in wrong.value.message
    assert "fernet:" not in wrong.value.message and "'M'" in wrong.value.message
    settings.STUDIO_CREDENTIALS_KEY = "not a key"
    with pytest.raises(ImproperlyConfigured, match="STUDIO_CREDENTIALS_KEY: key 1 is not a Fernet key") as bad:
        credentials.check_credentials_key()
    assert "not a key" not in str(bad.value)


@pytest.mark.django_db
def test_keys_can_be_rotated_with_the_setting(settings: Any) -> None:
    """W5: ``STUDIO_CREDENTIALS_KEY=new,old`` reads what the old key wrote; new values use the new one."""
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.STUDIO_CREDENTIALS_KEY = old
    model = RegisteredModel.objects.create(name="M", provider="openai", model_id="gpt", api_key=SECRET)
    settings.STUDIO_CREDENTIALS_KEY = f"{new},{old}"
    assert RegisteredModel.objects.get(pk=model.pk).plain_api_key() == SECRET
    rewritten = RegisteredModel.objects.get(pk=model.pk)
    rewritten.api_key = rewritten.plain_api_key()
    rewritten.save()
    settings.STUDIO_CREDENTIALS_KEY = new
    assert RegisteredModel.objects.get(pk=model.pk).plain_api_key() == SECRET


@pytest.fixture
async def answering_server() -> AsyncIterator[FakeProviderServer]:
    server = FakeProviderServer(responder=lambda request: [Text("hello"), Usage(input=3, output=3), Stop("stop")])
    yield server.start_in_thread()
    server.stop_in_thread()


@pytest.mark.django_db(transaction=True)
async def test_the_key_reaches_the_provider_and_nothing_else(
    user: Any, make_session: Any, host: Any, answering_server: FakeProviderServer
) -> None:
    """W5/S3: the provider gets the key; the agent store, the snapshot, the page and Studio's
    database never hold it."""
    model = await scripted_model(answering_server, "Keyed", api_key=SECRET)
    session = await sync_to_async(make_session)(user, registered_model=model)
    sid = str(session.pk)
    await host.prompt(sid, prompt="hi", agent="build")
    await host.wait_idle(sid)
    assert answering_server.requests[0].api_key == SECRET
    state = await host.state(sid)
    assert SECRET not in json.dumps(state.to_dict(), default=str)
    store = Path(session.store_path)
    assert SECRET.encode() not in b"".join(p.read_bytes() for p in store.parent.glob(store.name + "*"))
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    page = (await client.get(reverse("studio:session_detail", args=[session.pk]))).content.decode()
    assert SECRET not in page and "API key</dt><dd>set" in page
    assert SECRET not in await sync_to_async(_database_dump)()


@pytest.mark.django_db(transaction=True)
async def test_the_session_page_says_the_key_cannot_be_read(
    user: Any, make_session: Any, host: Any, settings: Any, studio_data_dir: Path
) -> None:
    """W14/W15: with the credentials key gone, the session page loads and says why the agent
    cannot run (no 500, no stored value on the page)."""
    model = await RegisteredModel.objects.acreate(name="Keyed", provider="openai", model_id="gpt", api_key=SECRET)
    session = await sync_to_async(make_session)(user, registered_model=model)
    (studio_data_dir / "credentials_key").unlink()
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    response = await client.get(reverse("studio:session_detail", args=[session.pk]))
    page = response.content.decode()
    assert response.status_code == 200
    assert "no credentials key" in page and "cannot be read" in page
    assert SECRET not in page and "fernet:" not in page
