"""W3: the Trace is built from the session snapshot alone (task tree, records, usage, plan),
and the live turn finds where it starts in the transcript (pure functions, no I/O)."""

from __future__ import annotations

from typing import Any

import pytest
from django.template.loader import render_to_string

from studio import trace, trace_records
from studio.host.live import ContextLive
from tests.studio.html_parts import element, elements, text


def _task(task_id: str, kind: str, name: str, status: str, target: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "kind": kind,
        "name": name,
        "status": status,
        "stopping": False,
        "target_id": target,
        "parent_task_id": extra.pop("parent", None),
        "arguments": extra.pop("arguments", None),
        "result": extra.pop("result", None),
        "error": None,
        "background": False,
        "detail": extra,
    }


SNAPSHOT: dict[str, Any] = {
    "contexts": [
        {"target_id": 0, "kind": "main", "parent_target_id": None, "label": "main", "status": "running"},
        {"target_id": 1, "kind": "subagent", "parent_target_id": 0, "label": "look around", "status": "idle"},
        {"target_id": 2, "kind": "fork", "parent_target_id": 0, "label": "fork", "status": "idle"},
    ],
    "tasks": [
        _task("e1:call-pair", "tool", "run_example_tasks", "running", arguments={"seconds": 5}),
        _task("task-pair", "task", "example.pair", "waiting", version=1, created_ms=2000, request_id="e1:call-pair",
              waiting_on=["task-a", "task-b"], checkpoint={"children": ["task-a", "task-b"]}),
        _task("task-a", "task", "example.timer", "running", parent="task-pair", version=1, created_ms=2001,
              wake_at=9_000_000_000_000, checkpoint={"label": "first child", "wake_at": 9_000_000_000_000}),
        _task("task-blocked", "task", "app.gone", "blocked", version=3, created_ms=50,
              blocked_reason="task definition 'app.gone' is not installed"),
    ],
    "history": [
        _task("task-b", "task", "example.timer", "completed", parent="task-pair", version=1, created_ms=2002,
              outcome={"status": "completed", "result": {"label": "second child"}}),
        _task("e0:call-sub", "tool", "subagent", "completed", arguments={"task": "look around"}),
        _task("main/sub/e0:call-sub", "subagent", "look around", "completed", target=1, parent="e0:call-sub"),
        _task("s1:call-ls", "tool", "ls", "completed", target=1, arguments={"path": "."}),
        _task("f1:call-x", "tool", "read", "completed", target=2),
    ],
    "history_total": 5,
    "turns": [{"request_id": "r1", "target_id": 0, "status": "running"}],
    "turns_total": 1,
    "usage": [
        {"target_id": 0, "own": {"calls": 2, "total_tokens": 100, "cost": 0.5},
         "total": {"calls": 3, "total_tokens": 160, "cost": 0.75}},
        {"target_id": 1, "own": {"calls": 1, "total_tokens": 60, "cost": 0.25},
         "total": {"calls": 1, "total_tokens": 60, "cost": 0.25}},
    ],
}  # fmt: skip


def _names(nodes: list[trace.TaskNode]) -> list[str]:
    return [node.name for node in nodes]


def test_the_task_tree_nests_parents_children_and_subagents() -> None:
    tree = trace.task_tree(SNAPSHOT, 0, timings={"e1:call-pair": {"duration_ms": 5.0, "started_ms": 1999}})
    # Active: the blocked task, then the call that started the pair (still active below it).
    assert _names(tree.active) == ["app.gone", "run_example_tasks"]
    [pair] = tree.active[1].children
    assert (pair.name, pair.status, pair.waiting_on) == ("example.pair", "waiting", ["task-a", "task-b"])
    assert [(c.name, c.status) for c in pair.children] == [("example.timer", "running"), ("example.timer", "completed")]
    running = pair.children[0]
    assert running.wake_at == 9_000_000_000_000 and running.key_argument == "first child" and running.cancellable
    assert pair.children[1].wake_at is None  # a finished timer has no countdown
    blocked = tree.active[0]
    assert blocked.state_label == "blocked" and "not installed" in blocked.blocked_reason and blocked.version == 3
    # History: the subagent under its call, the subagent's own calls under it; a fork's are not here.
    [call] = tree.history
    [subagent] = call.children
    assert (subagent.kind, subagent.subagent_target, _names(subagent.children)) == ("subagent", 1, ["ls"])
    assert tree.running == 4 and tree.finished == 4
    assert all(node.name != "read" for node in [*tree.active, *tree.history])


