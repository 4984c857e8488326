"""W3: the Trace is built from the session snapshot alone (task tree, records, usage, plan),
and the live turn finds where it starts in the transcript (pure functions, no I/O)."""

from __future__ import annotations

from typing import Any

import pytest
from django.template.loader import render_to_string

from studio import trace
from studio.live import ContextLive, find_turn_start


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


RECORDS = {
    "storage": {"label": "/data/s.sqlite", "kind": "sqlite", "owner_id": "o1"},
    "environment": {"id": "box-1", "label": "Build box", "kind": "remote", "status": "error",
                    "error": "connection refused by box-1", "api_token": "tok-secret-123"},
    "extensions": [{"name": "example", "version": "1.0", "tasks": [{"name": "example.timer", "version": 1}],
                    "tools": ["start_timer"], "docs": [], "hooks": []}],
    "catalogs": [
        {"id": "files", "status": "connected", "tools": ["files_read"]},
        {"id": "crm", "status": "drift", "error": "tool crm_find changed its schema since the session saw it"},
    ],
    "code_mode": {"memory_limit_bytes": 67108864, "timeout_ms": 300000},
    "registry": {"serial": 4, "hook_errors": 1},
}  # fmt: skip


def test_records_sections_are_generic_and_never_show_credentials() -> None:
    sections = trace.records_sections(RECORDS)
    assert sections["environment_remote"] and sections["environment"].state == "error"
    assert "connection refused" in sections["environment"].error
    assert [(c.title, c.state) for c in sections["catalogs"]] == [("files", "ok"), ("crm", "error")]
    assert "api_token" not in dict(sections["environment"].fields)
    assert dict(sections["code_mode"].fields)["timeout_ms"] == 300000
    local = trace.records_sections({"environment": {"id": "local", "kind": "local", "status": "ready"}})
    assert not local["environment_remote"] and local["catalogs"] is None and not local["code_mode_present"]


@pytest.mark.django_db
def test_the_records_tab_renders_a_remote_environment_and_a_catalog_in_drift() -> None:
    """W3: sections appear when the snapshot's records have them; secrets never do."""
    context = {
        "sections": trace.records_sections(RECORDS),
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
    assert "badge-remote" in html and "Build box" in html and "connection refused by box-1" in html
    assert "crm" in html and "changed its schema" in html and "state-error" in html
    assert "example.timer v1" in html and "67108864" in html and "1 hook error" in html
    assert "tok-secret-123" not in html and "api_token" not in html


# --- where a live turn starts --------------------------------------------------------------------


def _msg(role: str, text: str, entry: str, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}], "entry_id": entry, **extra}


TRANSCRIPT = [
    _msg("user", "one", "e1"),
    _msg("assistant", "a1", "e2"),
    _msg("user", "a steer", "e3"),
    _msg("assistant", "a2", "e4"),
    _msg("user", "[Background subagent 1 finished: look]\n\nresult", "e5", synthetic=True),
    _msg("assistant", "a3", "e6"),
    _msg("user", "two", "e7"),
    _msg("user", "the model continued", "e8", synthetic=True),
]


def test_the_next_turn_starts_after_the_previous_one_and_skips_steers() -> None:
    assert find_turn_start(TRANSCRIPT, "e1", {"e3"}, None) == 4  # the delivered result opens a turn
    assert find_turn_start(TRANSCRIPT, "e5", set(), None) == 6
    assert find_turn_start(TRANSCRIPT, "e1", set(), "two") == 6  # the expected prompt wins
    assert find_turn_start(TRANSCRIPT, None, set(), None) == 6  # no previous: the newest
    assert find_turn_start(TRANSCRIPT, "e7", set(), None) is None  # continuations are not turns


def test_a_context_renders_everything_before_its_live_turn_from_the_store() -> None:
    ctx = ContextLive(0)
    live = ctx.begin(TRANSCRIPT[:7], request_id="r2", expected_prompt="two")
    assert live.prompt == "two" and ctx.settled_len(TRANSCRIPT) == 6
    ctx.end("r2")
    assert ctx.settled_len(TRANSCRIPT) == len(TRANSCRIPT) and "r2" in ctx.ended
    resumed = ctx.begin_after(TRANSCRIPT, request_id="r2")
    assert resumed.prompt is None and ctx.settled_len([*TRANSCRIPT, _msg("assistant", "x", "e9")]) == 8
    assert "r2" not in ctx.ended
