"""The Trace from a session snapshot (pure: no I/O, no Django).

Everything the Tasks, Records, Usage and Plan tabs show comes from the runtime's ``session``
snapshot (``agentcore.session.snapshot.SessionSnapshot``), never from Studio's guesses. This
module turns one snapshot into what the templates need for one view (a conversation of the
store: ``target_id``), so the full page, a live push and a test all read the same shapes.

The task tree: durable tasks under the task that created them (``parent_task_id``) or under the
tool call that started them; subagents under the ``subagent`` call that made them, with the
child's own tool calls under the subagent; everything else at the top.

Code mode: a ``codemode`` call's task ``detail`` is its execution (script, nested calls, output,
return value, log), also listed in ``records["code_mode"]["executions"]``; ``code_mode_runs``
indexes them by the call's display id, so the conversation's tool row and the Tasks tab show
the same ``CodeModeRun``. The Records tab's shapes are in ``studio.trace_records``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: Task statuses that are final (``history``); everything else is active.
TERMINAL = frozenset({"completed", "failed", "aborted", "orphaned", "cancelled"})
HISTORY_PAGE = 50
#: Finished ``codemode`` calls whose nested calls the Tasks tab lists (the newest ones).
CODE_PANELS_SHOWN = 5


@dataclass(slots=True)
class TaskNode:
    """One task of the tree with what its row and detail show."""

    task: dict[str, Any]
    active: bool
    children: list[TaskNode] = field(default_factory=list)
    sort_ms: int = 0
    duration_ms: float | None = None
    code_brief: bool = False  # an older finished codemode call: its script, not every nested call

    @property
    def task_id(self) -> str:
        return str(self.task.get("task_id"))

    @property
    def kind(self) -> str:
        return str(self.task.get("kind"))

    @property
    def name(self) -> str:
        return str(self.task.get("name") or self.kind)

    @property
    def status(self) -> str:
        return str(self.task.get("status") or "")

    @property
    def detail(self) -> dict[str, Any]:
        return dict(self.task.get("detail") or {})

    @property
    def stopping(self) -> bool:
        return bool(self.task.get("stopping"))

    @property
    def version(self) -> Any:
        return self.detail.get("version")

    @property
    def phase(self) -> Any:
        return self.detail.get("phase")

    @property
    def checkpoint(self) -> Any:
        return self.detail.get("checkpoint")

    @property
    def blocked_reason(self) -> str:
        return str(self.detail.get("blocked_reason") or "")

    @property
    def waiting_on(self) -> list[str]:
        return [str(x) for x in self.detail.get("waiting_on") or []]

    @property
    def wake_at(self) -> int | None:
        """The absolute wake time (ms) while the task sleeps or is about to."""
        if not self.active:
            return None
        value = self.detail.get("wake_at")
        if value is None and isinstance(self.checkpoint, dict):
            value = self.checkpoint.get("wake_at")
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    @property
    def outcome(self) -> Any:
        return self.detail.get("outcome")

    @property
    def subagent_target(self) -> int | None:
        return int(self.task["target_id"]) if self.kind == "subagent" else None

    @property
    def cancellable(self) -> bool:
        return self.active and not self.stopping and self.kind in ("task", "subagent", "compaction")

    @property
    def state_label(self) -> str:
        """What the row says: running / waiting / blocked / stopping / the terminal outcome."""
        if self.stopping:
            return "stopping"
        return self.status or "pending"

    @property
    def code_mode(self) -> CodeModeRun | None:
        """A ``codemode`` call's execution (its task ``detail``), for the script and nested calls."""
        if self.kind != "tool" or self.name != "codemode":
            return None
        return code_mode_run(self.detail or None, self.task.get("arguments"))

    @property
    def key_argument(self) -> str:
        arguments = self.task.get("arguments")
        if self.kind == "tool" and self.name == "codemode":
            return script_summary(arguments)
        if self.kind == "task" and isinstance(self.checkpoint, dict) and self.checkpoint.get("label"):
            return str(self.checkpoint["label"])
        if isinstance(arguments, dict):
            for key in ("path", "command", "pattern", "query", "task", "label", "name"):
                value = arguments.get(key)
                if isinstance(value, str) and value:
                    return value if len(value) <= 120 else value[:117] + "…"
        return ""

    def count(self) -> int:
        return 1 + sum(child.count() for child in self.children)


@dataclass(slots=True)
class TaskTree:
    active: list[TaskNode]
    history: list[TaskNode]
    history_more: int  # history roots not on this page
    history_total: int  # finished tasks in the whole session (the snapshot lists the newest)
    running: int
    finished: int = 0  # finished tasks of this view in the snapshot

    @property
    def empty(self) -> bool:
        return not self.active and not self.history