def test_a_subagents_own_view_shows_its_work_under_it() -> None:
    tree = trace.task_tree(SNAPSHOT, 1)
    [subagent] = tree.history
    assert subagent.kind == "subagent" and _names(subagent.children) == ["ls"]


def test_stopping_is_shown_until_the_task_ends_and_is_not_cancellable_twice() -> None:
    snapshot = {**SNAPSHOT, "tasks": [{**SNAPSHOT["tasks"][2], "parent_task_id": None, "stopping": True}]}
    [node] = trace.task_tree(snapshot, 0).active
    assert node.state_label == "stopping" and not node.cancellable


def test_history_is_paged_newest_first() -> None:
    history = [_task(f"t{n}", "task", "example.timer", "completed", created_ms=n) for n in range(120)]
    snapshot = {"contexts": [{"target_id": 0, "kind": "main"}], "tasks": [], "history": history}
    first = trace.task_tree(snapshot, 0)
    assert [n.task_id for n in first.history[:2]] == ["t119", "t118"] and len(first.history) == trace.HISTORY_PAGE
    assert first.history_more == 70
    last = trace.task_tree(snapshot, 0, page=2)
    assert [n.task_id for n in last.history] == [f"t{n}" for n in range(19, -1, -1)] and last.history_more == 0


def test_view_status_counts_background_work_and_waits_for_nothing_else() -> None:
    assert trace.view_status(SNAPSHOT, 0) == "running"
    idle_main = {**SNAPSHOT, "contexts": [{**SNAPSHOT["contexts"][0], "status": "idle"}]}
    assert trace.view_status(idle_main, 0) == "running"  # a timer and a blocked task are still active
    quiet = {**idle_main, "tasks": [], "turns": [{"request_id": "r1", "target_id": 0, "status": "failed"}]}
    assert trace.view_status(quiet, 0) == "failed"
    paused = {**quiet, "contexts": [{**SNAPSHOT["contexts"][0], "status": "paused"}]}
    assert trace.view_status(paused, 0) == "waiting"
    assert trace.view_status(quiet, 0, live=True) == "running"


def test_usage_lists_subagents_separately_and_totals_once() -> None:
    usage = trace.usage_for(SNAPSHOT, 0)
    assert usage["own"]["calls"] == 2 and usage["total"]["calls"] == 3
    assert [(c["label"], c["own"]["calls"]) for c in usage["children"]] == [("look around", 1)]
    assert usage["total"]["total_tokens"] == usage["own"]["total_tokens"] + usage["children"][0]["own"]["total_tokens"]


# Shapes as agentcore's records write them (``records["catalogs"]`` from the catalogs extension,
# ``records["environment"]`` from the environment extension, ``records["code_mode"]`` from code
# mode), with a credential-looking field added that must never be rendered.
DRIFT = (
    "tool 'crm_find' differs from the definition this session saved (description, schema changed in catalog "
    "'crm'); the connection was closed. Using the changed tool needs a new session."
)
RECORDS = {
    "storage": {"label": "/data/s.sqlite", "kind": "sqlite", "owner_id": "o1"},
    "environment": {"id": "box-1", "label": "Build box", "kind": "remote", "status": "error",
                    "message": "execution environment 'Build box' (box-1) stopped during the call — its worker was "
                               "killed by signal 9", "cwd": "/srv/work", "api_token": "tok-secret-123"},
    "extensions": [{"name": "example", "version": "1.0", "tasks": [{"name": "example.timer", "version": 1}],
                    "tools": ["start_timer"], "docs": [], "hooks": []}],
    "catalogs": [
        {"id": "files", "kind": "mcp", "info": {"transport": "stdio", "target": "/usr/bin/files-mcp"},
         "declared_tools": 2, "allowed_tools": 2, "saved_tools": 2, "source": "declared", "status": "connected",
         "error": None},
        {"id": "crm", "kind": "mcp", "info": {"transport": "http", "target": "https://crm.example/mcp"},
         "declared_tools": 0, "allowed_tools": 3, "saved_tools": 3, "source": "discovered", "status": "error",
         "error": DRIFT, "missing": ["crm_gone"], "headers": {"Authorization": "Bearer tok-secret-123"}},
        {"id": "wiki", "kind": "custom", "info": {}, "declared_tools": 0, "allowed_tools": 1, "saved_tools": 0,
         "source": None, "status": "error", "error": "could not connect to catalog 'wiki': refused; call again"},
        {"id": "docs", "kind": "mcp", "info": {"transport": "stdio", "target": "docs-mcp"}, "declared_tools": 0,
         "allowed_tools": 4, "saved_tools": 0, "source": None, "status": "declared", "error": None},
    ],
    "code_mode": {"enabled": True, "engine": "quickjs 1.19.4", "fingerprint": "sha256:abc",
                  "limits": {"memory_limit_bytes": 67108864, "timeout_ms": 300000, "max_calls": 500,
                             "max_output_chars": 50000}, "executions_total": 0, "executions": []},
    "registry": {"serial": 4, "hook_errors": 1},
}  # fmt: skip


