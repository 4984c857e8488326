"""``manage.py runworker``: channels' worker, with Studio's session-host worker for ``studio-host``.

``python manage.py runworker studio-host`` runs ``studio.host.routing.StudioWorker``: it leases
sessions through the database, takes over the sessions of workers that died, and shuts down
cleanly on SIGTERM (sessions released at once). Any other channel list runs channels' own worker
unchanged. (Studio is listed before ``channels`` in ``INSTALLED_APPS`` so this command wins.)
"""

from __future__ import annotations

from typing import Any

from channels.management.commands.runworker import Command as ChannelsRunworker
from django.conf import settings

from studio import event_loop, heap
from studio.host.routing import StudioWorker


class Command(ChannelsRunworker):
    help = "Run a channel worker; for `studio-host`, a session-host worker that leases its sessions."
    worker_class = StudioWorker

    def handle(self, *args: Any, **options: Any) -> None:
        """Serve on Studio's event loop (``studio.event_loop``), with the process's collector
        settled (``studio.heap``) once the application is built."""
        event_loop.install()  # before channels' worker makes its loop
        import studio.asgi  # noqa: F401  (the application this worker serves: built before the heap is frozen)

        heap.settle(settings.STUDIO_GC_YOUNG_THRESHOLD)
        super().handle(*args, **options)
