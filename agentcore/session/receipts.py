"""A control command's receipt (SPEC S1, S2): made, recorded with its effect, found again.

A receipt is stored under the command's ``request_id`` together with the command's
fingerprint, in the same transaction as the effect. So a resend returns the original receipt
and does nothing again, the same id with another payload is ``request_conflict``, and a
reopened runtime still knows every receipt. Used by every command's handler — the session's
own (``control``) and an extension's (a ``task`` command names the extension's task) — so
none of them reaches into another's private helpers.
"""

from __future__ import annotations

from typing import Any

from agentcore.errors import REQUEST_CONFLICT, AgentError
from agentcore.harness.projection import ConversationLog, StoreView
from agentcore.harness.storage import Commit, Receipt
from agentcore.session.commands import Command


def command_receipt(command: Command, status: str, **fields: Any) -> dict[str, Any]:
    """What the caller of ``control()`` gets back: the command's id and type, its status and
    the fields that status carries."""
    return {"request_id": command.request_id, "type": command.type, "status": status, **fields}


def control_record(command: Command, digest: str, receipt: dict[str, Any]) -> dict[str, Any]:
    """The ``control`` part of a stored receipt: what a resend is compared with and answered from."""
    return {"fingerprint": digest, "type": command.type, "receipt": receipt}


def record_command(
    log: ConversationLog,
    command: Command,
    digest: str,
    receipt: dict[str, Any],
    commit: Commit | None = None,
    payload: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Commit ``commit`` (the command's effect) with the command's receipt, in one transaction;
    return the receipt. ``payload``: more fields of the stored receipt (its status defaults to
    the receipt's)."""
    commit = commit or Commit()
    body = dict(payload or {}, control=control_record(command, digest, receipt))
    body.setdefault("status", receipt["status"])
    commit.receipts.append(Receipt(command.request_id, log.conversation_id, body))
    log.commit(commit)
    return dict(receipt)


def resent_receipt(view: StoreView, command: Command, digest: str) -> dict[str, Any] | None:
    """The recorded receipt when ``command`` was applied before (a resend), else None;
    ``request_conflict`` when its id was used for another command or an input."""
    existing = view.receipts.get(command.request_id)
    if existing is None:
        return None
    recorded = existing.payload.get("control")
    if recorded is None or recorded.get("fingerprint") != digest:
        raise AgentError(
            REQUEST_CONFLICT,
            f"request_id {command.request_id!r} was already used for another command or input",
            details={"request_id": command.request_id},
        )
    return dict(recorded["receipt"])
