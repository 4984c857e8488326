"""Text a code-mode script hands the host is made valid UTF-8 before anything is committed (SPEC X4, D1).

A JavaScript string may hold a lone UTF-16 surrogate (``'\\ud800'``). The worker sends it as a
JSON escape; decoded, it is a Python str no UTF-8 store can hold. Every way a script hands text
over — ``text()``, ``console.log``, a thrown error, a ``store()`` key, a tool name — reaches the
code-mode result the host commits. Each test runs a real script in the real worker through the
real engine on a SQLite store; the session goes on afterwards and its store opens again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentcore import create_agent
from agentcore.errors import StoreError
from agentcore.harness import Commit, SqliteStorageFactory
from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Text, ToolCall
from tests.agentcore.child_process import spawn
from tests.agentcore.codemode_helpers import codemode_end, worker_pids
from tests.agentcore.session_helpers import run_with
from tests.agentcore.test_codemode_crash import CHILD, kill_inside, lines, stored
from tests.agentcore.test_crash_resume import assert_store_invariants

COMPLETIONS = "openai-completions"
SHOWN = "a\\ud800b"  # how the host shows 'a' + lone surrogate + 'b': the escape, as for tool results


@pytest.fixture(autouse=True)
def no_worker_left_behind():
    yield
    assert worker_pids() == [], "every sandbox worker is reaped when its script ends"


async def open_agent(fake_server: Any, db: Path, workspace: Path, **options: Any) -> Any:
    options.setdefault("database_path", str(db))
    return await create_agent(
        provider="fake",
        model="m",
        base_url=fake_server.base_url,
        api_key="k",
        api_kind=COMPLETIONS,
        workdir=str(workspace),
        session={"code_mode": {"timeout_ms": 30_000}},
        **options,
    )


FORMS = {
    "text": ("text('a\\ud800b')", False, SHOWN),
    "console.log": ("console.log('a\\ud800b')", False, SHOWN),
    "throw": ("throw new Error('a\\ud800b')", True, f"The script threw: Error: {SHOWN}"),
    "store": ("store('k\\ud800', 1); return 'stored'", False, 'Return value: "stored"'),
    "tool name": ("await tools['x\\ud800']()", True, "tools.x\\ud800 is not available in code mode"),
}


@pytest.mark.parametrize("form", list(FORMS))
async def test_a_lone_surrogate_from_a_script_is_escaped_and_the_session_goes_on(
    form: str, fake_server, tmp_path: Path, workspace: Path
) -> None:
    """X4 / D1: text(), console.log, a thrown Error, a store() key and a tools[...] name holding a
    lone surrogate: the result is committed with the surrogate as the escape ``\\ud800`` (the
    tool-result convention), the model gets the same text, the next request of the session runs
    and the store opens again."""
    code, is_error, shown = FORMS[form]
    db = tmp_path / "agent.sqlite"
    fake_server.enqueue(
        [ToolCall("codemode", {"code": code}, id="hostile")],
        [Text("done")],
        [ToolCall("codemode", {"code": "return load('k\\\\ud800') ?? 'none'"}, id="after")],
        [Text("done")],
    )
    async with await open_agent(fake_server, db, workspace) as agent:
        end = codemode_end(await run_with(agent, {"prompt": "hostile", "request_id": "h"}))
        assert end.is_error is is_error and shown in end.result, end.result
        assert fake_server.requests[1].json["messages"][-1]["content"] == end.result
    (finished,) = stored(db, "code_run_end")
    record = finished.payload
    if form in ("text", "console.log"):
        assert record["output"] == SHOWN + "\n"
    if form == "throw":
        assert record["error"].startswith(f"The script threw: Error: {SHOWN}")
    if form == "store":
        assert record["stored"] == ["k\\ud800"]
    if form == "tool name":
        (refused,) = stored(db, "nested_result")
        assert (refused.payload["name"], refused.payload["status"]) == ("x\\ud800", "blocked")
    async with await open_agent(fake_server, db, workspace) as agent:
        after = codemode_end(await run_with(agent, {"prompt": "after", "request_id": "a"}))
        expected = "1" if form == "store" else '"none"'
        assert after.result == f"Return value: {expected}" and not after.is_error


class RefusingFirstResult:
    """A SQLite store that refuses the first commit of a code-mode result the way the store
    refused a result holding a lone surrogate before the host repaired it (``store_invalid``,
    nothing written): what such a commit left behind is a store whose reopen resumes that result."""

    def __init__(self, db: Path) -> None:
        self.inner = SqliteStorageFactory(str(db))
        self.label = self.inner.label
        self.refused = 0

    def open(self) -> Any:
        storage, release = self.inner.open()
        factory = self

        class Refusing:
            label = storage.label

            def load(self) -> Any:
                return storage.load()

            def commit(self, commit: Commit) -> int:
                if not factory.refused and any(e.kind == "code_run_end" for e in commit.entries):
                    factory.refused += 1
                    raise StoreError("store_invalid", "entry holds text that is not valid UTF-8 (a lone surrogate)")
                return storage.commit(commit)

            def close(self) -> None:
                storage.close()

        return Refusing(), release


async def test_a_store_wedged_by_a_refused_result_resumes_and_finishes(
    fake_server, tmp_path: Path, workspace: Path
) -> None:
    """X4 / D1 / D3: the state an unrepaired result left (its commit refused, the request open)
    reopens and resumes: the script runs again from its log, its text is repaired, the result is
    committed and the turn ends; a new request runs after it."""
    db = tmp_path / "wedged.sqlite"
    code = """
        text('a\\ud800b'); store('k\\ud800', 1);
        await tools['x\\ud800']().catch(() => 0);
        throw new Error('\\ud800');
    """
    fake_server.enqueue([ToolCall("codemode", {"code": code}, id="c1")], [Text("resumed")])
    factory = RefusingFirstResult(db)
    async with await open_agent(fake_server, db, workspace, database_path=None, storage=factory) as agent:
        with pytest.raises(StoreError):
            await run_with(agent, {"prompt": "go", "request_id": "job"})
    assert factory.refused == 1 and stored(db, "code_run_end") == []

    async with await open_agent(fake_server, db, workspace) as agent:
        events = await run_with(agent, {"prompt": "go", "request_id": "job"})
        end = codemode_end(events)
        assert end.is_error and end.result.startswith(SHOWN) and "The script threw: Error: \\ud800" in end.result
        assert [e.status for e in events if e.type == "end"] == ["completed"]
        fake_server.enqueue([Text("next")])
        after = await run_with(agent, {"prompt": "next", "request_id": "next"})
        assert [e.status for e in after if e.type == "end"] == ["completed"]
    (finished,) = stored(db, "code_run_end")
    assert finished.payload["stored"] == ["k\\ud800"] and finished.payload["output"] == SHOWN + "\n"
    assert_store_invariants(db)


CRASHING = """
    text('before \\ud800');
    store('k\\ud800', 1);
    try { await tools.effect({tag: "two", hang: true}); } catch (e) { text('unknown \\udfff'); }
    throw new Error('after \\ud800');
