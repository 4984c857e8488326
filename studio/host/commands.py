"""Sending session commands to an open store's runtime, and reading its transcript: what every
command of the host (``studio.host.session_host``) goes through, apart from the host's
bookkeeping of which stores are open."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async

from studio import selectors
from studio.host import effects
from studio.host.contract import HostError, host_error
from studio.host.fold import Effect, fold_snapshot
from studio.host.state import HostedSession, View

if TYPE_CHECKING:
    from agentcore.runtime import AgentRuntime

#: Commands after which a model request may start on a model the composer offered (read from
#: the registry now): the runtime gets the current model table first.
MODEL_COMMANDS = ("submit", "configure")


def user_message(hs: HostedSession, view: View, entry_id: str) -> dict[str, Any]:
    """The text and images of a person's message of ``view``'s conversation, by its entry."""
    for message in runtime_of(hs).read_transcript(view.target_id or None, entry_ids=True):
        if message.get("entry_id") == entry_id and message.get("role") == "user" and not message.get("synthetic"):
            content = message.get("content") or []
            return {
                "prompt": "\n".join(c.get("text", "") for c in content if c.get("type") == "text"),
                "images": [
                    {"data": c["data"], "mime_type": c["mime_type"]} for c in content if c.get("type") == "image"
                ],
            }
    raise HostError("no_message", "That message is no longer in this conversation's context.")


def entry_before(hs: HostedSession, view: View, entry_id: str) -> str:
    """The committed entry just before ``entry_id`` in ``view``'s context (what a fork that
    drops that message starts from)."""
    transcript = runtime_of(hs).read_transcript(view.target_id or None, entry_ids=True)
    index = next((i for i, m in enumerate(transcript) if m.get("entry_id") == entry_id), None)
    if index is None:
        raise HostError("no_message", "That message is no longer in this conversation's context.")
    if index == 0:
        raise HostError("nothing_before", "The first message has nothing before it to fork from.")
    return str(transcript[index - 1]["entry_id"])


async def control(
    hs: HostedSession, request: dict[str, Any], view: View, *, request_id: str | None = None
) -> dict[str, Any]:
    """One session command for ``view``'s conversation; refusals become ``HostError``."""
    receipt, changes = await control_effects(hs, request, view, request_id=request_id)
    await effects.apply(hs, changes)
    return receipt


async def control_effects(
    hs: HostedSession, request: dict[str, Any], view: View, *, request_id: str | None = None
) -> tuple[dict[str, Any], list[Effect]]:
    """``control`` that returns the effects of the state it produced instead of writing them
    (the caller writes them with its own)."""
    from agentcore.errors import AGENT_NOT_READY, AgentError

    if request["type"] in MODEL_COMMANDS:
        await refresh_models(hs)
    body = {**request, "request_id": request_id or uuid.uuid4().hex}
    if view.target_id:
        body["target_id"] = view.target_id
    for _attempt in range(3):
        await hs.ready.wait()
        runtime = runtime_of(hs)
        try:
            receipt: dict[str, Any] = await runtime.control(body)
        except AgentError as exc:
            if exc.code == AGENT_NOT_READY and not hs.closing:
                continue  # the lease is switching between run() and serve()
            raise host_error(exc) from exc
        # What the command changed is visible at once (the chip, the config version), not
        # only when the lease reads the next snapshot off the bus; the snapshot is built
        # once, here (the session does not publish the same state again).
        snapshot = runtime.session_snapshot(published=True)
        return receipt, fold_snapshot(hs, snapshot, snapshot.model_dump(mode="json"))
    raise HostError("unavailable", "The session is not ready; try again.")


async def refresh_models(hs: HostedSession) -> None:
    """Hand the runtime the model table as registered now: a model added or priced after
    the runtime opened is priced as registered when a request starts on it. One plain read
    tells whether any registered model changed; the table is built again only then."""
    rows = await database_sync_to_async(selectors.enabled_model_rows)()
    if rows == hs.config.model_rows:
        return
    table = await database_sync_to_async(selectors.session_model_table)(hs.root_id)
    await hs.ready.wait()
    if table != hs.config.models:
        runtime_of(hs).update_models(table)
        hs.config.models = table
    hs.config.model_rows = rows


def runtime_of(hs: HostedSession) -> AgentRuntime:
    if hs.runtime is None:
        raise HostError("unavailable", "The session is not open; try again.")
    return hs.runtime


async def paused_run(view: View, kind: str) -> dict[str, Any]:
    """The paused turn of ``view`` waiting for a ``kind`` answer (``plan``, ``ask_user``)."""
    run = await database_sync_to_async(selectors.pending_run)(view.view_id)
    if run is None or (run["pending"] or {}).get("kind") != kind:
        raise HostError("not_waiting", "Nothing in this session is waiting for that answer.")
    return run
