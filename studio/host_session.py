"""What the session host holds: a store's session, its views, their state, and the runtime factory.

The host (``studio.hosts``) drives these; ``studio.host_events`` folds a runtime's events into
them and ``studio.host_publish`` turns them into pushes. Nothing here does I/O except opening
a runtime (``agentcore_runtime_factory``).
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings

from studio import runtime_options
from studio.live import ContextLive, LiveBlock
from studio.stores import StoreLocation

if TYPE_CHECKING:
    from studio.confinement import ToolConfinement

#: Events that open a live turn (a turn's first visible work). ``context_usage`` and ``usage``
#: also arrive between turns, so they never open one.
OPENING_EVENTS = ("text_delta", "thinking_delta", "tool", "retry", "compaction", "web_search", "sources")
RUNNING_STATUSES = ("running", "queued")


class HostError(Exception):
    """A command the host refused; ``code`` is stable (busy, not_waiting, version_conflict, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(slots=True)
class SessionConfig:
    """What the host needs to open a store and show one of its views.

    ``session_id`` is the view asked for; ``root_id`` the main session that owns the store.
    ``model_options`` include the API key: never render them. ``session`` is filled in by the
    host (the registry is a live object) just before the runtime factory is called.
    """

    session_id: str
    store: StoreLocation
    workdir: str
    permission_policy: str
    effort: str
    mode: str
    model_options: dict[str, Any] = field(repr=False)
    root_id: str = ""
    target_id: int = 0
    kind: str = "main"
    models: dict[str, Any] = field(default_factory=dict, repr=False)  # model id → attributes (configure)
    session: dict[str, Any] = field(default_factory=dict, repr=False)
    confinement: ToolConfinement | None = field(default=None, repr=False)  # where the tools run

    def __post_init__(self) -> None:
        self.root_id = self.root_id or self.session_id

    def __repr__(self) -> str:
        return f"SessionConfig({self.session_id!r}, store={self.store.label!r}, target={self.target_id})"


@dataclass(slots=True)
class HostState:
    """A consistent picture of one view: the store's transcript, the live turn, the snapshot."""

    session_id: str
    epoch: str
    seq: int
    running: bool
    transcript: list[dict[str, Any]]
    base_len: int | None = None  # while a turn is live: transcript messages that precede it
    live: dict[str, Any] | None = None
    context_usage: dict[str, int] | None = None
    snapshot: dict[str, Any] | None = None
    target_id: int = 0
    term: int = 0  # the holder's lease term (worker mode): a page never goes back to a lower one

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostState:
        return cls(**data)

    @property
    def settled_transcript(self) -> list[dict[str, Any]]:
        return self.transcript if self.base_len is None else self.transcript[: self.base_len]

    def live_turn(self) -> dict[str, Any] | None:
        if not self.live:
            return None
        return {**self.live, "blocks": [LiveBlock(**b) for b in self.live["blocks"]]}

    def context(self) -> dict[str, Any] | None:
        """This view's context in the snapshot (status, queue, config, plan)."""
        for context in (self.snapshot or {}).get("contexts", []):
            if context.get("target_id") == self.target_id:
                return dict(context)
        return None


class RuntimeFactory(Protocol):
    def __call__(self, config: SessionConfig) -> Awaitable[Any]: ...


async def agentcore_runtime_factory(config: SessionConfig, **extra: Any) -> Any:
    """Open the real agentcore runtime for a store, with the session protocol on.

    ``extra`` goes to ``create_agent`` as well (a test's factory adds a tool this way)."""
    from agentcore import create_agent

    options: dict[str, Any] = {**runtime_options.runtime_options(), **config.model_options, **extra}
    if config.models:
        options["models"] = dict(config.models)
    return await create_agent(
        **config.store.runtime_options(),
        workdir=config.workdir,
        permission_policy=config.permission_policy,
        effort=config.effort or None,
        mode="build",
        session=dict(config.session),
        **options,
    )


def configured_factory() -> RuntimeFactory:
    dotted = getattr(settings, "STUDIO_RUNTIME_FACTORY", "") or ""
    if not dotted:
        return agentcore_runtime_factory
    module, _, name = dotted.replace(":", ".").rpartition(".")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _plan_review_pause(payload: dict[str, Any]) -> None:
    """``approve_plan`` hook: every plan waits for a person in the browser."""
    from agentcore.errors import UserInputRequired

    raise UserInputRequired("plan review", payload={"kind": "plan", **payload})


def agent_host() -> Any:
    from agentcore.host import AgentHost

    return AgentHost(approve_plan=_plan_review_pause)


def event_dict(event: Any) -> dict[str, Any]:
    return event if isinstance(event, dict) else event.model_dump()


def request_of(record_id: str) -> str:
    """The request a usage record belongs to: ``<request_id>:<step>:<attempt>``."""
    parts = record_id.rsplit(":", 2)
    return parts[0] if len(parts) == 3 else record_id


@dataclass(slots=True)
class View:
    """One page's live channel: a conversation of the store, its group and sequence numbers."""

    view_id: str
    target_id: int
    kind: str = "main"
    seq: int = 0
    full: bool = False
    controls: bool = False
    trace: bool = False
    status: str = ""

    @property
    def group(self) -> str:
        return f"session-{self.view_id}"


@dataclass(slots=True)
class HostedSession:
    """One open store: its runtime, the lease that drives it, its views."""

    config: SessionConfig
    runtime: Any = None
    lease: asyncio.Task[None] | None = None
    flusher: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # a lease is active: commands work
    dirty: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    snapshot: dict[str, Any] | None = None
    contexts: dict[int, ContextLive] = field(default_factory=dict)
    views: dict[int, View] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)  # request id → prompt text (turn starts)
    withdrawn: set[str] = field(default_factory=set)
    queued_steers: dict[int, dict[str, str]] = field(default_factory=dict)  # target → input id → prompt
    folding: bool = False  # the lease is in the middle of folding one event
    flushing: bool = False  # the flush loop is rendering or sending a push
    closing: bool = False
    last_used: float = field(default_factory=time.monotonic)
    waiters: set[asyncio.Future[None]] = field(default_factory=set)  # wait_idle / wait_quiet
    ledger_pos: int = 0  # the store's usage ledger is reconciled up to here
    term: int = 0  # the lease term this host holds the session under (worker mode; 0 in-process)
    lost: bool = False  # another holder took the session over: publish and record nothing more

    @property
    def root_id(self) -> str:
        return self.config.root_id

    def context(self, target_id: int) -> ContextLive:
        ctx = self.contexts.get(target_id)
        if ctx is None:
            ctx = self.contexts[target_id] = ContextLive(target_id)
        return ctx

    def snapshot_context(self, target_id: int) -> dict[str, Any] | None:
        for context in (self.snapshot or {}).get("contexts", []):
            if context.get("target_id") == target_id:
                return dict(context)
        return None

    def settled(self, target_id: int) -> bool:
        """Nothing runs in this conversation *and* every event of its turns has been folded.

        The snapshot can be ahead of the events (it is built when the lease reads the bus, the
        events of a fast turn may still be queued behind it): a turn the snapshot calls finished
        counts only once its ``end`` event was seen here.
        """
        ctx = self.contexts.get(target_id)
        if self.folding or (ctx is not None and ctx.live is not None):
            return False
        context = self.snapshot_context(target_id) or {}
        if context.get("status") not in ("idle", "paused"):
            return False
        ended = ctx.ended if ctx is not None else set()
        for turn in (self.snapshot or {}).get("turns", []):
            if int(turn.get("target_id") or 0) != target_id:
                continue
            if turn.get("status") in ("completed", "failed", "aborted", "paused") and turn["request_id"] not in ended:
                return False
        return True

    def busy(self, target_id: int) -> bool:
        """Work is in progress in this conversation (a live turn, an open request, a queue)."""
        ctx = self.contexts.get(target_id)
        if ctx is not None and ctx.live is not None:
            return True
        context = self.snapshot_context(target_id) or {}
        return context.get("status") in ("running", "queued", "paused")

    def writing(self) -> bool:
        """A turn of some conversation is running or about to (a pause, a sleeping timer and
        other durable state survive closing the runtime; a turn in flight should not be cut)."""
        if any(ctx.live is not None for ctx in self.contexts.values()):
            return True
        return any(c.get("status") in RUNNING_STATUSES for c in (self.snapshot or {}).get("contexts", []))

    def quiet(self) -> bool:
        """Nothing at all is happening in the store (safe to close the runtime)."""
        if any(ctx.live is not None for ctx in self.contexts.values()):
            return False
        snapshot = self.snapshot or {}
        if snapshot.get("tasks"):
            return False
        return all(c.get("status") == "idle" for c in snapshot.get("contexts", []))


