"""Who a request or a socket belongs to: the person of the Django session it names (SPEC W6).

Django's ``AuthenticationMiddleware`` and Channels' ``AuthMiddleware`` answer that through the
ORM — the session row, then the user row by a ``get`` built on every page, htmx request and
socket, which cost more CPU than running it (``studio.sql`` says why). Here the session is read
by Studio's session engine (``studio.django_sessions``: one plain statement) and the user row
with one plain statement (``studio.sql``), and ``session_user`` decides exactly as Django does
on the common path: a user id and a backend this Studio lists (the model backend), a user who
may authenticate (``user_can_authenticate``: an inactive person is nobody), and a session hash
equal to that user's current one. Nothing is cached across requests: logging out deletes the
session row, changing the password changes the hash, and the very next request or socket is
refused. Anything off that path — another backend, a hash that does not match (then Django
tries its fallback secrets, or flushes the session) — is decided by the framework's own
``get_user``, so the behaviour is Django's in every case.
"""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddleware, get_user
from channels.db import database_sync_to_async
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.conf import settings
from django.contrib import auth
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model, load_backend
from django.contrib.auth import middleware as auth_middleware
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.backends.base import SessionBase
from django.http import HttpRequest
from django.utils.crypto import constant_time_compare
from django.utils.functional import SimpleLazyObject

from studio import selectors, sql
from studio.models import StudioSession

_MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


def session_user(session: SessionBase) -> Any:
    """The person ``session`` names on the common path, ``AnonymousUser`` when it names nobody
    who may log in, or None when the decision is the framework's (another backend, a hash that
    does not match: its ``get_user`` may rotate or flush the session). Sync: the database."""
    claim = _claim(session)
    if not isinstance(claim, tuple):
        return claim
    user_id, backend = claim
    model = get_user_model()
    return _accepted(session, backend, sql.one(model, **{model._meta.pk.name: user_id}))


def _claim(session: SessionBase) -> tuple[Any, ModelBackend] | AnonymousUser | None:
    """The user id and the backend ``session`` names (the session's one read), ``AnonymousUser``
    when it names no one, or None when the backend is not the model backend this Studio lists."""
    try:
        user_id = get_user_model()._meta.pk.to_python(session[SESSION_KEY])
        backend_path = session[BACKEND_SESSION_KEY]
    except KeyError:
        return AnonymousUser()
    if backend_path != _MODEL_BACKEND or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return None
    backend = load_backend(backend_path)
    assert isinstance(backend, ModelBackend)
    return user_id, backend


def _accepted(session: SessionBase, backend: ModelBackend, user: Any) -> Any:
    """``user`` (the row the session's id names) if they may log in with this session: else
    ``AnonymousUser`` (no row, an inactive person), or None for a hash that does not match."""
    if user is None or not backend.user_can_authenticate(user):
        return AnonymousUser()
    session_hash = session.get(HASH_SESSION_KEY)
    if not (session_hash and constant_time_compare(session_hash, user.get_session_auth_hash())):
        return None
    return user


# -- pages and htmx requests ------------------------------------------------------------------


class AuthenticationMiddleware(auth_middleware.AuthenticationMiddleware):
    """Django's ``AuthenticationMiddleware`` whose ``request.user`` is ``session_user``'s (once
    per request, as Django caches it); ``request.auser`` stays Django's."""

    def process_request(self, request: HttpRequest) -> None:
        super().process_request(request)
        request.user = SimpleLazyObject(lambda: _request_user(request))


def _request_user(request: HttpRequest) -> Any:
    cached = getattr(request, "_cached_user", None)
    if cached is None:
        user = session_user(request.session)
        cached = user if user is not None else auth.get_user(request)
        request._cached_user = cached  # Django's own cache attribute
    return cached


# -- sockets ----------------------------------------------------------------------------------


class SocketAuthMiddleware(AuthMiddleware):
    """Channels' ``AuthMiddleware`` with ``user_of_socket`` as its one database hop."""

    async def resolve_scope(self, scope: dict[str, Any]) -> None:
        scope["user"]._wrapped = await database_sync_to_async(user_of_socket)(scope)


class SessionSocketAuthMiddleware(AuthMiddleware):
    """A session page's socket: the person and the session they own (``scope["owned_session"]``,
    None when it is not theirs) in one database hop — an opening's socket crosses to the
    database thread once, not twice, and reads two rows, not three (``owner_and_session``)."""

    async def resolve_scope(self, scope: dict[str, Any]) -> None:
        session_id = scope["url_route"]["kwargs"]["session_id"]
        user, owned = await database_sync_to_async(owner_and_session)(scope, session_id)
        scope["user"]._wrapped = user
        scope["owned_session"] = owned


def socket_auth_stack(inner: Any) -> Any:
    """Cookies and the lazy session for every socket; each route then names its person with
    ``SocketAuthMiddleware`` or ``SessionSocketAuthMiddleware`` (``studio.routing``)."""
    return CookieMiddleware(SessionMiddleware(inner))


def user_of_socket(scope: dict[str, Any]) -> Any:
    """The person whose session ``scope``'s cookie names, or ``AnonymousUser``."""
    user = session_user(scope["session"])
    return user if user is not None else get_user.func(scope)


def owner_and_session(scope: dict[str, Any], session_id: Any) -> tuple[Any, StudioSession | None]:
    """The socket's person, and the session ``session_id`` if they own it. On the common path
    the session row names its user and the ownership read loads that user's row with it (one
    statement for both); the user is then accepted exactly as ``session_user`` accepts one.
    Any other outcome (not theirs, no such session, an inactive person, a hash that does not
    match) is decided the usual way, ``user_of_socket`` and then the ownership read, so a
    refused socket gets the same close code it always did."""
    claim = _claim(scope["session"])
    if isinstance(claim, tuple):
        user_id, backend = claim
        owned = selectors.owned_session(user_id, session_id)
        if owned is not None and _accepted(scope["session"], backend, owned.owner) is owned.owner:
            return owned.owner, owned
    user = user_of_socket(scope)
    return user, (selectors.owned_session(user.pk, session_id) if user.is_authenticated else None)