def test_catalog_records_show_state_counts_and_a_drift_apart_from_a_failed_connection() -> None:
    """W3/X3: declared / connected / error, the tool counts and the error text; a drift (a tool
    that changed since the session saved it) is labelled as one, a refused connect is not."""
    files, crm, wiki, docs = trace_records.records_sections(RECORDS)["catalogs"]
    assert (files.status, files.state, files.state_label, files.transport) == ("connected", "ok", "connected", "stdio")
    assert (crm.state, crm.state_label, crm.drift, crm.missing) == ("error", "drift", True, ["crm_gone"])
    assert (wiki.state, wiki.state_label, wiki.drift) == ("error", "error", False)
    assert (docs.state_label, docs.source, docs.saved_tools, docs.allowed_tools) == ("declared", "", 0, 4)


def test_environment_records_say_where_the_tools_run_and_why_they_cannot() -> None:
    """W3/X5: id, label, local or remote, the status and its message, the working directory."""
    env = trace_records.records_sections(RECORDS)["environment"]
    assert (env.id, env.label, env.remote, env.status, env.state) == ("box-1", "Build box", True, "error", "error")
    assert "killed by signal 9" in env.message and env.cwd == "/srv/work"
    fresh = trace_records.environment_record({"id": "w", "label": "W", "kind": None, "status": "not_connected"})
    assert fresh is not None and (fresh.kind, fresh.remote, fresh.state_label) == ("", False, "not connected")
    assert trace_records.records_sections({})["environment"] is None


def test_code_mode_in_records_lists_its_limits_and_engine() -> None:
    item = trace_records.records_sections(RECORDS)["code_mode"]
    fields = dict(item.fields)
    assert (item.title, item.state_label) == ("quickjs 1.19.4", "on")
    assert (fields["Memory limit"], fields["Timeout"], fields["Calls per script"]) == ("64 MiB", "300 s", 500)
    assert (fields["Output kept"], fields["Sandbox"]) == ("50,000 characters", "sha256:abc")
    assert trace_records.records_sections({"code_mode": None})["code_mode"] is None


@pytest.mark.django_db
def test_the_records_tab_renders_a_remote_environment_and_a_catalog_in_drift() -> None:
    """W3: sections appear when the snapshot's records have them; secrets never do."""
    context = {
        "sections": trace_records.records_sections(RECORDS),
        "records": {
            "model": {"name": "m", "model_id": "m", "api_key": "set"},
            "tools": [],
            "size": 10,
            "schema_version": 2,
            "store_path": "/data/s.sqlite",
        },
        "config": {"model_id": "m", "effort": "high", "version": 2},
        "runtime_model": {},
    }
    html = render_to_string("studio/_tab_records.html", context)
    environment = element(html, id="records-environment")
    assert "badge-remote" in environment and "Build box" in environment and "/srv/work" in environment
    assert "killed by signal 9" in text(element(environment, css="record-error"))
    crm = element(html, attr=("data-catalog", "crm"))
    assert "state-error" in crm and text(element(crm, css="catalog-status")) == "drift"
    assert "differs from the definition" in text(element(crm, css="record-error"))
    assert "3 allowed · 0 declared · 3 saved" in text(crm) and "https://crm.example/mcp" in crm
    assert text(element(element(html, attr=("data-catalog", "docs")), css="catalog-status")) == "declared"
    assert "example.timer v1" in html and "64 MiB" in text(element(html, id="records-code-mode"))
    assert "1 hook error" in html
    assert "tok-secret-123" not in html and "api_token" not in html


# --- code mode ---------------------------------------------------------------------------------


def _execution(task_id: str, status: str, calls: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "task_id": task_id, "call_key": "r1/0/0", "request_id": "r1", "target_id": 0, "status": status,
        "script": "const a = await tools.ls({});\nreturn a;", "script_truncated": False,
        "engine": "quickjs 1.19.4", "fingerprint": "sha256:abc",
        "limits": {"memory_limit_bytes": 33554432, "timeout_ms": 10000, "max_calls": 500, "max_output_chars": 50000},
        "started_ms": 1796086521561, "output": "", "output_truncated": False, "return_json": None, "error": None,
        "elapsed_ms": None, "duration_ms": None, "worker_start_ms": None, "stored": [], "replayed": [],
        "calls": calls, "calls_total": len(calls), **extra,
    }  # fmt: skip


