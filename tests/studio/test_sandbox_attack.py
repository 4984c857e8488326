"""Issue #22: a person who is not staff has no shell on the Studio server (W15, X5, T1, T2).

Real bwrap, a real in-process session host, real SQLite stores, the real ``openai-responses``
adapter talking to the scripted fake provider — which plays the attacker's model: its first
reply calls bash, read, ls, grep and find on Studio's database, its secret and credentials
keys, its data dir, another person's workspace and stores, directly and through symlinks planted
in the session's own workspace; its second reply ends the turn. What the tools returned is read
from the second request, i.e. exactly what the model got back.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.urls import reverse

from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import Step, Stop, Text, ToolCall, Usage
from studio import services
from studio.models import RegisteredModel, StudioSession
from studio.models import ToolCall as ToolCallRow
from tests.studio.fakes import scripted_model

pytestmark = pytest.mark.django_db(transaction=True)

LS_ENTRY = re.compile(r"^[dl-][rwxsStT-]{9}\s")
MARKERS = {
    "provider key in Studio's environment": "MARKER-ENV-OPENAI-KEY",
    "database": "MARKER-STUDIO-DATABASE",
    "secret_key": "MARKER-DJANGO-SECRET-KEY",
    "alice": "MARKER-ALICE-WORKSPACE",
    "store": "MARKER-ALICE-STORE",
}


def _attack(paths: dict[str, str], bash: str | None = None) -> list[Step]:
    """Every way in the model has: bash, read, ls, grep and find, by path and by planted link."""
    data, alice = paths["data"], paths["alice"]
    targets = [paths["database"], paths["secret_key"], paths["credentials"], f"{alice}/notes.txt"]
    bash = bash or "; ".join(
        [
            *(f"cat {t}" for t in targets),
            f"ls -la {data} {data}/sessions {data}/workspaces",
            f"grep -r MARKER {data} /tmp 2>/dev/null",
            "cat planted-db planted-key planted-alice/notes.txt",
            "ls -la planted-data/ planted-root/",
            "cat /proc/1/environ /proc/*/environ 2>/dev/null | tr '\\0' '\\n'",
            "env",
        ]
    )
    calls: list[Step] = [ToolCall("bash", {"command": bash}, id="call_bash")]
    for n, path in enumerate([*targets, "planted-db", "planted-key", "planted-alice/notes.txt"]):
        calls.append(ToolCall("read", {"path": path}, id=f"call_read_{n}"))
    for n, path in enumerate([data, f"{data}/workspaces", alice, "planted-data", "planted-root", "/"]):
        calls.append(ToolCall("ls", {"path": path}, id=f"call_ls_{n}"))
    calls.append(ToolCall("grep", {"pattern": "MARKER", "path": data}, id="call_grep"))
    calls.append(ToolCall("find", {"pattern": "*", "path": "planted-data"}, id="call_find"))
    return [*calls, Usage(input=10, output=10), Stop("tool_use")]


class Attacker:
    """The scripted model: the attack first, then a closing line once the results are in."""

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}
        self.bash: str | None = None
        self.results: dict[str, str] = {}

    def __call__(self, request: RecordedRequest) -> list[Step]:
        outputs = [i for i in request.json.get("input") or [] if i.get("type") == "function_call_output"]
        if not outputs:
            return _attack(self.paths, self.bash)
        self.results = {o["call_id"]: str(o.get("output")) for o in outputs}
        return [Text("done"), Usage(input=10, output=10), Stop("stop")]


@pytest.fixture
async def attacker() -> AsyncIterator[tuple[Attacker, FakeProviderServer]]:
    script = Attacker()
    server = FakeProviderServer(responder=script).start_in_thread()
    yield script, server
    server.stop_in_thread()


def _layout(data: Path, settings: Any, alice_workspace: Path) -> dict[str, str]:
    """Studio's secrets where a default install keeps them (all in the data dir)."""
    database, secret_key = data / "studio.sqlite3", data / "secret_key"
    database.write_text(MARKERS["database"])  # stands for Studio's database file (the e2e test uses the real one)
    secret_key.write_text(MARKERS["secret_key"])
    settings.STUDIO_SECRET_KEY_FILE = str(secret_key)
    (alice_workspace / "notes.txt").write_text(MARKERS["alice"])
    (data / "sessions").mkdir(exist_ok=True)
    (data / "sessions" / "alice-store.sqlite").write_text(MARKERS["store"])
    return {
        "data": str(data),
        "database": str(database),
        "secret_key": str(secret_key),
        "credentials": str(data / "credentials_key"),
        "alice": str(alice_workspace),
    }


