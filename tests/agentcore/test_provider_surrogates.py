"""Lone UTF-16 surrogates from the wire never reach the store (SPEC P1, D1, L2).

A proxy that slices UTF-16 sends half an emoji as a JSON escape (``"bad \\ud83d here"``).
``json.loads`` turns that into a Python str no UTF-8 store can hold. The adapters replace
lone surrogates with U+FFFD where they decode wire JSON, so the run ends normally and every
paid response keeps its usage row — through the real runtime, on memory and SQLite stores,
for all three protocols, in text, thinking and tool-call arguments.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentTool, ToolResult
from agentcore.providers import create_provider
from agentcore.testing import (
    FakeProviderServer,
    HttpError,
    StreamError,
    Text,
    Thinking,
    ToolCall,
    Usage,
    WebSearch,
)
from agentcore.testing.anthropic_encoder import AnthropicEncoder
from agentcore.testing.completions_encoder import CompletionsEncoder
from agentcore.testing.responses_encoder import ResponsesEncoder
from tests.agentcore.provider_fixtures import collect, make_model, make_request
from tests.conftest import API_KINDS
from tests.helpers import collect as run_agent
from tests.helpers import final

LONE_HIGH = "\ud83d"
LONE_LOW = "\ude00"
REPLACEMENT = "\ufffd"


async def _echo(arguments: dict[str, Any], ctx: Any) -> ToolResult:
    return ToolResult.text(f"echo {arguments.get('word')}")


ECHO = AgentTool(
    name="echo",
    description="Echo a word back.",
    parameters={"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    execute=_echo,
    read_only=True,
    replay="safe",
)


def _usage_rows(database: Path | None, agent: Any) -> list[str]:
    """Record ids of the usage ledger, read from the SQLite file itself when there is one."""
    if database is None:
        return sorted(agent.log.usage)
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as conn:
        return sorted(row[0] for row in conn.execute("SELECT record_id FROM usage"))


@pytest.fixture(params=["memory", "sqlite"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    return tmp_path / "store.sqlite" if request.param == "sqlite" else None


async def _run(make_agent: Any, api_kind: str, database: Path | None, prompt: str = "go") -> tuple[Any, list[Any]]:
    options: dict[str, Any] = {"extra_tools": [ECHO]}
    if database is not None:
        options["database_path"] = str(database)
    agent = await make_agent(api_kind, **options)
    return agent, await run_agent(agent, prompt)


def _assert_every_response_settled(events: list[Any], server: FakeProviderServer, rows: list[str]) -> None:
    usage_events = [e for e in events if e.type == "usage"]
    assert len(usage_events) == len(server.requests), "each paid response reports its usage"
    assert len(rows) == len(server.requests), "each paid response has a usage row in the store"
    assert sorted(e.record_id for e in usage_events) == rows


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_lone_surrogate_in_text_becomes_replacement_character(
    make_agent, fake_server, database, api_kind: str
) -> None:
    """P1/D1: `"bad \\ud83d here"` as a text delta → U+FFFD, an `end` event, a usage row."""
    fake_server.enqueue([Text(f"bad {LONE_HIGH} here, {LONE_LOW} too")])
    agent, events = await _run(make_agent, api_kind, database)
    end = final(events)
    assert end.status == "completed", end.error
    assert end.text == f"bad {REPLACEMENT} here, {REPLACEMENT} too"
    assert "".join(e.delta for e in events if e.type == "text_delta") == end.text
    assert agent.read_transcript()[-1]["content"][0]["text"] == end.text
    _assert_every_response_settled(events, fake_server, _usage_rows(database, agent))


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_lone_surrogate_in_thinking_becomes_replacement_character(
    make_agent, fake_server, database, api_kind: str
) -> None:
    """P1/D1: a lone surrogate in reasoning deltas is stored as U+FFFD."""
    fake_server.enqueue([Thinking(f"hmm {LONE_HIGH} hmm", chunk_size=64), Text("answer")])
    agent, events = await _run(make_agent, api_kind, database)
    end = final(events)
    assert end.status == "completed", end.error
    assert "".join(e.delta for e in events if e.type == "thinking_delta") == f"hmm {REPLACEMENT} hmm"
    thinking = [b for b in agent.read_transcript()[-1]["content"] if b["type"] == "thinking"]
    assert thinking and thinking[0]["thinking"] == f"hmm {REPLACEMENT} hmm"
    _assert_every_response_settled(events, fake_server, _usage_rows(database, agent))


@pytest.mark.parametrize("api_kind", API_KINDS)
@pytest.mark.parametrize("escaped", [False, True], ids=["in-fragment", "escaped-in-arguments"])
async def test_lone_surrogate_in_tool_arguments_reaches_the_tool_as_replacement(
    make_agent, fake_server, database, api_kind: str, escaped: bool
) -> None:
    """P1/D1: a lone surrogate in an argument fragment, or as a ``\\ud83d`` escape inside
    the arguments' own JSON text, reaches the tool and the store as U+FFFD; both paid
    responses (text + tool call, answer) keep their usage rows."""
    word = f"x{LONE_HIGH}y"
    call = ToolCall("echo", {"word": word}) if escaped else ToolCall("echo", raw_arguments=f'{{"word": "{word}"}}')
    fake_server.enqueue([Text(f"look {LONE_HIGH}"), call], [Text(f"done {LONE_LOW}")])
    agent, events = await _run(make_agent, api_kind, database)
    end = final(events)
    assert end.status == "completed", end.error
    assert end.text == f"done {REPLACEMENT}"
    tool_ends = [e for e in events if e.type == "tool" and e.phase == "end"]
    assert [e.result for e in tool_ends] == [f"echo x{REPLACEMENT}y"]
    blocks = [b for m in agent.read_transcript() if m["role"] == "assistant" for b in m["content"]]
    assert [b["arguments"] for b in blocks if b["type"] == "tool_call"] == [{"word": f"x{REPLACEMENT}y"}]
    assert [b["text"] for b in blocks if b["type"] == "text"] == [f"look {REPLACEMENT}", f"done {REPLACEMENT}"]
    _assert_every_response_settled(events, fake_server, _usage_rows(database, agent))


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_surrogate_pair_written_as_two_escapes_is_the_emoji(make_agent, fake_server, api_kind: str) -> None:
    """A valid pair sent as ``"\\ud83d\\ude00"`` (how ASCII-only JSON writes 😀) decodes intact."""
    fake_server.enqueue([Text(f"ok \U0001f600 fine {LONE_HIGH}")])
    agent, events = await _run(make_agent, api_kind, None)
    assert final(events).text == f"ok \U0001f600 fine {REPLACEMENT}"
    assert agent.read_transcript()[-1]["content"][0]["text"] == final(events).text


@pytest.mark.parametrize("api_kind", API_KINDS)
async def test_a_pair_sliced_across_two_deltas_is_two_replacement_characters(
    make_agent, fake_server, api_kind: str
) -> None:
    """Each delta is decoded on its own, so a pair cut between two events cannot be rejoined:
    each half is lone and becomes U+FFFD (documented), and the run still completes."""
    fake_server.enqueue([Text("a\U0001f600b", chunks=["a" + LONE_HIGH, LONE_LOW + "b"])])
    _, events = await _run(make_agent, api_kind, None)
    assert final(events).text == f"a{REPLACEMENT}{REPLACEMENT}b"


def test_fake_server_writes_surrogates_as_raw_json_escapes() -> None:
    """T5: the fake server sends a lone surrogate as a ``\\ud83d`` JSON escape on every
    protocol (the bytes a UTF-16-slicing proxy produces; a raw surrogate is not UTF-8 at all),
    and an emoji as the two escapes of its pair."""
    for encoder_cls in (ResponsesEncoder, AnthropicEncoder, CompletionsEncoder):
        encoder = encoder_cls("m", Usage(), {})
        text = b"".join(encoder.text(Text(f"bad {LONE_HIGH} here \U0001f600", chunk_size=64)))
        thinking = b"".join(encoder.thinking(Thinking(f"t{LONE_HIGH}", chunk_size=64)))
        call = ToolCall("echo", raw_arguments=f'{{"w": "{LONE_HIGH}"}}', argument_chunks=1)
        arguments = b"".join(encoder.tool_call(call))
        assert b"bad \\ud83d here \\ud83d\\ude00" in text, encoder_cls.__name__
        assert b"t\\ud83d" in thinking, encoder_cls.__name__
        assert b'\\"w\\": \\"\\ud83d\\"' in arguments, encoder_cls.__name__
        (text + thinking + arguments).decode("utf-8")


def _strings(value: Any) -> list[str]:
    """Every str reachable from a stream event (dataclasses, dicts, lists)."""
    if isinstance(value, str):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [s for f in dataclasses.fields(value) for s in _strings(getattr(value, f.name))]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []


SEARCH = WebSearch(f"query {LONE_HIGH}", [{"url": f"https://example.com/{LONE_HIGH}", "title": f"t{LONE_LOW}"}])
ADAPTER_SCRIPTS = {
    "web-search": [SEARCH, Text(f"cited {LONE_HIGH}")],
    "tool-name-and-id": [ToolCall(f"echo{LONE_HIGH}", {"word": "w"}, id=f"call{LONE_LOW}")],
    "http-error-message": [HttpError(500, message=f"upstream {LONE_HIGH} failed")],
    "stream-error-message": [Text("x"), StreamError(f"boom {LONE_HIGH}")],
    "signature": [Thinking("t", signature=f"sig{LONE_HIGH}"), Text("a")],
}


@pytest.mark.parametrize("api_kind", API_KINDS)
@pytest.mark.parametrize("script", list(ADAPTER_SCRIPTS))
async def test_no_string_an_adapter_yields_holds_a_lone_surrogate(fake_server, api_kind: str, script: str) -> None:
    """P1: web-search data, tool names and ids, error messages and signatures are sanitised
    in the same decoding path: every string of every stream event encodes as UTF-8."""
    fake_server.enqueue(ADAPTER_SCRIPTS[script])
    provider = create_provider(api_kind)
    try:
        out = await collect(provider, make_request(make_model(api_kind, fake_server.base_url), web_search=True))
    finally:
        await provider.aclose()
    strings = _strings(out.events)
    for text in strings:
        text.encode("utf-8")
    if (api_kind, script) != ("openai-completions", "signature"):  # Chat Completions has no signatures
        replaced = [t for t in strings if REPLACEMENT in t or "\\ufffd" in t]  # Responses keeps its item as JSON
        assert replaced, "the surrogate arrived and was replaced"
