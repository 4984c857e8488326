"""Issue #22: who gets a sandbox, and what a session gets when the server has none (W15, X5, T2).

By default sessions of people who are not staff are sandboxed and staff sessions run on the
server; staff choose otherwise per model (the admin) or per session (the new-session form, which
shows the choice to staff only). A sandboxed session on a server without a sandbox gets no bash,
write or edit — the model is never offered them — and its page says why.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client
from django.urls import reverse

from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import Step, Stop, Text, ToolCall, Usage
from studio import services
from studio.models import RegisteredModel, StudioSession
from tests.studio.fakes import scripted_model

ROOT = Path(__file__).resolve().parents[2]


def _new(owner: Any, model: RegisteredModel, **kwargs: Any) -> StudioSession:
    options = {"workdir": "", "permission_policy": "workspace", "effort": "low", "mode": "build"} | kwargs
    return services.session_create(owner=owner, registered_model=model, **options)


@pytest.mark.django_db
def test_isolation_is_by_person_unless_staff_choose_per_model_or_session(
    user: Any, admin_user: Any, demo_model: Any
) -> None:
    """W15: not staff → sandbox, staff → server; a model's choice beats the default; a staff
    member's choice for a session beats the model's."""
    assert _new(user, demo_model).tool_isolation == "sandbox"
    assert _new(admin_user, demo_model).tool_isolation == "host"
    trusted = RegisteredModel.objects.create(name="Trusted", provider="demo", model_id="demo", tool_isolation="host")
    boxed = RegisteredModel.objects.create(name="Boxed", provider="demo", model_id="demo", tool_isolation="sandbox")
    assert _new(user, trusted).tool_isolation == "host"
    assert _new(admin_user, boxed).tool_isolation == "sandbox"
    assert _new(admin_user, boxed, tool_isolation="host").tool_isolation == "host"
    assert _new(admin_user, trusted, tool_isolation="sandbox").tool_isolation == "sandbox"


@pytest.mark.django_db
def test_only_staff_see_and_use_the_choice_in_the_new_session_form(
    client: Client, user: Any, admin_user: Any, demo_model: Any
) -> None:
    """W15: the field is not offered to other people, and posting it anyway changes nothing."""
    data = {"registered_model": demo_model.pk, "workdir": "", "permission_policy": "auto", "effort": "low"}
    client.force_login(user)
    assert 'name="tool_isolation"' not in client.get(reverse("studio:session_list")).content.decode()
    assert (
        client.post(reverse("studio:session_create"), {**data, "mode": "build", "tool_isolation": "host"}).status_code
        == 302
    )
    assert StudioSession.objects.get(owner=user).tool_isolation == "sandbox"
    client.force_login(admin_user)
    assert 'name="tool_isolation"' in client.get(reverse("studio:session_list")).content.decode()
    client.post(reverse("studio:session_create"), {**data, "mode": "build", "tool_isolation": "sandbox"})
    assert StudioSession.objects.get(owner=admin_user).tool_isolation == "sandbox"


def _probe_script(request: RecordedRequest) -> list[Step]:
    """Tries the shell (which it should not have been offered) then answers with the tool list."""
    names = sorted(t.get("name", "") for t in request.json.get("tools") or [])
    outputs = [i for i in request.json.get("input") or [] if i.get("type") == "function_call_output"]
    if not outputs:
        return [
            ToolCall("bash", {"command": "cat /etc/passwd"}, id="call_bash"),
            ToolCall("read", {"path": "/etc/passwd"}, id="call_read"),
            Usage(input=5, output=5),
            Stop("tool_use"),
        ]
    return [Text("tools: " + ",".join(names)), Usage(input=5, output=5), Stop("stop")]


@pytest.fixture
async def probing_server() -> AsyncIterator[FakeProviderServer]:
    server = FakeProviderServer(responder=_probe_script).start_in_thread()
    yield server
    server.stop_in_thread()


@pytest.mark.django_db(transaction=True)
async def test_without_a_sandbox_there_is_no_shell_and_the_page_says_why(
    user: Any, settings: Any, tmp_path: Path, host: Any, probing_server: FakeProviderServer
) -> None:
    """W15/T2: no bwrap on the server → the model is offered no bash, write or edit (a call to
    bash is refused as unknown), read stays inside the workspace, and the page names the reason."""
    settings.STUDIO_SANDBOX = str(tmp_path / "no" / "bwrap")
    model = await scripted_model(probing_server)
    session = await sync_to_async(_new)(user, model, permission_policy="auto")
    assert session.tool_isolation == "sandbox"
    await host.prompt(str(session.pk), prompt="try the shell", agent="build")
    await host.wait_idle(str(session.pk))
    first, second = probing_server.requests[:2]
    offered = {t.get("name") for t in first.json.get("tools") or []}
    assert {"read", "ls", "grep", "find"} <= offered and not offered & {"bash", "write", "edit"}
    outputs = {
        i["call_id"].split("|")[0]: str(i["output"])
        for i in second.json["input"]
        if i.get("type") == "function_call_output"
    }
    assert "root:" not in outputs["call_bash"] and "root:" not in outputs["call_read"]
    assert "outside the working directory" in outputs["call_read"] or "access denied" in outputs["call_read"]
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    page = (await client.get(reverse("studio:session_detail", args=[session.pk]))).content.decode()
    banner = page.split('id="tools-banner"', 1)[1].split("</div>", 1)[0]
    assert "bash, write and edit are off" in banner and "is not installed" in banner
    assert "<dt>Permission policy</dt><dd>Read-only" in page  # what the runtime really got
    assert (
        '<code class="code-chip">bash</code>'
        not in page.split('id="records-tools-run"', 1)[0].rsplit("<dt>Tools</dt>", 1)[1]
    )


@pytest.mark.django_db(transaction=True)
async def test_a_sandboxed_session_says_so_and_records_its_environment(
    user: Any, host: Any, probing_server: FakeProviderServer
) -> None:
    """W15/X5: the banner says the tools run in a sandbox; the Records tab shows the sandbox as
    the session's execution environment."""
    model = await scripted_model(probing_server)
    session = await sync_to_async(_new)(user, model)
    await host.prompt(str(session.pk), prompt="try the shell", agent="build")
    await host.wait_idle(str(session.pk))
    offered = {t.get("name") for t in probing_server.requests[0].json.get("tools") or []}
    assert {"bash", "write", "edit"} <= offered
    records = (await host.state(str(session.pk))).snapshot["records"]["environment"]
    assert records["id"] == "studio-sandbox" and records["kind"] == "remote" and records["status"] == "connected"
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    page = (await client.get(reverse("studio:session_detail", args=[session.pk]))).content.decode()
    assert "Tools run in a sandbox: only this session&#x27;s workspace is visible, with no network." in page


