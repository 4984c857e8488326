"""A store's trace for the Timeline, kept current from the store (SPEC W8).

``TimelineFeed`` wraps agentcore's incremental ``TraceBuilder`` and a read-only reader of the
store: ``refresh()`` folds in the rows committed since the builder's last ``seq`` (O(log n) plus
the new rows); ``lay_out()`` lays one conversation out (``studio.timeline``). The builder is
shared by a host's flush and its page requests, which run on worker threads, so it is used
under a lock. What the host does with it is ``studio.host.timeline_feed``.

Everything shown passes agentcore's ``Redactor``, here with every registered model's API key
added to the secrets it replaces (the store never holds a key, but a model or a tool may have
written one).
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any

from agentcore.trace import Redactor, TraceBuilder, TraceSpan, open_trace_source, span_details
from studio import timeline

if TYPE_CHECKING:
    from studio.stores import StoreLocation


def trace_source(location: StoreLocation) -> str:
    """What ``agentcore.trace`` reads a store from: the SQLite file, or the PostgreSQL store's URL."""
    return location.store_url if location.is_postgres else location.path


def studio_redactor() -> Redactor:
    """agentcore's redactor, also replacing every registered model's API key (sync: the ORM)."""
    from studio.credentials import CredentialsError
    from studio.models import RegisteredModel

    secrets = dict(os.environ)
    for index, model in enumerate(RegisteredModel.objects.exclude(api_key="")):
        try:
            key = model.plain_api_key()
        except CredentialsError:
            continue
        if key:
            secrets[f"STUDIO_REGISTERED_MODEL_{index}_API_KEY"] = key
    return Redactor(secrets)


class TimelineFeed:
    """One store's trace, kept current from the store (see the module docstring)."""

    def __init__(self, source: Any, redactor: Redactor) -> None:
        self.reader = open_trace_source(source)
        self.redactor = redactor
        self.builder = TraceBuilder(self.reader.label, redactor=redactor)
        self.lock = threading.Lock()
        self.touched_seq = 0  # the store position of the last read that changed a span

    def refresh(self) -> list[str]:
        """Fold in what was committed since the last read; the ids of the spans it touched."""
        with self.lock:
            touched = self.builder.add(self.reader.read(self.builder.last_seq))
            if touched:
                self.touched_seq = self.builder.last_seq
            return touched

    def lay_out(self, conversation_id: str, *, request_id: str | None = None, prefix: str = "tl") -> timeline.Timeline:
        with self.lock:
            trace = self.builder.trace(conversation_id=conversation_id)
        return timeline.lay_out(
            trace, now_ms=int(time.time() * 1000), conversation_id=conversation_id, request_id=request_id, prefix=prefix
        )

    def span(self, conversation_id: str, span_id: str) -> TraceSpan | None:
        """A span of this conversation (or of its subagents), as the Timeline shows it."""
        with self.lock:
            return self.builder.trace(conversation_id=conversation_id).span(span_id)

    def details(self, span: TraceSpan) -> dict[str, Any]:
        return span_details(self.reader, span, redactor=self.redactor)
