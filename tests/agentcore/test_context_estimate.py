"""Context usage estimation and tracking (SPEC C1, C2)."""

from __future__ import annotations

import base64
import math
import statistics
import struct
import time
import zlib
from typing import Any, ClassVar

import pytest

from agentcore.context import estimate as estimate_module
from agentcore.context.estimate import (
    DEFAULT_IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    ContextTracker,
    StreamingUsage,
    UsageThrottle,
    estimate_agent_context_tokens,
    estimate_image_tokens,
    estimate_message_tokens,
    estimate_text_tokens,
    estimate_tool_tokens,
)
from agentcore.errors import InputValidationError
from agentcore.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    user_text,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def png(width: int, height: int) -> str:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + chunk + b"\x00" * 32).decode()


def jpeg(width: int, height: int) -> str:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return base64.b64encode(b"\xff\xd8" + app0 + sof + b"\x00" * 16).decode()


def gif(width: int, height: int) -> str:
    return base64.b64encode(b"GIF89a" + struct.pack("<HH", width, height) + b"\x00" * 16).decode()


def assistant(text: str = "", *, usage: Usage | None = None, calls: list[ToolCall] | None = None) -> AssistantMessage:
    content: list[Any] = [TextContent(text)] if text else []
    content.extend(calls or [])
    return AssistantMessage(content, usage=usage, stop_reason="tool_use" if calls else "stop")


def tool_result(call_id: str, text: str, name: str = "read") -> ToolResultMessage:
    return ToolResultMessage(call_id, name, [TextContent(text)])