def test_studio_starts_on_a_machine_without_bwrap_and_says_what_that_means(tmp_path: Path) -> None:
    """W15: ``manage.py studio`` (what ``dev.py studio`` runs) prepares and would serve without
    bwrap, and says that confined sessions have no shell."""
    env = {
        "PATH": "/usr/bin:/bin",
        "STUDIO_DATA_DIR": str(tmp_path / "data"),
        "STUDIO_SANDBOX": str(tmp_path / "missing-bwrap"),
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "studio", "--no-serve"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "No sandbox (bubblewrap" in done.stdout and "without bash, write and edit" in done.stdout


@pytest.mark.django_db
def test_the_sandbox_settings_hide_studios_data_and_are_checked(settings: Any, studio_data_dir: Path) -> None:
    """W15: the sandbox hides the data dir, the database, the key files and the workspaces
    base; ``STUDIO_SANDBOX`` and ``STUDIO_SANDBOX_NETWORK`` are validated, naming the setting."""
    from django.core.exceptions import ImproperlyConfigured

    from studio.confinement import configured_sandbox

    settings.STUDIO_SECRET_KEY_FILE = str(studio_data_dir / "secret_key")
    settings.STUDIO_WORKDIR_ROOT = str(studio_data_dir.parent / "root")
    sandbox = configured_sandbox()
    assert sandbox is not None and sandbox.bwrap == "bwrap" and sandbox.network is False
    data = studio_data_dir.resolve()
    assert {str(data), str(data / "secret_key"), str(data / "credentials_key"), str(data.parent / "root")} <= set(
        sandbox.hidden
    )
    settings.STUDIO_SANDBOX_NETWORK = True
    assert configured_sandbox().network is True  # type: ignore[union-attr]
    settings.STUDIO_SANDBOX = "off"
    assert configured_sandbox() is None
    for bad in ("sandbox-please", "relative/bwrap"):
        settings.STUDIO_SANDBOX = bad
        with pytest.raises(ImproperlyConfigured, match="STUDIO_SANDBOX must be bwrap"):
            configured_sandbox()
    settings.STUDIO_SANDBOX, settings.STUDIO_SANDBOX_NETWORK = "bwrap", "yes"
    with pytest.raises(ImproperlyConfigured, match="STUDIO_SANDBOX_NETWORK must be a boolean"):
        configured_sandbox()


@pytest.mark.django_db
def test_a_sandboxed_sessions_confinement_reads_one_row_however_many_sessions_its_owner_has(
    user: Any, demo_model: Any, other_user: Any
) -> None:
    """W15 (issue 25): checking that a confined session's workspace is still its owner's reads
    whether the workspace's own session is one of theirs — one row — instead of every session
    the person ever made (each page open and each Records render paid for all of them); its own
    fresh workspace (named by its id) is theirs by its own row and reads none; a workspace of
    another person's session is still refused."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from studio.confinement import confinement_of

    session = _new(user, demo_model)
    siblings = [_new(user, demo_model) for _ in range(30)]

    def reads() -> list[str]:
        session.refresh_from_db()
        with CaptureQueriesContext(connection) as queries:
            assert confinement_of(session).mode != "refused"
        return [q["sql"] for q in queries.captured_queries if "studio_studiosession" in q["sql"]]

    assert reads() == []
    StudioSession.objects.filter(pk=session.pk).update(workdir=siblings[0].workdir)
    [read] = reads()
    assert siblings[0].pk.hex in read
    theirs = _new(other_user, demo_model)
    StudioSession.objects.filter(pk=session.pk).update(workdir=theirs.workdir)
    session.refresh_from_db()
    assert confinement_of(session).mode == "refused"
    assert "is not a workspace of one of your sessions" in confinement_of(session).summary


@pytest.mark.django_db(transaction=True)
async def test_the_page_says_where_the_runtime_runs_its_tools_as_the_host_configured_it(
    user: Any, settings: Any, tmp_path: Path, host: Any, probing_server: FakeProviderServer
) -> None:
    """Issue 25: the page takes the confinement the host gave the session's runtime
    (``HostState.confinement``) instead of working it out again at every opening. So the banner
    and the Records tab say what the runtime really got, even after the server's sandbox setting
    changed under an open runtime (that change is for runtimes opened later)."""
    from studio.host.contract import HostState

    model = await scripted_model(probing_server)
    session = await sync_to_async(_new)(user, model)
    state = await host.state(str(session.pk))
    assert state.confinement is not None and state.confinement["mode"] == "sandbox"
    crossed = HostState.from_dict(json.loads(json.dumps(state.to_dict())))  # plain data, as it crosses to a worker
    assert crossed.confinement == state.confinement
    settings.STUDIO_SANDBOX = str(tmp_path / "no" / "bwrap")  # a row worked out now would have no shell
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    page = (await client.get(reverse("studio:session_detail", args=[session.pk]))).content.decode()
    sandboxed = "Tools run in a sandbox: only this session&#x27;s workspace is visible, with no network."
    assert sandboxed in page.split('id="records-tools-run"', 1)[1].split("</dd>", 1)[0]
    assert sandboxed in page.split('id="tools-banner"', 1)[1].split("</div>", 1)[0]
    offered = page.split('id="records-tools-run"', 1)[0].rsplit("<dt>Tools</dt>", 1)[1]
    assert '<code class="code-chip">bash</code>' in offered
