"""Compaction planning: where the cut goes, chunking, oversize detection (SPEC C3, C4, C5).

Property-based over random transcripts of user turns, assistant responses with tool calls
and their tool results, cut off at any point (so the newest message may be of any kind).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import cycle, islice

from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.compaction.plan import (
    SUMMARY_OPEN,
    build_merge_request,
    build_summary_request,
    find_cut_point,
    is_summary_message,
    plan_compaction,
    render_transcript,
    should_compact,
    summary_message,
    summary_text_of,
    touched_paths,
)
from agentcore.context.estimate import estimate_message_tokens, estimate_text_tokens
from agentcore.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    user_text,
)

VOCABULARY = "the agent reads files edits code runs tests and reports what changed in the repository".split()


def words(count: int) -> str:
    return " ".join(islice(cycle(VOCABULARY), count))


@st.composite
def transcripts(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    call_number = 0
    for _ in range(draw(st.integers(1, 8))):
        messages.append(user_text(words(draw(st.integers(1, 300)))))
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                call_number += 1
                calls.append(ToolCall(f"call-{call_number}", "read", {"path": f"src/f{call_number}.py"}))
            text = words(draw(st.integers(0, 60)))
            messages.append(AssistantMessage([TextContent(text), *calls], stop_reason="tool_use"))
            for call in calls:
                output = words(draw(st.integers(0, 800)))
                messages.append(ToolResultMessage(call.id, call.name, [TextContent(output)]))
        messages.append(AssistantMessage([TextContent(words(draw(st.integers(1, 200))))]))
    end = draw(st.integers(1, len(messages)))
    return messages[:end]


def tokens(messages: Sequence[Message]) -> int:
    return sum(map(estimate_message_tokens, messages))


def recent_window_start(messages: Sequence[Message], keep: int) -> int:
    """The spec's recent window: the longest suffix within ``keep`` (at least the newest message)."""
    start = len(messages) - 1
    while start > 0 and tokens(messages[start - 1 :]) <= keep:
        start -= 1
    return start


def is_turn_start(message: Message) -> bool:
    return isinstance(message, UserMessage | AssistantMessage)


# --- should_compact ---------------------------------------------------------------------------------


def test_should_compact_at_90_percent() -> None:
    assert not should_compact(89_999, 100_000, reserve_tokens=0)
    assert should_compact(90_000, 100_000, reserve_tokens=0)


def test_reserve_tokens_can_demand_earlier_compaction() -> None:
    assert should_compact(70_001, 100_000, reserve_tokens=30_000)
    assert not should_compact(70_000, 100_000, reserve_tokens=30_000)


def test_unknown_window_never_triggers() -> None:
    assert not should_compact(10**9, 0, reserve_tokens=1000)


# --- find_cut_point -----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(transcripts(), st.integers(0, 6000))
def test_cut_point_properties(messages: list[Message], keep: int) -> None:
    cut = find_cut_point(messages, keep_recent_tokens=keep)
    kept = messages[cut:]

    # The newest message is always kept.
    assert 0 <= cut <= len(messages) - 1

    # Never cut right before a tool result, and never separate a result from its call.
    if cut > 0:
        assert not isinstance(messages[cut], ToolResultMessage)
    kept_call_ids = {call.id for m in kept if isinstance(m, AssistantMessage) for call in m.tool_calls}
    for message in kept:
        if isinstance(message, ToolResultMessage):
            assert message.tool_call_id in kept_call_ids

    # Everything fits → nothing to summarize.
    if tokens(messages) <= keep:
        assert cut == 0

    # The kept part fits the budget unless no later turn start could have been cut at.
    if cut > 0 and tokens(kept) > keep:
        assert not any(is_turn_start(messages[j]) for j in range(cut + 1, len(messages)))

    # Aligned to the earliest user turn in the recent window when there is one.
    start = recent_window_start(messages, keep)
    users_in_window = [j for j in range(start, len(messages)) if isinstance(messages[j], UserMessage)]
    if users_in_window and start > 0:
        assert cut == users_in_window[0]
    elif start > 0:
        assistants_in_window = [j for j in range(start, len(messages)) if isinstance(messages[j], AssistantMessage)]
        if assistants_in_window:
            assert cut == assistants_in_window[0]


