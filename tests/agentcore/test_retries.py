"""Retries and continuations, one test per row of the seed's error section (SPEC L2–L7).

Faults come from the fake provider server through the real adapters; the backoff sleep is
injected (``sleeps`` records delays), so no test waits for real.
"""

from __future__ import annotations

import pytest

from agentcore import AgentInput
from agentcore.testing.steps import Aborted, Disconnect, HttpError, NoTerminal, Stop, Text, ToolCall, Usage
from tests.conftest import API_KINDS
from tests.helpers import collect, final, text_of

RETRYABLE_STATUSES = (408, 409, 429, 500, 502, 503, 504, 529)


@pytest.mark.parametrize("status", RETRYABLE_STATUSES)
async def test_recoverable_status_before_content_is_retried(make_agent, fake_server, sleeps, status: int) -> None:
    """L2: 408/409/429/5xx before any content → retry with a `dropped` retry event, then success."""
    fake_server.enqueue([HttpError(status)], [Text("recovered")])
    agent = await make_agent()
    events = await collect(agent, "hi")
    retries = [e for e in events if e.type == "retry"]
    assert [(r.kind, r.attempt, r.max_attempts) for r in retries] == [("dropped", 1, 10)]
    assert final(events).status == "completed" and final(events).text == "recovered"
    assert len(sleeps.delays) == 1 and 0 < sleeps.delays[0] <= 8


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_disconnect_before_content_is_retried(make_agent, fake_server, api_kind: str) -> None:
    """L2: a connection dropped before content is retried from scratch (no continuation prompt)."""
    fake_server.enqueue([Disconnect(after_events=0)], [Text("second try")])
    agent = await make_agent(api_kind)
    events = await collect(agent, "hi")
    assert final(events).text == "second try"
    assert [e.kind for e in events if e.type == "retry"] == ["dropped"]
    assert "interrupted" not in str(fake_server.requests[1].json)


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_missing_terminal_event_is_retried(make_agent, fake_server, api_kind: str) -> None:
    """L2: a stream that ends without its terminal event counts as dropped."""
    fake_server.enqueue([NoTerminal()], [Text("complete")])
    agent = await make_agent(api_kind)
    events = await collect(agent, "hi")
    assert final(events).text == "complete"
    assert [e.kind for e in events if e.type == "retry"] == ["dropped"]


async def test_provider_aborted_without_our_cancel_is_retried(make_agent, fake_server) -> None:
    """L2: provider-reported `aborted` on a request we did not cancel → retry."""
    fake_server.enqueue([Aborted()], [Text("fine")])
    agent = await make_agent()
    events = await collect(agent, "hi")
    assert final(events).status == "completed"
    assert [e.kind for e in events if e.type == "retry"] == ["dropped"]


async def test_retry_after_is_honoured_within_the_cap(make_agent, fake_server, sleeps) -> None:
    """L2: Retry-After is used as the delay, but never beyond 8 s."""
    fake_server.enqueue([HttpError(429, retry_after=3)], [HttpError(503, retry_after=120)], [Text("ok")])
    agent = await make_agent()
    await collect(agent, "hi")
    assert sleeps.delays == [3, 8]


async def test_backoff_is_exponential_and_capped(make_agent, fake_server, sleeps) -> None:
    fake_server.enqueue(*([HttpError(503)] for _ in range(7)), [Text("ok")])
    agent = await make_agent()
    await collect(agent, "hi")
    assert sleeps.delays == [0.5, 1, 2, 4, 8, 8, 8]


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_drop_after_content_continues_from_kept_text(make_agent, fake_server, api_kind: str) -> None:
    """L3: a drop after text keeps the text, sends a continuation prompt, and finishes the turn."""
    fake_server.enqueue([Text("The first half, "), Disconnect()], [Text("and the second half.")])
    agent = await make_agent(api_kind)
    events = await collect(agent, "write")
    assert text_of(events) == "The first half, and the second half."
    assert [e.kind for e in events if e.type == "retry"] == ["dropped"]
    second = str(fake_server.requests[1].json)
    assert "The first half, " in second, "the model sees its partial text"
    assert "interrupted" in second and "can see it" in second
    roles = [m["role"] for m in agent.read_transcript()]
    assert roles == ["user", "assistant", "user", "assistant"]


async def test_drop_after_content_drops_tool_calls_without_results(make_agent, fake_server) -> None:
    """L3: tool calls of the interrupted reply are dropped (no result exists for them)."""
    fake_server.enqueue(
        [Text("Let me look."), ToolCall("ls", {"path": "."}, id="lost"), Disconnect()],
        [Text("done")],
    )
    agent = await make_agent()
    events = await collect(agent, "go")
    assert final(events).status == "completed"
    assert not [e for e in events if e.type == "tool"]
    assert "lost" not in str(fake_server.requests[1].json)


async def test_ten_interruptions_exhaust_the_budget_naming_the_cause(make_agent, fake_server) -> None:
    """L3: after 10 consecutive drops the error says so and names the cause."""
    fake_server.enqueue(*([HttpError(502, message="bad gateway upstream")] for _ in range(11)))
    agent = await make_agent()
    events = await collect(agent, "hi")
    end = final(events)
    assert end.status == "failed" and end.error_code == "model_error"
    assert "interrupted 10 times" in (end.error or "") and "bad gateway upstream" in (end.error or "")
    assert len([e for e in events if e.type == "retry"]) == 10
    assert len(fake_server.requests) == 11


