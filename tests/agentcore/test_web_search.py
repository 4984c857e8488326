"""Provider-native web search through the loop (SPEC P2)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentcore import AgentInput, InputValidationError
from agentcore.testing.steps import Stop, Text, WebSearch
from tests.helpers import collect, final

SOURCES = [{"url": "https://example.org/release", "title": "Release notes"}]
SEARCH_ON = {"web_search": True}


def search_tools(request: Any) -> list[dict[str, Any]]:
    return [t for t in request.json.get("tools", []) if "web_search" in str(t.get("type", ""))]


@pytest.mark.parametrize(
    ("api_kind", "tool"),
    [
        ("openai-responses", {"type": "web_search"}),
        ("anthropic-messages", {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}),
    ],
)
async def test_search_events_sources_and_native_replay(make_agent, fake_server, api_kind: str, tool: dict) -> None:
    """P2: the search tool is sent; web_search and sources events arrive; the native search
    content is stored with the answer and sent back to the same model on the next turn."""
    fake_server.enqueue([WebSearch("latest release", SOURCES), Text("Version 2 is out.")], [Text("ok")])
    agent = await make_agent(api_kind, model_attributes=SEARCH_ON)
    events = await collect(agent, "what is new?")
    assert final(events).status == "completed"
    assert search_tools(fake_server.requests[0]) == [tool]
    statuses = [e.search["status"] for e in events if e.type == "web_search"]
    assert statuses[0] == "running" and statuses[-1] == "success"
    sources = [s["url"] for e in events if e.type == "sources" for s in e.sources]
    assert "https://example.org/release" in sources
    assert any(block["type"] == "native" for block in agent.read_transcript()[1]["content"])
    await collect(agent, "thanks")
    assert "example.org/release" in json.dumps(fake_server.requests[1].json), "native content replayed"


@pytest.mark.parametrize("api_kind", ["openai-responses", "anthropic-messages"])
async def test_sources_are_stored_with_the_answer(make_agent, fake_server, api_kind: str, tmp_path) -> None:
    """P2/W13: the ``sources`` an answer cited (titles and links) are kept with the assistant
    message, so a transcript read after a reopen shows them as the live run did; a message
    that cited nothing has no ``sources``."""
    database = str(tmp_path / "store.sqlite")
    fake_server.enqueue([WebSearch("latest release", SOURCES), Text("Version 2 is out.")], [Text("no search")])
    agent = await make_agent(api_kind, model_attributes=SEARCH_ON, database_path=database)
    await collect(agent, "what is new?")
    await collect(agent, "and?")
    await agent.close()
    reopened = await make_agent(api_kind, model_attributes=SEARCH_ON, database_path=database)
    answers = [m for m in reopened.read_transcript() if m["role"] == "assistant"]
    assert [{k: s[k] for k in ("url", "title")} for s in answers[0]["sources"]] == SOURCES
    assert "sources" not in answers[1]


async def test_native_content_is_not_sent_to_another_model(make_agent, fake_server) -> None:
    """P2: switching model drops the provider-native blocks from the history sent."""
    fake_server.enqueue([WebSearch("q", SOURCES), Text("found")], [Text("ok")])
    agent = await make_agent("openai-responses", model_attributes=SEARCH_ON)
    await collect(agent, "search")
    await collect(agent, AgentInput(prompt="next", model="another-model"))
    second = json.dumps(fake_server.requests[1].json)
    assert "web_search_call" not in second and "found" in second


async def test_default_follows_capability_and_run_override_wins(make_agent, fake_server) -> None:
    """P2: on by default when declared; runtime False turns it off; the run's value wins."""
    fake_server.enqueue(*([Text("ok")] for _ in range(3)))
    agent = await make_agent("openai-responses", model_attributes=SEARCH_ON)
    await collect(agent, "a")
    off = await make_agent("openai-responses", model_attributes=SEARCH_ON, web_search=False)
    await collect(off, "b")
    await collect(off, AgentInput(prompt="c", web_search=True))
    assert [bool(search_tools(r)) for r in fake_server.requests] == [True, False, True]


async def test_explicit_true_on_undeclared_endpoint_enables_it(make_agent, fake_server) -> None:
    fake_server.enqueue([Text("ok")])
    agent = await make_agent("anthropic-messages", web_search=True)
    await collect(agent, "a")
    assert search_tools(fake_server.requests[0])


@pytest.mark.parametrize(
    ("api_kind", "options"),
    [
        ("openai-completions", {"web_search": True}),
        ("openai-responses", {"web_search": True, "model_attributes": {"web_search": False}}),
    ],
)
async def test_impossible_combinations_are_input_validation(make_agent, fake_server, api_kind, options) -> None:
    """P2: True on openai-completions or on a model declaring no search → input_validation."""
    agent = await make_agent(api_kind, **{k: v for k, v in options.items() if k != "web_search"})
    with pytest.raises(InputValidationError) as info:
        await collect(agent, AgentInput(prompt="x", web_search=True))
    assert info.value.field == "web_search"
    assert fake_server.requests == [] and agent.read_transcript() == []


async def test_pause_turn_is_continued_at_most_three_times(make_agent, fake_server) -> None:
    """P2: Anthropic pause_turn is continued automatically, at most 3 times, then an error."""
    fake_server.enqueue(*([Text("searching…"), Stop("pause_turn")] for _ in range(2)), [Text("answer")])
    agent = await make_agent("anthropic-messages", model_attributes=SEARCH_ON)
    assert final(await collect(agent, "go")).status == "completed"
    fake_server.enqueue(*([Text("still…"), Stop("pause_turn")] for _ in range(4)))
    end = final(await collect(agent, "again"))
    assert end.status == "failed" and "paused the turn more than 3 times" in (end.error or "")


async def test_compaction_requests_never_carry_the_search_tool(make_agent, fake_server) -> None:
    """P2/C5: the summary request has no tools at all, so no search tool."""
    fake_server.enqueue([Text("hi")], [Text("summary")])
    agent = await make_agent("openai-responses", model_attributes=SEARCH_ON)
    await collect(agent, "hello")
    await collect(agent, "/compact")
    assert search_tools(fake_server.requests[0]) and not fake_server.requests[1].json.get("tools")
