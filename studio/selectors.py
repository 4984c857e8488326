"""Reads: every query a page, a consumer or the session host makes (nothing here writes or
renders; page contexts are ``studio.pages``)."""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.db.models import Case, Count, QuerySet, Sum, Value, When
from django.http import Http404

from studio import sql
from studio.host.contract import HostError, SessionConfig
from studio.host.live import STEER_MISSED
from studio.model_capabilities import Capabilities, capabilities
from studio.models import (
    Approval,
    Provider,
    RegisteredModel,
    Run,
    RunStatus,
    SessionKind,
    StudioSession,
    ToolCall,
    UsageRecord,
)
from studio.stores import location_of
from studio.workspaces import ProtectedPaths

_T = TypeVar("_T")

#: Turns listed in the Usage tab (totals always cover the whole session).
USAGE_TURNS = 100


def session_for_user(user: Any, session_id: Any) -> StudioSession:
    """The session if ``user`` owns it, else 404 — the same answer whether the id does not
    exist or belongs to someone else, so ids of other users' sessions cannot be probed."""
    session = owned_session(user.pk, session_id) if user.is_authenticated else None
    if session is None:
        raise Http404("No such session.")
    return session


def require_owned(user: Any, session_id: Any) -> None:
    """404 unless ``user`` owns the session ``session_id`` (as ``session_for_user`` answers),
    reading no row: for a caller that reads the session's row itself afterwards (the session
    page reads its view row once the host has opened it, so a full read before would be wasted)."""
    try:
        owned = user.is_authenticated and sql.exists(StudioSession, id=session_id, owner=user.pk)
    except (ValueError, TypeError, ValidationError) as exc:
        raise Http404("No such session.") from exc
    if not owned:
        raise Http404("No such session.")


def owned_session(owner_id: Any, session_id: Any) -> StudioSession | None:
    """The session ``session_id`` if the person ``owner_id`` owns it (its model, owner and root
    rows loaded with it: one statement), else None; a malformed id is no session."""
    try:
        session: StudioSession | None = sql.one(
            StudioSession, ("registered_model", "owner", "root"), id=session_id, owner=owner_id
        )
    except (ValueError, TypeError, ValidationError):
        return None
    return session


def root_of(session_id: str) -> str:
    """The main session whose store a view belongs to (itself for a main session)."""
    row = StudioSession.objects.filter(pk=session_id).values_list("root_id", flat=True).first()
    return str(row or session_id)


def views_of(root_id: str) -> list[tuple[str, int, str, str]]:
    """Every view of a store: (session id, target id, kind, the sessions list's status), the
    main session first."""
    names = ("id", "root", "target_id", "kind", "status", "last_activity")
    c = {name: sql.column(StudioSession, name) for name in names}
    statement = (
        f"SELECT {c['id']}, {c['target_id']}, {c['kind']}, {c['status']} FROM {sql.table(StudioSession)}"
        f" WHERE {c['id']} = %s OR {c['root']} = %s ORDER BY {c['last_activity']} DESC"  # the model's ordering
    )
    key = sql.param(StudioSession, "id", root_id)
    fields = [(StudioSession, name) for name in ("id", "target_id", "kind", "status")]
    rows = sql.fetch(statement, [key, key], fields)
    return [(str(pk), int(target), str(kind), str(status)) for pk, target, kind, status in rows]


def view_for_target(root: StudioSession, target_id: int) -> StudioSession | None:
    if target_id == 0:
        return root
    return StudioSession.objects.filter(root=root, target_id=target_id).first()


def registered_models() -> QuerySet[RegisteredModel]:
    """Enabled models, the offline demo first, then by name."""
    demo_first = Case(When(provider=Provider.DEMO, then=Value(0)), default=Value(1))
    return RegisteredModel.objects.filter(enabled=True).order_by(demo_first, "name")


