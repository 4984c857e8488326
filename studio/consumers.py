"""The session watcher: one WebSocket per open session page.

It never runs anything (runs live in ``studio.host.session_host``); it authenticates, joins the session's
group, renders the current state once, then forwards the host's pushes in order. Each push has
a sequence number; a watcher that sees a gap (a frame dropped by a full channel, or a new host
epoch after a restart) re-renders every region from a fresh host state instead of applying a
patch out of order. So the page can lag, but never lose or duplicate content.

Worker mode adds the holder's lease ``term`` to every push and state: when a worker dies and
another takes the session over, the new holder's first push is a full render under a higher
term, and anything still in flight from the old holder (a lower term) is ignored — the page
never goes back to the picture of a holder that lost the session.

The page also *sends* on it: the composer's text prompt (``studio.composer``), answered on the
same socket by ``#composer-error`` out of band (empty and marked accepted/queued, or the error
naming the field). A frame that is not a prompt gets a typed error too and changes nothing.

Close codes (before the handshake is accepted, so nothing is ever sent):
``4401`` not logged in, ``4403`` not the session's owner (or no such session).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from studio import composer, pages
from studio.host.contract import HostError
from studio.host.routing import get_host_client
from studio.models import StudioSession

log = logging.getLogger("studio.consumers")

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


class SessionConsumer(AsyncWebsocketConsumer):
    session: StudioSession | None = None  # the owned session, read once at connect (its prompts' target)
    session_id: str = ""
    group: str = ""
    epoch: str = ""
    seq: int = -1
    term: int = 0
    banner: bool = False  # a "no host answered" notice is on the page: the next full render clears it

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        session_id = str(self.scope["url_route"]["kwargs"]["session_id"])
        self.session = self.scope["owned_session"]  # read with the person (SessionSocketAuthMiddleware)
        if self.session is None:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.session_id = session_id
        self.group = f"session-{session_id}"
        # Join before reading the state: every push after the state's seq is then delivered.
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        if not await self._page_is_current():
            await self.resync()

    async def _page_is_current(self) -> bool:
        """The page was rendered at the host's current state (its URL says which): it needs no
        second render, only a sign that the socket is listening (``#host-sync``)."""
        query = parse_qs((self.scope.get("query_string") or b"").decode())
        shown = (query.get("epoch", [""])[0], query.get("seq", [""])[0], query.get("term", [""])[0])
        if not shown[0]:
            return False
        try:
            epoch, seq, term = await get_host_client().call("position", self.session_id)
        except HostError:
            return False
        if (str(epoch), str(seq), str(term)) != shown:
            return False
        self.epoch, self.seq, self.term = str(epoch), int(seq), int(term)
        await self.send(text_data=f'<span id="host-sync" hx-swap-oob="true" hidden data-seq="{int(seq)}"></span>')
        return True

    async def dispatch(self, message: dict[str, Any]) -> None:
        """A push is relayed without touching the database, so it skips what Channels does
        before every handler (``aclose_old_connections``: a hop to the database thread per
        frame, the largest part of a relay's cost). So does a frame from the page (a prompt):
        its only database write, a changed build/plan default, runs in
        ``database_sync_to_async``, which closes stale connections itself, and a prompt does
        not queue behind every session's renders on that thread. So does the handshake: its person
        and session were read by ``SessionSocketAuthMiddleware`` in ``database_sync_to_async``,
        and a resync renders there too. The rest dispatches as usual."""
        kind = message.get("type")
        if kind == "websocket.connect":  # its reads ran in database_sync_to_async, which closes stale connections
            await self.websocket_connect(message)
            return
        if kind == "session.push":
            await self.session_push(message)
            return
        if kind == "websocket.receive":
            await self.websocket_receive(message)
            return
        await super().dispatch(message)

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """A frame from the page: the composer's prompt. Answered on this socket with
        ``#composer-error`` (what the POST would have answered); nothing else is accepted."""
        assert self.session is not None  # receive only follows an accepted connect
        try:
            command, fields = composer.socket_frame(text_data, bytes_data)
            if command != "prompt":
                raise composer.PromptRefused("command", "unknown_command", f"Unknown command {command!r}.")
            prompt = composer.parse_prompt(fields, None, default_agent=self.session.mode)
            receipt = await composer.submit_prompt(self.session, prompt)
        except composer.PromptRefused as exc:
            reply = composer.composer_reply(error=exc.message, reply="refused", field=exc.field, code=exc.code)
            await self.send(text_data=reply)
            return
        except HostError as exc:
            await self.send(text_data=composer.composer_reply(error=exc.message, reply="refused", code=exc.code))
            return
        status = "queued" if receipt.get("status") == "queued" else "accepted"
        await self.send(text_data=composer.composer_reply(reply=status))

    async def session_push(self, message: dict[str, Any]) -> None:
        epoch, seq, term = message["epoch"], int(message["seq"]), int(message.get("term") or 0)
        if term < self.term:
            return  # from a holder that has lost the session since
        if epoch == self.epoch and seq <= self.seq:
            return  # already part of what this page shows
        if message.get("full") or (epoch == self.epoch and seq == self.seq + 1):
            self.epoch, self.seq, self.term = epoch, seq, term
            await self.send(text_data=self._clearing_banner(message["html"], bool(message.get("full"))))
            return
        log.info(
            "session %s: push gap (%s/%s after %s/%s), re-rendering", self.session_id, epoch, seq, self.epoch, self.seq
        )
        await self.resync()

    async def resync(self) -> None:
        try:
            state = await get_host_client().state(self.session_id)
        except HostError as exc:
            self.banner = True
            await self.send(text_data=_host_error_banner(exc.message))
            return
        html = await database_sync_to_async(pages.render_full_regions)(self.session_id, state)
        if state.term < self.term:
            return  # a stale holder answered before it learned it lost the session
        self.epoch, self.seq, self.term = state.epoch, state.seq, state.term
        await self.send(text_data=self._clearing_banner(html, True))

    def _clearing_banner(self, html: str, full: bool) -> str:
        """A full render after a failed resync (e.g. while a worker was being replaced) also
        takes the notice away: the page is whole again."""
        if not (full and self.banner):
            return html
        self.banner = False
        return _host_error_banner("") + html


def _host_error_banner(message: str) -> str:
    return composer.composer_reply(error=message)


class SessionListConsumer(AsyncWebsocketConsumer):
    """The sessions list's live status pills (``studio.host.status_feed``): one socket per list
    page on its person's group (staff also on the staff group). Only listens."""

    groups_joined: tuple[str, ...] = ()

    async def connect(self) -> None:
        from studio.host.status_feed import STAFF_GROUP, user_group

        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.groups_joined = (user_group(user.pk),) + ((STAFF_GROUP,) if user.is_staff else ())
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        return None

    async def sessions_status(self, message: dict[str, Any]) -> None:
        """New statuses: each row's pill, out of band (a row not on the page is ignored)."""
        from django.template.loader import render_to_string

        from studio.models import SessionStatus

        labels = dict(SessionStatus.choices)
        html = "".join(
            render_to_string(
                "studio/_list_pill.html",
                {"session_id": session_id, "status": status, "label": labels.get(status, status), "oob": True},
            )
            for session_id, status in message["statuses"].items()
        )
        await self.send(text_data=html)
