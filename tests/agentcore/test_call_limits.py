"""Tool-call arguments and the context window (SPEC C2, C5; issue: oversized call arguments).

A call whose arguments cannot fit the window is refused before it enters the transcript, so
it is never sent again; the context meter counts what a response holds even when the
provider under-reports its output; the estimate counts non-word runs (base64, hashes, repeats).
"""

from __future__ import annotations

import base64
import json
import os

import pytest

from agentcore.context.estimate import estimate_text_tokens
from agentcore.engine.call_limits import OMITTED_KEY
from agentcore.testing.steps import Text, ToolCall, Usage
from tests.conftest import API_KINDS
from tests.helpers import collect, final


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_oversized_call_is_refused_and_never_sent_again(make_agent, fake_server, workspace, api_kind) -> None:
    """C5: a 200 KB write on an 8k window is not run; the next request is small; the model is told why.

    200 KB stays under the runaway-output cap of an 8k output limit (256k characters), so the
    response completes and the call-limit check, not the stream bound, refuses it."""
    big = base64.b64encode(os.urandom(150_000)).decode()
    fake_server.enqueue(
        [ToolCall("write", {"path": "big.txt", "content": big}, id="w1"), Usage(input=100, output=20)],
        [Text("I will split it."), Usage(input=200, output=10)],
    )
    agent = await make_agent(api_kind, context_window=8_000, database_path=str(workspace.parent / "s.sqlite"))
    events = await collect(agent, "write the blob")
    assert final(events).status == "completed"
    assert not (workspace / "big.txt").exists(), "the oversized call never ran"
    second = json.dumps(fake_server.requests[1].json)
    assert len(second) < 50_000, f"the oversized arguments were sent again ({len(second)} bytes)"
    assert "too large for the 8,000-token context window" in second
    call = next(m for m in agent.read_transcript() if m["role"] == "assistant")["content"][0]
    assert set(call["arguments"]) == {OMITTED_KEY}
    ends = [e for e in events if e.type == "tool" and e.phase == "end"]
    assert ends and ends[0].is_error


async def test_invalid_oversized_calls_in_a_loop_do_not_grow_requests(make_agent, fake_server) -> None:
    """C5: an invalid 200 KB call repeated three times leaves every request small."""
    junk = "{" + "a" * 200_000
    fake_server.enqueue(
        *[[ToolCall("write", raw_arguments=junk, id=f"j{i}")] for i in range(3)],
        [Text("giving up")],
    )
    agent = await make_agent("openai-completions", context_window=8_000)
    assert final(await collect(agent, "go")).status == "completed"
    sizes = [len(json.dumps(request.json)) for request in fake_server.requests]
    assert len(sizes) == 4 and max(sizes) < 50_000, sizes


async def test_meter_counts_call_arguments_when_usage_underreports(make_agent, fake_server) -> None:
    """C2: a response holding ~30k tokens of arguments counts as such, whatever its usage says."""
    content = base64.b64encode(os.urandom(45_000)).decode()
    fake_server.enqueue(
        [ToolCall("write", {"path": "a.txt", "content": content}, id="w1"), Usage(input=100, output=5)],
        [Text("done"), Usage(input=40_000, output=5)],
    )
    agent = await make_agent("openai-completions", context_window=200_000)
    events = await collect(agent, "go")
    assert final(events).status == "completed"
    after_call = [e.used for e in events if e.type == "context_usage"]
    assert max(after_call) >= estimate_text_tokens(content) >= 25_000


def test_estimate_counts_non_word_runs() -> None:
    """C2: base64, hex and repeated characters cost tokens by their length, not as one word."""
    blob = base64.b64encode(os.urandom(30_000)).decode()  # 40k characters; BPE: ~27k tokens
    assert estimate_text_tokens(blob) >= len(blob) // 3
    assert estimate_text_tokens("x" * 100_000) >= 100_000 // 8  # BPE packs repeats ~8 per token
    assert estimate_text_tokens(os.urandom(10_000).hex()) >= 20_000 // 3
    assert estimate_text_tokens("!" * 10_000) >= 10_000 // 16
    prose = "The quick brown fox jumps over the lazy dog. " * 100
    assert estimate_text_tokens(prose) < len(prose) // 3, "ordinary prose is unchanged"