"""


@pytest.mark.crash
async def test_a_crash_inside_a_script_with_lone_surrogates_resumes_and_commits_the_repaired_result(
    tmp_path: Path, workspace: Path
) -> None:
    """X4 / D2: SIGKILL while the script's `never` call runs; the resumed script replays its log,
    the call is "outcome unknown", and the result with every lone surrogate escaped is committed:
    the reopened run completes (no store_invalid) and the store keeps its invariants."""
    db = tmp_path / "crash.sqlite"
    effects = workspace / "effects.txt"
    async with FakeProviderServer() as server:
        server.enqueue([ToolCall("codemode", {"code": CRASHING}, id="c1")], [Text("done")])
        args = ("--db", str(db), "--base-url", server.base_url, "--workdir", str(workspace), "--request-id", "job")
        await kill_inside(await spawn(CHILD, *args), lambda: "two" in lines(effects))
        events = await (await spawn(CHILD, *args)).run_to_end()
    assert [e["status"] for e in events if e["type"] == "end"] == ["completed"]
    result = next(e for e in events if e["type"] == "tool" and e["name"] == "codemode" and e["phase"] == "end")
    assert result["result"].startswith("before \\ud800\nunknown \\udfff\nThe script threw: Error: after \\ud800")
    assert lines(effects) == ["two"], "the never call did not run again"
    (finished,) = stored(db, "code_run_end")
    assert finished.payload["stored"] == ["k\\ud800"]
    assert_store_invariants(db)
