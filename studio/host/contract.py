"""The host's contract: what it is driven through and what it publishes (the bottom layer).

Everything above imports from here; this module imports nothing of Studio's but where a store
lives (``studio.stores``). ``HostState`` is what a page is rendered from and what crosses the
channel layer in worker mode, so it is plain data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from studio.stores import StoreLocation

if TYPE_CHECKING:
    from studio.confinement import ToolConfinement

#: A context status in which work is in progress or about to be.
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
    model_rows: tuple[Any, ...] = field(default=(), repr=False)  # what ``models`` was built from
    owner_id: int | None = None  # the person whose store it is (every view of it is theirs)
    session: dict[str, Any] = field(default_factory=dict, repr=False)
    confinement: ToolConfinement | None = field(default=None, repr=False)  # where the tools run
    http_client: Any = field(default=None, repr=False)  # the host's pooled client, set like ``session``

    def __post_init__(self) -> None:
        self.root_id = self.root_id or self.session_id

    def __repr__(self) -> str:
        return f"SessionConfig({self.session_id!r}, store={self.store.label!r}, target={self.target_id})"


@dataclass(slots=True)
class HostState:
    """A consistent picture of one view: the store's transcript, the live turn, the snapshot.

    ``transcript`` is the view's conversation as the store has it; while a turn is live,
    ``base_len`` messages precede it (the rest belong to the live turn's request). ``live`` is
    the live turn as plain data (``LiveTurn.to_dict``), ``snapshot`` the session snapshot as the
    runtime serialised it (``SessionSnapshot.model_dump(mode="json")``)."""

    session_id: str
    epoch: str
    seq: int
    running: bool
    transcript: list[dict[str, Any]]
    base_len: int | None = None
    live: dict[str, Any] | None = None
    context_usage: dict[str, int] | None = None
    snapshot: dict[str, Any] | None = None
    target_id: int = 0
    term: int = 0  # the holder's lease term (worker mode): a page never goes back to a lower one
    # Whether a turn of this view may wait for the person (a plan review, questions): the store
    # says so (the snapshot) or the host saw the turn pause. None: unknown (no host), so a page
    # reads Studio's row; False spares every render of the conversation that read.
    waiting: bool | None = None
    # Where the store's tools run, as the host configured its runtime (``ToolConfinement.shown``):
    # the page shows it instead of working it out again at every opening (a realpath of every
    # protected path, the workdir's checks). None: no host said.
    confinement: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostState:
        return cls(**data)

    @property
    def settled_transcript(self) -> list[dict[str, Any]]:
        return self.transcript if self.base_len is None else self.transcript[: self.base_len]

    @property
    def live_transcript(self) -> list[dict[str, Any]]:
        """The live turn's messages the store already has (its user message first)."""
        return [] if self.base_len is None else self.transcript[self.base_len :]

    def context(self) -> dict[str, Any] | None:
        """This view's context in the snapshot (status, queue, config, plan)."""
        for context in (self.snapshot or {}).get("contexts", []):
            if context.get("target_id") == self.target_id:
                return dict(context)
        return None


@dataclass(slots=True)
class Regions:
    """What one view must re-render at its next push, region by region.

    ``full`` re-renders every region (a resync: a new holder, a reset, a new context
    generation); the others name one region each, so a push renders only what changed."""

    full: bool = False
    conversation: bool = False  # the settled turns (a turn ended: it renders from the store)
    opening: bool = False  # a live turn was opened: its user message and empty block list
    pending: bool = False  # the review card or question form
    ring: bool = False  # the context ring
    config: bool = False  # the model and effort form (its version)
    controls: bool = False  # title, status pill, run controls, queue chips
    tasks: bool = False
    plan: bool = False
    usage: bool = False
    records: bool = False
    timeline: bool = False  # the Timeline (only for a store whose Timeline a page opened)

    def any(self) -> bool:
        return any(getattr(self, name) for name in self.__slots__)

    def ring_only(self) -> bool:
        """Nothing but the context ring (if that) is marked: a push of streamed work only."""
        return not any(getattr(self, name) for name in self.__slots__ if name != "ring")

    def take(self) -> Regions:
        """The marks as they are, cleared here (the caller renders them)."""
        taken = Regions(**{name: getattr(self, name) for name in self.__slots__})
        for name in self.__slots__:
            setattr(self, name, False)
        return taken

    def mark(self, **regions: bool) -> None:
        for name, value in regions.items():
            if value:
                setattr(self, name, True)

    def everything(self) -> None:
        self.full = True


def live_prefix(request_id: str) -> str:
    """DOM id prefix of a live turn's blocks (stable for the whole turn)."""
    return "lv-" + ("".join(ch for ch in request_id if ch.isalnum())[:16] or "turn")


class SessionLeases(Protocol):
    """Worker mode: who may hold a main session (``studio.host.leases.LeaseKeeper``)."""

    async def acquire(self, root_id: str) -> int:
        """Hold the session (renew ours or claim a free or expired one); its lease term.
        ``HostError("moved")`` when this worker may not hold it: its message is the request
        channel of the live worker that has it, or empty (no holder known: route afresh)."""
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


#: Store errors after which this process's runtime can no longer write: a newer owner fenced it,
#: or its database connection (and with it the owner lease) is gone. The store is still right;
#: the runtime is not, and must be dropped (and reopened by whoever holds the session).
LOST_STORE_CODES = ("store_fenced", "store_unavailable")


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


def host_error(exc: BaseException) -> HostError:
    """A runtime's refusal of a command as the host's error (a version conflict explained)."""
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
