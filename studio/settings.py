"""Studio settings.

The defaults are production safe and need no configuration: DEBUG off (styled error pages,
no URL list on a 404), static files served by WhiteNoise, a random secret key kept in the data
dir, only local host names allowed, SQLite under the data dir, the in-memory channel layer and
the session host inside the daphne process. Everything else is environment variables (see
docs/studio.md):

- ``DJANGO_DEBUG=1`` turns Django's debug mode on (development only: ``manage.py studio --dev``).
- ``DJANGO_SECRET_KEY`` (default: generated once into ``<data dir>/secret_key``, mode 0600),
  ``DJANGO_ALLOWED_HOSTS`` (comma separated; default the loopback names),
  ``DJANGO_CSRF_TRUSTED_ORIGINS`` (comma separated, e.g. ``https://studio.example.com``).
- ``STUDIO_HTTPS=1`` behind TLS: secure cookies, HSTS, redirect to https and trust of the
  proxy's ``X-Forwarded-Proto`` — the settings only TLS can satisfy, so they are off by
  default (they would lock a plain-http local Studio out).
- ``STUDIO_DATA_DIR``: where the Studio database, the per-session agent stores and the
  default workspaces live (default ``./.studio-data``).
- ``STUDIO_DATABASE_PATH``: the Studio SQLite file (default ``<data dir>/studio.sqlite3``).
- ``STUDIO_REDIS_URL``: use the Redis channel layer (needed for scale mode).
- ``STUDIO_HOST_MODE``: ``inprocess`` (default: runtimes run as asyncio tasks in the web
  process) or ``worker`` (runtimes run in ``manage.py runworker studio-host`` processes, which
  lease sessions through the database: see the scale-out block at the end).
- ``STUDIO_DATABASE_URL``: a ``postgresql://`` URL for Studio's tables *and* every session's
  agent store (default: SQLite files under the data dir).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from studio.redis_host import redis_host

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if not value:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


DEBUG = _env_bool("DJANGO_DEBUG", False)
HTTPS = _env_bool("STUDIO_HTTPS", False)

STUDIO_DATA_DIR = Path(os.environ.get("STUDIO_DATA_DIR", BASE_DIR / ".studio-data")).resolve()


#: The generated secret key's file (empty when DJANGO_SECRET_KEY is given): one of the paths no
#: session may see (``studio.workspaces.protected_paths``).
STUDIO_SECRET_KEY_FILE = "" if os.environ.get("DJANGO_SECRET_KEY") else str(STUDIO_DATA_DIR / "secret_key")


def _secret_key() -> str:
    """An explicit key, else a random key generated once and kept in the data dir (0600).

    Keeping the generated key on disk means logins survive a restart without anyone having
    to configure anything; it is as strong as a configured one (67 random URL-safe chars).
    """
    explicit = os.environ.get("DJANGO_SECRET_KEY")
    if explicit:
        return explicit
    key_file = Path(STUDIO_SECRET_KEY_FILE)
    try:
        return key_file.read_text().strip()
    except FileNotFoundError:
        STUDIO_DATA_DIR.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        key_file.write_text(key)
        key_file.chmod(0o600)
        return key


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = _env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = _env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "studio",  # before channels: its `runworker` (the session-host worker) wins
    "channels",
    "django_htmx",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files without DEBUG: answered here, before sessions, CSRF and the login wall.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "studio.authentication.AuthenticationMiddleware",  # Django's, reading the user plainly
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "studio.middleware.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "studio.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

ASGI_APPLICATION = "studio.asgi.application"
WSGI_APPLICATION = None

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("STUDIO_DATABASE_PATH", str(STUDIO_DATA_DIR / "studio.sqlite3")),
        # The session host writes trace rows from worker threads while pages read; WAL and a
        # busy timeout keep those from failing with "database is locked".
        "OPTIONS": {
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
        },
        # One connection per thread for the process's life: every database hop of the session
        # host (``database_sync_to_async``) otherwise opened a new SQLite connection and ran the
        # pragmas above again (a file open and two statements per hop, several hops per turn).
        "CONN_MAX_AGE": None,
        "TEST": {"NAME": os.environ.get("STUDIO_TEST_DATABASE_PATH") or None},
    }
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

CSRF_FAILURE_VIEW = "studio.views.csrf_failure"

LOGIN_URL = "studio:login"
LOGIN_REDIRECT_URL = "studio:session_list"
LOGOUT_REDIRECT_URL = "studio:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = STUDIO_DATA_DIR / "static-root"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns at start-up about a missing one
# WhiteNoise serves straight from the finders (app and project static dirs), so a checkout
# works without `collectstatic`; after `collectstatic` it serves STATIC_ROOT the same way.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
WHITENOISE_MAX_AGE = 0 if DEBUG else 3600

SESSION_ENGINE = "studio.django_sessions"  # database sessions, read with one plain statement
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# What only TLS can fix (`manage.py check --deploy` lists exactly these without STUDIO_HTTPS).
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = HTTPS
SECURE_HSTS_SECONDS = 31_536_000 if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Channels -------------------------------------------------------------------------------
# The in-memory layer keeps 100 messages per channel by default and group_send drops silently
# when a channel is full. The host batches partials (one per STUDIO_FLUSH_INTERVAL) and every
# push carries a sequence number so a consumer that sees a gap re-renders from the store; a
# larger capacity makes that rare.
STUDIO_REDIS_URL = os.environ.get("STUDIO_REDIS_URL", "")
# Without a client-side read timeout: why in studio/redis_host.py.
STUDIO_REDIS_HOST = redis_host(STUDIO_REDIS_URL)
# The default single-machine Studio (``manage.py studio``: daphne plus session-host workers)
# shares a layer the supervisor serves on a Unix socket (studio/host/local_layer.py).
STUDIO_LOCAL_LAYER = os.environ.get("STUDIO_LOCAL_LAYER", "")
if STUDIO_REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [STUDIO_REDIS_HOST], "capacity": 1500, "expiry": 60, "group_expiry": 86400},
        }
    }
elif STUDIO_LOCAL_LAYER:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "studio.host.local_layer.LocalChannelLayer",
            "CONFIG": {"path": STUDIO_LOCAL_LAYER, "capacity": 1500, "expiry": 60, "group_expiry": 86400},
        }
    }
else:
    # One process: Channels' in-memory contract, at the cost of the channel at hand per push.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "studio.host.memory_layer.ProcessChannelLayer",
            "CONFIG": {"capacity": 1500, "expiry": 60, "group_expiry": 86400},
        }
    }

STUDIO_HOST_MODE = os.environ.get("STUDIO_HOST_MODE", "inprocess")
# ``manage.py studio`` on one machine: how many session-host worker processes it starts and
# supervises beside daphne ("auto": one per core; 0, the default: the host runs inside daphne,
# which measured faster to first token and cheaper in CPU on a 2-core machine: docs/benchmarks.md).
STUDIO_WORKERS = os.environ.get("STUDIO_WORKERS", "0")
STUDIO_FLUSH_INTERVAL = float(os.environ.get("STUDIO_FLUSH_INTERVAL", "0.025"))
# The widest stream window a host gives its runtimes when many turns stream at once (agentcore
# commits streamed text, and emits it, once per window; 20 ms per ten live turns, from 20 ms).
# 60 ms measured best at 50 streams on 2 cores (docs/benchmarks.md, round 6): against 40 ms,
# 25 frames per answer instead of 34 and ~5 ms less CPU per turn; against 80 ms, a p95 delay
# ~15 ms lower (the last window of every answer waits for the turn's end) for ~2 ms more CPU.
STUDIO_STREAM_WINDOW_MAX = float(os.environ.get("STUDIO_STREAM_WINDOW_MAX", "0.06"))
# A server process (``studio.server``, ``runworker``) collects its young generation after this
# many net new container objects (Python: 700), with its start-up heap frozen (studio.heap:
# fewer and shorter collector pauses in the middle of the streams); 0 keeps Python's thresholds.
STUDIO_GC_YOUNG_THRESHOLD = os.environ.get("STUDIO_GC_YOUNG_THRESHOLD", "20000")
STUDIO_RUNTIME_IDLE_SECONDS = float(os.environ.get("STUDIO_RUNTIME_IDLE_SECONDS", "900"))
# Dotted path of an async factory ``(SessionConfig) -> runtime``; empty = agentcore.create_agent.
STUDIO_RUNTIME_FACTORY = os.environ.get("STUDIO_RUNTIME_FACTORY", "")
# Where fresh workspaces go (<root>/<session id>) and the only place workdirs may be picked from;
# empty: <data dir>/workspaces, and sessions that run on the server may pick any other directory.
# Under it, a person may only use a workspace of their own sessions (studio.workspaces).
STUDIO_WORKDIR_ROOT = os.environ.get("STUDIO_WORKDIR_ROOT", "")
# Folders staff allow every person to use as a workdir (comma separated absolute paths).
STUDIO_SHARED_WORKDIRS = _env_list("STUDIO_SHARED_WORKDIRS", [])
# Sessions whose tools are confined (people who are not staff, by default; studio.confinement)
# run them in this sandbox: "bwrap" (Debian's bubblewrap, found on PATH), the path of a bwrap
# executable, or "off" (no sandbox: such sessions get no bash, write or edit).
STUDIO_SANDBOX = os.environ.get("STUDIO_SANDBOX", "bwrap")
# Sandboxed tools get the server's network (off: a loopback of their own, nothing else).
STUDIO_SANDBOX_NETWORK = _env_bool("STUDIO_SANDBOX_NETWORK", False)
# API keys at rest are encrypted (studio.credentials) with these Fernet keys (comma separated,
# the first encrypts), or else with the key in this file (default <data dir>/credentials_key).
STUDIO_CREDENTIALS_KEY = os.environ.get("STUDIO_CREDENTIALS_KEY", "")
STUDIO_CREDENTIALS_KEY_FILE = os.environ.get("STUDIO_CREDENTIALS_KEY_FILE", "")
# Extensions every session gets, as dotted module paths (like INSTALLED_APPS); each module
# exposes EXTENSIONS or extensions(). The host builds one registry from them (studio.extensions).
STUDIO_EXTENSIONS = _env_list("STUDIO_EXTENSIONS", ["studio.extensions.example"])
# Tools a subagent may get (always intersected with the parent's; a child never delegates).
STUDIO_SUBAGENT_TOOLS = _env_list("STUDIO_SUBAGENT_TOOLS", ["read", "grep", "find", "ls", "write", "edit", "bash"])
STUDIO_MAX_SUBAGENTS = int(os.environ.get("STUDIO_MAX_SUBAGENTS", "4"))

# --- Code mode, tool catalogs, execution environment, OTLP export ------------------------------
# Read by studio/runtime_options.py for every runtime and checked at start-up (a bad value is an
# ImproperlyConfigured naming the setting). In a settings module of your own, the Python values
# work too (a dict of limits, a list of MCP server dicts, a callable).
# Code mode (needs the codemode extra): off (default), on, or JSON limits
# {"memory_limit_bytes": ..., "timeout_ms": ...}.
STUDIO_CODE_MODE = os.environ.get("STUDIO_CODE_MODE", "demo")  # demo | on | off | JSON limits
# Tool catalogs behind tool_search: JSON MCP servers [{"id", "command"|"url", "args", "env", ...,
# "allowed_tools": [...]}] or the dotted path of a function returning catalogs. Empty: none.
STUDIO_CATALOGS = os.environ.get("STUDIO_CATALOGS", "")
# Where the built-in tools run: empty (this process), "local", "remote" (a worker process confined
# to the session's workdir), or the dotted path of a function returning {id, label, open}.
STUDIO_ENVIRONMENT = os.environ.get("STUDIO_ENVIRONMENT", "")
# OpenTelemetry GenAI spans over OTLP/HTTP (e.g. http://127.0.0.1:4318; /v1/traces is appended).
STUDIO_OTLP_ENDPOINT = os.environ.get("STUDIO_OTLP_ENDPOINT", "")
STUDIO_OTLP_HEADERS = os.environ.get("STUDIO_OTLP_HEADERS", "")  # name=value,name2=value2
STUDIO_OTLP_SERVICE_NAME = os.environ.get("STUDIO_OTLP_SERVICE_NAME", "agentcore-studio")
STUDIO_OTLP_CAPTURE_CONTENT = _env_bool("STUDIO_OTLP_CAPTURE_CONTENT", False)  # model output, tool args/results

# --- Scale-out: PostgreSQL and session leases (docs/durability.md, "Scaling out") --------------------------
# One setting puts Studio's own tables and every session's agent store (a PostgreSQL store named
# after the main session's id) in one database, so any worker can take any session over.
STUDIO_DATABASE_URL = os.environ.get("STUDIO_DATABASE_URL", "").strip()
if STUDIO_DATABASE_URL:
    from studio.database_url import django_database

    DATABASES["default"] = django_database(STUDIO_DATABASE_URL)
# Worker mode: a session is leased to one live worker for this long and renewed every quarter
# of it (on a thread of its own, so a busy worker still renews on time); a worker that stops
# renewing (SIGKILL, a frozen process) loses its sessions to a live worker after at most this
# long plus one sweep (a quarter of it) plus opening the store: about two seconds.
STUDIO_LEASE_SECONDS = float(os.environ.get("STUDIO_LEASE_SECONDS", "1.5"))
# How long a web process waits for a worker's answer before it says no host answered.
STUDIO_HOST_TIMEOUT = float(os.environ.get("STUDIO_HOST_TIMEOUT", "15"))

# Each record is written once: our loggers do not propagate to the root logger (daphne puts a
# handler there too), and a refused request (4xx) is one line without a traceback — a denied
# request is not an error. 5xx keep their traceback.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"client_errors_one_line": {"()": "studio.logging.ClientErrorsOneLine"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["client_errors_one_line"]}
    },
    "loggers": {
        "studio": {"handlers": ["console"], "level": os.environ.get("STUDIO_LOG_LEVEL", "INFO"), "propagate": False},
        "django": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}