async def test_length_stop_continues_then_succeeds(make_agent, fake_server) -> None:
    """L4: stop_reason=length → continuation asking for the pending action; kind=length."""
    fake_server.enqueue([Text("I will now call"), Stop("length")], [ToolCall("ls", {"path": "."})], [Text("ok")])
    agent = await make_agent()
    events = await collect(agent, "go")
    retries = [e for e in events if e.type == "retry"]
    assert [(r.kind, r.attempt, r.max_attempts) for r in retries] == [("length", 1, 2)]
    assert "max_tokens" in str(fake_server.requests[1].json)
    assert final(events).status == "completed"


async def test_length_stop_three_times_names_max_tokens(make_agent, fake_server) -> None:
    """L4: the length budget is 2; the third length stop fails naming max_tokens."""
    fake_server.enqueue(*([Text("cut"), Stop("length")] for _ in range(3)))
    agent = await make_agent()
    events = await collect(agent, "go")
    end = final(events)
    assert end.status == "failed" and "max_tokens" in (end.error or "") and "raise" in (end.error or "")
    assert [e.attempt for e in events if e.type == "retry"] == [1, 2]


async def test_length_twice_then_success(make_agent, fake_server) -> None:
    fake_server.enqueue([Text("a"), Stop("length")], [Text("b"), Stop("length")], [Text("c")])
    agent = await make_agent()
    events = await collect(agent, "go")
    assert final(events).status == "completed"
    assert [e.kind for e in events if e.type == "retry"] == ["length", "length"]


LOSABLE = ("anthropic-messages", "openai-completions")
"""The wires whose stop reason can claim a tool call that never came. On Responses the
terminal ``output`` is the answer itself: a call named there is built from it."""


@pytest.mark.parametrize("api_kind", LOSABLE)
async def test_lost_call_is_continued(make_agent, fake_server, api_kind: str) -> None:
    """L5: stop reason tool_use with no call → lost-call continuation telling the model to resend."""
    fake_server.enqueue([Text("Calling ls"), Stop("tool_use")], [ToolCall("ls", {"path": "."})], [Text("ok")])
    agent = await make_agent(api_kind)
    events = await collect(agent, "go")
    assert [e.kind for e in events if e.type == "retry"] == ["lost-call"]
    assert "no tool call arrived" in str(fake_server.requests[1].json)
    assert final(events).status == "completed"


@pytest.mark.parametrize("api_kind", LOSABLE)
async def test_lost_call_exhaustion_says_lost_n_times(make_agent, fake_server, api_kind: str) -> None:
    fake_server.enqueue(*([Text("Calling"), Stop("tool_use")] for _ in range(11)))
    agent = await make_agent(api_kind)
    end = final(await collect(agent, "go"))
    assert end.status == "failed" and "lost 10 times" in (end.error or "")


async def test_budgets_reset_after_a_full_success(make_agent, fake_server) -> None:
    """L6: consecutive counting; a fully successful request resets the budget to 1/10."""
    fake_server.enqueue(
        [HttpError(503)],
        [HttpError(503)],
        [ToolCall("ls", {"path": "."})],
        [HttpError(503)],
        [Text("end")],
    )
    agent = await make_agent()
    events = await collect(agent, "go")
    assert [e.attempt for e in events if e.type == "retry"] == [1, 2, 1]


async def test_partial_text_does_not_reset_the_budget(make_agent, fake_server) -> None:
    """L6: a drop after partial text is not a full success: the count keeps rising."""
    fake_server.enqueue([HttpError(503)], [Text("part"), Disconnect()], [HttpError(503)], [Text("rest")])
    agent = await make_agent()
    events = await collect(agent, "go")
    assert [e.attempt for e in events if e.type == "retry"] == [1, 2, 3]


async def test_each_retry_is_its_own_usage_record(make_agent, fake_server) -> None:
    """L6: every attempt is a separate history record with its own stable record id."""
    fake_server.enqueue([HttpError(503)], [Text("ok"), Usage(input=10, output=2)])
    agent = await make_agent()
    events = await collect(agent, AgentInput(prompt="go", request_id="r"))
    records = [e.record_id for e in events if e.type == "usage"]
    assert len(records) == 2 and len(set(records)) == 2


@pytest.mark.parametrize(
    ("status", "code"),
    [(401, None), (403, None), (400, None), (404, None), (429, "insufficient_quota"), (402, None)],
)
async def test_auth_bad_request_and_quota_are_never_retried(make_agent, fake_server, status: int, code) -> None:
    """L7: auth, bad-parameter and quota errors fail at once."""
    fake_server.enqueue([HttpError(status, message="nope", code=code, error_type=code)], [Text("unused")])
    agent = await make_agent()
    events = await collect(agent, "go")
    assert final(events).status == "failed"
    assert not [e for e in events if e.type == "retry"]
    assert len(fake_server.requests) == 1