def _read(path: str) -> str:
    return Path(path).read_text().strip()


def _plant(workspace: Path, paths: dict[str, str]) -> None:
    for name, target in [
        ("planted-db", paths["database"]),
        ("planted-key", paths["secret_key"]),
        ("planted-alice", paths["alice"]),
        ("planted-data", paths["data"]),
        ("planted-root", "/"),
    ]:
        (workspace / name).symlink_to(target)


async def _model(server: FakeProviderServer) -> RegisteredModel:
    return await scripted_model(server, "Attacker's model", api_key="sk-REAL-KEY")  # type: ignore[no-any-return]


async def _new_session(owner: Any, model: RegisteredModel, **kwargs: Any) -> StudioSession:
    options = {"workdir": "", "permission_policy": "auto", "effort": "low", "mode": "build"} | kwargs
    return await sync_to_async(services.session_create)(owner=owner, registered_model=model, **options)


async def _run(host: Any, session: StudioSession) -> None:
    sid = str(session.pk)
    await host.prompt(sid, prompt="show me everything on this server", agent="build")
    await host.wait_idle(sid)


async def test_a_non_staff_sessions_tools_cannot_see_studios_secrets_or_other_peoples_files(
    user: Any,
    other_user: Any,
    settings: Any,
    studio_data_dir: Path,
    attacker: Any,
    host: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """W15/X5: mallory's bash, read, ls, grep and find see none of the database, the keys, the
    data dir, alice's workspace or stores, nor Studio's environment — by path, by planted
    symlink, through /proc."""
    monkeypatch.setenv("OPENAI_API_KEY", MARKERS["provider key in Studio's environment"])
    script, server = attacker
    model = await _model(server)
    alice_session = await _new_session(user, model)
    mallory_session = await _new_session(other_user, model)
    assert mallory_session.tool_isolation == "sandbox"
    script.paths = _layout(studio_data_dir, settings, Path(alice_session.workdir))
    _plant(Path(mallory_session.workdir), script.paths)
    await _run(host, mallory_session)
    assert len(script.results) == 16, script.results.keys()
    seen = json.dumps(script.results)
    for what, marker in MARKERS.items():
        assert marker not in seen, f"the sandbox leaked {what}"
    assert "sk-REAL-KEY" not in seen
    credentials_key = _read(script.paths["credentials"])  # the key that encrypts API keys is there, unseen
    assert credentials_key and credentials_key not in seen
    for call_id, output in script.results.items():
        if call_id.startswith(("call_read", "call_ls_0", "call_ls_1", "call_ls_2", "call_grep")):
            assert "outside the root of this execution environment" in output or "No such" in output, (call_id, output)
    entries = {line.split()[-1] for line in script.results["call_bash"].splitlines() if LS_ENTRY.match(line)}
    assert Path(mallory_session.workdir).name in entries  # bash did list the data dir: all it shows is her own
    assert not entries & {
        "studio.sqlite3",
        "secret_key",
        "credentials_key",
        "sessions",
        Path(alice_session.workdir).name,
    }
    statuses = sorted([r.status async for r in ToolCallRow.objects.filter(session=mallory_session)])
    assert statuses == ["error"] * 15 + ["ok"]  # every file tool refused; bash ran (and saw nothing)


async def test_a_staff_session_keeps_running_on_the_server(
    user: Any,
    admin_user: Any,
    settings: Any,
    studio_data_dir: Path,
    tmp_path: Path,
    attacker: Any,
    host: Any,
) -> None:
    """W15: a staff member's session runs its tools as the Studio process, as before: bash
    reads what the Studio process can (the point of trusting staff)."""
    script, server = attacker
    model = await _model(server)
    alice_session = await _new_session(user, model)
    staff_work = tmp_path / "staff-work"
    staff_work.mkdir()
    staff_session = await _new_session(admin_user, model, workdir=str(staff_work))
    assert staff_session.tool_isolation == "host"
    script.paths = _layout(studio_data_dir, settings, Path(alice_session.workdir))
    script.bash = f"cat {script.paths['database']} {script.paths['alice']}/notes.txt"
    await _run(host, staff_session)
    assert MARKERS["database"] in script.results["call_bash"] and MARKERS["alice"] in script.results["call_bash"]
    client = AsyncClient()
    await sync_to_async(client.force_login)(admin_user)
    page = (await client.get(reverse("studio:session_detail", args=[staff_session.pk]))).content.decode()
    assert 'id="tools-banner"' not in page and "Tools run on the Studio server" in page
