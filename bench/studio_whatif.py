"""A what-if runtime factory for ``studio_overhead.py --agent-flush-ms``: agentcore's fragment window.

agentcore commits streamed text at most every ``agentcore.engine.fragments.FLUSH_INTERVAL_S``
(50 ms) and emits the deltas only after that commit, so Studio cannot show a token earlier than
that window allows. This factory (``STUDIO_RUNTIME_FACTORY=studio_whatif.factory``, loaded by
daphne) sets the window from ``BENCH_AGENT_FLUSH_S`` in daphne's process, then opens the real
runtime, so the benchmark can show what a smaller window would buy. An experiment only: it
changes a module constant, not a supported option.
"""

from __future__ import annotations

import os
from typing import Any


async def factory(config: Any) -> Any:
    from agentcore.engine import fragments
    from studio.host.factory import agentcore_runtime_factory

    fragments.FLUSH_INTERVAL_S = float(os.environ["BENCH_AGENT_FLUSH_S"])
    return await agentcore_runtime_factory(config)