def host_error(exc: BaseException) -> HostError:
    code = str(getattr(exc, "code", "") or "error")
    message = str(getattr(exc, "message", None) or exc)
    if code == "version_conflict":
        details = getattr(exc, "details", None) or {}
        current = details.get("current_version")
        message = (
            "The model settings were changed elsewhere"
            + (f" (they are now at version {current})" if current is not None else "")
            + ". The form shows the current settings: choose again."
        )
    return HostError(code, message)


def config_versions(snapshot: dict[str, Any]) -> dict[int, int]:
    return {int(c["target_id"]): int((c.get("config") or {}).get("version") or 0) for c in snapshot.get("contexts", [])}


def subtrees(snapshot: dict[str, Any] | None) -> dict[int, set[int]]:
    """Per context, the targets whose usage it includes: itself and its subagents (not forks)."""
    contexts = (snapshot or {}).get("contexts", [])
    parents = {int(c["target_id"]): c.get("parent_target_id") for c in contexts if c.get("kind") == "subagent"}
    out: dict[int, set[int]] = {int(c["target_id"]): {int(c["target_id"])} for c in contexts}
    for child in parents:
        parent = parents.get(child)
        while parent is not None:
            out.setdefault(int(parent), {int(parent)}).add(child)
            parent = parents.get(int(parent))
    return out


