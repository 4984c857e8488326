"""Real test doubles: a scripted fake provider server speaking all three wire protocols (SPEC T5, P3).

The names below are resolved on first use (PEP 562): importing one submodule — the offline
demo needs only ``steps`` to describe its answers — does not load the server, its encoders
and ``argparse``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest, Responder, echo_responder
    from agentcore.testing.steps import (
        Aborted,
        Delay,
        Disconnect,
        Endless,
        GatewayCut,
        Hang,
        HttpError,
        NoTerminal,
        Overflow,
        Step,
        Stop,
        StreamError,
        Text,
        Thinking,
        ToolCall,
        Usage,
        WebSearch,
        response_from_json,
        step_from_json,
    )

_SERVER_NAMES = ("FakeProviderServer", "RecordedRequest", "Responder", "echo_responder")

__all__ = [
    "Aborted",
    "Delay",
    "Disconnect",
    "Endless",
    "FakeProviderServer",
    "GatewayCut",
    "Hang",
    "HttpError",
    "NoTerminal",
    "Overflow",
    "RecordedRequest",
    "Responder",
    "Step",
    "Stop",
    "StreamError",
    "Text",
    "Thinking",
    "ToolCall",
    "Usage",
    "WebSearch",
    "echo_responder",
    "response_from_json",
    "step_from_json",
]


def __getattr__(name: str) -> Any:
    """Import the submodule that defines ``name`` (``fake_server`` or ``steps``) and cache it."""
    if name not in __all__:
        raise AttributeError(f"module 'agentcore.testing' has no attribute {name!r}")
    module = "agentcore.testing.fake_server" if name in _SERVER_NAMES else "agentcore.testing.steps"
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
