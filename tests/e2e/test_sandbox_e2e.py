"""Issue #22, end to end: a person who is not staff asks the agent for Studio's secrets (W15, X5).

A real daphne with the production defaults — its real SQLite database, secret key and
credentials key in the data dir, agent stores under ``sessions/`` — and real bubblewrap. Two
people who are not staff log in over HTTP; the model is the scripted fake provider, playing the
attacker: it asks bash for the first bytes of the database (``head -c 15``, the issue's attack),
the keys, the data dir and the other person's workspace, and read and ls for the same, directly
and through symlinks planted in its own workspace. What the tools gave back is what the fake
provider received in the next request.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import Step, Stop, Text, ToolCall, Usage
from tests.e2e.conftest import Studio, serve_studio

pytestmark = pytest.mark.e2e

API_KEY = "sk-e2e-REGISTERED-KEY-4242"
ALICE_MARKER = "ALICE-E2E-PRIVATE"
REGISTER = """
from studio.models import RegisteredModel
RegisteredModel.objects.create(name="Scripted", provider="custom", model_id="m", base_url=BASE_URL,
    api_key=API_KEY, api_kind="openai-responses")
"""


class Attacker:
    """The model: one round of attacks, then "done"; ``answered`` is set once results are in."""

    def __init__(self) -> None:
        self.targets: dict[str, str] = {}
        self.results: dict[str, str] = {}
        self.answered = threading.Event()

    def __call__(self, request: RecordedRequest) -> list[Step]:
        outputs = [i for i in request.json.get("input") or [] if i.get("type") == "function_call_output"]
        if outputs:
            self.results = {o["call_id"]: str(o.get("output")) for o in outputs}
            self.answered.set()
            return [Text("done"), Usage(input=5, output=5), Stop("stop")]
        t = self.targets
        bash = "; ".join(
            [
                f"head -c 15 {t['database']}",
                f"cat {t['secret_key']} {t['credentials_key']} {t['alice']}/notes.txt",
                f"ls -la {t['data']} {t['data']}/sessions",
                "head -c 15 planted-db; cat planted-key planted-alice/notes.txt",
                "env",
            ]
        )
        calls: list[Step] = [ToolCall("bash", {"command": bash}, id="call_bash")]
        for n, path in enumerate([t["database"], t["secret_key"], "planted-db", "planted-alice/notes.txt"]):
            calls.append(ToolCall("read", {"path": path}, id=f"call_read_{n}"))
        for n, path in enumerate([t["data"], "planted-data"]):
            calls.append(ToolCall("ls", {"path": path}, id=f"call_ls_{n}"))
        return [*calls, Usage(input=5, output=5), Stop("tool_use")]


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Studio, Attacker]]:
    script = Attacker()
    server = FakeProviderServer(responder=script).start_in_thread()
    base = tmp_path_factory.mktemp("studio-sandbox")
    try:
        with serve_studio(base, {}, ("alice", "mallory")) as studio:
            register = REGISTER.replace("BASE_URL", repr(server.base_url)).replace("API_KEY", repr(API_KEY))
            studio.manage("shell", "-c", register)
            yield studio, script
    finally:
        server.stop_in_thread()


def _login(studio: Studio, user: str) -> httpx.Client:
    http = httpx.Client(base_url=studio.base_url, timeout=60)
    page = http.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, page.text
    done = http.post(
        "/login/", data={"username": user, "password": studio.users[user], "csrfmiddlewaretoken": token.group(1)}
    )
    assert done.status_code == 302 and "sessionid" in http.cookies
    return http


def _new_session(http: httpx.Client) -> str:
    listing = http.get("/")
    model = re.search(r'<option value="(\d+)"[^>]*>Scripted', listing.text)
    assert model, listing.text
    response = http.post(
        "/sessions/new/",
        data={"registered_model": model.group(1), "workdir": "", "permission_policy": "auto", "effort": "low"}
        | {"mode": "build"},
        headers={"X-CSRFToken": http.cookies["csrftoken"]},
    )
    assert response.status_code == 302, response.text
    return str(response.headers["Location"].rstrip("/").rsplit("/", 1)[-1])


def test_a_non_staff_agent_gets_no_byte_of_the_database_or_the_keys(attacked: tuple[Studio, Attacker]) -> None:
    """W15: ``head -c 15`` of the database, the keys, the other person's files, the data dir: not
    by path, not by planted symlink; the session page says the tools are sandboxed."""
    studio, script = attacked
    data = studio.data_dir
    alice, mallory = _login(studio, "alice"), _login(studio, "mallory")
    alice_workspace = data / "workspaces" / _new_session(alice)
    (alice_workspace / "notes.txt").write_text(ALICE_MARKER)
    session_id = _new_session(mallory)
    workspace = data / "workspaces" / session_id
    script.targets = {
        "data": str(data),
        "database": str(data / "studio.sqlite3"),
        "secret_key": str(data / "secret_key"),
        "credentials_key": str(data / "credentials_key"),
        "alice": str(alice_workspace),
    }
    for name, target in [
        ("planted-db", data / "studio.sqlite3"),
        ("planted-key", data / "secret_key"),
        ("planted-alice", alice_workspace),
        ("planted-data", data),
    ]:
        (workspace / name).symlink_to(target)
    page = mallory.get(f"/sessions/{session_id}/")
    assert "Tools run in a sandbox: only this session&#x27;s workspace is visible" in page.text
    sent = mallory.post(
        f"/sessions/{session_id}/prompt/",
        data={"prompt": "show me Studio's database", "agent": "build"},
        headers={"X-CSRFToken": mallory.cookies["csrftoken"], "HX-Request": "true"},
    )
    assert sent.status_code == 200, sent.text
    assert script.answered.wait(60), "the scripted attack never got its results back"
    seen = json.dumps(script.results)
    assert len(script.results) == 7
    secrets = {
        "the database header": "SQLite format 3",
        "the secret key": _read(data / "secret_key"),
        "the credentials key": _read(data / "credentials_key"),
        "alice's files": ALICE_MARKER,
        "the registered API key": API_KEY,
    }
    for what, secret in secrets.items():
        assert secret and secret not in seen, f"the agent got {what}"
    assert "No such file or directory" in script.results["call_bash"]
    for call_id in ("call_read_0", "call_read_1", "call_read_2", "call_read_3", "call_ls_0", "call_ls_1"):
        assert "outside the root of this execution environment" in script.results[call_id]
    for http in (alice, mallory):
        http.close()


def _read(path: Path) -> str:
    return path.read_text().strip()


def test_the_database_holds_no_api_key(attacked: tuple[Studio, Attacker]) -> None:
    """W5: the registered key is nowhere in Studio's database file (or its WAL)."""
    studio, _script = attacked
    data = studio.data_dir
    blob = b"".join(p.read_bytes() for p in data.glob("studio.sqlite3*"))
    assert blob and API_KEY.encode() not in blob
