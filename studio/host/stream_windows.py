"""How wide a host makes its runtimes' stream windows: the load policy and the count of live
turns it follows, apart from the host that applies them (``SessionHost.retune``) so they can be
read and tested alone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: agentcore's own stream window (``agentcore.engine.fragments.FLUSH_INTERVAL_S``): a host with
#: few streams keeps it.
BASE_STREAM_WINDOW = 0.02
#: Live streams per step of 20 ms added to the window.
STREAMS_PER_STEP = 10


def stream_window(live: int, *, widest: float) -> float:
    """The stream window for a host running ``live`` turns at once: 20 ms per ten streams, at
    least agentcore's 20 ms, at most ``widest`` (``STUDIO_STREAM_WINDOW_MAX``).

    Why: every window of every streaming answer costs a commit, a batch of events and a push —
    on one core a few dozen streams at 20 ms cost more CPU than the streams take, so text queues
    and delays grow without bound; wider windows under load cost each reader a few tens of ms."""
    return max(BASE_STREAM_WINDOW, min(widest, BASE_STREAM_WINDOW * live / STREAMS_PER_STEP))


@dataclass(slots=True)
class StreamWindows:
    """A host's live turns and the window its runtimes stream with for them.

    The total is kept as each session was last counted (``recount``, with the count the session
    keeps of itself: ``HostedSession.counted_live``), so a turn's start or end costs the same
    with 200 sessions open as with one: summing every session's turns at each start and end made
    a turn's cost grow with the sessions streaming at once."""

    policy: Callable[[int], float]  # the window for a number of live turns
    window: float = BASE_STREAM_WINDOW
    live: int = 0

    def recount(self, before: int, now: int) -> float | None:
        """A session counted with ``before`` live turns has ``now`` (0 once it left the host);
        the new window when that changes it, else None."""
        self.live += now - before
        window = self.policy(self.live)
        if window == self.window:
            return None
        self.window = window
        return window
