"""Streams that never end are bounded: header timeout, idle timeout between events, output cap
(SPEC L2, L8, T5).

Each bound is configured short (tens of milliseconds) so no test waits for a real timeout;
each is asserted by the failure it produces, and the runtime tests show the engine retries
it (the backoff sleep is injected, so nothing waits). Every test is wrapped in
``asyncio.timeout``: a bound that does not fire fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentHost, create_agent
from agentcore.errors import InputValidationError
from agentcore.providers import (
    AnthropicMessagesProvider,
    OpenAICompletionsProvider,
    OpenAIResponsesProvider,
    StreamTimeouts,
    output_cap_chars,
)
from agentcore.providers.base import ProviderRequest, StreamEvent
from agentcore.providers.streaming import SSEAdapter
from agentcore.testing import Disconnect, Endless, FakeProviderServer, Hang, Text, Thinking
from tests.agentcore.provider_fixtures import Collected, collect, make_model, make_request
from tests.conftest import API_KINDS
from tests.helpers import collect as run_agent
from tests.helpers import final, text_of

ADAPTERS: dict[str, type[SSEAdapter]] = {
    "openai-responses": OpenAIResponsesProvider,
    "anthropic-messages": AnthropicMessagesProvider,
    "openai-completions": OpenAICompletionsProvider,
}
SHORT = StreamTimeouts(connect_s=5.0, header_s=0.05, idle_s=0.1)
GUARD_S = 10.0  # what "immediately" / "does not hang" means here


@pytest.fixture(params=API_KINDS)
def api_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _adapter(api_kind: str, timeouts: StreamTimeouts | None = None) -> SSEAdapter:
    return ADAPTERS[api_kind](None, timeouts)


@pytest.fixture
async def short_provider(api_kind: str) -> AsyncIterator[SSEAdapter]:
    adapter = _adapter(api_kind, SHORT)
    yield adapter
    await adapter.aclose()


@pytest.fixture
async def default_provider(api_kind: str) -> AsyncIterator[SSEAdapter]:
    """Default bounds (60 s headers, 120 s idle): only our abort can end these streams in time."""
    adapter = _adapter(api_kind)
    yield adapter
    await adapter.aclose()


def _request(server: FakeProviderServer, api_kind: str, **kwargs: Any) -> ProviderRequest:
    max_tokens = kwargs.pop("max_tokens", 32_000)
    return make_request(make_model(api_kind, server.base_url, max_tokens=max_tokens), **kwargs)


# --- the bounds, at the adapter ----------------------------------------------------------------


async def test_a_server_that_never_sends_headers_times_out(fake_server, short_provider, api_kind) -> None:
    """L2: accepted connection, no status line: a retryable `timeout` naming header_s."""
    fake_server.enqueue([Hang(before_headers=True)])
    async with asyncio.timeout(GUARD_S):
        out = await collect(short_provider, _request(fake_server, api_kind))
    failure = out.end.failure
    assert failure is not None and failure.kind == "timeout" and failure.retryable
    assert "no response headers within 0.05 s" in failure.message and "header_s" in failure.message
    assert out.end.message.stop_reason == "error"
    await fake_server.until(lambda s: s.requests[0].client_disconnected)


@pytest.mark.parametrize("kind", ["comments", "pings"])
async def test_endless_keepalives_do_not_reset_the_idle_timer(fake_server, short_provider, api_kind, kind) -> None:
    """L2: `: ping` comments (and Anthropic ping events) every 2 ms, forever, after some text:
    the idle bound still fires, the text received is kept, and the connection is closed."""
    fake_server.enqueue([Text("kept so far"), Endless(kind, interval_s=0.002)])
    async with asyncio.timeout(GUARD_S):
        out = await collect(short_provider, _request(fake_server, api_kind))
    failure = out.end.failure
    assert failure is not None and failure.kind == "timeout" and failure.retryable
    assert "no stream event for 0.1 s" in failure.message and "idle_s" in failure.message
    assert out.end.message.text == "kept so far"
    assert fake_server.requests[0].endless_frames > 5, "keep-alives were flowing when the bound fired"
    await fake_server.until(lambda s: s.requests[0].client_disconnected)


async def test_real_events_restart_the_idle_clock(fake_server, api_kind) -> None:
    """L2: a slow stream whose events each come well within idle_s completes, although the
    whole stream takes longer than idle_s."""
    timeouts = StreamTimeouts(header_s=5.0, idle_s=0.5)
    provider = _adapter(api_kind, timeouts)
    text = "abcdefghij" * 5
    fake_server.enqueue([Text(text, chunk_size=1, pace_s=0.02)])  # 50 frames over ~1 s
    try:
        async with asyncio.timeout(GUARD_S):
            out = await collect(provider, _request(fake_server, api_kind))
    finally:
        await provider.aclose()
    assert out.end.failure is None and out.text == text


async def test_a_complete_response_on_a_connection_held_open_still_succeeds(
    fake_server, short_provider, api_kind
) -> None:
    """After the terminal event the adapter reads the body's end so the connection can be
    reused; a server that never ends the body costs that connection (closed after one
    quiet tick), not the complete response."""
    fake_server.enqueue([Text("complete"), Hang(after_terminal=True)])
    async with asyncio.timeout(GUARD_S):
        out = await collect(short_provider, _request(fake_server, api_kind))
    assert out.end.failure is None and out.text == "complete"
    assert fake_server.requests[0].hung
    await fake_server.until(lambda s: s.requests[0].client_disconnected)


TERMINAL_EVENTS = {"openai-responses": 9, "anthropic-messages": 7, "openai-completions": 5}


async def test_a_connection_dropped_after_the_terminal_event_keeps_the_response(
    fake_server, short_provider, api_kind
) -> None:
    """The terminal event arrived, then the socket closed without ending the chunked body:
    the response is complete and kept (it used to fail as a connection error and be retried)."""
    fake_server.enqueue([Text("complete"), Disconnect(after_events=TERMINAL_EVENTS[api_kind])])
    async with asyncio.timeout(GUARD_S):
        out = await collect(short_provider, _request(fake_server, api_kind))
    assert fake_server.requests[0].cut
    assert out.end.failure is None and out.text == "complete"


async def test_endless_text_past_max_tokens_is_an_overrun(fake_server, short_provider, api_kind) -> None:
    """L2: text streamed far past what max_tokens allows ends as a retryable `overrun` that
    names the limit, soon after the cap (not after the stream, which never ends)."""
    fake_server.enqueue([Endless("text", chunk="x" * 1000, interval_s=0.0)])
    async with asyncio.timeout(GUARD_S):
        out = await collect(short_provider, _request(fake_server, api_kind, max_tokens=16))
    failure = out.end.failure
    cap = output_cap_chars(16)
    assert failure is not None and failure.kind == "overrun" and failure.retryable
    assert f"more than the {cap} allowed for max_tokens=16" in failure.message
    assert cap < len(out.text) <= cap + 1000 * 64, "stopped soon after the cap"
    await fake_server.until(lambda s: s.requests[0].client_disconnected)


@pytest.mark.parametrize("over", [False, True], ids=["at-the-cap", "one-past-the-cap"])
async def test_the_output_cap_is_32_characters_per_token(fake_server, short_provider, api_kind, over) -> None:
    """The documented rule: 32 characters per token of max_tokens (at least 16,384); thinking
    counts too. Exactly at the cap passes; one character more is an overrun."""
    max_tokens = 1000
    cap = output_cap_chars(max_tokens)
    assert cap == 32_000
    thinking = "t" * 10_000
    text = "y" * (cap - len(thinking) + (1 if over else 0))
    fake_server.enqueue([Thinking(thinking, chunk_size=2000), Text(text, chunk_size=2000)])
    async with asyncio.timeout(GUARD_S):
        out = await collect(short_provider, _request(fake_server, api_kind, max_tokens=max_tokens))
    if over:
        assert out.end.failure is not None and out.end.failure.kind == "overrun"
    else:
        assert out.end.failure is None and out.text == text and out.thinking == thinking


def test_output_cap_has_a_floor_for_small_limits() -> None:
    assert output_cap_chars(1) == 16_384
    assert output_cap_chars(512) == 16_384
    assert output_cap_chars(513) == 16_416


# --- cancellation still interrupts at once, in each state --------------------------------------


async def _abort_when(condition: Any, abort: asyncio.Event) -> None:
    await condition
    abort.set()


async def _stream_with_abort(provider: SSEAdapter, request: ProviderRequest, trigger: Any) -> Collected:
    abort = asyncio.Event()
    task = asyncio.create_task(_abort_when(trigger, abort))
    events: list[StreamEvent] = []
    try:
        async with asyncio.timeout(GUARD_S):
            async for event in provider.stream(request, abort):
                events.append(event)
    finally:
        task.cancel()
    return Collected(events)


async def test_abort_while_waiting_for_headers(fake_server, default_provider, api_kind) -> None:
    """L8: the run waits for headers (60 s bound): our abort ends it at once, `cancelled`."""
    fake_server.enqueue([Hang(before_headers=True)])
    out = await _stream_with_abort(default_provider, _request(fake_server, api_kind), fake_server.until_hanging(1))
    assert out.end.failure is not None and out.end.failure.kind == "cancelled"
    assert out.end.message.stop_reason == "aborted"
    await fake_server.until(lambda s: s.requests[0].client_disconnected)


@pytest.mark.parametrize("kind", ["comments", "text"])
async def test_abort_during_an_endless_stream(fake_server, default_provider, api_kind, kind) -> None:
    """L8: endless keep-alive comments (120 s idle bound) or endless text (a cap far away):
    our abort ends the stream at once, keeping what arrived."""
    fake_server.enqueue([Text("before "), Endless(kind, chunk="more ", interval_s=0.002)])
    started = fake_server.until(lambda s: bool(s.requests) and s.requests[0].endless_frames >= 5)
    out = await _stream_with_abort(default_provider, _request(fake_server, api_kind), started)
    assert out.end.failure is not None and out.end.failure.kind == "cancelled"
    assert out.end.message.text.startswith("before ")
    await fake_server.until(lambda s: s.requests[0].client_disconnected)


async def test_an_outside_cancellation_during_a_bounded_read_still_cancels(fake_server, short_provider, api_kind):
    """The guard's own cancellation is absorbed; the caller's is not (no swallowed cancel)."""
    fake_server.enqueue([Hang(before_headers=True)])
    task = asyncio.create_task(collect(short_provider, _request(fake_server, api_kind)))
    await fake_server.until_hanging(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# --- through the runtime: each bound is a retried, named failure ----------------------------------


FAULTS = {
    "no-headers": ([Hang(before_headers=True)], "no response headers within 0.05 s"),
    "endless-comments": ([Endless("comments")], "no stream event for 0.1 s"),
    "endless-text": ([Endless("text", chunk="x" * 1000, interval_s=0.0)], "ran past its output limit"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_runtime_retries_each_bound_with_its_reason(make_agent, fake_server, sleeps, api_kind, fault) -> None:
    """L2: each bound is a `dropped` retry whose reason names it; the next attempt succeeds.
    The backoff sleep is injected, so nothing waits for real."""
    steps, reason = FAULTS[fault]
    fake_server.enqueue(steps, [Text("recovered")])
    agent = await make_agent(
        api_kind,
        max_tokens=16,
        stream_timeouts={"connect_s": 5, "header_s": 0.05, "idle_s": 0.1},
    )
    async with asyncio.timeout(GUARD_S):
        events = await run_agent(agent, "hi")
    retries = [e for e in events if e.type == "retry"]
    assert [(r.kind, r.attempt) for r in retries] == [("dropped", 1)]
    assert reason in retries[0].reason
    assert sleeps.delays == [0.5]
    assert final(events).status == "completed" and text_of(events).endswith("recovered")
    assert len([e for e in events if e.type == "usage"]) == 2, "the failed attempt is settled with usage"


async def test_runtime_abort_signal_ends_an_endless_stream(make_agent, fake_server, api_kind) -> None:
    """L8: the host's abort_signal ends a run stuck on endless keep-alives, `aborted`."""
    fake_server.enqueue([Text("partial "), Endless("comments")])
    agent = await make_agent(api_kind)
    abort = asyncio.Event()
    started = fake_server.until(lambda s: bool(s.requests) and s.requests[0].endless_frames >= 5)
    trigger = asyncio.create_task(_abort_when(started, abort))
    async with asyncio.timeout(GUARD_S):
        events = await run_agent(agent, "hi", AgentHost(abort_signal=abort))
    await trigger
    assert final(events).status == "aborted"
    assert not [e for e in events if e.type == "retry"]


