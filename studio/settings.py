"""Studio settings.

Local use needs no configuration: DEBUG on, SQLite under the data dir, the in-memory channel
layer and the session host running inside the daphne process. Production is configured with
environment variables only (see the README):

- ``DJANGO_DEBUG=0``, ``DJANGO_SECRET_KEY``, ``DJANGO_ALLOWED_HOSTS`` (comma separated),
  ``DJANGO_CSRF_TRUSTED_ORIGINS`` (comma separated, e.g. ``https://studio.example.com``).
- ``STUDIO_DATA_DIR``: where the Studio database, the per-session agent stores and the
  default workspaces live (default ``./.studio-data``).
- ``STUDIO_DATABASE_PATH``: the Studio SQLite file (default ``<data dir>/studio.sqlite3``).
- ``STUDIO_REDIS_URL``: use the Redis channel layer (needed for scale mode).
- ``STUDIO_HOST_MODE``: ``inprocess`` (default: runtimes run as asyncio tasks in the web
  process) or ``worker`` (runtimes run in ``manage.py runworker studio-host…`` processes).
- ``STUDIO_HOST_SHARDS``: number of host worker channels in worker mode (default 1).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

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


DEBUG = _env_bool("DJANGO_DEBUG", True)

STUDIO_DATA_DIR = Path(os.environ.get("STUDIO_DATA_DIR", BASE_DIR / ".studio-data")).resolve()


def _secret_key() -> str:
    """An explicit key in production; locally a random key kept in the data dir.

    Keeping the generated key on disk means logins survive a restart without anyone having
    to configure anything.
    """
    explicit = os.environ.get("DJANGO_SECRET_KEY")
    if explicit:
        return explicit
    if not DEBUG:
        raise RuntimeError("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG=0")
    key_file = STUDIO_DATA_DIR / "secret_key"
    try:
        return key_file.read_text().strip()
    except FileNotFoundError:
        STUDIO_DATA_DIR.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        key_file.write_text(key)
        key_file.chmod(0o600)
        return key


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = _env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = _env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "studio",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
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
        "TEST": {"NAME": os.environ.get("STUDIO_TEST_DATABASE_PATH") or None},
    }
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

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

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SESSION_COOKIE_SECURE = _env_bool("DJANGO_SECURE_COOKIES", True)
    CSRF_COOKIE_SECURE = _env_bool("DJANGO_SECURE_COOKIES", True)

# --- Channels -------------------------------------------------------------------------------
# The in-memory layer keeps 100 messages per channel by default and group_send drops silently
# when a channel is full. The host batches partials (one per STUDIO_FLUSH_INTERVAL) and every
# push carries a sequence number so a consumer that sees a gap re-renders from the store; a
# larger capacity makes that rare.
STUDIO_REDIS_URL = os.environ.get("STUDIO_REDIS_URL", "")
# redis-py ≥ 6 reads with a 5 s socket timeout by default, the same as channels_redis's 5 s
# blocking pop: the reply to an idle BZPOPMIN then races the client's timeout and a consumer
# dies with "Timeout reading from …". Reads must be allowed to outlast the pop.
STUDIO_REDIS_HOST = {"address": STUDIO_REDIS_URL, "socket_timeout": 30, "socket_connect_timeout": 5}
if STUDIO_REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [STUDIO_REDIS_HOST], "capacity": 1500, "expiry": 60, "group_expiry": 86400},
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": 1500, "expiry": 60, "group_expiry": 86400},
        }
    }

STUDIO_HOST_MODE = os.environ.get("STUDIO_HOST_MODE", "inprocess")
STUDIO_HOST_SHARDS = int(os.environ.get("STUDIO_HOST_SHARDS", "1"))
STUDIO_FLUSH_INTERVAL = float(os.environ.get("STUDIO_FLUSH_INTERVAL", "0.075"))
STUDIO_RUNTIME_IDLE_SECONDS = float(os.environ.get("STUDIO_RUNTIME_IDLE_SECONDS", "900"))
# Dotted path of an async factory ``(SessionConfig) -> runtime``; empty = agentcore.create_agent.
STUDIO_RUNTIME_FACTORY = os.environ.get("STUDIO_RUNTIME_FACTORY", "")
# Leave empty to let users pick any existing directory as a workdir; set it to confine them.
STUDIO_WORKDIR_ROOT = os.environ.get("STUDIO_WORKDIR_ROOT", "")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "studio": {"handlers": ["console"], "level": os.environ.get("STUDIO_LOG_LEVEL", "INFO")},
        "django": {"handlers": ["console"], "level": "WARNING"},
    },
}
