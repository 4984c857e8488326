"""The Records tab from a session snapshot's ``records`` (pure: no I/O, no Django).

Catalogs and the execution environment get views of their own (``CatalogRecord``,
``EnvironmentRecord``) that show only known, credential-free fields; anything else the runtime
reports renders as a generic ``RecordItem`` whose fields named like a credential are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


@dataclass(slots=True)
class CatalogRecord:
    """One tool catalog of ``records["catalogs"]`` (``agentcore.extensions.catalogs``)."""

    id: str
    kind: str
    status: str  # declared | connected | error
    error: str
    transport: str
    target: str
    declared_tools: int
    allowed_tools: int
    saved_tools: int
    source: str  # declared | discovered | "" before the first search
    missing: list[str]
    conflicts: list[str]

    @property
    def drift(self) -> bool:
        """The error is a drift (a tool differs from the definition the session saved), not a
        failed connection. agentcore's records give the error text only; this is its wording
        (``catalogs.link``), and the badge falls back to "error" if that wording changes."""
        return self.status == "error" and "differs from the definition" in self.error

    @property
    def state(self) -> str:
        return {"connected": "ok", "error": "error", "declared": "warn"}.get(self.status, "")

    @property
    def state_label(self) -> str:
        return "drift" if self.drift else self.status or "unknown"


def catalog_record(raw: Any) -> CatalogRecord:
    raw = raw if isinstance(raw, dict) else {"id": str(raw)}
    info = raw.get("info") if isinstance(raw.get("info"), dict) else {}
    error = raw.get("error") or raw.get("drift") or ""
    status = str(raw.get("status") or "")
    return CatalogRecord(
        id=str(raw.get("id") or raw.get("name") or "—"),
        kind=str(raw.get("kind") or "custom"),
        status="error" if error and status not in ("error",) else status,
        error=str(error),
        transport=str(info.get("transport") or ""),
        target=str(info.get("target") or ""),
        declared_tools=_count(raw.get("declared_tools")),
        allowed_tools=_count(raw.get("allowed_tools")),
        saved_tools=_count(raw.get("saved_tools")),
        source=str(raw.get("source") or ""),
        missing=[str(x) for x in raw.get("missing") or []],
        conflicts=[str(x) for x in raw.get("conflicts") or []],
    )


def _count(value: Any) -> int:
    if isinstance(value, list | tuple):
        return len(value)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(slots=True)
class EnvironmentRecord:
    """``records["environment"]``: where the session's built-in tools run. Only these fields
    are shown (the runtime never records credentials; nothing else is rendered anyway)."""

    id: str
    label: str
    kind: str  # local | remote | "" (not opened yet)
    status: str  # not_connected | connected | error | closed
    message: str
    cwd: str

    @property
    def remote(self) -> bool:
        return self.kind == "remote"

    @property
    def state(self) -> str:
        return {"connected": "ok", "error": "error", "not_connected": "warn"}.get(self.status, "")

    @property
    def state_label(self) -> str:
        return self.status.replace("_", " ") or "unknown"


def environment_record(raw: Any) -> EnvironmentRecord | None:
    if not isinstance(raw, dict):
        return None
    message = raw.get("message") or raw.get("error") or ""
    status = str(raw.get("status") or "")
    return EnvironmentRecord(
        id=str(raw.get("id") or ""),
        label=str(raw.get("label") or raw.get("id") or ""),
        kind=str(raw.get("kind") or ""),
        status="error" if raw.get("error") and not status else status,
        message=str(message),
        cwd=str(raw.get("cwd") or ""),
    )


def records_sections(records: dict[str, Any] | None) -> dict[str, Any]:
    """The snapshot's ``records`` as Records-tab sections (present only when the key exists)."""
    records = dict(records or {})
    environment = environment_record(records.get("environment"))
    catalogs = records.get("catalogs")
    code_mode = records.get("code_mode")
    known = {"storage", "environment", "extensions", "catalogs", "code_mode", "model", "registry"}
    return {
        "storage": records.get("storage") or {},
        "environment": environment,
        "environment_remote": environment is not None and environment.remote,
        "extensions": records.get("extensions") if isinstance(records.get("extensions"), list) else None,
        "registry": records.get("registry") or {},
        "catalogs": [catalog_record(c) for c in catalogs] if isinstance(catalogs, list) else None,
        "code_mode": code_mode_limits(code_mode) if isinstance(code_mode, dict) else None,
        "code_mode_present": isinstance(code_mode, dict),
        "model": records.get("model") or {},
        "others": [
            record_item({"name": k, **v} if isinstance(v, dict) else {"name": k, "value": v})
            for k, v in records.items()
            if k not in known and _public(k)
        ],
    }


def code_mode_limits(raw: dict[str, Any]) -> RecordItem:
    """Code mode in Records: the engine and its limits (the executions are in Tasks)."""
    nested = raw.get("limits")
    limits: dict[str, Any] = nested if isinstance(nested, dict) else raw
    memory, timeout = limits.get("memory_limit_bytes"), limits.get("timeout_ms")
    calls, output = limits.get("max_calls"), limits.get("max_output_chars")
    rows: list[tuple[str, Any]] = [
        ("Memory limit", f"{memory / (1 << 20):g} MiB" if isinstance(memory, int) else None),
        ("Timeout", f"{timeout / 1000:g} s" if isinstance(timeout, int) else None),
        ("Calls per script", calls),
        ("Output kept", f"{output:,} characters" if isinstance(output, int) else None),
        ("Sandbox", raw.get("fingerprint")),
        ("Scripts run", raw.get("executions_total")),
    ]
    enabled = raw.get("enabled", True)
    return RecordItem(
        title=str(raw.get("engine") or "QuickJS sandbox"),
        state="ok" if enabled else "",
        state_label="on" if enabled else "off",
        fields=[(label, value) for label, value in rows if value is not None],
    )


