"""Studio's own records.

The agent store (one per main session, owned by agentcore: a SQLite file, or a PostgreSQL store
with ``STUDIO_DATABASE_URL``) is the truth for the conversation. These tables hold what Studio
needs around it: which models are registered, who owns which session, which worker holds it
(worker mode), and the trace Studio observed from run events that the transcript does not carry
(tool timings, approval history, usage ledger, how each run ended). Usage rows are keyed by the
runtime's stable ``record_id`` so a replayed report is an upsert, never a double count.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import models


class Provider(models.TextChoices):
    DEMO = "demo", "Offline demo model"
    OPENAI = "openai", "OpenAI"
    ANTHROPIC = "anthropic", "Anthropic"
    CUSTOM = "custom", "Custom endpoint"


class ApiKind(models.TextChoices):
    DEFAULT = "", "Provider default"
    OPENAI_RESPONSES = "openai-responses", "OpenAI Responses"
    ANTHROPIC_MESSAGES = "anthropic-messages", "Anthropic Messages"
    OPENAI_COMPLETIONS = "openai-completions", "OpenAI Chat Completions"


class PermissionPolicy(models.TextChoices):
    WORKSPACE = "workspace", "Workspace — workdir only"
    READ_ONLY = "read-only", "Read-only — no edits, no bash"
    AUTO = "auto", "Auto — files anywhere"


class ToolIsolation(models.TextChoices):
    """Where a session's built-in tools run (``studio.confinement``)."""

    SANDBOX = "sandbox", "In a sandbox — only the session's workspace"
    HOST = "host", "On the Studio server — as the Studio process"


#: A registered model's choice: "" = by person (staff on the server, everyone else sandboxed).
MODEL_TOOL_ISOLATION = [("", "By person — sandboxed unless staff"), *ToolIsolation.choices]


class Effort(models.TextChoices):
    OFF = "off", "Off"
    MINIMAL = "minimal", "Minimal"
    LOW = "low", "Low"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High"
    XHIGH = "xhigh", "Extra high"
    MAX = "max", "Max"


class Mode(models.TextChoices):
    BUILD = "build", "Build"
    PLAN = "plan", "Plan"


class SessionKind(models.TextChoices):
    MAIN = "main", "Session"
    FORK = "fork", "Fork"
    SUBAGENT = "subagent", "Subagent"


class StoreBackend(models.TextChoices):
    SQLITE = "sqlite", "SQLite file"
    POSTGRESQL = "postgresql", "PostgreSQL store"


class SessionStatus(models.TextChoices):
    IDLE = "idle", "Idle"
    RUNNING = "running", "Running"
    WAITING = "waiting", "Waiting for you"
    FAILED = "failed", "Failed"


