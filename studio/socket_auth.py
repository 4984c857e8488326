"""Who a WebSocket belongs to: the person of the Django session its cookie names (SPEC W6).

Channels' ``AuthMiddleware`` answers that through the ORM — the session row by a filtered
``get``, then the user row by another — and building those two queries cost more CPU than the
rest of a socket's opening (~1.3 ms of ~1.5 ms per socket, measured on this project's machines;
``studio.sql`` says why). Here the session is read by Studio's session engine
(``studio.django_sessions``: one plain statement) and the user row with one plain statement
(``studio.sql``), in the same one database hop, deciding exactly as Django does on the common
path: a user id and a backend this Studio lists, the model backend's user
(``user_can_authenticate``: an inactive person is nobody), and a session hash equal to that
user's current one. Nothing is cached: logging out deletes the row, changing the password
changes the hash, and the very next socket is refused. Anything off that path — a custom
backend, a hash that does not match (Channels then flushes the session) — goes through
Channels' own ``get_user``, so its behaviour is Django's in every case.
"""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddleware, get_user
from channels.db import database_sync_to_async
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model, load_backend
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.backends.base import SessionBase
from django.utils.crypto import constant_time_compare

from studio import sql

_MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


class SocketAuthMiddleware(AuthMiddleware):
    """Channels' ``AuthMiddleware`` with ``user_of_socket`` as its one database hop."""

    async def resolve_scope(self, scope: dict[str, Any]) -> None:
        scope["user"]._wrapped = await database_sync_to_async(user_of_socket)(scope)


def socket_auth_stack(inner: Any) -> Any:
    """Cookies, then the lazy session, then the person: Channels' stack with Studio's reads."""
    return CookieMiddleware(SessionMiddleware(SocketAuthMiddleware(inner)))


def user_of_socket(scope: dict[str, Any]) -> Any:
    """The person whose session ``scope``'s cookie names, or ``AnonymousUser`` (sync: Django's
    database). The common case in two plain statements; every other case as Channels decides."""
    session: SessionBase = scope["session"]
    try:  # the session's one read (``studio.django_sessions``: one plain statement)
        user_id = get_user_model()._meta.pk.to_python(session[SESSION_KEY])
        backend_path = session[BACKEND_SESSION_KEY]
    except KeyError:
        return AnonymousUser()
    if backend_path != _MODEL_BACKEND or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return get_user.func(scope)
    backend = load_backend(backend_path)
    assert isinstance(backend, ModelBackend)
    model = get_user_model()
    user = sql.one(model, **{model._meta.pk.name: user_id})
    if user is None or not backend.user_can_authenticate(user):
        return AnonymousUser()
    session_hash = session.get(HASH_SESSION_KEY)
    if not (session_hash and constant_time_compare(session_hash, user.get_session_auth_hash())):
        return get_user.func(scope)  # Channels flushes a session whose hash no longer matches
    return user
