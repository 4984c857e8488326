"""The Trace from a session snapshot (pure: no I/O, no Django).

Everything the Tasks, Records, Usage and Plan tabs show comes from the runtime's ``session``
snapshot (``agentcore.session.snapshot.SessionSnapshot``), never from Studio's guesses. This
module turns one snapshot into what the templates need for one view (a conversation of the
store: ``target_id``), so the full page, a live push and a test all read the same shapes.

The task tree: durable tasks under the task that created them (``parent_task_id``) or under the
tool call that started them; subagents under the ``subagent`` call that made them, with the
child's own tool calls under the subagent; everything else at the top.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Task statuses that are final (``history``); everything else is active.
TERMINAL = frozenset({"completed", "failed", "aborted", "orphaned", "cancelled"})
HISTORY_PAGE = 50


@dataclass(slots=True)
class TaskNode:
    """One task of the tree with what its row and detail show."""

    task: dict[str, Any]
    active: bool
    children: list[TaskNode] = field(default_factory=list)
    sort_ms: int = 0
    duration_ms: float | None = None

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
    def key_argument(self) -> str:
        arguments = self.task.get("arguments")
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
    node: TaskNode, nodes: dict[str, TaskNode], subagents: dict[int | None, TaskNode], view_target: int
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


# --- records --------------------------------------------------------------------------------


@dataclass(slots=True)
class RecordItem:
    """One entry of a generic Records section: a title, a state badge and its fields."""

    title: str
    state: str = ""  # ok | error | warn | "" (neutral)
    state_label: str = ""
    fields: list[tuple[str, Any]] = field(default_factory=list)
    error: str = ""


_SECRET_WORDS = ("key", "token", "secret", "password", "credential", "authorization")


def _public(key: str) -> bool:
    lowered = key.lower()
    return not any(word in lowered for word in _SECRET_WORDS)


def record_item(raw: Any, *, title_keys: tuple[str, ...] = ("label", "name", "id")) -> RecordItem:
    """A generic record (a catalog, an environment, code-mode limits) as a titled list of fields.

    Unknown shapes still render: scalar fields become rows, nested ones JSON. Anything whose
    name suggests a credential is left out even though records never should carry one.
    """
    if not isinstance(raw, dict):
        return RecordItem(title=str(raw))
    title = next((str(raw[k]) for k in title_keys if raw.get(k)), "")
    error = next((str(raw[k]) for k in ("error", "drift", "drift_error", "last_error") if raw.get(k)), "")
    status = str(raw.get("status") or raw.get("state") or "")
    connected = raw.get("connected")
    if error:
        state, label = "error", status or "error"
    elif status in ("ready", "connected", "ok", "active") or connected is True:
        state, label = "ok", status or "connected"
    elif status:
        state, label = "warn" if status in ("connecting", "declared", "disconnected") else "", status
    elif connected is False:
        state, label = "", "not connected"
    else:
        state, label = "", ""
    fields = [(k, v) for k, v in raw.items() if _public(str(k)) and k not in ("error",)]
    return RecordItem(title=title, state=state, state_label=label, fields=fields, error=error)


def records_sections(records: dict[str, Any] | None) -> dict[str, Any]:
    """The snapshot's ``records`` as Records-tab sections (present only when the key exists)."""
    records = dict(records or {})
    environment = records.get("environment")
    env_item = record_item(environment) if environment is not None else None
    remote = isinstance(environment, dict) and str(environment.get("kind") or "local") != "local"
    catalogs = records.get("catalogs")
    code_mode = records.get("code_mode")
    known = {"storage", "environment", "extensions", "catalogs", "code_mode", "model", "registry"}
    return {
        "storage": records.get("storage") or {},
        "environment": env_item,
        "environment_remote": remote,
        "extensions": records.get("extensions") if isinstance(records.get("extensions"), list) else None,
        "registry": records.get("registry") or {},
        "catalogs": [record_item(c, title_keys=("id", "name", "label")) for c in catalogs]
        if isinstance(catalogs, list)
        else None,
        "code_mode": record_item(code_mode, title_keys=("name",)) if isinstance(code_mode, dict) else None,
        "code_mode_present": "code_mode" in records,
        "model": records.get("model") or {},
        "others": [
            record_item({"name": k, **v} if isinstance(v, dict) else {"name": k, "value": v})
            for k, v in records.items()
            if k not in known and _public(k)
        ],
    }


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
