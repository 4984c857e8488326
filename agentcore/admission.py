"""Admitting a ``run()`` input: the one path for plain and session runs (SPEC I1, D1, S6).

An input names a request (``request_id``, made up when absent). What ``run()`` does with it
depends only on what the store already knows about that request, decided here once:

- its receipt says it ended (completed, failed, aborted): ``Replayed`` — the recorded final
  event, with no model or tool call;
- the same id was used for another input: ``input_validation`` naming ``request_id`` (a
  resume — a decision, or a bare request id — is not another input);
- it is the open operation: ``Paused`` (apply the input's decision) or ``Unfinished``
  (continue it from its program counter);
- a decision for a request that is not paused: ``input_validation``;
- anything else: ``Fresh``. A fresh input is then checked whole by ``prepare_start`` — its
  images read, its operation built and configured, an empty prompt refused — before anything
  is written, so bad input leaves the store unchanged. Where it goes next (start now,
  supersede an older operation, wait in a session's queue) is the caller's: the plain runtime
  and the session driver differ only there.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from agentcore.engine.operations import input_hash, is_compaction, is_resume
from agentcore.errors import InputValidationError
from agentcore.events import RunEndEvent
from agentcore.harness.op_state import OpState
from agentcore.harness.projection import ConversationLog, new_id
from agentcore.harness.storage import Receipt
from agentcore.inputs import AgentInput
from agentcore.messages import ImageContent
from agentcore.tools.images import load_image_files

FINISHED = ("completed", "failed", "aborted")


@dataclass(frozen=True, slots=True)
class Replayed:
    """The request ended before: its recorded final event, marked ``replayed``."""

    final: RunEndEvent


@dataclass(frozen=True, slots=True)
class Paused:
    """The request is the open operation and waits for a decision."""

    op: OpState


@dataclass(frozen=True, slots=True)
class Unfinished:
    """The request is the open operation, not paused: continue it from its program counter."""

    op: OpState


@dataclass(frozen=True, slots=True)
class Fresh:
    """Nothing open under this id (``receipt``: what the store knows of it, e.g. ``queued``)."""

    request_id: str
    digest: str
    receipt: Receipt | None


Admission: TypeAlias = Replayed | Paused | Unfinished | Fresh


def admit(log: ConversationLog, input: AgentInput) -> Admission:
    """What ``input`` is to ``log``'s conversation (module docstring); writes nothing."""
    request_id = input.request_id or new_id()
    receipt = log.receipts.get(request_id)
    digest = input_hash(input)
    if receipt is not None and receipt.payload.get("input_hash") not in (None, digest) and not is_resume(input):
        raise InputValidationError(
            f"request_id {request_id!r} was already used for a different input", field="request_id"
        )
    if receipt is not None and receipt.payload.get("status") in FINISHED:
        return Replayed(RunEndEvent.model_validate(dict(receipt.payload["final"], replayed=True)))
    op = log.op
    if op is not None and op["request_id"] == request_id:
        return Paused(op) if op["phase"] == "paused" else Unfinished(op)
    if input.plan_resume or input.ask_resume or input.tool_resume:
        raise InputValidationError(f"no paused request {request_id!r}", field="request_id")
    return Fresh(request_id, digest, receipt)


@dataclass(frozen=True, slots=True)
class Start:
    """A fresh input, checked whole and ready to be written: its first program counter, its
    user message's prompt and images, and its ``running`` receipt."""

    op: OpState
    prompt: str
    images: list[ImageContent]
    receipt: dict[str, Any]


async def prepare_start(
    input: AgentInput,
    fresh: Fresh,
    *,
    new_op: Callable[[str, AgentInput], OpState],
    configure: Callable[[OpState], object],
    workdir: str | os.PathLike[str] | None,
) -> Start:
    """Validate everything before writing anything: the images (read off the event loop), the
    operation ``new_op`` builds, its configuration (a bad model or workdir raises here) and
    that there is something to answer (``prompt``; a compaction needs none)."""
    images = await load_images(input, workdir)
    op = new_op(fresh.request_id, input)
    configure(op)
    if not is_compaction(input) and not input.prompt and not images:
        raise InputValidationError("prompt is empty and no images are attached", field="prompt")
    return Start(op, input.prompt, images, running_receipt(fresh.digest))


async def load_images(input: AgentInput, workdir: str | os.PathLike[str] | None) -> list[ImageContent]:
    """Inline images and ``image_files`` (read off the event loop, relative to the input's
    workdir, else ``workdir``, else the process's) of ``input``."""
    images = [ImageContent(i.data, i.mime_type) for i in input.images]
    if input.image_files:
        base = Path(input.workdir or workdir or os.getcwd())
        images.extend(await asyncio.to_thread(load_image_files, input.image_files, base))
    return images


def running_receipt(digest: str) -> dict[str, Any]:
    """The receipt of a request that starts now (``input_hash`` makes a resend recognizable)."""
    return {"status": "running", "input_hash": digest}