def default_model_for(user: Any) -> RegisteredModel | None:
    """The model a new session of ``user`` starts with: the one this person chose last time.

    Registering a model in the admin never changes anyone's default (a model nobody chose
    may have no network or no key); before a person has chosen, it is the offline demo.
    """
    models = registered_models()
    last = (
        StudioSession.objects.filter(owner=user, registered_model__enabled=True, kind=SessionKind.MAIN)
        .order_by("-created_at")
        .values_list("registered_model_id", flat=True)
        .first()
        if getattr(user, "is_authenticated", False)
        else None
    )
    return (models.filter(pk=last).first() if last else None) or models.filter(provider=Provider.DEMO).first()


def provider_name(model: RegisteredModel) -> str:
    """The provider a runtime resolves for this model (``configure`` names it)."""
    return "custom" if model.provider == Provider.CUSTOM else str(model.provider)


def model_choices(model: RegisteredModel) -> list[RegisteredModel]:
    """Models a session on ``model`` can switch to with ``configure``: same provider, endpoint,
    API kind and key — the runtime's credentials — so a switch never sends a key elsewhere.
    Keys are compared decrypted (each is encrypted with its own IV); one that cannot be read
    is never a match. Enabled ones only, by name (as ``registered_models`` orders them).

    One plain statement (``studio.sql``): the controls re-render this at every turn's start."""
    if model.is_demo:
        return [model]
    same = sql.rows(
        RegisteredModel,
        ("name",),
        enabled=True,
        provider=model.provider,
        base_url=model.base_url,
        api_kind=model.api_kind,
    )
    same = [m for m in same if m.model_id != ""]
    key = _readable_key(model)
    return [m for m in same if m.pk == model.pk or (key is not None and _readable_key(m) == key)]


def _readable_key(model: RegisteredModel) -> str | None:
    from studio.credentials import CredentialsError

    try:
        return model.plain_api_key()
    except CredentialsError:
        return None


def model_table(model: RegisteredModel) -> dict[str, Any]:
    """The runtime's model table (``create_agent(models=...)``): model id → attributes of every
    model a session on ``model`` may switch to, as registered now."""
    return _table_of(model_choices(model))


def _table_of(choices: list[RegisteredModel]) -> dict[str, Any]:
    return {m.model_id: m.attributes for m in choices if m.attributes and not m.is_demo}


def enabled_model_rows() -> tuple[tuple[Any, ...], ...]:
    """What every model table depends on — each enabled model's identity, endpoint, key (as
    stored) and attributes — as plain values in one read: the host compares it before each
    prompt and builds a table again (model instances, decrypted keys) only when it changed."""
    fields = ("id", "provider", "model_id", "base_url", "api_kind", "api_key", "attributes")
    columns = ", ".join(sql.column(RegisteredModel, name) for name in fields)
    enabled, pk = sql.column(RegisteredModel, "enabled"), sql.column(RegisteredModel, "id")
    statement = f"SELECT {columns} FROM {sql.table(RegisteredModel)} WHERE {enabled} = %s ORDER BY {pk}"
    rows = sql.fetch(statement, [sql.param(RegisteredModel, "enabled", True)], [(RegisteredModel, n) for n in fields])
    return tuple(rows)  # one plain statement: read before every prompt


def session_model_table(root_id: str) -> dict[str, Any]:
    """``model_table`` of the session that owns the store ``root_id``."""
    model = RegisteredModel.objects.get(sessions__pk=root_id)
    return model_table(model)


