"""The ASGI application a Studio server process serves: ``daphne studio.server:application``.

The same application as ``studio.asgi`` (which tests and in-process benchmarks import), with
the server's collector settled once it is built (``studio.heap``: the start-up heap frozen, the
young generation's threshold raised). That is a setting of the whole process, so it belongs to
the process that serves, not to every importer of the application.
"""

from django.conf import settings

from studio import heap
from studio.asgi import application

heap.settle(settings.STUDIO_GC_YOUNG_THRESHOLD)

__all__ = ["application"]