def subtree_targets(snapshot: dict[str, Any], target_id: int) -> set[int]:
    """``target_id`` and every subagent below it (forks are conversations of their own)."""
    contexts = snapshot.get("contexts", [])
    out = {target_id}
    grew = True
    while grew:
        grew = False
        for context in contexts:
            target = int(context["target_id"])
            if context.get("kind") == "subagent" and context.get("parent_target_id") in out and target not in out:
                out.add(target)
                grew = True
    return out


def task_tree(
    snapshot: dict[str, Any] | None,
    target_id: int,
    *,
    timings: dict[str, dict[str, Any]] | None = None,
    page: int = 0,
) -> TaskTree:
    """The tasks of ``target_id``'s conversation (and its subagents) as a tree.

    ``timings`` (display tool-call id → ``{duration_ms, started_ms}``) add durations and an
    order to tool calls, which the snapshot lists without times. History roots are newest first
    and paged (``HISTORY_PAGE`` per page).
    """
    snapshot = snapshot or {}
    timings = timings or {}
    targets = subtree_targets(snapshot, target_id)
    nodes: dict[str, TaskNode] = {}
    for active, rows in ((True, snapshot.get("tasks", [])), (False, snapshot.get("history", []))):
        for task in rows:
            if int(task.get("target_id") or 0) not in targets:
                continue
            node = TaskNode(task=dict(task), active=active and str(task.get("status")) not in TERMINAL)
            timing = timings.get(node.task_id) or {}
            node.duration_ms = timing.get("duration_ms")
            detail = node.detail
            node.sort_ms = int(detail.get("created_ms") or timing.get("started_ms") or 0)
            nodes.setdefault(node.task_id, node)
    subagent_of_target = {n.subagent_target: n for n in nodes.values() if n.subagent_target is not None}
    roots: list[TaskNode] = []
    for node in nodes.values():
        parent = _parent(node, nodes, subagent_of_target, target_id)
        if parent is not None and parent is not node:
            parent.children.append(node)
        else:
            roots.append(node)
    for node in nodes.values():
        node.children.sort(key=lambda child: child.sort_ms)
        if node.sort_ms == 0 and node.children:
            node.sort_ms = min(child.sort_ms for child in node.children)
    # Every trace push re-renders the tab: only the newest finished scripts list their nested calls
    # (the conversation's row of each call always does).
    scripts = [n for n in nodes.values() if n.kind == "tool" and n.name == "codemode" and not n.active]
    scripts.sort(key=lambda n: int(n.detail.get("started_ms") or n.sort_ms), reverse=True)
    for node in scripts[CODE_PANELS_SHOWN:]:
        node.code_brief = True
    live_roots = [root for root in roots if _has_active(root)]
    live_roots.sort(key=lambda root: root.sort_ms)
    done_roots = [root for root in roots if not _has_active(root)]
    done_roots.sort(key=lambda root: root.sort_ms, reverse=True)
    start = max(0, page) * HISTORY_PAGE
    shown = done_roots[start : start + HISTORY_PAGE]
    return TaskTree(
        active=live_roots,
        history=shown,
        history_more=max(0, len(done_roots) - start - len(shown)),
        history_total=int(snapshot.get("history_total") or 0),
        running=sum(1 for n in nodes.values() if n.active),
        finished=sum(1 for n in nodes.values() if not n.active),
    )


def _parent(
    node: TaskNode, nodes: dict[str, TaskNode], subagents: dict[int, TaskNode], view_target: int
) -> TaskNode | None:
    task = node.task
    parent_id = task.get("parent_task_id")
    if parent_id and str(parent_id) in nodes:
        return nodes[str(parent_id)]
    if node.kind == "task":
        started_by = node.detail.get("request_id")  # a tool call that started the task
        if started_by and str(started_by) in nodes:
            return nodes[str(started_by)]
    target = int(task.get("target_id") or 0)
    if node.kind in ("tool", "task", "compaction"):
        return subagents.get(target)  # a subagent's own work goes under it (in its own view too)
    return None


def _has_active(node: TaskNode) -> bool:
    return node.active or any(_has_active(child) for child in node.children)


# --- code mode ------------------------------------------------------------------------------

