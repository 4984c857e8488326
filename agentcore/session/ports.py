"""What the session's parts may ask of the session, as small ``Protocol``s (issue 24).

The driver owns the session's parts — control commands (``control``), subagents
(``children``), the snapshot (``snapshots``), background compaction
(``agentcore.compaction.background``) and the extensions (``extension``) — and hands each one
itself through a port that names exactly what that part uses; the driver satisfies every port
structurally, and nothing under ``session/`` or ``extensions/`` imports the driver. Each part
declares its own port next to it; the pieces several ports share are here.
"""

from __future__ import annotations

from typing import Any, Protocol

from agentcore.engine.base import TurnConfig
from agentcore.harness.op_state import OpState
from agentcore.harness.projection import ConversationLog, StoreView
from agentcore.harness.storage import Commit
from agentcore.messages import ImageContent
from agentcore.session.contexts import Context, Contexts


class SessionStore(Protocol):
    """What every part reads: the store's projection (commit through it) and the contexts."""

    @property
    def view(self) -> StoreView: ...

    @property
    def contexts(self) -> Contexts: ...


class ContextOperations(Protocol):
    """Making and configuring an operation of a context as the session does: pinned to the
    context's configured model (``configure`` command) and with the context's tools."""

    def new_op(
        self,
        log: ConversationLog,
        request_id: str,
        settings: dict[str, Any],
        *,
        mode: str | None = None,
        compaction: bool = False,
    ) -> OpState: ...

    def configure(self, log: ConversationLog, op: OpState, context: Context | None = None) -> TurnConfig: ...


class InputQueue(Protocol):
    """Adding an input to a context's queue (``session.queue``) with its ``queued`` receipt."""

    def enqueue(
        self,
        log: ConversationLog,
        input_id: str,
        prompt: str,
        images: list[ImageContent],
        *,
        mode: str,
        receipt: dict[str, Any],
        kind: str = "input",
        commit: Commit | None = None,
        agent: str | None = None,
    ) -> None: ...
