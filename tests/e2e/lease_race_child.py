"""A would-be worker racing for one lease: ``python -m tests.e2e.lease_race_child <session> <worker>``.

Registers itself as a worker, then claims the session's lease once (``studio.host.leases.claim``)
and prints ``{"worker": ..., "term": <term or null>}``. The test holds the lease row's lock
while both racers start, so both claims are in flight at the same instant.
"""

from __future__ import annotations

import json
import os
import sys

import django


def main() -> None:
    session_id, worker_id = sys.argv[1], sys.argv[2]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
    django.setup()
    from studio.host import leases

    leases.register_worker(worker_id, f"racer-{worker_id}", 60)
    term = leases.claim(session_id, worker_id, 60)
    print(json.dumps({"worker": worker_id, "term": term}), flush=True)


if __name__ == "__main__":
    main()
