"""ASGI entry point: HTTP (Django), WebSocket (session watchers) and the host channels.

The ``channel`` routes are used by ``manage.py runworker studio-host`` in scale mode: a worker
process consumes the host channel(s) and runs the sessions sharded onto them.
"""

import os

from channels.auth import AuthMiddlewareStack
from channels.routing import ChannelNameRouter, ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402

from studio.hosts import HOST_CHANNEL, HostWorkerConsumer  # noqa: E402
from studio.routing import websocket_urlpatterns  # noqa: E402

_host_channels = {HOST_CHANNEL: HostWorkerConsumer.as_asgi()}
for _shard in range(settings.STUDIO_HOST_SHARDS if settings.STUDIO_HOST_SHARDS > 1 else 0):
    _host_channels[f"{HOST_CHANNEL}-{_shard}"] = HostWorkerConsumer.as_asgi()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        "channel": ChannelNameRouter(_host_channels),
    }
)