class ModelCatalog:
    """Each registered model's runtime options (its decrypted key), model table and the models a
    session on it may switch to, as of one version of the enabled models (``enabled_model_rows``,
    which holds every field they are built from): a store's opening and a turn's pushes read
    that one plain statement and decrypt nothing and query no table again until a model
    changes. A host owns one (no process-wide state); callers get copies, so a change to one
    config never reaches another."""

    def __init__(self) -> None:
        self._rows: tuple[tuple[Any, ...], ...] = ()
        self._built: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        self._choices: dict[int, list[RegisteredModel]] = {}
        self._capabilities: dict[int, Capabilities] = {}

    def _version(self, rows: tuple[tuple[Any, ...], ...]) -> None:
        if rows != self._rows:
            self._rows, self._built, self._choices, self._capabilities = rows, {}, {}, {}

    def parts(self, model: RegisteredModel, rows: tuple[tuple[Any, ...], ...]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(model.runtime_options(), model_table(model))`` as of ``rows`` (``CredentialsError``
        when the key cannot be read: never kept). A model not in ``rows`` (disabled) is built
        afresh each time: its fields are not part of the version."""
        self._version(rows)
        built = self._built.get(model.pk)
        if built is None:
            built = (model.runtime_options(), _table_of(self.choices(model, rows)))
            if _listed(model, rows):
                self._built[model.pk] = built
        return copy.deepcopy(built)

    def choices(self, model: RegisteredModel, rows: tuple[tuple[Any, ...], ...]) -> list[RegisteredModel]:
        """``model_choices(model)`` as of ``rows`` (the instances are shared: read them only)."""
        self._version(rows)
        choices: list[RegisteredModel] = _kept(self._choices, model, rows, model_choices)
        return list(choices)

    def capabilities(self, model: RegisteredModel, rows: tuple[tuple[Any, ...], ...]) -> Capabilities:
        """``model_capabilities.capabilities(model)`` as of ``rows``."""
        self._version(rows)
        return _kept(self._capabilities, model, rows, capabilities)


def _kept(
    kept: dict[int, _T],
    model: RegisteredModel,
    rows: tuple[tuple[Any, ...], ...],
    build: Callable[[RegisteredModel], _T],
) -> _T:
    """``build(model)``, kept in ``kept`` when ``model`` is one of ``rows`` (a disabled model's
    fields are not part of the version: built afresh each time)."""
    known = kept.get(model.pk)
    if known is None:
        known = build(model)
        if _listed(model, rows):
            kept[model.pk] = known
    return known


@dataclass(frozen=True, slots=True)
class ModelMenu:
    """A host's ``ModelCatalog`` at the version of the registered models one store runs with
    (``SessionConfig.model_rows``, read again before every prompt): what a push's controls and
    turn actions offer, built once per version for every session of the host."""

    catalog: ModelCatalog
    rows: tuple[tuple[Any, ...], ...]

    def choices(self, model: RegisteredModel) -> list[RegisteredModel]:
        return self.catalog.choices(model, self.rows)

    def capabilities(self, model: RegisteredModel) -> Capabilities:
        return self.catalog.capabilities(model, self.rows)


def _listed(model: RegisteredModel, rows: tuple[tuple[Any, ...], ...]) -> bool:
    return any(row[0] == model.pk for row in rows)


def session_config(
    session_id: str, catalog: ModelCatalog | None = None, protected: ProtectedPaths | None = None
) -> SessionConfig:
    """What the host needs for a view: its store's options (the main session's), its target
    and where its tools run. ``HostError`` when the session cannot run: a confined session
    whose workdir it may no longer use, or a model whose API key cannot be read. ``catalog``
    and ``protected``: the host's ``ModelCatalog`` and ``ProtectedPaths`` (default: read for
    this call alone)."""
    from studio.confinement import confinement_of
    from studio.credentials import CredentialsError

    session = _view_row(session_id, ("registered_model", "root__registered_model"))
    root = session.root or session
    model = root.registered_model
    confinement = confinement_of(root, protected.get() if protected is not None else None)
    if confinement.mode == "refused":
        raise HostError("workdir_refused", confinement.summary)
    rows = enabled_model_rows()
    try:
        model_options, models = (catalog or ModelCatalog()).parts(model, rows)
    except CredentialsError as exc:
        raise HostError("credentials", str(exc)) from None
    return SessionConfig(
        session_id=str(session.pk),
        store=location_of(root),
        workdir=root.workdir,
        permission_policy=confinement.permission_policy,
        effort=root.effort,
        mode=root.mode,
        model_options=model_options,
        root_id=str(root.pk),
        target_id=int(session.target_id),
        kind=str(session.kind),
        models=models,
        model_rows=rows,
        owner_id=int(root.owner_id),
        confinement=confinement,
    )


def session_view(session_id: str) -> StudioSession:
    """A view's row with everything its page reads (model, owner, the main session's)."""
    return _view_row(session_id, ("registered_model", "owner", "root__registered_model", "root__owner"))


def _view_row(session_id: str, related: tuple[str, ...]) -> StudioSession:
    """A view's row with ``related`` loaded, in one plain statement (``studio.sql.one``: every
    page, prompt and push reads it); ``StudioSession.DoesNotExist`` as the ORM's ``get``."""
    session = sql.one(StudioSession, related, id=session_id)
    if session is None:
        raise StudioSession.DoesNotExist(f"No session {session_id}.")
    return session


