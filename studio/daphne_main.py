"""``python -m studio.daphne_main [daphne's arguments]``: daphne on Studio's event loop.

daphne makes its Twisted reactor's asyncio loop when ``daphne.server`` is imported, so the
loop's policy (``studio.event_loop``: uvloop by default) must be set before daphne's command
line is even imported — which is all this module adds to ``python -m daphne``. Its arguments,
output and exit status are daphne's own.
"""

from __future__ import annotations

from studio import event_loop


def main() -> None:
    event_loop.install()
    from daphne.cli import CommandLineInterface  # imported only now: it makes the loop

    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
