"""Provider usage numbers that are not non-negative integers never become negative or
fractional cost, and never fail the response (SPEC P1, L2).

The rule (``agentcore.providers.shared.token_count``): an integer counts, a negative one as 0;
an integral float counts as that integer; a string, boolean, fractional, infinite or NaN value
is ignored. Checked on the wire shapes of all three protocols, through the real adapters.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentcore.providers import AnthropicMessagesProvider, OpenAICompletionsProvider, OpenAIResponsesProvider
from agentcore.providers.streaming import SSEAdapter
from agentcore.testing import Text, Usage
from tests.agentcore.provider_fixtures import collect, make_model, make_request
from tests.conftest import API_KINDS
from tests.helpers import collect as run_agent
from tests.helpers import final

ADAPTERS: dict[str, type[SSEAdapter]] = {
    "openai-responses": OpenAIResponsesProvider,
    "anthropic-messages": AnthropicMessagesProvider,
    "openai-completions": OpenAICompletionsProvider,
}


def wire_usage(api_kind: str, input: Any, output: Any, cached: Any, extra: Any) -> dict[str, Any]:
    """One usage object in the protocol's shape; ``extra`` is its reasoning / cache-write count."""
    if api_kind == "openai-completions":
        return {
            "prompt_tokens": input,
            "completion_tokens": output,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": extra},
        }
    if api_kind == "openai-responses":
        return {
            "input_tokens": input,
            "output_tokens": output,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens_details": {"reasoning_tokens": extra},
        }
    return {
        "input_tokens": input,
        "output_tokens": output,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": extra,
    }


@pytest.fixture(params=API_KINDS)
def api_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def provider(api_kind: str) -> AsyncIterator[SSEAdapter]:
    adapter = ADAPTERS[api_kind]()
    yield adapter
    await adapter.aclose()


def _counts(usage: Any) -> tuple[int, int, int, int, int]:
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_input_tokens,
        usage.cache_creation_tokens,
        usage.reasoning_tokens,
    )


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param((-100, -5, -3, -2), (0, 0, 0, 0, 0), id="negative"),
        pytest.param(("100", "abc", None, True), (0, 0, 0, 0, 0), id="strings-null-bool"),
        pytest.param((12.5, float("nan"), 1e400, -0.0), (0, 0, 0, 0, 0), id="fractional-nan-inf"),
        pytest.param((120.0, 30.0, 20.0, 4.0), None, id="integral-floats"),
        pytest.param((120, 30, 20, 4), None, id="integers"),
    ],
)
async def test_usage_counts_are_non_negative_integers(fake_server, provider, api_kind, values, expected) -> None:
    """P1: whatever the counts, the response succeeds and its usage and cost are >= 0."""
    fake_server.enqueue([Text("hello"), Usage(wire=wire_usage(api_kind, *values))])
    out = await collect(provider, make_request(make_model(api_kind, fake_server.base_url)))
    assert out.end.failure is None and out.text == "hello"
    usage = out.end.message.usage
    assert usage is not None
    counts = _counts(usage)
    assert all(type(n) is int and n >= 0 for n in counts), counts
    if expected is not None:
        assert counts == expected
    else:
        # 120 prompt tokens of which 20 cached (OpenAI counts cached inside input; Anthropic apart)
        openai = api_kind != "anthropic-messages"
        assert counts == ((100, 30, 20, 0, 4) if openai else (120, 30, 20, 4, 0))
    cost = usage.cost
    assert min(cost.input, cost.output, cost.cache_read, cost.cache_write, cost.total) >= 0


async def test_a_negative_count_never_becomes_negative_cost_in_the_ledger(make_agent, fake_server, api_kind) -> None:
    """Through the runtime: the usage event, the run total and the stored row are all >= 0."""
    fake_server.enqueue([Text("hi"), Usage(wire=wire_usage(api_kind, 50, -1_000_000, -7, -9))])
    agent = await make_agent(api_kind)
    events = await run_agent(agent, "go")
    end = final(events)
    assert end.status == "completed"
    usage_events = [e for e in events if e.type == "usage"]
    assert len(usage_events) == 1 and usage_events[0].cost >= 0 and usage_events[0].output_tokens == 0
    assert end.usage is not None and end.usage["cost"] >= 0
    [row] = agent.log.usage.values()
    assert all(v >= 0 for k, v in row.payload.items() if k.endswith("_tokens") and isinstance(v, int))