# --- the option ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"idle_s": 0}, "stream_timeouts.idle_s"),
        ({"idle_s": -1.5}, "stream_timeouts.idle_s"),
        ({"header_s": "60"}, "stream_timeouts.header_s"),
        ({"header_s": True}, "stream_timeouts.header_s"),
        ({"connect_s": float("nan")}, "stream_timeouts.connect_s"),
        ({"connect_s": float("inf")}, "stream_timeouts.connect_s"),
        ({"idle_s": 86_401}, "stream_timeouts.idle_s"),
        ({"read_s": 5}, "stream_timeouts.read_s"),
        ("fast", "stream_timeouts"),
        (None, "stream_timeouts"),
    ],
)
async def test_bad_stream_timeouts_are_input_validation_naming_the_field(
    tmp_path: Path, value: Any, field: str
) -> None:
    """R1: a bad value is `input_validation` naming the field, and nothing is opened."""
    database = tmp_path / "never.sqlite"
    with pytest.raises(InputValidationError) as caught:
        await create_agent(
            provider="fake",
            model="m",
            base_url="http://127.0.0.1:9/v1",
            api_key="k",
            api_kind="openai-responses",
            database_path=str(database),
            stream_timeouts=value,
        )
    assert caught.value.code == "input_validation" and caught.value.field == field
    assert not database.exists()


def test_stream_timeouts_dataclass_validates_too() -> None:
    with pytest.raises(InputValidationError) as caught:
        StreamTimeouts(idle_s=0)
    assert caught.value.field == "stream_timeouts.idle_s"
    assert StreamTimeouts(connect_s=1, header_s=2.5, idle_s=3) == StreamTimeouts(1, 2.5, 3)
