"""The static context estimate is remembered by its text, across runtimes (SPEC C1, C2; issue 25).

Every runtime of a host carries the same system prompt and tool definitions; their estimate
is a pure function of that text, so it is computed once per process and looked up after.
These tests hold the two things that matter: the numbers are exactly what estimating afresh
gives, and a second runtime's first turn really looks them up instead of estimating again.
"""

from __future__ import annotations

import copy
from typing import Any

from agentcore.context.estimate import (
    ContextTracker,
    estimate_static_context_tokens,
    estimate_text_tokens,
    estimate_tool_tokens,
    static_text_tokens,
)
from agentcore.prompts import load_prompt
from agentcore.testing import Text
from agentcore.tools.builtin import builtin_tools
from tests.helpers import collect, final


def _fresh_tool_estimate(tool: Any) -> int:
    """The definition estimated with the memo emptied first: what a cold process computes."""
    static_text_tokens.cache_clear()
    return estimate_tool_tokens(tool)


def test_remembered_estimates_equal_fresh_ones_for_every_builtin_tool_and_prompt() -> None:
    """C2: a warm lookup gives the cold estimate, for each built-in tool and the prompts."""
    for tool in builtin_tools():
        cold = _fresh_tool_estimate(tool)
        assert estimate_tool_tokens(tool) == cold
        assert static_text_tokens(tool.description) == estimate_text_tokens(tool.description)
    for name in ("system.md", "plan.md", "i-have-adhd.md"):
        text = load_prompt(name)
        static_text_tokens.cache_clear()
        cold = estimate_static_context_tokens(system_prompt=text, sections=["notes " * 40])
        assert estimate_static_context_tokens(system_prompt=text, sections=["notes " * 40]) == cold
        assert static_text_tokens(text) == estimate_text_tokens(text)


def test_a_schema_changed_in_place_is_estimated_anew() -> None:
    """The memo is keyed by the definition's text, not by the object: a tool whose schema
    grows after a first estimate is counted with its new schema."""
    tool = {"name": "lookup", "description": "Find a record.", "parameters": {"type": "object", "properties": {}}}
    before = estimate_tool_tokens(tool)
    tool["parameters"]["properties"] = {f"field_{i}": {"type": "string"} for i in range(30)}
    after = estimate_tool_tokens(tool)
    assert after > before
    assert after == _fresh_tool_estimate(copy.deepcopy(tool))


def test_trackers_of_two_runtimes_count_the_same_static_context() -> None:
    """Two trackers given equal (not identical) prompts and tools report equal static tokens."""
    prompt = load_prompt("system.md")
    first = ContextTracker(system_prompt=prompt, tools=builtin_tools())
    second = ContextTracker(system_prompt="".join(list(prompt)), tools=builtin_tools())
    assert first.static_tokens == second.static_tokens > 0


async def test_a_second_runtimes_first_turn_looks_the_static_context_up(make_agent, fake_server) -> None:
    """Issue 25: the second runtime's first configure estimates no static text afresh: every
    text it needs (its system prompt, each tool's name, description and schema) is a lookup."""
    static_text_tokens.cache_clear()
    fake_server.enqueue([Text("one")], [Text("two")])
    first = await make_agent("openai-completions")
    assert final(await collect(first, "hi")).status == "completed"
    warm = static_text_tokens.cache_info()
    second = await make_agent("openai-completions")
    assert final(await collect(second, "hi")).status == "completed"
    after = static_text_tokens.cache_info()
    assert after.misses == warm.misses, "the second runtime estimated static text afresh"
    assert after.hits - warm.hits >= 1 + 3 * len(builtin_tools())