#: An execution's status (``agentcore.extensions.codemode.trace``) → the colour class of tool rows.
RUN_CSS = {
    "running": "running",
    "interrupted": "waiting",
    "completed": "ok",
    "failed": "error",
    "timeout": "error",
    "memory": "error",
    "limit": "error",
    "mismatch": "error",
    "crashed": "error",
    "cancelled": "interrupted",
    "stopped": "interrupted",
}
#: A nested call's status (``agentcore.engine.nested.Status`` or ``in_flight``) → colour class.
CALL_CSS = {
    "in_flight": "running",
    "completed": "ok",
    "failed": "error",
    "blocked": "error",
    "invalid": "error",
    "denied": "error",
    "unknown": "error",
    "cancelled": "interrupted",
    "paused": "waiting",
}


@dataclass(slots=True)
class NestedCall:
    """One ``await tools.<name>(args)`` of a script, as the snapshot previews it."""

    index: int
    name: str
    arguments: Any
    status: str
    ok: bool | None
    result: str | None
    duration_ms: float | None
    at_ms: float | None
    replayed: bool
    rerun: bool

    @property
    def css(self) -> str:
        return CALL_CSS.get(self.status, "error")

    @property
    def label(self) -> str:
        return "running" if self.status == "in_flight" else self.status

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False, separators=(", ", ": ")) if self.arguments else "{}"


@dataclass(slots=True)
class CodeModeRun:
    """A ``codemode`` call: its script and, when the snapshot still lists the execution, the
    nested calls in order, the ``text()`` output, the return value and the execution log.

    ``execution`` is None for a call the snapshot no longer lists (it keeps the newest 200
    finished tasks): the script still shows, from the call's own arguments."""

    script: str
    execution: dict[str, Any] | None
    calls: list[NestedCall] = field(default_factory=list)

    @property
    def status(self) -> str:
        return str((self.execution or {}).get("status") or "")

    @property
    def css(self) -> str:
        return RUN_CSS.get(self.status, "")

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def calls_total(self) -> int:
        return int((self.execution or {}).get("calls_total") or len(self.calls))

    @property
    def more_calls(self) -> int:
        return max(0, self.calls_total - len(self.calls))

    @property
    def info(self) -> dict[str, Any]:
        """The execution's fields as the snapshot has them (empty when it is not listed)."""
        return self.execution or {}

    def get(self, key: str) -> Any:
        return (self.execution or {}).get(key)

    @property
    def output(self) -> str:
        return str(self.get("output") or "")

    @property
    def return_value(self) -> Any:
        """The return value as JSON data (shown highlighted), or its text when it was cut."""
        text = self.get("return_json")
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return str(text)

    @property
    def error(self) -> str:
        return str(self.get("error") or "")

    @property
    def log(self) -> list[tuple[str, Any]]:
        """The execution log's header facts (what recovery verifies), for the collapsible list."""
        execution = self.execution or {}
        limits = execution.get("limits") or {}
        rows: list[tuple[str, Any]] = [
            ("Engine", execution.get("engine")),
            ("Sandbox fingerprint", execution.get("fingerprint")),
            ("Memory limit", limits.get("memory_limit_bytes")),
            ("Timeout", f"{limits['timeout_ms']} ms" if limits.get("timeout_ms") else None),
            ("Started", execution.get("started_ms")),
            ("Script time", f"{execution['elapsed_ms']} ms" if execution.get("elapsed_ms") is not None else None),
            ("Worker start", execution.get("worker_start_ms")),
            ("Stored keys", ", ".join(map(str, execution.get("stored") or [])) or None),
            ("Answered from the log", ", ".join(f"#{i}" for i in execution.get("replayed") or []) or None),
            ("Call key", execution.get("call_key")),
        ]
        return [(name, value) for name, value in rows if value not in (None, "")]


def code_mode_run(execution: dict[str, Any] | None, arguments: Any = None) -> CodeModeRun:
    """The view of one ``codemode`` call from its execution (task ``detail`` or a record of
    ``records["code_mode"]["executions"]``) and the call's arguments (the script as sent)."""
    execution = execution if isinstance(execution, dict) and "script" in execution else None
    script = str((execution or {}).get("script") or "")
    if not script and isinstance(arguments, dict):
        script = str(arguments.get("code") or "")
    calls = []
    for raw in (execution or {}).get("calls") or []:
        if not isinstance(raw, dict):
            continue
        calls.append(
            NestedCall(
                index=int(raw.get("index") or 0),
                name=str(raw.get("name") or "?"),
                arguments=raw.get("arguments"),
                status=str(raw.get("status") or "in_flight"),
                ok=raw.get("ok"),
                result=None if raw.get("result") is None else str(raw["result"]),
                duration_ms=raw.get("duration_ms"),
                at_ms=raw.get("at_ms"),
                replayed=bool(raw.get("replayed")),
                rerun=bool(raw.get("rerun")),
            )
        )
    calls.sort(key=lambda call: call.index)
    return CodeModeRun(script=script, execution=execution, calls=calls)