def usage(context: int) -> Usage:
    """A usage whose context size is ``context``, split like a real cached response."""
    return Usage(input_tokens=context // 10, cached_input_tokens=context - context // 10 - 50, output_tokens=50)


# --- text -----------------------------------------------------------------------------------


def test_empty_text_is_zero_and_any_text_at_least_one() -> None:
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens(" ") == 1
    assert estimate_text_tokens("a") == 1


def test_cjk_is_counted_per_character() -> None:
    """C2: one token per Han/kana/Hangul character (and CJK punctuation), whatever the length."""
    assert estimate_text_tokens("上下文压缩" * 200) == 1000
    assert estimate_text_tokens("これは日本語です") == 8
    assert estimate_text_tokens("한국어문장") == 5
    assert estimate_text_tokens("你好，世界。") == 6


def test_english_is_not_counted_per_character() -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 20
    assert 180 <= estimate_text_tokens(text) <= 240  # ~10 tokens per sentence in o200k


def test_mixed_text_adds_up() -> None:
    cjk, latin = "实时上下文" * 10, "context usage ring " * 10
    combined = estimate_text_tokens(cjk + " " + latin)
    assert abs(combined - (estimate_text_tokens(cjk) + estimate_text_tokens(latin))) <= 2


def test_more_text_never_estimates_less() -> None:
    base = "def handler(payload: dict[str, Any]) -> None:\n    return None\n"
    assert estimate_text_tokens(base * 3) > estimate_text_tokens(base * 2) > estimate_text_tokens(base)


def test_digits_are_grouped_by_three() -> None:
    assert estimate_text_tokens("1234567890" * 30) < estimate_text_tokens("abcdefghij " * 30) * 2
    assert 60 <= estimate_text_tokens("1" * 300) <= 110  # 100 groups of three


def test_lone_surrogates_and_emoji_do_not_break_the_estimate() -> None:
    assert estimate_text_tokens("bad \ud800 surrogate") >= 3
    assert estimate_text_tokens("😀😀😀 🚀") >= 4


# --- images ---------------------------------------------------------------------------------


def test_image_tokens_from_png_dimensions() -> None:
    assert estimate_image_tokens(ImageContent(png(800, 600), "image/png")) == math.ceil(800 * 600 / 750)


def test_image_tokens_from_jpeg_and_gif_dimensions() -> None:
    assert estimate_image_tokens(ImageContent(jpeg(300, 200), "image/jpeg")) == 80
    assert estimate_image_tokens(ImageContent(gif(150, 100), "image/gif")) == 20


def test_large_images_are_scaled_and_capped() -> None:
    assert estimate_image_tokens(ImageContent(png(8000, 6000), "image/png")) == DEFAULT_IMAGE_TOKENS


def test_unreadable_image_uses_the_default() -> None:
    assert estimate_image_tokens(ImageContent("not base64 at all!!", "image/png")) == DEFAULT_IMAGE_TOKENS
    assert estimate_image_tokens(ImageContent(base64.b64encode(b"x" * 90).decode(), "image/webp")) == (
        DEFAULT_IMAGE_TOKENS
    )


def test_images_count_in_user_messages_and_tool_results() -> None:
    image = ImageContent(png(750, 100), "image/png")  # 100 tokens
    assert estimate_message_tokens(user_text("", [image])) == MESSAGE_OVERHEAD_TOKENS + 100
    result = ToolResultMessage("c1", "screenshot", [image])
    assert estimate_message_tokens(result) > 100


# --- messages, tools, static context ---------------------------------------------------------------


def test_tool_call_arguments_are_counted() -> None:
    small = assistant(calls=[ToolCall("c1", "write", {"path": "a.txt", "content": "x"})])
    big = assistant(calls=[ToolCall("c1", "write", {"path": "a.txt", "content": "word " * 500})])
    assert estimate_message_tokens(big) - estimate_message_tokens(small) >= 450


def test_tool_results_and_reasoning_are_counted() -> None:
    assert estimate_message_tokens(tool_result("c1", "line of output\n" * 100)) > 300
    thinking = AssistantMessage([ThinkingContent("let me think about this carefully " * 50)])
    assert estimate_message_tokens(thinking) > 250


def test_structured_content_counts_only_without_content() -> None:
    bare = ToolResultMessage("c1", "query", [], structured_content={"rows": list(range(100))})
    with_text = ToolResultMessage("c1", "query", [TextContent("ok")], structured_content={"rows": list(range(100))})
    assert estimate_message_tokens(bare) > estimate_message_tokens(with_text)


def test_agent_context_counts_system_prompt_sections_tools_and_messages() -> None:
    messages: list[Message] = [user_text("hello there"), assistant("hi")]
    only_messages = estimate_agent_context_tokens(messages)
    assert only_messages == sum(map(estimate_message_tokens, messages))
    tool = {"name": "read", "description": "Read a file from disk.", "parameters": {"type": "object"}}
    full = estimate_agent_context_tokens(
        messages,
        system_prompt="You are a careful coding agent. " * 20,
        tools=[tool],
        sections={"project": "Repository notes " * 30},
    )
    assert full >= only_messages + 100 + 60 + estimate_tool_tokens(tool)
    assert estimate_agent_context_tokens(messages, sections=["plain section text"]) > only_messages


def test_tool_definitions_count_schema() -> None:
    class Tool:
        name = "grep"
        description = "Search files."
        parameters: ClassVar[dict[str, Any]] = {
            "type": "object",
            "properties": {f"p{i}": {"type": "string"} for i in range(40)},
        }

    assert estimate_tool_tokens(Tool()) > estimate_tool_tokens({"name": "grep", "description": "Search files."}) + 100


# --- tracker: calibration -----------------------------------------------------------------------------


def transcript() -> list[Message]:
    return [
        user_text("read the config"),
        assistant(usage=usage(1000), calls=[ToolCall("c1", "read", {"path": "config.toml"})]),
        tool_result("c1", "key = 'value'\n" * 40),
    ]


def test_estimate_is_last_usage_plus_later_messages() -> None:
    messages = transcript()
    tracker = ContextTracker(system_prompt="system " * 100)
    assert tracker.current(messages) == estimate_agent_context_tokens(messages, system_prompt="system " * 100)
    assert tracker.record_usage(1, usage(1000), messages[1])
    assert tracker.current(messages) == 1000 + estimate_message_tokens(messages[2])


def test_billed_usage_is_never_summed() -> None:
    """C2: each request re-sends the context; the newest usage replaces, never adds to, the old one."""
    messages = transcript()
    tracker = ContextTracker()
    tracker.record_usage(1, messages[1].usage if isinstance(messages[1], AssistantMessage) else None, messages[1])
    final = assistant("done", usage=usage(1300))
    messages.append(final)
    tracker.record_usage(3, final.usage, final)
    assert tracker.current(messages) == 1300
    follow_up = user_text("thanks")
    messages.append(follow_up)
    assert tracker.current(messages) == 1300 + estimate_message_tokens(follow_up)


def test_usage_without_tokens_does_not_calibrate() -> None:
    messages = transcript()
    tracker = ContextTracker()
    assert not tracker.record_usage(1, Usage(), messages[1])
    assert not tracker.record_usage(1, None, messages[1])
    assert tracker.current(messages) == estimate_agent_context_tokens(messages)


def test_cache_tokens_are_part_of_the_calibration() -> None:
    messages = transcript()
    tracker = ContextTracker()
    tracker.record_usage(1, Usage(input_tokens=10, cached_input_tokens=900, cache_creation_tokens=80, output_tokens=10))
    assert tracker.current(messages[:2]) == 1000


def test_rewritten_list_falls_back_to_estimation() -> None:
    messages = transcript()
    tracker = ContextTracker()
    tracker.record_usage(1, usage(5000), messages[1])
    other: list[Message] = [user_text("different"), assistant("history"), tool_result("c9", "x")]
    assert tracker.current(other) == estimate_agent_context_tokens(other)
    assert tracker.current(messages[:1]) == estimate_agent_context_tokens(messages[:1])


def test_recalibrate_uses_the_last_valid_response_after_the_compaction_boundary() -> None:
    messages = [*transcript(), assistant("done", usage=usage(1500)), user_text("more")]
    tracker = ContextTracker()
    assert tracker.recalibrate(messages)
    assert tracker.current(messages) == 1500 + estimate_message_tokens(messages[-1])
    assert not tracker.recalibrate(messages, first_eligible_index=4)
    assert tracker.current(messages) == estimate_agent_context_tokens(messages)


# --- tracker: measurement, compaction, reset ------------------------------------------------------------------


def test_measurement_anchors_later_estimates() -> None:
    messages = transcript()
    tracker = ContextTracker()
    tracker.current(messages)
    tracker.set_measurement(5000, 128_000)
    assert tracker.current(messages) == 5000
    assert tracker.measured_total == 128_000
    extra = user_text("and then " * 20)
    messages.append(extra)
    assert tracker.current(messages) == 5000 + estimate_message_tokens(extra)
    reply = assistant("ok", usage=usage(7000))
    messages.append(reply)
    tracker.record_usage(len(messages) - 1, reply.usage, reply)
    assert tracker.current(messages) == 7000
    assert tracker.measured_total is None


def test_measurement_with_explicit_message_count() -> None:
    messages = transcript()
    tracker = ContextTracker()
    tracker.set_measurement(100.4, 1000, message_count=2)
    assert tracker.current(messages) == 101 + estimate_message_tokens(messages[2])


@pytest.mark.parametrize(
    ("used", "total", "field"),
    [
        (-1, 1000, "used"),
        (float("nan"), 1000, "used"),
        (float("inf"), 1000, "used"),
        ("12", 1000, "used"),
        (True, 1000, "used"),
        (10, 0, "total"),
        (10, -5, "total"),
        (10, float("inf"), "total"),
        (10, float("nan"), "total"),
        (10, None, "total"),
    ],
)
def test_measurement_validation_names_the_field(used: Any, total: Any, field: str) -> None:
    tracker = ContextTracker()
    with pytest.raises(InputValidationError) as caught:
        tracker.set_measurement(used, total)
    assert caught.value.field == field
    assert caught.value.code == "input_validation"
    assert field in caught.value.message


def test_zero_used_is_valid() -> None:
    tracker = ContextTracker()
    tracker.set_measurement(0, 1)
    assert tracker.current([]) == 0


def test_after_compaction_retained_responses_no_longer_calibrate() -> None:
    old_response = assistant("earlier answer", usage=usage(90_000))
    tracker = ContextTracker(system_prompt="be brief")
    messages: list[Message] = [user_text("q1"), old_response, user_text("q2")]
    tracker.record_usage(1, old_response.usage, old_response)
    compacted: list[Message] = [user_text("<summary>"), old_response, messages[2]]
    tracker.after_compaction(compacted)
    expected = estimate_agent_context_tokens(compacted, system_prompt="be brief")
    assert tracker.current(compacted) == expected
    assert not tracker.record_usage(1, old_response.usage, old_response)
    assert tracker.current(compacted) == expected
    fresh = assistant("new answer", usage=usage(3000))
    compacted.append(fresh)
    assert tracker.record_usage(3, fresh.usage, fresh)
    assert tracker.current(compacted) == 3000


def test_after_compaction_clears_a_measurement_too() -> None:
    messages = transcript()
    tracker = ContextTracker()
    tracker.set_measurement(50_000, 100_000, message_count=3)
    tracker.after_compaction(messages)
    assert tracker.current(messages) == estimate_agent_context_tokens(messages)


def test_reset_clears_calibration_and_measurement() -> None:
    messages = transcript()
    tracker = ContextTracker()
    tracker.record_usage(1, usage(9999), messages[1])
    tracker.reset()
    assert not tracker.calibrated
    assert tracker.current(messages) == estimate_agent_context_tokens(messages)
    tracker.set_measurement(10, 20, message_count=3)
    tracker.reset()
    assert tracker.current(messages) == estimate_agent_context_tokens(messages)


def test_per_message_estimates_are_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Message] = []
    real = estimate_module.estimate_message_tokens

    def counting(message: Message) -> int:
        calls.append(message)
        return real(message)

    monkeypatch.setattr(estimate_module, "estimate_message_tokens", counting)
    messages = transcript()
    tracker = ContextTracker()
    tracker.current(messages)
    tracker.current(messages)
    messages.append(user_text("next"))
    tracker.current(messages)
    assert len(calls) == 4


