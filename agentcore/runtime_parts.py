"""The parts of an open runtime that the session and its extensions may use (issue 24).

``AgentRuntime`` is the facade; nothing below it imports it. What the parts below need of it
is handed down once, at open, as ``RuntimeParts``: a frozen record of the runtime's
dependencies — its options, its configuration resolver, the main conversation's context
meter, the retry sleep, the tracer, the store — in the way pydantic-ai separates a run's
dependencies from the state it changes. Frozen means the record never changes; the parts it
names are the runtime's own objects (the resolver's model table, the meter's reading), shared,
not copied.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from agentcore.config import ConfigResolver
from agentcore.context.meter import ContextMeter
from agentcore.engine.retry import Sleep
from agentcore.errors import AgentError
from agentcore.harness.storage import AgentStorage
from agentcore.inputs import AgentOptions
from agentcore.tracing import Tracer


@dataclass(frozen=True, slots=True)
class RuntimeParts:
    """One open runtime's dependencies; see the module docstring."""

    session_id: str  # the main conversation's id
    owner_id: str  # this owner of the store (the lease's)
    options: AgentOptions
    config: ConfigResolver
    meter: ContextMeter  # the main conversation's
    sleep: Sleep
    tracer: Tracer | None
    storage: AgentStorage

    def records(self) -> dict[str, Any]:
        """What the snapshot's ``records`` show of the runtime: the store, where the tools run
        and the model — never credentials. Extensions add theirs (``extension_records``)."""
        storage = self.storage
        records: dict[str, Any] = {
            "storage": {
                "label": getattr(storage, "label", ""),
                "kind": getattr(storage, "kind", "custom"),  # the built-in backends name themselves
                "schema_version": getattr(storage, "schema_version", None),
                "owner_id": self.owner_id,
            },
            "environment": {
                "id": "local",
                "label": "Local machine",
                "kind": "local",
                "status": "connected",
                "message": None,
                "cwd": self.options.workdir or os.getcwd(),
            },
            "extensions": [],
            "catalogs": [],
            "code_mode": None,
        }
        try:
            records["model"] = self.config.model({}).public_dict()
        except AgentError as exc:
            records["model"] = {"error": exc.message}
        return records
