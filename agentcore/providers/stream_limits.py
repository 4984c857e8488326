"""Bounds on one streamed model request, so no stream runs forever (SPEC L2, L8).

Without them, a server that accepts the connection and never answers, one that sends SSE
keep-alive comments forever, or a model that streams text far past its output limit keeps a
run going until someone cancels it. Each bound ends the stream with a *retryable* failure
whose message names the bound, so the engine's one retry policy (backoff, budget of 10)
handles it like any other dropped request:

- ``connect_s`` — opening the TCP/TLS connection (failure kind ``connection``).
- ``header_s`` — from sending the request until the response status and headers arrived
  (kind ``timeout``). Local servers that process the whole prompt before answering may need
  more than the default.
- ``idle_s`` — time spent waiting on the network for the next *event* (kind ``timeout``).
  SSE comments (``: ping``) and Anthropic ``ping`` events are keep-alives and do not count
  as events; every other event restarts the clock. Time the consumer spends between reads
  is not waiting on the network and does not count.

The header and idle bounds are checked by a ticker (a quarter of the shorter one), so each
fires at most a quarter of that bound late — the idle bound between ``idle_s`` and
1.25 x ``idle_s`` after the last event.
- the output cap (kind ``overrun``): the streamed text, thinking and tool-call arguments
  together may not exceed ``output_cap_chars(max_tokens)`` characters, i.e. 32 characters per
  token of the request's output limit (8x the ~4 characters a token averages), and never
  less than 16,384 characters. A model cannot legitimately produce more than ``max_tokens``
  tokens, so a stream that far past it is a runaway (a server ignoring the limit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agentcore.errors import InputValidationError

MAX_TIMEOUT_S = 86_400.0
OUTPUT_CHARS_PER_TOKEN = 32
MIN_OUTPUT_CAP_CHARS = 16_384


@dataclass(frozen=True, slots=True)
class StreamTimeouts:
    """Seconds; each must be a finite number in (0, 86400]. ``create_agent(stream_timeouts=
    {...})`` validates the same rule at the boundary and names the bad field."""

    connect_s: float = 15.0
    header_s: float = 60.0
    idle_s: float = 120.0

    def __post_init__(self) -> None:
        for name in ("connect_s", "header_s", "idle_s"):
            value = getattr(self, name)
            valid = isinstance(value, int | float) and not isinstance(value, bool)
            if not valid or not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
                raise InputValidationError(
                    f"stream_timeouts.{name} must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], got {value!r}",
                    field=f"stream_timeouts.{name}",
                )


def output_cap_chars(max_tokens: int) -> int:
    """Streamed characters beyond which a response counts as a runaway (see the module doc)."""
    return max(MIN_OUTPUT_CAP_CHARS, max_tokens * OUTPUT_CHARS_PER_TOKEN)