def _nested(index: int, name: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"index": index, "name": name, "arguments": {"path": "."}, "status": status, "ok": extra.pop("ok", None),
            "result": extra.pop("result", None), "duration_ms": extra.pop("duration_ms", None), "at_ms": 3,
            "replayed": extra.pop("replayed", False), "rerun": False, "replay": "safe"}  # fmt: skip


def test_code_mode_runs_are_found_in_tasks_history_and_records_by_the_call_id() -> None:
    """X4/W3: the codemode call's task detail is its execution; the records' newest executions
    fill in the rest; for one call id the fresher picture wins."""
    running = _execution("e1:c1", "running", [_nested(0, "ls", "completed", ok=True, result="a\nb")])
    fresher = _execution("e1:c1", "running", [_nested(0, "ls", "completed", ok=True), _nested(1, "read", "in_flight")])
    settled = _execution("e0:c0", "completed", [], return_json="1")
    snapshot = {
        "tasks": [{"task_id": "e1:c1", "kind": "tool", "name": "codemode", "detail": running}],
        "history": [{"task_id": "e0:c0", "kind": "tool", "name": "codemode", "detail": settled},
                    {"task_id": "e0:c9", "kind": "tool", "name": "ls", "detail": {}}],
        "records": {"code_mode": {"executions": [fresher]}},
    }  # fmt: skip
    runs = trace.code_mode_runs(snapshot)
    assert set(runs) == {"e1:c1", "e0:c0"}
    view = trace.code_mode_run(runs["e1:c1"])
    assert [(c.index, c.name, c.label, c.css) for c in view.calls] == [
        (0, "ls", "completed", "ok"),
        (1, "read", "running", "running"),
    ]
    assert view.running and view.css == "running" and view.calls_total == 2 and view.more_calls == 0
    assert trace.code_mode_run(runs["e0:c0"]).return_value == 1
    assert trace.code_mode_runs(None) == {} and trace.code_mode_runs({"records": {"code_mode": None}}) == {}


def test_a_code_mode_call_the_snapshot_no_longer_lists_still_shows_its_script() -> None:
    view = trace.code_mode_run(None, {"code": "// first\n\nreturn 1;"})
    assert view.execution is None and view.script.endswith("return 1;") and view.calls == []
    assert trace.script_summary({"code": "// a comment\n\n  const x = 1;\nreturn x;"}) == "const x = 1;"
    listed = _execution("t", "timeout", [_nested(i, "ls", "completed") for i in range(50)], calls_total=75)
    assert trace.code_mode_run(listed).more_calls == 25 and trace.code_mode_run(listed).css == "error"


@pytest.mark.django_db
def test_the_code_mode_panel_highlights_the_script_and_keeps_everything_else_text() -> None:
    """X4/W3/W6: the script is highlighted by Pygments (escaped), arguments, results, output and
    the return value are escaped text; hostile script text never becomes markup."""
    hostile = '<img src=x onerror="window.__pwned=1">'
    execution = _execution(
        "e1:c1",
        "failed",
        [_nested(0, "read", "failed", ok=False, result=f"no such file {hostile}", duration_ms=2.5),
         _nested(1, "ls", "completed", ok=True, result="README.md", replayed=True)],
        script=f"// {hostile}\nconst r = await tools.read({{path: '{hostile}'}});",
        output=f"line {hostile}\n",
        return_json='{"html": "</pre><script>alert(1)</script>"}',
        error="The script threw: Error: boom",
        duration_ms=12.0,
        stored=["k"],
    )  # fmt: skip
    html = render_to_string("studio/_code_mode.html", {"run": trace.code_mode_run(execution)})
    assert "<img" not in html and "<script>" not in html
    assert '<span class="c1">' in element(html, css="cm-script")  # a highlighted comment
    failed, replayed = elements(html, css="cm-call")
    assert 'data-status="failed"' in failed and "code-error" in element(failed, css="cm-result")
    assert f"no such file {hostile}" == text(element(failed, css="cm-result"))
    assert "from the log" in text(replayed) and 'data-status="completed"' in replayed
    assert text(element(html, css="cm-output")) == f"line {hostile}"
    assert "</pre><script>alert(1)</script>" in text(element(html, css="cm-return"))
    assert text(element(html, css="cm-error")) == "The script threw: Error: boom"
    log = text(element(html, css="cm-log"))
    assert "quickjs 1.19.4" in log and "sha256:abc" in log and "Stored keys" in log


# --- where a live turn starts --------------------------------------------------------------------


