"""How wide a host makes its runtimes' stream windows: the load policy, apart from the host
that applies it (``SessionHost._retune``) so it can be read and tested alone."""

from __future__ import annotations

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
