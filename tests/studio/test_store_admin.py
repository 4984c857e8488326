"""W5: store administration — import an exported store, cancel unfinished work offline."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from studio.host.session_host import SessionHost
from studio.models import Run, StudioSession

pytestmark = pytest.mark.django_db(transaction=True)

IMPORT_URL = "admin:studio_sessionstore_import"


async def _write_store(path: Path, workdir: str, prompt: str) -> None:
    from agentcore import create_agent

    runtime = await create_agent(database_path=str(path), workdir=workdir, provider="demo")
    try:
        async for _ in runtime.run(prompt):
            pass
    finally:
        await runtime.close()


@pytest.fixture
def exported_store(tmp_path: Path) -> Path:
    """A store exported the way the admin's export action does it."""
    from agentcore import export_agent_database

    live = tmp_path / "live.sqlite"
    asyncio.run(_write_store(live, str(tmp_path), "remember the blue notebook"))
    destination = tmp_path / "exports" / "notebook.sqlite"
    export_agent_database(database_path=live, destination=destination)
    return destination


def _post_import(client: Client, **data: Any) -> Any:
    return client.post(reverse(IMPORT_URL), data, follow=True)


def test_changelist_links_to_the_import_page(admin_client: Client) -> None:
    page = admin_client.get(reverse("admin:studio_sessionstore_changelist")).content.decode()
    assert reverse(IMPORT_URL) in page
    form = admin_client.get(reverse(IMPORT_URL))
    assert form.status_code == 200 and 'type="file"' in form.content.decode()


def test_import_needs_a_staff_login(client: Client, logged_in: Client) -> None:
    anonymous = Client().get(reverse(IMPORT_URL))
    assert anonymous.status_code == 302 and "login/" in anonymous["Location"]
    not_staff = logged_in.get(reverse(IMPORT_URL))  # a Studio user, not an admin
    assert not_staff.status_code == 302 and "/admin/login/" in not_staff["Location"]


async def test_import_from_a_server_path_creates_a_session_that_shows_the_conversation(
    admin_client: Client, user: Any, demo_model: Any, exported_store: Path, host: SessionHost
) -> None:
    response = await sync_to_async(_post_import)(
        admin_client,
        source_path=str(exported_store),
        owner=user.pk,
        registered_model=demo_model.pk,
        title="Notebook, restored",
    )
    assert "Imported the store into “Notebook, restored”" in response.content.decode()
    session = await StudioSession.objects.aget(title="Notebook, restored")
    assert session.owner_id == user.pk
    assert await sync_to_async(Path(session.store_path).is_file)()
    assert await sync_to_async(exported_store.is_file)()  # the source is copied, never moved
    state = await host.state(str(session.pk))
    assert "remember the blue notebook" in str(state.transcript)
    owner = Client()
    await sync_to_async(owner.force_login)(user)
    page = await sync_to_async(owner.get)(f"/sessions/{session.pk}/")
    assert "remember the blue notebook" in page.content.decode()


def test_import_an_upload_into_a_session_whose_store_is_missing(
    admin_client: Client, user: Any, make_session: Any, exported_store: Path, studio_data_dir: Path
) -> None:
    session = make_session(user, title="Lost its store")
    assert not Path(session.store_path).exists()
    upload = SimpleUploadedFile("notebook.sqlite", exported_store.read_bytes())
    response = _post_import(admin_client, source_file=upload, session=session.pk)
    assert "Imported the store into “Lost its store”" in response.content.decode()
    assert Path(session.store_path).is_file()
    assert StudioSession.objects.count() == 1  # restored in place, no new session
    assert list((studio_data_dir / "imports").iterdir()) == []  # the upload's temp copy is gone


