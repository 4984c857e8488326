"""What every runtime Studio opens is given, from settings: its ``session={...}`` options and
any other ``create_agent`` options (a tracer, ...).

Kept apart from the host so that the features a deployment turns on (extensions, subagents,
code mode, tool catalogs, tracing) are read in one place, and the host only asks for them.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings


def session_options(registry: Any) -> dict[str, Any]:
    """``create_agent(session=...)`` for a session's main conversation. ``registry`` is the
    host's one ``AgentRegistry`` built from ``STUDIO_EXTENSIONS``."""
    return {
        "registry": registry,
        "subagents": {
            "tools": list(settings.STUDIO_SUBAGENT_TOOLS),
            "max_agents": int(settings.STUDIO_MAX_SUBAGENTS),
        },
    }


def runtime_options() -> dict[str, Any]:
    """Further ``create_agent`` options every runtime gets (none by default)."""
    return {}
