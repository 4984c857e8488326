"""``python -m studio.daphne_main [daphne's arguments]``: daphne on Studio's event loop.

daphne makes its Twisted reactor's asyncio loop when ``daphne.server`` is imported, so the
loop's policy (``studio.event_loop``: uvloop by default) must be set before daphne's command
line is even imported — which is all this module adds to ``python -m daphne``. Its arguments,
output and exit status are daphne's own.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from studio import event_loop


def command(
    port: int, application: str = "studio.server:application", *, host: str = "127.0.0.1", options: Sequence[str] = ()
) -> list[str]:
    """The command line that serves ``application`` on ``host:port`` this way (what
    ``manage.py studio`` runs, and the tests and benchmarks that start a daphne of their own);
    ``options``: more of daphne's own."""
    return [sys.executable, "-m", "studio.daphne_main", *options, "-b", host, "-p", str(port), application]


def main() -> None:
    event_loop.install()
    from daphne.cli import CommandLineInterface  # imported only now: it makes the loop

    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