def test_import_errors_are_clear_and_leave_nothing_behind(
    admin_client: Client, user: Any, demo_model: Any, make_session: Any, exported_store: Path, tmp_path: Path
) -> None:
    new = {"owner": user.pk, "registered_model": demo_model.pk}

    def error_of(**data: Any) -> str:
        response = _post_import(admin_client, **data)
        assert response.status_code == 200 and "errornote" in response.content.decode()
        return response.content.decode()

    assert "Give exactly one source" in error_of(**new)
    both = SimpleUploadedFile("x.sqlite", b"x")
    assert "Give exactly one source" in error_of(source_file=both, source_path=str(exported_store), **new)
    assert "No file at" in error_of(source_path=str(tmp_path / "missing.sqlite"), **new)
    assert "absolute path" in error_of(source_path="relative.sqlite", **new)
    not_a_store = tmp_path / "notes.sqlite"
    not_a_store.write_text("just text")
    assert "not an agentcore session store" in error_of(source_path=str(not_a_store), **new)
    # The target must not exist: a session that already has a store is never overwritten.
    session = make_session(user, title="Has a store")
    Path(session.store_path).write_bytes(exported_store.read_bytes())
    before = Path(session.store_path).read_bytes()
    assert "already has a store" in error_of(source_path=str(exported_store), session=session.pk)
    assert Path(session.store_path).read_bytes() == before
    assert list(StudioSession.objects.values_list("title", flat=True)) == ["Has a store"]  # no half-made session


def test_an_import_defaults_to_the_admin_and_the_stores_model_and_is_named_by_its_first_prompt(
    admin_client: Client, admin_user: Any, demo_model: Any, exported_store: Path
) -> None:
    """W5: the form preselects the admin as owner and, left blank, the model the store was used
    with, so the first submit works; the new session is titled by the store's first prompt
    (not "Imported <uuid>-<timestamp>") and shows its tokens before anyone opens it."""
    from studio.models import UsageRecord

    form = admin_client.get(reverse(IMPORT_URL)).content.decode()
    assert f'<option value="{admin_user.pk}" selected>' in form
    assert "The model the store was used with" in form
    upload = SimpleUploadedFile("3f2a9c1e-20261201T101010.sqlite", exported_store.read_bytes())
    response = _post_import(admin_client, source_file=upload)
    assert "Imported the store into “remember the blue notebook”" in response.content.decode()
    session = StudioSession.objects.get(title="remember the blue notebook")
    assert (session.owner_id, session.registered_model_id) == (admin_user.pk, demo_model.pk)
    assert session.total_tokens > 0 and UsageRecord.objects.filter(session=session).count() >= 1
    listing = admin_client.get(reverse("studio:session_list")).content.decode()
    assert "remember the blue notebook" in listing


def test_the_model_admin_says_api_kind(admin_client: Client) -> None:
    from studio.models import RegisteredModel

    RegisteredModel.objects.create(name="Listed", provider="custom", model_id="m", base_url="http://127.0.0.1:9")
    page = admin_client.get(reverse("admin:studio_registeredmodel_add")).content.decode()
    assert "API kind" in page and "Api kind" not in page
    listing = admin_client.get(reverse("admin:studio_registeredmodel_changelist")).content.decode()
    assert "API kind" in listing and "Api kind" not in listing


async def _paused_plan(make_session: Any, user: Any, host: SessionHost) -> StudioSession:
    session = await sync_to_async(make_session)(user, mode="plan")
    await host.prompt(str(session.pk), prompt="Plan a reading list app", agent="plan")
    await host.wait_idle(str(session.pk))
    run = await Run.objects.aget(session=session)
    assert run.status == "paused" and run.pending["kind"] == "plan"
    return session


def _cancel(client: Client, session: StudioSession) -> str:
    response = client.post(
        reverse("admin:studio_sessionstore_changelist"),
        {"action": "cancel_offline", "_selected_action": [str(session.pk)]},
        follow=True,
    )
    return response.content.decode()


async def test_offline_cancel_ends_a_paused_run_and_the_session_works_again(
    admin_client: Client, user: Any, make_session: Any, host: SessionHost
) -> None:
    session = await _paused_plan(make_session, user, host)
    # The host still has the store open (and its owner lock): the action asks it to let go.
    page = await sync_to_async(_cancel)(admin_client, session)
    assert "cancelled 1 unfinished run." in page
    run = await Run.objects.aget(session=session)
    assert (run.status, run.pending, run.error_code) == ("aborted", None, "cancelled_offline")
    assert (await StudioSession.objects.aget(pk=session.pk)).status == "idle"
    # The store agrees: nothing waits for a review any more, and a new prompt runs normally.
    await host.prompt(str(session.pk), prompt="Plan a smaller app", agent="plan")
    await host.wait_idle(str(session.pk))
    assert await Run.objects.filter(session=session, status="paused").acount() == 1
    again = await sync_to_async(_cancel)(admin_client, session)
    assert "cancelled 1 unfinished run." in again
    idle = await sync_to_async(_cancel)(admin_client, session)
    assert "nothing was unfinished" in idle