def approvals_of(session: StudioSession) -> list[Approval]:
    """The view's plan reviews, oldest first."""
    return sql.rows(Approval, ("created_at", "id"), session=session.pk)  # the Plan tab, every full render


def _run_dict(run: Run) -> dict[str, Any]:
    return {"request_id": run.request_id, "agent": run.agent, "pending": run.pending, "status": run.status}


def pending_run(session_id: str) -> dict[str, Any] | None:
    """The turn paused for a plan review or questions, if any (the newest one)."""
    run = Run.objects.filter(session_id=session_id, status=RunStatus.PAUSED).order_by("-started_at", "-id").first()
    return _run_dict(run) if run is not None else None


def tool_timings(root_id: str, ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Status, duration and start of tool calls (by the runtime's display call id)."""
    rows = ToolCall.objects.filter(session_id=root_id)
    if ids is not None:
        rows = rows.filter(tool_call_id__in=ids)
    return {
        t.tool_call_id: {
            "status": t.status,
            "duration_ms": t.duration_ms,
            "started_ms": int(t.started_at.timestamp() * 1000),
        }
        for t in rows.only("tool_call_id", "status", "duration_ms", "started_at")
    }


def run_notices(session_id: str, prompts: set[str] | None = None) -> dict[str, list[dict[str, str] | None]]:
    """How each prompt-carrying turn ended when that deserves a notice, by prompt text.

    Turns are matched to their run by the prompt's text in order (a queued follow-up and a steer
    can be placed in another order than they were sent), so a notice lands on its own turn.
    ``prompts`` limits the query to the prompts on screen.
    """
    notices: dict[str, list[dict[str, str] | None]] = {}
    if prompts is not None and not prompts:
        return notices
    skipped = (RunStatus.QUEUED, RunStatus.WITHDRAWN, RunStatus.CANCELLED)
    columns = ("prompt", "status", "error_code", "error", "retries", "mode")
    where = [f"{sql.column(Run, 'session')} = %s", f"{sql.column(Run, 'prompt')} <> ''"]
    params: list[Any] = [sql.param(Run, "session", session_id)]
    where.append(f"{sql.column(Run, 'status')} NOT IN ({', '.join(['%s'] * len(skipped))})")
    params.extend(str(status) for status in skipped)
    if prompts is not None:
        where.append(f"{sql.column(Run, 'prompt')} IN ({', '.join(['%s'] * len(prompts))})")
        params.extend(sorted(prompts))
    statement = (
        f"SELECT {', '.join(sql.column(Run, c) for c in columns)} FROM {sql.table(Run)} "
        f"WHERE {' AND '.join(where)} ORDER BY {sql.column(Run, 'started_at')}, {sql.column(Run, 'id')}"
    )
    for prompt, status, error_code, error, retries, mode in sql.fetch(statement, params, [(Run, c) for c in columns]):
        notice: dict[str, str] | None
        if status == RunStatus.FAILED:
            notice = {"level": "error", "title": "The run failed", "code": error_code, "text": error}
        elif status == RunStatus.ABORTED and error_code == "cancelled_offline":
            notice = {"level": "stopped", "title": "Stopped", "code": "", "text": "Cancelled by an admin."}
        elif status == RunStatus.ABORTED:
            notice = {"level": "stopped", "title": "Stopped", "code": "", "text": ""}
        elif dropped := [r for r in retries or [] if r.get("kind") in ("dropped", "connect")]:
            notice = {
                "level": "info",
                "title": f"Recovered after {len(dropped)} network retr{'y' if len(dropped) == 1 else 'ies'}",
                "code": "",
                "text": str(dropped[-1].get("reason") or ""),
            }
        elif mode == "steer" and status != RunStatus.PLACED:
            notice = {"level": "info", "title": "Sent as the next message", "code": "", "text": STEER_MISSED}
        else:
            notice = None
        notices.setdefault(prompt, []).append(notice)
    return notices


# --- trace tabs --------------------------------------------------------------------------------

_TOKEN_FIELDS = ("input_tokens", "cached_input_tokens", "cache_creation_tokens", "output_tokens", "reasoning_tokens")
_COST_FIELDS = ("cost_input", "cost_output", "cost_cache_read", "cost_cache_write")


def usage_context(session: StudioSession, targets: set[int] | None = None) -> dict[str, Any]:
    """Usage per turn and per session, each token class priced separately, never summed twice.

    Read from Studio's copy of the store's usage ledger (``UsageRecord``, one row per settled
    model call, reconciled with the store): the runtime's price of each token class is kept, so
    cached input and cache writes are priced on their own. ``targets`` limits it to the calls of
    some conversations of the store (a view and its subagents). Reasoning tokens are part of
    output tokens (they are shown, not added again). Totals are sums in the database; only the
    newest ``USAGE_TURNS`` turns are grouped here, so a long session costs the same per render.
    """
    root = session.root or session

    def records() -> QuerySet[UsageRecord]:
        """Every record of the view (an ORM query: built only for a long session's totals)."""
        rows = UsageRecord.objects.filter(session=root)
        return rows.filter(target_id__in=targets) if targets is not None else rows

    newest, prompts = _newest_usage(root, session, targets, USAGE_TURNS * 4 + 1)
    if len(newest) <= USAGE_TURNS * 4:  # every record is here: the totals are their sums
        sums: dict[str, Any] = {"calls": len(newest)}
        for f in ("cost", *_TOKEN_FIELDS, *_COST_FIELDS):
            sums[f] = sum((r[f] for r in newest), Decimal(0) if f == "cost" or f in _COST_FIELDS else 0)
    else:
        newest.pop()
        sums = records().aggregate(
            calls=Count("id"), cost=Sum("cost"), **{f: Sum(f) for f in _TOKEN_FIELDS + _COST_FIELDS}
        )
    totals: dict[str, Any] = {"calls": sums["calls"] or 0, "cost": sums["cost"] or Decimal(0)}
    for f in _TOKEN_FIELDS:
        totals[f] = sums[f] or 0
    for f in _COST_FIELDS:
        totals[f] = sums[f] or Decimal(0)
    totals["tokens"] = sum(totals[f] for f in _TOKEN_FIELDS[:4])
    newest.reverse()
    turns: OrderedDict[str, dict[str, Any]] = OrderedDict()
    for record in newest:
        turn = turns.setdefault(
            record["request_id"],
            {
                "request_id": record["request_id"],
                "prompt": "",
                "calls": 0,
                "cost": Decimal(0),
                "model": record["model"],
                "target_id": record["target_id"],
            }
            | dict.fromkeys(_TOKEN_FIELDS, 0)
            | dict.fromkeys(_COST_FIELDS, Decimal(0)),
        )
        turn["calls"] += 1
        turn["cost"] += record["cost"]
        turn["model"] = record["model"] or turn["model"]
        for f in _TOKEN_FIELDS + _COST_FIELDS:
            turn[f] += record[f]
    rows = list(turns.values())[-USAGE_TURNS:]
    for row in rows:
        row["prompt"] = prompts.get(row["request_id"], "")
    priced = any(totals[f] for f in _COST_FIELDS)

    def class_costs(row: dict[str, Any]) -> dict[str, Decimal] | None:
        """Per token class, as the runtime priced it (``UsageEvent.cost_detail``)."""
        if not priced:
            return None
        return {
            "input": row["cost_input"],
            "cached": row["cost_cache_read"],
            "cache_write": row["cost_cache_write"],
            "output": row["cost_output"],
        }

    for row in rows:
        row["class_costs"] = class_costs(row)
    totals["class_costs"] = class_costs(totals)
    turn_count = records().values("request_id").distinct().count() if len(turns) >= USAGE_TURNS else len(rows)
    return {
        "usage_rows": rows,
        "usage_rows_total": turn_count,
        "usage_totals": totals,
        "usage_chart": _usage_chart(rows),
    }


_USAGE_COLUMNS = ("request_id", "model", "target_id", "cost", *_TOKEN_FIELDS, *_COST_FIELDS)


def _newest_usage(
    root: StudioSession, session: StudioSession, targets: set[int] | None, limit: int
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The newest ``limit`` usage records of the store (of ``targets``), newest first, and the
    prompt of each one's turn (its run in this view or the main one): one statement
    (``studio.sql``: it runs on every turn's end of every watched page)."""
    u = sql.table(UsageRecord)
    selected = ", ".join(f"u.{sql.column(UsageRecord, c)}" for c in _USAGE_COLUMNS)
    runs, run_session = sql.table(Run), sql.column(Run, "session")
    prompt = (
        f"(SELECT r.{sql.column(Run, 'prompt')} FROM {runs} r WHERE r.{sql.column(Run, 'request_id')} = "
        f"u.{sql.column(UsageRecord, 'request_id')} AND r.{run_session} IN (%s, %s) "
        f"ORDER BY r.{sql.column(Run, 'started_at')} DESC, r.{sql.column(Run, 'id')} DESC LIMIT 1)"
    )
    params: list[Any] = [sql.param(Run, "session", session.pk), sql.param(Run, "session", root.pk)]
    where = f"u.{sql.column(UsageRecord, 'session')} = %s"
    params.append(sql.param(UsageRecord, "session", root.pk))
    if targets is not None:
        where += f" AND u.{sql.column(UsageRecord, 'target_id')} IN ({', '.join(['%s'] * len(targets)) or 'NULL'})"
        params.extend(sorted(targets))
    statement = (
        f"SELECT {selected}, {prompt} FROM {u} u WHERE {where} "
        f"ORDER BY u.{sql.column(UsageRecord, 'id')} DESC LIMIT %s"
    )
    fields = [(UsageRecord, c) for c in _USAGE_COLUMNS] + [(Run, "prompt")]
    newest: list[dict[str, Any]] = []
    prompts: dict[str, str] = {}
    for row in sql.fetch(statement, [*params, limit], fields):
        record = dict(zip(_USAGE_COLUMNS, row[:-1], strict=True))
        newest.append(record)
        prompts.setdefault(record["request_id"], row[-1] or "")
    return newest, prompts


def _usage_chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Stacked bars (input, cached input, cache write, output) per turn, as SVG geometry."""
    width, height, gap = 300, 90, 4
    shown = rows[-24:]
    if not shown:
        return {"bars": [], "width": width, "height": height}
    peak = max(sum(r[f] for f in _TOKEN_FIELDS[:4]) for r in shown) or 1
    bar_w = max(4, (width - gap * (len(shown) - 1)) // max(len(shown), 1))
    bar_w = min(bar_w, 28)
    bars = []
    offset = len(rows) - len(shown)
    for i, row in enumerate(shown):
        x = i * (bar_w + gap)
        y = height
        segments = []
        for f, css in zip(_TOKEN_FIELDS[:4], ("seg-input", "seg-cached", "seg-write", "seg-output"), strict=True):
            h = round(row[f] / peak * (height - 2), 2)
            if h <= 0:
                continue
            y -= h
            segments.append({"y": round(y, 2), "h": h, "css": css})
        total = sum(row[f] for f in _TOKEN_FIELDS[:4])
        bars.append({"x": x, "w": bar_w, "segments": segments, "label": f"Turn {offset + i + 1}: {total:,} tokens"})
    return {"bars": bars, "width": width, "height": height}


