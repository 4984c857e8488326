"""The lease task: the loop that holds one store's runtime with ``serve()`` and folds its events.

Apart from ``SessionHost`` (which starts it, and answers it through ``ServingHost``) because it
is the one hot loop of the host: every event of every turn passes here once, in the order
the runtime emits it — the catch-up after an opening, the fold, the rows it writes, the lease's
note of activity. A lease that ends (a failed turn, a lost store) is decided here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Protocol

from agentcore.events import RunEndEvent
from studio.host import effects
from studio.host.contract import SessionLeases, store_code, store_lost
from studio.host.factory import agent_host
from studio.host.fold import Effect, fold_event
from studio.host.publisher import Publisher
from studio.host.state import HostedSession, folding_changes, wake

log = logging.getLogger("studio.hosts")


class ServingHost(Protocol):
    """What the lease task needs from the host that owns the session."""

    publisher: Publisher
    leases: SessionLeases | None

    def retune(self, hs: HostedSession) -> None:
        """Count the session's live turns again (its runtimes' stream window follows)."""

    async def drop(self, root_id: str, reason: str) -> None:
        """Forget a session this process may no longer write."""


async def hold(owner: ServingHost, hs: HostedSession) -> None:
    """Hold the runtime with ``serve()`` until the session closes: every prompt, decision and
    control reaches it as a command, and every event it emits is folded here."""
    host = agent_host()
    runtime = hs.runtime
    assert runtime is not None
    while not hs.closing:
        stream = runtime.serve(host)
        started = time.monotonic()
        held: list[Effect] = []  # a live turn's usage rows, written with the next rows
        try:
            async with contextlib.aclosing(stream):  # type: ignore[type-var]  # serve() is an async generator
                async for event in stream:
                    if not hs.caught_up:
                        await effects.catch_up(hs, event)
                    hs.ready.set()
                    if isinstance(event, RunEndEvent):
                        await owner.publisher.text_out(hs)  # its last tokens before its end's rows
                    with folding_changes(hs):
                        try:
                            changes, held = effects.with_held_usage(hs, held, fold_event(hs, event))
                            if hs.live_turns() != hs.counted_live:
                                owner.retune(hs)
                            await effects.apply(hs, changes)
                        except Exception:  # Studio's bookkeeping failed; the store is still right
                            log.exception("session %s: could not fold an event", hs.root_id)
                    if owner.leases is not None:
                        owner.leases.note_activity(hs.root_id, not hs.quiet())
            await _write_held(hs, held)
        except asyncio.CancelledError:
            raise  # rows still held are restored from the store's ledger at the next opening
        except Exception as exc:
            await _write_held(hs, held)
            if store_lost(exc):
                # This process can no longer write the store (fenced, or its connection and
                # owner lease are gone): serving again would fail the same way forever.
                await owner.drop(hs.root_id, f"the store refused this owner: {store_code(exc)}")
                return
            # A turn that fails ends in the store (its end event was folded above) and the
            # session stays usable: hold it again.
            log.warning("session %s: the lease ended with %s: %s", hs.root_id, type(exc).__name__, exc)
            if time.monotonic() - started < 1.0:
                await asyncio.sleep(1.0)  # a failure at once again: do not spin
        finally:
            hs.ready.clear()
            wake(hs)


async def _write_held(hs: HostedSession, held: list[Effect]) -> None:
    """The usage rows a lease's stream held when it ended (``effects.with_held_usage``)."""
    with folding_changes(hs):
        try:
            await effects.apply(hs, held)
        except Exception:
            log.exception("session %s: could not record its last usage", hs.root_id)