def test_cut_falls_back_to_the_latest_assistant_turn() -> None:
    messages: list[Message] = [
        user_text(words(50)),
        AssistantMessage([TextContent("ok"), ToolCall("c1", "read", {"path": "a"})]),
        ToolResultMessage("c1", "read", [TextContent(words(40))]),
        AssistantMessage([TextContent("next"), ToolCall("c2", "read", {"path": "b"})]),
        ToolResultMessage("c2", "read", [TextContent(words(400))]),
    ]
    assert find_cut_point(messages, keep_recent_tokens=100) == 3


def test_single_message_is_never_summarized_automatically() -> None:
    assert find_cut_point([user_text(words(5000))], keep_recent_tokens=10) == 0
    assert find_cut_point([], keep_recent_tokens=10) == 0


def test_custom_estimate_is_used() -> None:
    messages: list[Message] = [user_text("a"), AssistantMessage([TextContent("b")]), user_text("c")]
    assert find_cut_point(messages, keep_recent_tokens=1, estimate=lambda m: 1) == 2
    assert find_cut_point(messages, keep_recent_tokens=3, estimate=lambda m: 1) == 0


# --- plan_compaction --------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    transcripts(),
    st.integers(1500, 20_000),
    st.integers(100, 1000),
    st.integers(0, 4000),
    st.booleans(),
)
def test_plan_chunks_fit_and_partition(
    messages: list[Message], window: int, max_summary: int, keep: int, force: bool
) -> None:
    plan = plan_compaction(
        messages,
        window=window,
        reserve_tokens=max_summary,
        keep_recent_tokens=keep,
        max_summary_tokens=max_summary,
        force=force,
    )
    assert list(plan.to_summarize) + list(plan.kept) == messages
    assert plan.cut_index == len(plan.to_summarize)
    if force:
        assert plan.kept == ()
    else:
        assert plan.cut_index == find_cut_point(messages, keep_recent_tokens=keep)
    if plan.oversize:
        assert plan.chunks == ()
        assert not plan.needed
        error = plan.oversize_error()
        assert error is not None and "Shorten" in error
        return
    assert [m for chunk in plan.chunks for m in chunk] == list(plan.to_summarize)
    assert all(chunk for chunk in plan.chunks)
    for chunk in plan.chunks:
        system, user = build_summary_request(chunk)
        assert estimate_text_tokens(system) + estimate_text_tokens(user) + max_summary <= window
    for message in plan.kept:
        assert estimate_message_tokens(message) <= window - max_summary


def test_history_that_overflows_is_split_into_chunks() -> None:
    messages: list[Message] = []
    for turn in range(12):
        messages.append(user_text(f"step {turn}: " + words(1500)))
        messages.append(AssistantMessage([TextContent(words(1500))]))
    plan = plan_compaction(messages, window=6000, reserve_tokens=500, keep_recent_tokens=1000, max_summary_tokens=800)
    assert plan.needed
    assert len(plan.chunks) > 2
    assert plan.tokens_before > 6000


def test_a_single_oversize_tool_result_is_reported() -> None:
    messages: list[Message] = [
        user_text("dump the log"),
        AssistantMessage([ToolCall("c1", "bash", {"command": "cat huge.log"})], stop_reason="tool_use"),
        ToolResultMessage("c1", "bash", [TextContent(words(30_000))]),
    ]
    plan = plan_compaction(
        messages, window=16_000, reserve_tokens=1000, keep_recent_tokens=2000, max_summary_tokens=1000
    )
    assert plan.oversize
    assert plan.oversize_index == 2
    assert plan.oversize_tokens > plan.oversize_limit == 15_000
    error = plan.oversize_error()
    assert error is not None
    assert "'bash'" in error and "Shorten" in error


