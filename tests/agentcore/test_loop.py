"""The tool loop through the real adapters and the fake provider server (SPEC L1, L8, E1, E2, D1, I1)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentcore import AgentHost, AgentInput
from agentcore.testing.steps import Hang, Stop, Text, Thinking, ToolCall, Usage
from tests.conftest import API_KINDS
from tests.helpers import collect, final, text_of, types

PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_tool_loop_runs_ls_then_answers(make_agent, fake_server, api_kind: str) -> None:
    """L1: model asks for ls → the tool runs → its result goes back → the model answers."""
    fake_server.enqueue(
        [ToolCall("ls", {"path": "."}, id="call_1"), Usage(input=100, output=10)],
        [Text("There are two files."), Usage(input=150, output=8)],
    )
    agent = await make_agent(api_kind)
    events = await collect(agent, AgentInput(prompt="what files are here?", request_id="r1"))
    end = final(events)
    assert end.status == "completed"
    assert end.text == "There are two files."
    tool_events = [e for e in events if e.type == "tool"]
    assert [e.phase for e in tool_events] == ["start", "end"]
    assert tool_events[0].name == "ls" and tool_events[0].arguments == {"path": "."}
    assert "README.md" in (tool_events[1].result or "") and not tool_events[1].is_error
    assert tool_events[0].tool_call_id == tool_events[1].tool_call_id
    # The second request carried the tool result back to the model.
    second = str(fake_server.requests[1].json)
    assert "README.md" in second and "main.py" in second
    assert end.usage["calls"] == 2
    assert end.usage["input_tokens"] == 250


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_event_order_context_usage_first_and_end_last(make_agent, fake_server, api_kind: str) -> None:
    """E1/C1: context_usage before the first request; deltas in order; the end event is last.
    The chunks come further apart than the stream window, so each is released (and shown) on
    its own: several deltas (a window's chunks of one block are one delta)."""
    fake_server.enqueue(
        [Thinking("let me think"), Text("Hello world, this is streamed.", chunk_size=5, pace_s=0.03)]
    )
    agent = await make_agent(api_kind)
    events = await collect(agent, "hi")
    kinds = types(events)
    assert kinds[0] == "context_usage"
    assert kinds[-1] == "end"
    assert text_of(events) == "Hello world, this is streamed."
    assert kinds.index("thinking_delta") < kinds.index("text_delta")
    assert "usage" in kinds
    deltas = [e for e in events if e.type == "text_delta"]
    assert len(deltas) > 1, "text is streamed in several deltas"
    assert len({e.index for e in deltas}) == 1


async def test_two_parallel_tool_calls_results_in_model_order(make_agent, fake_server, workspace: Path) -> None:
    """T1/L1: two read-only calls in one response run and come back in the model's order."""
    fake_server.enqueue(
        [ToolCall("read", {"path": "main.py"}, id="a"), ToolCall("read", {"path": "README.md"}, id="b")],
        [Text("done")],
    )
    agent = await make_agent()
    events = await collect(agent, "read both")
    assert final(events).status == "completed"
    transcript = agent.read_transcript()
    results = [m for m in transcript if m["role"] == "tool_result"]
    assert [r["tool_call_id"].split("|")[0] for r in results] == ["a", "b"]
    assert "print('hello')" in results[0]["content"][0]["text"]
    assert "Demo project" in results[1]["content"][0]["text"]


async def test_same_request_id_returns_original_outcome_without_calls(make_agent, fake_server) -> None:
    """I1/D1: the same request id on the same store replays the outcome; no model request."""
    fake_server.enqueue([Text("first answer")])
    agent = await make_agent()
    first = final(await collect(agent, AgentInput(prompt="q", request_id="same")))
    again = final(await collect(agent, AgentInput(prompt="q", request_id="same")))
    assert len(fake_server.requests) == 1
    assert again.replayed and again.text == first.text == "first answer"


async def test_reusing_request_id_with_other_input_is_rejected(make_agent, fake_server) -> None:
    fake_server.enqueue([Text("ok")])
    agent = await make_agent()
    await collect(agent, AgentInput(prompt="one", request_id="rid"))
    with pytest.raises(Exception) as info:
        await collect(agent, AgentInput(prompt="two", request_id="rid"))
    assert getattr(info.value, "field", None) == "request_id"


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_cancel_mid_stream_aborts_and_reports_usage(make_agent, fake_server, api_kind: str) -> None:
    """L8: abort during the stream ends with execution_aborted, keeps usage, closes the stream."""
    fake_server.enqueue([Usage(input=42, output=3), Text("partial answer"), Hang(), Text("never sent")])
    agent = await make_agent(api_kind)
    abort = asyncio.Event()
    events: list = []

    async for event in agent.run(AgentInput(prompt="go", request_id="c1"), AgentHost(abort_signal=abort)):
        events.append(event)
        if event.type == "text_delta":  # the stream is live and shown: cancel now
            abort.set()
    end = final(events)
    assert end.status == "aborted" and end.error_code == "execution_aborted"
    assert "never sent" not in text_of(events)
    usage_events = [e for e in events if e.type == "usage"]
    assert usage_events, "the usage received before the cancel is still reported"
    if api_kind == "anthropic-messages":  # Anthropic reports input usage at message_start
        assert usage_events[0].input_tokens == 42
    await fake_server.until(lambda s: s.requests[-1].client_disconnected or s.requests[-1].completed)
    assert fake_server.requests[-1].client_disconnected


async def test_images_are_sent_as_image_content(make_agent, fake_server) -> None:
    """I1: a run with only an image attached is a valid run; the image reaches the model."""
    fake_server.enqueue([Text("a pixel")])
    agent = await make_agent()
    events = await collect(agent, AgentInput(prompt="", images=[{"data": PNG_1PX, "mime_type": "image/png"}]))
    assert final(events).status == "completed"
    assert PNG_1PX in str(fake_server.requests[0].json)


async def test_unreadable_image_file_names_the_file(make_agent, fake_server, workspace: Path) -> None:
    """I1: a non-image attachment is an error naming the file, not silently dropped."""
    agent = await make_agent()
    with pytest.raises(Exception) as info:
        await collect(agent, AgentInput(prompt="see", image_files=["main.py"]))
    assert "main.py" in str(info.value) and getattr(info.value, "field", "") == "image_files.0"
    assert fake_server.requests == []
    assert agent.read_transcript() == []


async def test_stop_reason_stop_without_tools_is_one_request(make_agent, fake_server) -> None:
    fake_server.enqueue([Text("plain"), Stop("stop")])
    agent = await make_agent()
    events = await collect(agent, "hello")
    assert final(events).text == "plain"
    assert len(fake_server.requests) == 1