class RegisteredModel(models.Model):
    """A model users can pick for a session. ``api_key`` is write-only in every UI and stored
    encrypted (``studio.credentials``): assign the plain key, ``save()`` encrypts it, and only
    ``plain_api_key()`` (for the session host) opens it again."""

    name = models.CharField(max_length=200, unique=True)
    provider = models.CharField(max_length=20, choices=Provider.choices, default=Provider.OPENAI)
    model_id = models.CharField("model id", max_length=200, blank=True)
    base_url = models.URLField("base URL", max_length=500, blank=True)
    api_kind = models.CharField(max_length=40, choices=ApiKind.choices, blank=True, default="")
    api_key = models.TextField("API key", blank=True)
    attributes = models.JSONField(default=dict, blank=True, help_text="Model attributes (SPEC M1) as JSON.")
    enabled = models.BooleanField(default=True)
    tool_isolation = models.CharField(
        "tools run",
        max_length=10,
        choices=MODEL_TOOL_ISOLATION,
        blank=True,
        default="",
        help_text="Where the tools of new sessions on this model run. By person: people who are not staff "
        "get a sandbox (or no shell and no file changes when the server has none).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:  # never leak the key through a debug repr
        return f"<RegisteredModel {self.pk} {self.name!r} provider={self.provider}>"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Encrypt a key assigned in plain text before it reaches the database."""
        from studio.credentials import encrypt, is_encrypted

        if self.api_key and not is_encrypted(self.api_key):
            self.api_key = encrypt(self.api_key)
        super().save(*args, **kwargs)

    def plain_api_key(self) -> str:
        """The key itself (for the session host only); ``CredentialsError`` if it cannot be read.
        A model not saved yet still holds the key as it was assigned."""
        from studio.credentials import decrypt, is_encrypted

        if self._state.adding and not is_encrypted(self.api_key):
            return self.api_key
        return decrypt(self.api_key, what=f"the API key of model {self.name!r}")

    @property
    def is_demo(self) -> bool:
        return self.provider == Provider.DEMO

    @property
    def display_name(self) -> str:
        return "Offline demo model" if self.is_demo else self.name

    def runtime_options(self) -> dict[str, Any]:
        """Options for ``create_agent`` (includes the key: for the session host only)."""
        if self.is_demo:
            return {"provider": "demo"}
        options: dict[str, Any] = {}
        if self.provider != Provider.CUSTOM:
            options["provider"] = self.provider
        for key, value in (
            ("model", self.model_id),
            ("base_url", self.base_url),
            ("api_kind", self.api_kind),
            ("api_key", self.plain_api_key()),
        ):
            if value:
                options[key] = value
        if self.attributes:
            options["model_attributes"] = self.attributes
        return options

    def public_description(self) -> dict[str, Any]:
        """What the Records tab may show: everything but the key."""
        return {
            "name": self.display_name,
            "provider": self.provider,
            "model_id": self.model_id or ("demo" if self.is_demo else ""),
            "base_url": self.base_url,
            "api_kind": self.api_kind or "provider default",
            "api_key": "set" if self.api_key else "not set",
            "attributes": self.attributes or {},
        }


class StudioSession(models.Model):
    """One conversation of an agent store, owned by one user.

    A *main* session owns its store (``root`` is empty, ``target_id`` 0). A *fork* or a
    *subagent* is another conversation of the same store (the runtime's ``target_id``), shown
    as its own page: ``root`` is the main session whose store and runtime it shares. A subagent
    page is read-only — the agent that started it talks to it, not the person.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="studio_sessions")
    root = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="views")
    target_id = models.PositiveIntegerField(default=0)
    kind = models.CharField(max_length=10, choices=SessionKind.choices, default=SessionKind.MAIN)
    title = models.CharField(max_length=200, blank=True)
    registered_model = models.ForeignKey(RegisteredModel, on_delete=models.PROTECT, related_name="sessions")
    workdir = models.CharField(max_length=1000)
    permission_policy = models.CharField(
        max_length=20, choices=PermissionPolicy.choices, default=PermissionPolicy.WORKSPACE
    )
    effort = models.CharField(max_length=10, choices=Effort.choices, default=Effort.MEDIUM)
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.BUILD)
    # Chosen when the session is created (the owner, the model, a staff member's choice) and
    # kept: a session's execution target does not change under it (SPEC X5).
    tool_isolation = models.CharField(
        "tools run", max_length=10, choices=ToolIsolation.choices, default=ToolIsolation.SANDBOX
    )
    status = models.CharField(max_length=10, choices=SessionStatus.choices, default=SessionStatus.IDLE)
    # Where the store lives: ``sqlite`` (``store_path`` is the file) or ``postgresql`` (the store
    # named after the main session's id in ``STUDIO_DATABASE_URL``; ``store_path`` is its label,
    # for display only). Chosen when the session is created, so a Studio switched to PostgreSQL
    # still opens its older SQLite sessions.
    store_backend = models.CharField(max_length=12, choices=StoreBackend.choices, default=StoreBackend.SQLITE)
    store_path = models.CharField(max_length=1000)
    created_at = models.DateTimeField(auto_now_add=True)
    last_activity = models.DateTimeField(auto_now_add=True)
    input_tokens = models.BigIntegerField(default=0)
    cached_input_tokens = models.BigIntegerField(default=0)
    cache_creation_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    reasoning_tokens = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    # The store's usage ledger is copied up to this commit (its ``seq``): opening a big store
    # reconciles only what is new. Reset to 0 when the store file is replaced (import).
    ledger_pos = models.BigIntegerField(default=0)
    # Hidden from the sessions list unless asked for (the store and the page stay).
    archived = models.BooleanField(default=False)

    class Meta:
        ordering = ("-last_activity",)
        indexes = (
            models.Index(fields=["owner", "-last_activity"]),
            # The operator's list: a person's visible sessions by activity, status or cost.
            models.Index(fields=["owner", "archived", "-last_activity"], name="studio_sess_list_activity"),
            models.Index(fields=["owner", "archived", "status"], name="studio_sess_list_status"),
            models.Index(fields=["owner", "archived", "-cost"], name="studio_sess_list_cost"),
        )
        constraints = (
            models.UniqueConstraint(fields=["root", "target_id"], name="studio_session_unique_target"),
        )

    def __str__(self) -> str:
        return self.title or f"Session {str(self.id)[:8]}"

    @property
    def root_id_str(self) -> str:
        """The id of the session that owns the store (this one for a main session)."""
        return str(self.root_id or self.id)

    @property
    def read_only(self) -> bool:
        return self.kind == SessionKind.SUBAGENT

    @property
    def group_name(self) -> str:
        """The channel-layer group that carries this session's live partials."""
        return f"session-{self.id}"

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.cached_input_tokens + self.cache_creation_tokens + self.output_tokens


class SessionStore(StudioSession):
    """The agent store behind a session, as the admin sees it (a proxy: no table of its own)."""

    class Meta:
        proxy = True
        verbose_name = "session store"
        verbose_name_plural = "session stores"


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    PAUSED = "paused", "Waiting for you"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    ABORTED = "aborted", "Stopped"
    WITHDRAWN = "withdrawn", "Withdrawn"
    CANCELLED = "cancelled", "Cancelled"
    PLACED = "placed", "Joined the running turn"