def test_incremental_estimate_of_a_long_transcript_is_fast() -> None:
    """Per new message, well under 1 ms on a 200-message transcript (cached estimates)."""
    messages: list[Message] = []
    for turn in range(50):
        messages.append(user_text(f"Please look at module {turn} and fix the failing test. " * 4))
        call = ToolCall(f"c{turn}", "read", {"path": f"src/module_{turn}.py"})
        messages.append(assistant("Reading it.", calls=[call]))
        messages.append(tool_result(f"c{turn}", "def f(x):\n    return x + 1\n" * 30))
        messages.append(assistant("Fixed: the off-by-one in f. " * 5))
    tracker = ContextTracker(system_prompt="You are a coding agent. " * 50)
    tracker.current(messages)
    timings = []
    for index in range(20):
        messages.append(user_text(f"follow-up question number {index}, with a little more detail " * 3))
        started = time.perf_counter()
        tracker.current(messages)
        timings.append(time.perf_counter() - started)
    assert statistics.median(timings) < 0.001


# --- streaming ---------------------------------------------------------------------------------


def test_throttle_emits_at_most_every_100_ms() -> None:
    clock = FakeClock()
    throttle = UsageThrottle(clock=clock)
    assert throttle.offer(10)
    clock.now = 0.05
    assert not throttle.offer(11)
    clock.now = 0.099
    assert not throttle.offer(12)
    clock.now = 0.1
    assert throttle.offer(12)
    clock.now = 0.5
    assert not throttle.offer(12)  # unchanged value: nothing to say
    assert throttle.offer(12, force=True)  # message end / after compaction: always
    clock.now = 0.51
    assert throttle.offer(13, force=True)
    assert throttle.last_value == 13


