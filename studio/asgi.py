"""ASGI entry point: HTTP (Django), WebSocket (session watchers) and the host channels.

HTTP requests run their sync part on threads kept across requests (``studio.request_threads``).

The ``channel`` route is used by ``manage.py runworker studio-host`` in worker mode: a worker
process consumes the shared host channel and a request channel of its own, and runs the
sessions it holds a lease on (``studio.host.routing``, ``studio.host.leases``).
"""

import os

from channels.routing import ChannelNameRouter, ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
get_asgi_application()  # django.setup(), as Django's own entry point does

from studio.request_threads import StudioASGIHandler  # noqa: E402

django_asgi_app = StudioASGIHandler()

from studio.authentication import socket_auth_stack  # noqa: E402
from studio.host.routing import HOST_CHANNEL, HostWorkerConsumer  # noqa: E402
from studio.routing import websocket_urlpatterns  # noqa: E402

_host_channels = {HOST_CHANNEL: HostWorkerConsumer.as_asgi()}

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(socket_auth_stack(URLRouter(websocket_urlpatterns))),
        "channel": ChannelNameRouter(_host_channels),
    }
)