class Run(models.Model):
    """One logical request (``request_id``): a prompt and every resume of it."""

    session = models.ForeignKey(StudioSession, on_delete=models.CASCADE, related_name="runs")
    request_id = models.CharField(max_length=200)
    prompt = models.TextField(blank=True)
    agent = models.CharField(max_length=10, choices=Mode.choices, default=Mode.BUILD)
    effort = models.CharField(max_length=10, blank=True)
    mode = models.CharField(max_length=10, blank=True)  # follow_up | steer (session commands)
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.RUNNING)
    error_code = models.CharField(max_length=100, blank=True)
    error = models.TextField(blank=True)
    pending = models.JSONField(null=True, blank=True)
    retries = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = (
            "started_at",
            "id",
        )
        constraints = (models.UniqueConstraint(fields=["session", "request_id"], name="studio_run_unique_request"),)


class ToolCall(models.Model):
    """A tool call as Studio saw it: arguments, outcome and timing (the Tasks tab)."""

    session = models.ForeignKey(StudioSession, on_delete=models.CASCADE, related_name="tool_calls")
    request_id = models.CharField(max_length=200, blank=True)
    tool_call_id = models.CharField(max_length=200)
    name = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=12, default="running")  # running | ok | error | interrupted
    result = models.TextField(blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = (
            "started_at",
            "id",
        )
        constraints = (
            models.UniqueConstraint(fields=["session", "request_id", "tool_call_id"], name="studio_toolcall_unique"),
        )


class Approval(models.Model):
    """A plan submitted for review and the reviewer's decision (the Plan tab's history)."""

    session = models.ForeignKey(StudioSession, on_delete=models.CASCADE, related_name="approvals")
    request_id = models.CharField(max_length=200, blank=True)
    approval_id = models.CharField(max_length=200)
    plan = models.TextField(blank=True)
    decision = models.CharField(max_length=10, blank=True)  # "" (pending) | approved | rejected
    notes = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = (
            "created_at",
            "id",
        )
        constraints = (models.UniqueConstraint(fields=["session", "approval_id"], name="studio_approval_unique"),)


class UsageRecord(models.Model):
    """One settled model response's usage; ``record_id`` is the runtime's stable id (upsert key)."""

    session = models.ForeignKey(StudioSession, on_delete=models.CASCADE, related_name="usage_records")
    record_id = models.CharField(max_length=200)
    request_id = models.CharField(max_length=200, blank=True)
    # The context (runtime target) that made the call: 0 = main, else a fork or a subagent.
    # Records are kept on the main session; views add up their own targets.
    target_id = models.PositiveIntegerField(default=0)
    model = models.CharField(max_length=200, blank=True)
    input_tokens = models.BigIntegerField(default=0)
    cached_input_tokens = models.BigIntegerField(default=0)
    cache_creation_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    reasoning_tokens = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    # The runtime's price per token class (``UsageEvent.cost_detail``, USD): never recomputed here.
    cost_input = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    cost_output = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    cost_cache_read = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    cost_cache_write = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    created_at = models.DateTimeField(auto_now_add=True)
    # When the model call ended, as the store's ledger says (``ended_ms``; for a live report, when
    # Studio recorded it): what usage over time groups by day.
    at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = (
            "created_at",
            "id",
        )
        constraints = (models.UniqueConstraint(fields=["session", "record_id"], name="studio_usage_unique_record"),)
        indexes = (models.Index(fields=["at"], name="studio_usage_at"),)


class HostWorker(models.Model):
    """A live session-host worker process (worker mode): where its requests go and how fresh it is.

    ``id`` is new for every process start (the host's epoch), so a restarted worker never
    inherits a dead one's leases. ``expires_at`` is renewed with every heartbeat (database
    time); a worker past it is treated as dead. ``stopping``: a clean shutdown is under way, so
    no new session is routed to it.
    """

    id = models.CharField(primary_key=True, max_length=64)
    channel = models.CharField(max_length=200)
    pid = models.PositiveIntegerField(default=0)
    hostname = models.CharField(max_length=255, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    heartbeat_at = models.DateTimeField(null=True)
    expires_at = models.DateTimeField(null=True, db_index=True)
    stopping = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"worker {self.id} (pid {self.pid} on {self.hostname})"


class SessionLease(models.Model):
    """Which worker holds a main session (and so its store and every view of it), until when.

    Claimed with one conditional ``UPDATE`` (free, expired, or already ours), so of two workers
    racing for the same lease exactly one wins; ``term`` rises with every claim and travels with
    the holder's pushes, so a page never goes back to an older holder's picture. ``active``:
    the store has work that must go on (a turn, a queue, a pause, a task): when its holder dies
    or shuts down, a live worker claims it without waiting for a request.
    """

    session = models.OneToOneField(StudioSession, primary_key=True, on_delete=models.CASCADE, related_name="lease")
    worker = models.ForeignKey(HostWorker, null=True, blank=True, on_delete=models.SET_NULL, related_name="leases")
    expires_at = models.DateTimeField(null=True, db_index=True)
    term = models.PositiveBigIntegerField(default=0)
    active = models.BooleanField(default=False)
    claimed_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"lease of {self.session_id} (term {self.term})"
