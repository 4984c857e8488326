"""WebSocket routes (HTTP routes are in ``studio.urls``); each names its person its own way
(``studio.authentication``) under the cookie and session layers of ``studio.asgi``."""

from django.urls import path

from studio.authentication import SessionSocketAuthMiddleware, SocketAuthMiddleware
from studio.consumers import SessionConsumer, SessionListConsumer

websocket_urlpatterns = [
    path("ws/sessions/", SocketAuthMiddleware(SessionListConsumer.as_asgi())),
    path("ws/sessions/<uuid:session_id>/", SessionSocketAuthMiddleware(SessionConsumer.as_asgi())),
]