def test_streaming_usage_grows_with_deltas_and_is_throttled() -> None:
    clock = FakeClock()
    stream = StreamingUsage(1000, clock=clock)
    first = stream.take_update()
    assert first is not None and first >= 1000
    text = "The model is writing a long answer about context windows and compaction. " * 40
    for start in range(0, len(text), 7):
        stream.add_text(text[start : start + 7])
        clock.now += 0.01
        stream.take_update()
    # Splitting into deltas does not double count words cut in two.
    assert abs(stream.tokens - (1000 + MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(text))) <= 12
    clock.now += 0.01
    stream.add_text(" more")
    assert stream.take_update() is None  # within 100 ms of the last emission
    final = stream.take_update(force=True)
    assert final == stream.tokens


def test_streaming_usage_counts_cjk_and_tool_calls() -> None:
    stream = StreamingUsage(0, clock=FakeClock())
    stream.add_text("中文" * 50)
    stream.add_tool_call("write")
    stream.add_text('{"path": "notes.md"}')
    assert stream.tokens >= MESSAGE_OVERHEAD_TOKENS + 100 + 8


async def test_public_estimate_accepts_the_runtimes_own_transcript_format(make_agent, fake_server) -> None:
    """C2/R2: ``estimate_agent_context_tokens(runtime.read_transcript())`` works — message dicts,
    thinking, tool calls and tool results included — and equals the estimate of the same
    transcript as message objects (and of a mix of both)."""
    from agentcore import AgentInput
    from agentcore.messages import message_from_dict
    from agentcore.testing.steps import Stop, Text, Thinking
    from agentcore.testing.steps import ToolCall as ToolCallStep
    from tests.helpers import collect, final

    fake_server.enqueue(
        [Thinking("look first"), ToolCallStep("ls", {"path": "."}, id="call_1"), Stop("tool_use")],
        [Text("Two files: README.md and main.py.")],
    )
    agent = await make_agent()
    assert final(await collect(agent, AgentInput(prompt="what files are here?", request_id="r1"))).status == "completed"
    transcript = agent.read_transcript()
    assert [m["role"] for m in transcript] == ["user", "assistant", "tool_result", "assistant"]

    from_dicts = estimate_agent_context_tokens(transcript, system_prompt="be brief")
    objects = [message_from_dict(m) for m in transcript]
    assert from_dicts == estimate_agent_context_tokens(objects, system_prompt="be brief")
    assert from_dicts == estimate_agent_context_tokens(
        [objects[0], *transcript[1:3], objects[3]], system_prompt="be brief"
    )
    assert from_dicts > estimate_agent_context_tokens(transcript[:1], system_prompt="be brief")


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"content": []}, "messages.1"),
        ({"role": "robot", "content": []}, "messages.1"),
        ({"role": "user", "content": [{"type": "video"}]}, "messages.1"),
        ({"role": "user", "content": "a plain string is not a content list"}, "messages.1"),
        ("just text", "messages.1"),
        (None, "messages.1"),
    ],
)
def test_public_estimate_names_a_malformed_message(bad: Any, field: str) -> None:
    """C2: an entry that is neither a message nor a message dict is input_validation naming it."""
    with pytest.raises(InputValidationError) as info:
        estimate_agent_context_tokens([user_text("fine"), bad])
    assert info.value.field == field
