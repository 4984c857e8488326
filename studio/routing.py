"""WebSocket routes (HTTP routes are in ``studio.urls``)."""

from django.urls import path

from studio.consumers import SessionConsumer, SessionListConsumer

websocket_urlpatterns = [
    path("ws/sessions/", SessionListConsumer.as_asgi()),
    path("ws/sessions/<uuid:session_id>/", SessionConsumer.as_asgi()),
]