def live_prefix(request_id: str) -> str:
    """DOM id prefix of a live turn's blocks (stable for the whole turn)."""
    return "lv-" + ("".join(ch for ch in request_id if ch.isalnum())[:16] or "turn")


def context_usage(runtime: Any, target_id: int = 0) -> dict[str, int] | None:
    if runtime is None:
        return None
    try:
        if target_id:
            snapshot = runtime.snapshot()
            context = next((c for c in snapshot["contexts"] if c["target_id"] == target_id), None)
            usage = (context or {}).get("context_usage")
        else:
            usage = runtime.get_context_usage()
    except Exception:
        return None
    if not usage:
        return None
    return {"used": int(usage["used"]), "total": int(usage["total"])}


def touch(
    hs: HostedSession, view: View | None, *, full: bool = False, controls: bool = False, trace: bool = False
) -> None:
    """Mark what ``view`` must re-render at the next flush, and wake the flusher."""
    if view is not None:
        view.full = view.full or full
        view.controls = view.controls or controls
        view.trace = view.trace or trace
    wake(hs)


def wake(hs: HostedSession) -> None:
    """Something changed: the flush loop pushes it, and whoever waits in ``changed`` looks."""
    hs.dirty.set()
    notify(hs)


def notify(hs: HostedSession) -> None:
    """Wake whoever waits in ``changed`` (a flush went out) without asking for another flush:
    setting ``dirty`` here kept an idle session's flush loop turning once per window forever."""
    for waiter in list(hs.waiters):
        if not waiter.done():
            waiter.set_result(None)


async def changed(hs: HostedSession) -> None:
    """Wait for the next processed event, snapshot or flush of ``hs``."""
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    hs.waiters.add(waiter)
    try:
        await waiter
    finally:
        hs.waiters.discard(waiter)


#: Store errors after which this process's runtime can no longer write: a newer owner fenced it,
#: or its database connection (and with it the owner lease) is gone. The store is still right;
#: the runtime is not, and must be dropped (and reopened by whoever holds the session).
LOST_STORE_CODES = ("store_fenced", "store_unavailable")


class SessionLeases(Protocol):
    """Worker mode: who may hold a main session (``studio.leases.LeaseKeeper``)."""

    async def acquire(self, root_id: str) -> int:
        """Hold the session (renew ours or claim a free or expired one); its lease term.
        ``HostError("moved")`` naming the holder when another live worker has it."""
        ...

    def holds(self, root_id: str) -> bool:
        """The lease is ours by the local clock (renewed recently enough)."""
        ...

    async def release(self, root_id: str, *, active: bool) -> None:
        """Give the session up (``active``: it has work a live worker must pick up)."""
        ...

    async def unlock_store(self, root_id: str, error: BaseException) -> bool:
        """Opening found the store still held by a stale owner: fence it; True to retry."""
        ...

    def note_activity(self, root_id: str, active: bool) -> None:
        """The session went from idle to having work (or back): record it soon, so a crash
        right after a turn starts still gets the session taken over without a request."""
        ...


def store_code(exc: BaseException) -> str:
    """The store error code behind ``exc`` (the runtime may wrap it), or ""."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            break
        code = str(getattr(seen, "code", "") or "")
        if code in LOST_STORE_CODES:
            return code
        seen = seen.__cause__ or seen.__context__
    return ""


def store_lost(exc: BaseException) -> bool:
    return bool(store_code(exc))