def test_plan_validates_settings() -> None:
    import pytest

    from agentcore.errors import InputValidationError

    with pytest.raises(InputValidationError) as caught:
        plan_compaction([], window=0, reserve_tokens=0, keep_recent_tokens=0, max_summary_tokens=10)
    assert caught.value.field == "window"
    with pytest.raises(InputValidationError) as caught:
        plan_compaction([], window=10, reserve_tokens=-1, keep_recent_tokens=0, max_summary_tokens=10)
    assert caught.value.field == "reserve_tokens"


def test_empty_transcript_plans_nothing() -> None:
    plan = plan_compaction([], window=1000, reserve_tokens=0, keep_recent_tokens=0, max_summary_tokens=100, force=True)
    assert not plan.needed
    assert plan.chunks == ()


# --- prompts and the summary message --------------------------------------------------------------


def test_summary_request_lists_paths_requests_and_previous_summary() -> None:
    messages: list[Message] = [
        summary_message("Goal: migrate the build to uv."),
        user_text("Please update pyproject.toml and README.md"),
        AssistantMessage(
            [
                ToolCall("c1", "read", {"path": "pyproject.toml"}),
                ToolCall("c2", "edit", {"file_path": "README.md", "old": "a", "new": "b"}),
                ToolCall("c3", "grep", {"pattern": "uv", "paths": ["src", "docs/index.md"]}),
            ],
            stop_reason="tool_use",
        ),
        ToolResultMessage("c1", "read", [TextContent("[project]\nname = 'x'\n" + "x" * 5000)]),
        ToolResultMessage("c2", "edit", [TextContent("edited")]),
        ToolResultMessage("c3", "grep", [TextContent("docs/index.md:3: uv")]),
    ]
    system, user = build_summary_request(messages, instructions="Focus on the build.")
    assert "Unfinished work" in system
    assert "<previous-summary>\nGoal: migrate the build to uv.\n</previous-summary>" in user
    assert "- modified: README.md" in user
    assert "- read: pyproject.toml" in user
    assert "- read: docs/index.md" in user
    assert '"Please update pyproject.toml and README.md"' in user
    assert "Focus on the build." in user
    assert "characters omitted" in user  # long tool output is clipped
    assert SUMMARY_OPEN not in user  # the earlier summary is not repeated as conversation


def test_touched_paths_are_deterministic_and_deduplicated() -> None:
    calls = [
        ToolCall("1", "read", {"path": "b.py"}),
        ToolCall("2", "read", {"path": "a.py"}),
        ToolCall("3", "write", {"path": "a.py", "content": "x"}),
        ToolCall("4", "read", {"path": "b.py"}),
        ToolCall("5", "bash", {"command": "ls", "output_file": "out.txt"}),
    ]
    messages: list[Message] = [AssistantMessage(list(calls))]
    assert touched_paths(messages) == (["b.py", "out.txt"], ["a.py"])


def test_merge_request_keeps_order() -> None:
    system, user = build_merge_request(["first part", "second part"])
    assert "merging" in system
    assert user.index('part="1" of="2"') < user.index("first part") < user.index('part="2" of="2"')


def test_summary_message_round_trips_and_is_marked() -> None:
    message = summary_message("  The user wants X.\n")
    assert isinstance(message, UserMessage)
    assert is_summary_message(message)
    assert summary_text_of(message) == "The user wants X."
    assert "summary" in render_transcript([message]).lower()
    assert not is_summary_message(user_text("hello"))
    assert summary_text_of(AssistantMessage([TextContent("x")])) is None


def test_chinese_prompts_are_supported() -> None:
    system, user = build_summary_request([user_text("请把上下文压缩一下"), AssistantMessage([TextContent("好的")])])
    assert "请把上下文压缩一下" in user
    assert "language the user writes in" in system
