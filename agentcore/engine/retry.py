"""Retry and continuation budgets, backoff and prompts (SPEC L2–L7).

Budgets count *consecutive* failures and live in the operation's durable program counter,
so reopening an unfinished run never resets them (DURABILITY invariant 13). A fully
successful model request resets both. The clock is injectable so tests never sleep.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agentcore.prompts import load_prompt

MAX_CONNECTION_ATTEMPTS = 10
#: A request that never reached a server (refused, unreachable, unresolvable, connect timeout):
#: nothing was lost by failing sooner, and a server that restarts (a local model server, a
#: proxy rolling over) is back within the ~15 s of backoff five attempts give. A stream that
#: dropped reached a server that was there a moment ago and keeps the ten of SPEC L2.
MAX_CONNECT_ATTEMPTS = 5
MAX_LENGTH_CONTINUATIONS = 2
MAX_PAUSE_TURNS = 3
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0

Sleep = Callable[[float], Awaitable[None]]


def backoff_delay(attempt: int, retry_after: float | None = None, *, jitter: random.Random | None = None) -> float:
    """Exponential backoff for the ``attempt``-th retry (1-based), capped at 8 s.

    A server's ``Retry-After`` is honoured but never beyond the cap, so one misbehaving
    proxy cannot stall a run for minutes.
    """
    if retry_after is not None and retry_after >= 0:
        return min(float(retry_after), BACKOFF_CAP_S)
    delay: float = min(BACKOFF_BASE_S * float(2 ** (attempt - 1)), BACKOFF_CAP_S)
    if jitter is not None:
        delay *= 0.8 + 0.4 * jitter.random()
    return min(delay, BACKOFF_CAP_S)


async def abortable_sleep(seconds: float, abort: asyncio.Event | None, sleep: Sleep = asyncio.sleep) -> bool:
    """Sleep unless ``abort`` is set first. Returns True when aborted."""
    if abort is None:
        await sleep(seconds)
        return False
    if abort.is_set():
        return True
    sleeper = asyncio.ensure_future(sleep(seconds))
    waiter = asyncio.ensure_future(abort.wait())
    try:
        await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        waiter.cancel()
    return abort.is_set()


@dataclass(slots=True)
class Budgets:
    """Consecutive-failure counters persisted in the operation register."""

    connection: int = 0  # dropped, lost-call and recovery share this budget of 10
    length: int = 0  # output-limit continuations: their own budget of 2

    def reset(self) -> None:
        self.connection = 0
        self.length = 0


def continuation_prompt(cause: str, *, model_sees_partial: bool) -> str:
    visibility = (
        "Your partial reply is above and you can see it."
        if model_sees_partial
        else "You cannot see your partial reply; the user already saw it."
    )
    return load_prompt("continuation.md").format(cause=cause, visibility=visibility)


def length_prompt() -> str:
    return load_prompt("length_continuation.md")


def lost_call_prompt() -> str:
    return load_prompt("lost_call.md")


def exhausted_message(kind: str, count: int, cause: str, *, endpoint: str | None = None) -> str:
    if kind == "length":
        return (
            f"the reply hit the output limit {count} times in a row; raise the model's max_tokens "
            f"(model attribute max_tokens or the max_tokens option) and try again"
        )
    if kind == "connect":
        where = f" to {endpoint}" if endpoint else ""
        return f"could not connect{where} {count} times in a row; last cause: {cause}"
    if kind == "lost-call":
        return f"the model's tool call was lost {count} times in a row ({cause})"
    return f"the model request was interrupted {count} times in a row; last cause: {cause}"
