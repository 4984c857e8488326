"""A what-if runtime factory: every runtime Studio opens streams with one fixed stream window.

agentcore commits streamed text once per *stream window* (20 ms by default) and emits the deltas
only after that commit, so Studio cannot show a token earlier than the window allows; Studio's
host widens the window with load (``studio.host.session_host.stream_window``, up to
``STUDIO_STREAM_WINDOW_MAX``) through the supported ``AgentRuntime.set_stream_window``. This
factory (``STUDIO_RUNTIME_FACTORY=studio_whatif.factory``, used by ``studio_overhead.py
--agent-flush-ms`` and ``studio_inprocess.py --agent-window-ms``) opens the real runtime and pins
its window to ``BENCH_AGENT_FLUSH_S`` seconds: every window the host asks for later sets the
what-if one instead, so the benchmark shows what that window buys whatever the load.

``STUDIO_STREAM_WINDOW_MAX`` alone does not make this redundant: it caps the host's widening
but cannot fix the window at a given width (the host starts at 20 ms and widens only with the
number of live streams). Patching ``agentcore.engine.fragments.FLUSH_INTERVAL_S``, as this
module once did, has no effect: ``StreamWindow``'s default is bound when the class is created.
"""

from __future__ import annotations

import functools
import os
from typing import Any


async def factory(config: Any) -> Any:
    from agentcore.runtime import AgentRuntime
    from studio.host.factory import agentcore_runtime_factory

    seconds = float(os.environ["BENCH_AGENT_FLUSH_S"])
    runtime = await agentcore_runtime_factory(config)
    runtime.set_stream_window(seconds)
    # The host's later requests (its load policy) set the what-if window, through the same API.
    runtime.set_stream_window = functools.partial(_pinned, runtime, seconds, AgentRuntime.set_stream_window)
    return runtime


def _pinned(runtime: Any, seconds: float, set_window: Any, _asked: float) -> None:
    set_window(runtime, seconds)
