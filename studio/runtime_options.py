"""What every runtime Studio opens is given, from settings: its ``session={...}`` options and
any other ``create_agent`` options (a tracer, ...).

Kept apart from the host so that the features a deployment turns on (extensions, subagents,
code mode, tool catalogs, the execution environment, OTLP export) are read in one place, and
the host only asks for them: ``session_options(registry)`` when it opens a store,
``runtime_options()`` for every runtime, ``close_tracing()`` when it closes.

Settings (docs/studio.md); each accepts the environment variable's text or, in a settings
module of your own, the Python value:

- ``STUDIO_CODE_MODE``: ``demo`` (default: on for sessions on the offline demo model, whose
  scripts call only the session's own tools, when the ``codemode`` extra is installed; off for
  every other session), off, on (``1``/``on``/``true``/``{}``: the defaults), or the limits as
  JSON ``{"memory_limit_bytes": …, "timeout_ms": …}``.
- ``STUDIO_CATALOGS``: MCP servers as JSON, ``[{"id", "command"|"url", "args", "env", "cwd",
  "headers", "connect_timeout", "allowed_tools", "descriptors"?}, …]``, or the dotted path of a
  function returning the catalogs (``AgentToolCatalog`` objects, or such dicts).
- ``STUDIO_ENVIRONMENT``: empty (default: the tools run in the Studio process, as without the
  option), ``local``, ``remote`` (a worker process confined to the session's working
  directory), or the dotted path of a function returning a ``session.environment`` option
  ``{id, label, open}``.
- ``STUDIO_OTLP_ENDPOINT`` (+ ``STUDIO_OTLP_HEADERS``, ``STUDIO_OTLP_SERVICE_NAME``,
  ``STUDIO_OTLP_CAPTURE_CONTENT``): export every runtime's OpenTelemetry GenAI spans over
  OTLP/HTTP through one batch processor per process.

Every setting is checked when Django starts (``check_settings``, from ``StudioConfig.ready``):
a bad value is an ``ImproperlyConfigured`` naming the setting — and never echoing a header
value or a URL's credentials, which may be secrets.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import threading
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from studio.confinement import ToolConfinement

_OFF = frozenset({"", "0", "off", "false", "no", "none"})
_ON = frozenset({"1", "on", "true", "yes"})
_CATALOG_KEYS = frozenset({"allowed_tools", "descriptors"})
_HEADER_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")
TRACES_PATH = "/v1/traces"
REMOTE_ID = "studio-worker"
REMOTE_LABEL = "Worker process (confined to the session's working directory)"


def session_options(registry: Any, confinement: ToolConfinement | None = None, *, demo: bool = False) -> dict[str, Any]:
    """``create_agent(session=...)`` for a session's main conversation. ``registry`` is the
    host's one ``AgentRegistry`` built from ``STUDIO_EXTENSIONS``; ``confinement`` says where
    the session's tools run: a confined session gets its sandbox (or no environment: local,
    read-only tools), never ``STUDIO_ENVIRONMENT``, which is for sessions on the server.
    ``demo``: the session is on the offline demo model (``STUDIO_CODE_MODE=demo``).

    Catalogs and the environment are built anew for every store the host opens (a catalog's
    connection and an environment's worker belong to one runtime)."""
    options: dict[str, Any] = {
        "registry": registry,
        "subagents": {
            "tools": list(settings.STUDIO_SUBAGENT_TOOLS),
            "max_agents": int(settings.STUDIO_MAX_SUBAGENTS),
        },
    }
    code_mode = code_mode_option(demo=demo)
    if code_mode is not None:
        options["code_mode"] = code_mode
    catalogs = catalog_options()
    if catalogs:
        options["tool_search"] = {"catalogs": catalogs}
    if confinement is not None and confinement.confined:
        environment = confinement.environment
    else:
        environment = environment_option()
    if environment is not None:
        options["environment"] = environment
    return options


def runtime_options() -> dict[str, Any]:
    """Further ``create_agent`` options every runtime gets: ``tracing`` with the process's OTLP
    exporter when ``STUDIO_OTLP_ENDPOINT`` is set (nothing otherwise)."""
    export = otlp_settings()
    if export is None:
        return {}
    from agentcore.tracing import AgentTracing

    return {"tracing": AgentTracing(provider=_TRACING.provider(export), capture_content=export.capture_content)}


def close_tracing() -> None:
    """Flush and shut down this process's tracer provider (the host calls it when it closes,
    after its runtimes). Blocks while the batch is sent (at most the exporter's timeout)."""
    _TRACING.close()


def check_settings() -> None:
    """Parse every setting of this module now (Django start-up): bad values raise here, naming
    the setting, instead of when the first session opens."""
    code_mode_option()
    catalog_options()
    environment_option()
    otlp_settings()


# --- code mode ------------------------------------------------------------------------------


def code_mode_option(*, demo: bool = False) -> dict[str, Any] | None:
    """``session.code_mode`` from ``STUDIO_CODE_MODE``, validated by agentcore; None when off
    (``demo``, the default: on with the defaults for a session on the offline demo model, so a
    newcomer sees a code-mode script; off for the others and without the ``codemode`` extra)."""
    raw = getattr(settings, "STUDIO_CODE_MODE", "demo")
    value: Any
    if raw is None or raw is False:
        return None
    if isinstance(raw, str) and raw.strip().lower() == "demo":
        return {} if demo and _importable("quickjs") else None
    if raw is True:
        value = {}
    elif isinstance(raw, str):
        text = raw.strip()
        if text.lower() in _OFF:
            return None
        if text.lower() in _ON:
            value = {}
        else:
            try:
                value = json.loads(text)
            except ValueError:
                raise ImproperlyConfigured(
                    "STUDIO_CODE_MODE must be demo, on, off, or the limits as a JSON object "
                    '{"memory_limit_bytes": ..., "timeout_ms": ...}; it is neither a switch nor JSON'
                ) from None
    else:
        value = raw
    if not isinstance(value, dict):
        raise ImproperlyConfigured(
            f"STUDIO_CODE_MODE must be demo, on, off, or a JSON object of limits; got {type(value).__name__}"
        )
    _validate("code_mode", value, "STUDIO_CODE_MODE")
    return dict(value)


# --- tool catalogs ----------------------------------------------------------------------------


def catalog_options() -> list[Any]:
    """``session.tool_search.catalogs`` from ``STUDIO_CATALOGS`` (empty when unset), validated
    the way the session will validate them. Nothing is started or connected here."""
    raw = getattr(settings, "STUDIO_CATALOGS", "")
    items: Any
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return []
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith(("[", "{")):
            try:
                items = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ImproperlyConfigured(f"STUDIO_CATALOGS is not valid JSON: {exc.msg} (at {exc.pos})") from None
        else:
            items = _call_dotted("STUDIO_CATALOGS", text)
    elif callable(raw):
        items = _call("STUDIO_CATALOGS", raw)
    else:
        items = raw
    if isinstance(items, Mapping):
        items = [items]
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise ImproperlyConfigured(
            f"STUDIO_CATALOGS must be a list of MCP server definitions or catalogs; got {type(items).__name__}"
        )
    catalogs = [_catalog(n, item) for n, item in enumerate(items)]
    if catalogs:
        _validate("tool_search", {"catalogs": catalogs}, "STUDIO_CATALOGS")
    return catalogs


def _catalog(n: int, item: Any) -> Any:
    """One catalog: an ``AgentToolCatalog`` as given, or an MCP server definition (a dict)."""
    from agentcore.extensions.catalogs import AgentToolCatalog

    if isinstance(item, AgentToolCatalog):
        return item
    where = f"STUDIO_CATALOGS[{n}]"
    if not isinstance(item, Mapping):
        raise ImproperlyConfigured(
            f"{where} must be an MCP server definition (an object) or an AgentToolCatalog; got {type(item).__name__}"
        )
    if importlib.util.find_spec("mcp") is None:
        raise ImproperlyConfigured(f"{where}: MCP catalogs need the mcp extra (pip install 'agentcore-studio[mcp]')")
    from agentcore.errors import InputValidationError
    from agentcore.extensions.mcp_catalog import create_mcp_tool_catalog

    definition = {k: v for k, v in item.items() if k not in _CATALOG_KEYS}
    name = f" ({definition['id']!r})" if isinstance(definition.get("id"), str) else ""
    if "allowed_tools" not in item:
        raise ImproperlyConfigured(f"{where}{name}: allowed_tools is required (the server's tool names to offer)")
    try:
        return create_mcp_tool_catalog(
            definition=definition, allowed_tools=item["allowed_tools"], descriptors=item.get("descriptors")
        )
    except InputValidationError as exc:
        raise ImproperlyConfigured(f"{where}{name}: {exc.message}") from None


# --- execution environment --------------------------------------------------------------------


def environment_option() -> dict[str, Any] | None:
    """``session.environment`` from ``STUDIO_ENVIRONMENT``; None = the tools run here, as
    without the option. A session keeps the environment id it first ran with: changing the id
    makes its existing sessions refuse to open (agentcore's identity rule)."""
    raw = getattr(settings, "STUDIO_ENVIRONMENT", "")
    option: Any
    if raw is None or raw is False:
        return None
    if isinstance(raw, str):
        text = raw.strip()
        if text.lower() in _OFF:
            return None
        if text.lower() == "local":
            from agentcore.extensions.environment import local_environment

            return local_environment(id="local", label="Studio's machine")
        if text.lower() == "remote":
            from agentcore.extensions.environment import remote_environment

            return remote_environment(id=REMOTE_ID, label=REMOTE_LABEL)
        option = _call_dotted("STUDIO_ENVIRONMENT", text, what="local, remote or a dotted path")
    elif callable(raw):
        option = _call("STUDIO_ENVIRONMENT", raw)
    else:
        option = raw
    if not isinstance(option, Mapping):
        raise ImproperlyConfigured(
            f"STUDIO_ENVIRONMENT must give a session.environment option {{id, label, open}}; "
            f"got {type(option).__name__}"
        )
    _validate("environment", dict(option), "STUDIO_ENVIRONMENT")
    return dict(option)


# --- OTLP export --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OtlpSettings:
    """Where and how spans are exported. ``headers`` may hold credentials: never shown."""

    endpoint: str
    headers: tuple[tuple[str, str], ...]
    service_name: str
    capture_content: bool

    def __repr__(self) -> str:
        return f"OtlpSettings({_public_url(self.endpoint)!r}, {len(self.headers)} header(s), {self.service_name!r})"


def otlp_settings() -> OtlpSettings | None:
    """The OTLP export settings, or None when ``STUDIO_OTLP_ENDPOINT`` is empty."""
    raw = getattr(settings, "STUDIO_OTLP_ENDPOINT", "") or ""
    if not isinstance(raw, str):
        raise ImproperlyConfigured(f"STUDIO_OTLP_ENDPOINT must be a URL string; got {type(raw).__name__}")
    if not raw.strip():
        return None
    endpoint = _traces_url(raw.strip())
    headers = _headers(getattr(settings, "STUDIO_OTLP_HEADERS", "") or "")
    service = getattr(settings, "STUDIO_OTLP_SERVICE_NAME", "") or "agentcore-studio"
    if not isinstance(service, str) or not service.strip() or not service.isprintable() or len(service) > 200:
        raise ImproperlyConfigured("STUDIO_OTLP_SERVICE_NAME must be a printable name of at most 200 characters")
    capture = getattr(settings, "STUDIO_OTLP_CAPTURE_CONTENT", False)
    if not isinstance(capture, bool):
        raise ImproperlyConfigured(f"STUDIO_OTLP_CAPTURE_CONTENT must be a boolean; got {type(capture).__name__}")
    for module in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"):
        if not _importable(module):
            raise ImproperlyConfigured(
                "STUDIO_OTLP_ENDPOINT needs opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http "
                "(pip install 'agentcore-studio[studio]')"
            )
    return OtlpSettings(endpoint, headers, service.strip(), capture)


def _traces_url(raw: str) -> str:
    """The receiver's base URL gets ``/v1/traces`` appended (as ``OTEL_EXPORTER_OTLP_ENDPOINT``
    does); a URL that already ends with it is used as it is."""
    try:
        parts = urllib.parse.urlsplit(raw)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ImproperlyConfigured("STUDIO_OTLP_ENDPOINT is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ImproperlyConfigured(
            "STUDIO_OTLP_ENDPOINT must be an http(s) URL of an OTLP/HTTP receiver, e.g. http://127.0.0.1:4318"
        )
    if any(ch.isspace() for ch in raw):
        raise ImproperlyConfigured("STUDIO_OTLP_ENDPOINT must not contain spaces")
    path = parts.path.rstrip("/")
    if not path.endswith(TRACES_PATH):
        path += TRACES_PATH
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _public_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _headers(raw: Any) -> tuple[tuple[str, str], ...]:
    """``name=value,name2=value2`` (values URL-decoded, as ``OTEL_EXPORTER_OTLP_HEADERS``) or a
    dict. Errors name the header, never its value."""
    pairs: list[tuple[str, str]] = []
    if isinstance(raw, Mapping):
        pairs = [(k, v) for k, v in raw.items()]
    elif isinstance(raw, str):
        for n, item in enumerate(part for part in raw.split(",") if part.strip()):
            name, sep, value = item.partition("=")
            if not sep:
                raise ImproperlyConfigured(
                    f"STUDIO_OTLP_HEADERS item {n + 1} has no '=': write name=value pairs separated by commas"
                )
            pairs.append((urllib.parse.unquote(name.strip()), urllib.parse.unquote(value.strip())))
    else:
        raise ImproperlyConfigured(f"STUDIO_OTLP_HEADERS must be name=value pairs or a dict; got {type(raw).__name__}")
    for name, value in pairs:
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise ImproperlyConfigured(f"STUDIO_OTLP_HEADERS: {str(name)[:40]!r} is not a valid header name")
        if not isinstance(value, str) or any(ch in value for ch in "\r\n\x00"):
            raise ImproperlyConfigured(f"STUDIO_OTLP_HEADERS: the value of {name!r} is not a valid header value")
    return tuple(pairs)


class _ProcessTracing:
    """The process's one tracer provider with its batch processor and OTLP/HTTP exporter.

    One per process, not per runtime: a batch processor is a thread and a queue, and runtimes
    come and go with sessions. Module state because ``runtime_options()`` is called for each
    runtime without a handle on the host; the host shuts it down when it closes (and the SDK's
    exit hook flushes it if a process ends without closing its host)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._provider: Any = None
        self._settings: OtlpSettings | None = None

    def provider(self, export: OtlpSettings) -> Any:
        with self._lock:
            if self._provider is not None and self._settings == export:
                return self._provider
            stale, self._provider = self._provider, None
            if stale is not None:  # the settings changed (tests): the old one is flushed first
                stale.shutdown()
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import SERVICE_NAME, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            provider = TracerProvider(resource=Resource.create({SERVICE_NAME: export.service_name}))
            exporter = OTLPSpanExporter(endpoint=export.endpoint, headers=dict(export.headers))
            provider.add_span_processor(BatchSpanProcessor(exporter))
            self._provider, self._settings = provider, export
            return provider

    def close(self) -> None:
        with self._lock:
            provider, self._provider, self._settings = self._provider, None, None
        if provider is not None:
            provider.shutdown()


_TRACING = _ProcessTracing()


# --- helpers ----------------------------------------------------------------------------------


def _validate(key: str, value: Any, setting: str) -> None:
    """Run agentcore's own strict check of ``session.<key>`` and rename the field to the setting."""
    from agentcore.errors import InputValidationError
    from agentcore.session.extension import parse_extension_option

    try:
        parse_extension_option(key, value)
    except InputValidationError as exc:
        message = str(exc.message).replace(f"session.{key}", setting)
        raise ImproperlyConfigured(message if message.startswith(setting) else f"{setting}: {message}") from None


def _call_dotted(setting: str, path: str, *, what: str = "JSON or a dotted path") -> Any:
    module_name, _, attribute = path.replace(":", ".").rpartition(".")
    if not module_name or not all(part.isidentifier() for part in path.replace(":", ".").split(".")):
        raise ImproperlyConfigured(f"{setting} must be {what}; {path[:80]!r} is none of these")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImproperlyConfigured(f"{setting}: cannot import {module_name!r}: {exc}") from exc
    target = getattr(module, attribute, None)
    if target is None:
        raise ImproperlyConfigured(f"{setting}: {module_name!r} has no attribute {attribute!r}")
    return _call(setting, target) if callable(target) else target


def _call(setting: str, factory: Callable[[], Any]) -> Any:
    try:
        return factory()
    except ImproperlyConfigured:
        raise
    except Exception as exc:
        raise ImproperlyConfigured(f"{setting}: {getattr(factory, '__name__', 'the factory')}() failed: {exc}") from exc


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False
