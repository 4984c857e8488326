"""What a gateway (the LiteLLM proxy) does to a stream, replayed by the fake provider server
through the real adapters and engine (SPEC L2, L3, L7, M2; issue 23).

Each fault is the byte shape LiteLLM 1.80.5 was seen to send (``tests/interop`` runs the real
proxy): a bare error object without ``type`` mid-stream, ``data: [DONE]`` on every wire, a cut
upstream reported as a *normal* finish with nothing in it, and a 400 refusing the reasoning
parameters agentcore sends to a model id it does not know.
"""

from __future__ import annotations

import pytest

from agentcore import AgentInput
from agentcore.testing.steps import GatewayCut, HttpError, NoTerminal, StreamError, Text, Usage
from tests.conftest import API_KINDS
from tests.helpers import collect, final, text_of


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_a_gateway_error_object_is_retried_with_the_providers_message(
    make_agent, fake_server, api_kind: str
) -> None:
    """L2: ``data: {"error": {"message", "type": null, "code": "503"}}`` after content is a
    retryable drop whose reason is the provider's message; the turn continues (L3)."""
    fake_server.enqueue(
        [Text("The answer is"), StreamError("upstream overloaded", code="503", gateway=True)],
        [Text(" forty-two."), Usage(input=50, output=5)],
    )
    agent = await make_agent(api_kind)
    events = await collect(agent, "question")
    retries = [e for e in events if e.type == "retry"]
    assert [(r.kind, r.attempt) for r in retries] == [("dropped", 1)]
    assert "upstream overloaded" in retries[0].reason
    assert final(events).status == "completed"


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_a_gateway_error_object_with_a_client_error_code_is_not_retried(
    make_agent, fake_server, api_kind: str
) -> None:
    """L7: the same object with code "400" is a bad request, exactly as an HTTP 400 would be."""
    fake_server.enqueue([StreamError("invalid model parameter", code="400", gateway=True)])
    agent = await make_agent(api_kind)
    events = await collect(agent, "question")
    end = final(events)
    assert end.status == "failed" and "invalid model parameter" in (end.error or "")
    assert not [e for e in events if e.type == "retry"] and len(fake_server.requests) == 1


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_done_marker_without_the_terminal_event_is_a_drop(make_agent, fake_server, api_kind: str) -> None:
    """L2/L3: ``data: [DONE]`` before the protocol's terminal event (Chat Completions: before the
    usage chunk it asked for) ends the stream as dropped — never a JSON error, never an answer."""
    fake_server.enqueue(
        [Text("The first half"), NoTerminal(done_marker=True)],
        [Text(" and the second half."), Usage(input=50, output=5)],
    )
    agent = await make_agent(api_kind)
    events = await collect(agent, "question")
    retries = [e for e in events if e.type == "retry"]
    assert [r.kind for r in retries] == ["dropped"] and "JSON" not in retries[0].reason
    assert "The first half" in str(fake_server.requests[1].json), "the continuation shows the model its text"
    assert final(events).status == "completed"


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_a_cut_reported_as_a_normal_finish_is_retried_not_answered(
    make_agent, fake_server, api_kind: str
) -> None:
    """L2 (issue 23): LiteLLM, when its upstream dies, ends the stream normally with nothing in
    it (``finish_reason: stop`` + ``[DONE]`` without usage; ``end_turn`` + ``message_stop`` with
    zero usage; ``response.completed`` with an empty output). That is a drop, retried."""
    fake_server.enqueue([GatewayCut()], [Text("the real answer"), Usage(input=40, output=4)])
    agent = await make_agent(api_kind)
    events = await collect(agent, "question")
    assert [e.kind for e in events if e.type == "retry"] == ["dropped"]
    end = final(events)
    assert end.status == "completed" and end.text == "the real answer"


async def test_chat_stream_without_the_usage_chunk_it_asked_for_is_continued(make_agent, fake_server) -> None:
    """L3: text, ``finish_reason: stop`` and ``[DONE]`` but no usage chunk although the request set
    ``stream_options.include_usage``: the stream was cut; the text is kept and continued."""
    fake_server.enqueue([Text("Partial text"), GatewayCut()], [Text(", finished."), Usage(input=30, output=3)])
    agent = await make_agent("openai-completions")
    events = await collect(agent, "question")
    assert fake_server.requests[0].json["stream_options"] == {"include_usage": True}
    retries = [e for e in events if e.type == "retry"]
    assert [r.kind for r in retries] == ["dropped"] and "usage" in retries[0].reason
    assert text_of(events) == "Partial text, finished."
    assert final(events).status == "completed"


async def test_an_empty_normal_finish_is_a_drop_even_with_output_tokens(make_agent, fake_server) -> None:
    """L2: LiteLLM translating Anthropic reports a cut as ``stop`` with the upstream's first
    output-token count (1), so usage cannot tell a cut from an answer: any normal finish with no
    content at all is a drop; ten of them fail the run naming the cause."""
    fake_server.enqueue(*([Usage(input=30, output=1)] for _ in range(11)))
    agent = await make_agent("anthropic-messages")
    events = await collect(agent, "question")
    end = final(events)
    assert end.status == "failed" and "interrupted 10 times" in (end.error or "")
    assert "no content" in (end.error or "")


LITELLM_UNSUPPORTED = (
    "litellm.UnsupportedParamsError: openai does not support parameters: ['reasoning_effort'], for "
    "model=my-local-model. To drop these, set `litellm.drop_params=True` or for proxy:\n\n"
    "`litellm_settings:\n drop_params: true`\n."
)


@pytest.mark.parametrize(
    ("api_kind", "parameter"),
    [("openai-completions", "reasoning_effort"), ("anthropic-messages", "thinking"), ("openai-responses", "reasoning")],
)
async def test_a_refused_reasoning_parameter_names_it_and_the_fix(
    make_agent, fake_server, api_kind: str, parameter: str
) -> None:
    """M2/L7: an unknown model id is assumed to reason, so reasoning parameters go out; a gateway
    answering 400 UnsupportedParamsError ends the run, unretried, with an error that names the
    refused parameter and both fixes (``model_attributes.reasoning=false``, ``drop_params``)."""
    message = LITELLM_UNSUPPORTED.replace("reasoning_effort", parameter)
    body = {"error": {"message": message, "type": "None", "param": None, "code": "400"}}
    fake_server.enqueue([HttpError(400, body=body)])
    agent = await make_agent(api_kind, model="my-local-model", effort="high")
    events = await collect(agent, AgentInput(prompt="hi"))
    end = final(events)
    assert end.status == "failed" and len(fake_server.requests) == 1
    error = end.error or ""
    assert f"refused the parameter(s) {parameter}" in error
    assert '"reasoning": false' in error and "drop_params" in error
