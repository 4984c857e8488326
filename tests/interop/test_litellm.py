"""agentcore behind the real LiteLLM proxy (1.80.5), in front of the fake provider server
(SPEC P1, L1, L2, L3, M2; issue 23).

Every agentcore wire (Chat Completions, Responses, Messages) against every kind of upstream the
proxy serves: ``openai/`` (passed through where the wires match), ``anthropic/`` and
``hosted_vllm/`` (translated). Each path streams, runs a tool and completes with the usage the
upstream reported; an upstream killed mid-stream is retried, never a completed empty answer.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentInput, create_agent
from agentcore.events import RunEndEvent
from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import Disconnect, Hang, Text, ToolCall, Usage
from tests.interop.conftest import Proxy

API_KINDS = ("openai-completions", "openai-responses", "anthropic-messages")
ROUTES = ("openai", "anthropic", "hosted_vllm")
WIRE_PATH = {
    "openai-completions": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "anthropic-messages": "/v1/messages",
}
NOT_REASONING = {"reasoning": False}  # the documented setting for a model without reasoning


def upstream_path(api_kind: str, route: str) -> str:
    """Where the proxy sends a request: passed through on the same wire, or translated."""
    if route == "anthropic":
        return "/v1/messages"
    if route == "openai" and api_kind != "anthropic-messages":
        return WIRE_PATH[api_kind]
    return "/v1/chat/completions"


async def agent_for(proxy: Proxy, api_kind: str, route: str, workdir: Path, **options: Any) -> Any:
    base = proxy.base_url if api_kind == "anthropic-messages" else f"{proxy.base_url}/v1"
    options.setdefault("model_attributes", NOT_REASONING)
    return await create_agent(
        provider="litellm",
        model=route,
        api_kind=api_kind,
        base_url=base,
        api_key="sk-local",
        workdir=str(workdir),
        **options,
    )


async def run(agent: Any, prompt: str) -> list[Any]:
    try:
        return [event async for event in agent.run(AgentInput(prompt=prompt))]
    finally:
        await agent.close()


def completed(events: list[Any], proxy: Proxy) -> RunEndEvent:
    """The run's end, which must be ``completed`` (else the error and the proxy's last output)."""
    end = events[-1]
    assert isinstance(end, RunEndEvent), end
    assert end.status == "completed", f"{end.error}\n--- proxy log ---\n{proxy.log.read_text()[-3000:]}"
    return end


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "README.md").write_text("# Demo\nA demo project for the gateway test.\n")
    return tmp_path


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_streams_runs_a_tool_and_completes_with_exact_usage(
    litellm: Proxy, fake: FakeProviderServer, workspace: Path, api_kind: str, route: str
) -> None:
    """P1/L1: the text arrives as several deltas, the model's ``read`` call runs and its result
    reaches the next request, the answer completes, and each request's usage is exactly what the
    upstream reported (input counted whole: uncached + cache reads + cache writes)."""
    fake.enqueue(
        [
            # Paced beyond agentcore's 20 ms stream window, whose deltas are one event per window.
            Text("Let me read the readme first.", chunk_size=6, pace_s=0.03),
            ToolCall("read", {"path": "README.md"}),
            Usage(input=120, output=14),
        ],
        [Text("It is a demo project for the gateway test.", chunk_size=6, pace_s=0.03), Usage(input=190, output=11)],
    )
    agent = await agent_for(litellm, api_kind, route, workspace)
    events = await run(agent, "What is in the readme?")
    end = completed(events, litellm)
    assert end.text == "It is a demo project for the gateway test."
    deltas = [e for e in events if e.type == "text_delta"]
    assert len(deltas) > 2, "streamed, not delivered in one piece"
    tool_end = next(e for e in events if e.type == "tool" and e.phase == "end")
    assert tool_end.name == "read" and "A demo project for the gateway test." in (tool_end.result or "")
    assert not [e for e in events if e.type == "retry"]
    paths = [r.path for r in fake.requests]
    assert paths == [upstream_path(api_kind, route)] * 2
    assert "A demo project for the gateway test." in str(fake.requests[1].json), "the tool result went upstream"
    usage = [e for e in events if e.type == "usage"]
    whole_input = [u.input_tokens + u.cached_input_tokens + u.cache_creation_tokens for u in usage]
    assert whole_input == [120, 190] and [u.output_tokens for u in usage] == [14, 11]


PREAMBLE_EVENTS = {"/v1/chat/completions": 1, "/v1/messages": 2, "/v1/responses": 2}
"""Events an upstream sends before any content: the role chunk; message_start + ping;
response.created + response.in_progress."""


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_an_upstream_killed_mid_stream_is_retried_not_answered_empty(
    litellm: Proxy, fake: FakeProviderServer, workspace: Path, api_kind: str, route: str
) -> None:
    """L2: the upstream's connection dies after its stream began (status, headers, the opening
    events) and before any content. Whatever the proxy makes of it — an error object, ``[DONE]``
    without the terminal event, or a *normal* finish with nothing in it and no usage — agentcore
    retries; the run completes with the second answer, never as an empty one."""
    cut_after = PREAMBLE_EVENTS[upstream_path(api_kind, route)]
    fake.enqueue(
        [Text("The first attempt never gets this far."), Disconnect(after_events=cut_after)],
        [Text("The second attempt is whole."), Usage(input=60, output=7)],
    )
    agent = await agent_for(litellm, api_kind, route, workspace)
    events = await run(agent, "Say something.")
    end = completed(events, litellm)
    assert end.text == "The second attempt is whole."
    retries = [e for e in events if e.type == "retry"]
    assert [r.kind for r in retries] == ["dropped"], [r.reason for r in retries]
    assert len(fake.requests) == 2 and fake.requests[0].cut


@pytest.mark.parametrize("api_kind", ["openai-responses", "anthropic-messages"])
async def test_a_cut_after_content_on_a_passed_through_stream_is_continued(
    litellm: Proxy, fake: FakeProviderServer, workspace: Path, api_kind: str
) -> None:
    """L3: where the proxy passes the stream through (Responses to ``openai/``, Messages to
    ``anthropic/``) a cut after content reaches agentcore as what it is — ``[DONE]`` without
    ``response.completed``, or a stream without ``message_stop`` — so the text is kept and the
    model is asked to continue. (Translating, LiteLLM 1.80.5 instead invents a normal finish and
    a usage count after forwarded text: that cannot be told from a complete answer; see the
    gateway notes in the docs.)"""
    route = "openai" if api_kind == "openai-responses" else "anthropic"
    forwarded = threading.Event()  # the upstream dies only once agentcore has the text
    fake.enqueue(
        [Text("The first half,", chunk_size=5), Hang(event=forwarded), Disconnect()],
        [Text(" and the second half."), Usage(input=60, output=7)],
    )
    agent = await agent_for(litellm, api_kind, route, workspace)
    events: list[Any] = []
    try:
        async for event in agent.run(AgentInput(prompt="Say something.")):
            events.append(event)
            if event.type == "text_delta":
                forwarded.set()
    finally:
        forwarded.set()
        await agent.close()
    completed(events, litellm)
    retries = [e for e in events if e.type == "retry"]
    assert [r.kind for r in retries] == ["dropped"], [r.reason for r in retries]
    assert "The first half," in str(fake.requests[1].json), "the continuation shows the model its text"
    assert "".join(e.delta for e in events if e.type == "text_delta") == "The first half, and the second half."


async def test_an_unknown_model_id_refused_reasoning_parameters_say_how_to_fix_it(
    litellm: Proxy, fake: FakeProviderServer, workspace: Path
) -> None:
    """M2/L7: without attributes an unknown model id is assumed to reason, so ``reasoning_effort``
    goes out; LiteLLM answers 400 UnsupportedParamsError. The run fails at once (no retry, no
    upstream request) with an error naming the parameter and both fixes."""
    agent = await agent_for(litellm, "openai-completions", "openai", workspace, model_attributes=None, effort="high")
    events = await run(agent, "hi")
    end = events[-1]
    assert isinstance(end, RunEndEvent) and end.status == "failed"
    assert not [e for e in events if e.type == "retry"] and not fake.requests, "refused before any upstream call"
    error = end.error or ""
    assert "refused the parameter(s) reasoning_effort" in error
    assert '"reasoning": false' in error and "drop_params" in error


async def test_drop_params_lets_the_reasoning_fallback_through(
    litellm: Proxy, fake: FakeProviderServer, workspace: Path
) -> None:
    """M2: the other fix — a proxy entry with ``drop_params: true`` drops what the model does not
    support, so the reasoning fallback needs no attributes."""
    fake.enqueue([Text("fine"), Usage(input=10, output=1)])
    agent = await agent_for(
        litellm, "openai-completions", "drop-params", workspace, model_attributes=None, effort="high"
    )
    end = completed(await run(agent, "hi"), litellm)
    assert end.text == "fine"
    assert "reasoning_effort" not in fake.requests[0].json