async def test_offline_cancel_is_refused_while_another_process_owns_the_store(
    admin_client: Client, user: Any, make_session: Any, host: SessionHost
) -> None:
    from agentcore.harness.lease import OwnerLease, lock_path_for

    session = await _paused_plan(make_session, user, host)
    await host.release(str(session.pk))
    lease = OwnerLease.acquire(lock_path_for(session.store_path))  # e.g. a worker on another machine
    try:
        page = await sync_to_async(_cancel)(admin_client, session)
    finally:
        lease.release()
    assert "cancel failed" in page and "still has this store open" in page and "store_locked" in page
    assert (await Run.objects.aget(session=session)).status == "paused"  # nothing changed


def test_offline_cancel_of_a_session_that_never_ran(admin_client: Client, user: Any, make_session: Any) -> None:
    session = make_session(user)
    assert "nothing to cancel" in _cancel(admin_client, session)


def _export(client: Client, session: StudioSession) -> str:
    response = client.post(
        reverse("admin:studio_sessionstore_changelist"),
        {"action": "export_store", "_selected_action": [str(session.pk)]},
        follow=True,
    )
    return response.content.decode()


async def test_export_works_for_a_session_parked_in_the_host_and_it_carries_on(
    admin_client: Client, user: Any, make_session: Any, host: SessionHost, studio_data_dir: Path
) -> None:
    """Issue #15: a waiting session's runtime holds the store's owner lock in the host; the
    export goes through the host, so it works, and the plan can still be approved after."""
    session = await _paused_plan(make_session, user, host)
    assert host._sessions[str(session.pk)].runtime is not None  # parked, owning the store
    page = await sync_to_async(_export)(admin_client, session)
    assert "exported to" in page and "store_locked" not in page
    [copy] = list((studio_data_dir / "exports").glob(f"{session.pk}-*.sqlite"))
    from agentcore import create_agent

    exported = await create_agent(database_path=str(copy), workdir=session.workdir, provider="demo")
    try:
        assert "Plan a reading list app" in str(exported.read_transcript())
        assert exported.pending_request_id is not None  # the pause travelled with the copy
    finally:
        await exported.close()
    await host.resume_plan(str(session.pk), approved=True)
    await host.wait_idle(str(session.pk))
    assert (await Run.objects.aget(session=session)).status == "completed"


async def test_export_is_refused_only_while_a_run_is_writing(
    admin_client: Client, user: Any, make_session: Any, gated_host: Any, studio_data_dir: Path
) -> None:
    host, gate, _server = gated_host
    session = await sync_to_async(make_session)(user)
    await host.prompt(str(session.pk), prompt="HOLD a long job", agent="build")
    await gate.entered.wait()
    page = await sync_to_async(_export)(admin_client, session)
    assert "export failed" in page and "A turn is writing to this store" in page
    assert not (studio_data_dir / "exports").exists() or not list((studio_data_dir / "exports").iterdir())
    gate.release()
    await host.wait_idle(str(session.pk))


def test_import_page_loads_the_admin_form_styles(admin_client: Client) -> None:
    """Issue #15: the import form is laid out like every admin form (forms.css, rows)."""
    html = admin_client.get(reverse(IMPORT_URL)).content.decode()
    assert "admin/css/forms.css" in html
    assert 'class="form-row field-source_path' in html and "change-form" in html


def test_list_and_change_page_show_the_same_title(admin_client: Client, user: Any, make_session: Any) -> None:
    """Issue #15: an untitled session is not "Session 1a2b3c4d" in the list and blank on
    its change page; both show its name, marked untitled; a named one shows its title."""
    untitled = make_session(user)
    named = make_session(user, title="Reading list")
    listing = admin_client.get(reverse("admin:studio_sessionstore_changelist")).content.decode()
    shown = f"Session {str(untitled.pk)[:8]} (untitled)"
    assert shown in listing and "Reading list" in listing
    change = admin_client.get(reverse("admin:studio_sessionstore_change", args=[untitled.pk])).content.decode()
    assert f'placeholder="{shown}"' in change
    named_page = admin_client.get(reverse("admin:studio_sessionstore_change", args=[named.pk])).content.decode()
    assert 'value="Reading list"' in named_page
