"""``manage.py runworker``: channels' worker, with Studio's session-host worker for ``studio-host``.

``python manage.py runworker studio-host`` runs ``studio.host.routing.StudioWorker``: it leases
sessions through the database, takes over the sessions of workers that died, and shuts down
cleanly on SIGTERM (sessions released at once). Any other channel list runs channels' own worker
unchanged. (Studio is listed before ``channels`` in ``INSTALLED_APPS`` so this command wins.)
"""

from __future__ import annotations

from channels.management.commands.runworker import Command as ChannelsRunworker

from studio.host.routing import StudioWorker


class Command(ChannelsRunworker):
    help = "Run a channel worker; for `studio-host`, a session-host worker that leases its sessions."
    worker_class = StudioWorker