def code_mode_runs(snapshot: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Every execution the snapshot has, by the ``codemode`` call's task id (the display tool
    call id the conversation uses): the tasks' and history's ``detail``, and the newest
    executions of ``records["code_mode"]`` (the fresher of the two wins: a newer revision can
    only have more calls)."""
    snapshot = snapshot or {}
    found: dict[str, dict[str, Any]] = {}
    records = snapshot.get("records") or {}
    code_mode = records.get("code_mode") if isinstance(records, dict) else None
    executions = code_mode.get("executions") if isinstance(code_mode, dict) else None
    for task in [*(snapshot.get("history") or []), *(snapshot.get("tasks") or []), *(executions or [])]:
        detail = task.get("detail") if "detail" in task else task
        if isinstance(detail, dict) and "script" in detail and detail.get("task_id"):
            key = str(detail["task_id"])
            known = found.get(key)
            if known is None or _progress(detail) >= _progress(known):
                found[key] = detail
    return found


def _progress(execution: dict[str, Any]) -> tuple[int, int]:
    done = 1 if execution.get("status") not in (None, "running", "interrupted") else 0
    settled = sum(1 for c in execution.get("calls") or [] if isinstance(c, dict) and c.get("status") != "in_flight")
    return done, int(execution.get("calls_total") or 0) * 2 + settled


def script_summary(arguments: Any) -> str:
    """The first meaningful line of a script, for a ``codemode`` row (instead of raw JSON)."""
    code = arguments.get("code") if isinstance(arguments, dict) else None
    if not isinstance(code, str):
        return ""
    for line in code.splitlines():
        line = line.strip()
        if line and not line.startswith("//"):
            return line if len(line) <= 120 else line[:117] + "…"
    return ""


# --- usage ----------------------------------------------------------------------------------


def usage_for(snapshot: dict[str, Any] | None, target_id: int) -> dict[str, Any]:
    """This conversation's usage: its own calls, its subagents one by one, and the total.

    The runtime counts each model call once, for the context that made it; ``total`` adds the
    subagents below. The parent total is therefore never a double count.
    """
    snapshot = snapshot or {}
    by_target = {int(u["target_id"]): u for u in snapshot.get("usage", [])}
    labels = {int(c["target_id"]): c for c in snapshot.get("contexts", [])}
    mine = by_target.get(target_id) or {}
    children = []
    for context in snapshot.get("contexts", []):
        target = int(context["target_id"])
        if context.get("kind") == "subagent" and target in subtree_targets(snapshot, target_id) - {target_id}:
            entry = by_target.get(target) or {}
            children.append(
                {
                    "target_id": target,
                    "label": context.get("label") or f"subagent {target}",
                    "own": entry.get("own") or {},
                    "status": context.get("status"),
                }
            )
    turns = [t for t in snapshot.get("turns", []) if int(t.get("target_id") or 0) == target_id]
    return {
        "own": mine.get("own") or {},
        "total": mine.get("total") or mine.get("own") or {},
        "children": children,
        "turns": turns,
        "turns_total": int(snapshot.get("turns_total") or 0),
        "label": (labels.get(target_id) or {}).get("label", ""),
    }


# --- plan -----------------------------------------------------------------------------------


def plan_of(snapshot: dict[str, Any] | None, target_id: int) -> dict[str, Any]:
    """The ``update_plan`` checklist of this conversation (version and items)."""
    for context in (snapshot or {}).get("contexts", []):
        if int(context["target_id"]) == target_id:
            plan = context.get("plan") or {}
            items = list(plan.get("items") or [])
            return {
                "version": int(plan.get("version") or 0),
                "items": items,
                "done": sum(1 for i in items if i.get("status") == "completed"),
            }
    return {"version": 0, "items": [], "done": 0}


def view_status(snapshot: dict[str, Any], target_id: int, *, live: bool = False) -> str:
    """What the sessions list says about a conversation: running, waiting (for you), failed or
    idle. Background work (a sleeping timer, a subagent) counts as running."""
    context = next((c for c in snapshot.get("contexts", []) if c.get("target_id") == target_id), None)
    status = (context or {}).get("status")
    if live or status in ("running", "queued"):
        return "running"
    if status == "paused":
        return "waiting"
    targets = subtree_targets(snapshot, target_id)
    if any(int(t.get("target_id") or 0) in targets and t.get("kind") != "tool" for t in snapshot.get("tasks", [])):
        return "running"
    turns = [t for t in snapshot.get("turns", []) if int(t.get("target_id") or 0) == target_id]
    if turns and turns[-1].get("status") == "failed":
        return "failed"
    return "idle"