def _msg(role: str, text: str, entry: str, request: str | None, **extra: Any) -> dict[str, Any]:
    content = [{"type": "text", "text": text}]
    return {"role": role, "content": content, "entry_id": entry, "request_id": request, **extra}


TRANSCRIPT = [
    _msg("user", "one", "e1", "r1"),
    _msg("assistant", "a1", "e2", "r1"),
    _msg("user", "a steer", "e3", "r1"),  # a steer is written by the turn it joined
    _msg("assistant", "a2", "e4", "r1"),
    _msg("user", "[Background subagent 1 finished: look]\n\nresult", "e5", "rd", synthetic=True),
    _msg("assistant", "a3", "e6", "rd"),
    _msg("user", "one", "e7", "r2"),  # the same words again: told apart by the request id
    _msg("user", "the model continued", "e8", "r2", synthetic=True),
]


def test_a_live_turn_is_its_requests_messages_never_a_guess_from_their_text() -> None:
    """W2: the live turn is keyed by the runtime's request id: the messages of that request are
    the live turn's (steers and continuations included), everything before is settled."""
    ctx = ContextLive(0)
    ctx.begin("r2")
    assert ctx.settled_len(TRANSCRIPT) == 6
    ctx.begin("rd")
    assert ctx.settled_len(TRANSCRIPT[:6]) == 4  # the delivered result opens its own turn
    ctx.begin("r1")
    assert ctx.settled_len(TRANSCRIPT[:4]) == 0
    ctx.begin("r3")
    assert ctx.settled_len(TRANSCRIPT) == len(TRANSCRIPT)  # accepted, nothing of it stored yet


def test_a_context_renders_everything_before_its_live_turn_from_the_store() -> None:
    ctx = ContextLive(0)
    live = ctx.begin("r2")
    assert live.request_id == "r2" and ctx.settled_len(TRANSCRIPT) == 6
    ctx.end("r2")
    assert ctx.settled_len(TRANSCRIPT) == len(TRANSCRIPT) and "r2" in ctx.ended
    resumed = ctx.begin_after(TRANSCRIPT, request_id="r2")
    assert resumed.resumed and ctx.settled_len([*TRANSCRIPT, _msg("assistant", "x", "e9", "r2")]) == 8
    assert "r2" not in ctx.ended


@pytest.mark.django_db
def test_a_codemode_row_says_starting_until_a_snapshot_lists_its_execution() -> None:
    """A live ``codemode`` block before the snapshot has its execution says it is starting; a
    finished one the snapshot no longer lists says so (and still shows its script)."""
    from studio.host.live import LiveBlock
    from studio.rendering import render_block

    block = LiveBlock(key="b0", kind="tool", tool_call_id="e1:c1", name="codemode",
                      arguments={"code": "return 1;"}, status="running")  # fmt: skip
    assert "Starting the script" in render_block(block, "lv", {})
    block.status, block.result = "ok", "Return value: 1"
    html = render_block(block, "lv", {})
    assert "no longer lists" in html and "Return value: 1" in html and "return" in text(element(html, css="cm-script"))
    listed = render_block(block, "lv", {"e1:c1": _execution("e1:c1", "completed", [_nested(0, "ls", "completed")])})
    assert "cm-call" in listed and "no longer lists" not in listed and "1 call" in text(element(listed, css="cm-count"))


@pytest.mark.django_db
def test_the_tasks_tab_lists_nested_calls_of_the_newest_scripts_only() -> None:
    """Every trace push re-renders the Tasks tab: the newest finished scripts (and every running
    one) list their nested calls; older ones show the script and a count, so a session with many
    scripts costs a bounded render."""

    def script_task(task_id: str, status: str, detail: dict[str, Any]) -> dict[str, Any]:
        return {**_task(task_id, "tool", "codemode", status, arguments={"code": "return 1;"}), "detail": detail}

    history = [
        script_task(f"e{i}:c", "completed",
                    _execution(f"e{i}:c", "completed", [_nested(0, "ls", "completed")], started_ms=1000 + i))
        for i in range(8)
    ]  # fmt: skip
    running = script_task("e9:c", "running", _execution("e9:c", "running", []))
    tree = trace.task_tree({"tasks": [running], "history": history}, 0)
    brief = sorted(n.task_id for n in tree.history if n.code_brief)
    assert brief == ["e0:c", "e1:c", "e2:c"] and not tree.active[0].code_brief
    html = render_to_string("studio/_tab_tasks.html", {"tree": tree, "session": {"target_id": 0}})
    assert len(elements(html, css="cm-brief")) == 3 and len(elements(html, css="cm-calls")) == 5
    assert html.count('class="code hl cm-script"') == 9  # every script is shown
