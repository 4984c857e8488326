"""The collector settings of a Studio server process (daphne, or a session-host worker).

Why: a Studio process holds Django, the SDKs and every open session's runtime: about 110,000
container objects after start-up, and another thousand or so per open session. CPython's cyclic
collector walks the old generation whole now and then (about 0.5–1 µs per object on a small
VM), and every walk stops the event loop that streams every session's text. Measured with
``bench/studio_overhead.py`` over its 1-, 10- and 50-session runs (docs/benchmarks.md): with
Python's defaults the collector ran ~200 times for ~380 ms, with full collections of 110–154 ms
in the middle of 50 streams; settled as below, ~6 times for ~130 ms, the longest ~70–85 ms.

Two settings do that, both standard for long-running servers:

- **the start-up heap is frozen** (``gc.freeze()`` after one full collection): modules,
  settings, templates and URL patterns live as long as the process, so walking them again on
  every full collection finds nothing and only costs the pause;
- **the young generation is collected after ``STUDIO_GC_YOUNG_THRESHOLD`` net new container
  objects** (20,000; Python's default is 700): a turn allocates thousands of short-lived
  containers, most freed by reference counting long before that, so far fewer of them are
  promoted and the old generation is walked far less often.

Cycles are still collected: only what existed at start-up is exempt. ``0`` keeps Python's
thresholds (the heap is still frozen).
"""

from __future__ import annotations

import gc

from django.core.exceptions import ImproperlyConfigured

#: The setting's name, for its error.
YOUNG_THRESHOLD_SETTING = "STUDIO_GC_YOUNG_THRESHOLD"


def young_threshold(raw: str) -> int:
    """``STUDIO_GC_YOUNG_THRESHOLD`` as a count (0: Python's own); anything else is refused by name."""
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise ImproperlyConfigured(
            f"{YOUNG_THRESHOLD_SETTING} must be a whole number of objects (0: Python's default), not {raw!r}"
        )
    return value


def settle(raw_young_threshold: str) -> None:
    """Freeze the heap as it is after start-up and set the young generation's threshold.

    Called once per server process, after the ASGI application (and with it every module a
    request needs) is built. The full collection first means no garbage of the start-up is
    frozen with it."""
    young = young_threshold(raw_young_threshold)
    gc.collect()
    gc.freeze()
    if young:
        _, middle, old = gc.get_threshold()
        gc.set_threshold(young, middle, old)
