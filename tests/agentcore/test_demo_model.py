"""The offline demo model shows every feature (SPEC P3; issue 27).

Each named prompt of ``DEMO_PROMPTS`` runs against the real demo (the fake provider server on a
thread, through the real Responses adapter) and does what its ``shows`` says; the rules that
depend on timing or on a steer are checked on the responder itself with a request shaped like
the ones the runtime sends.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agentcore import AgentRuntime, create_agent
from agentcore.demo import DEMO_FILES, DEMO_PROMPTS, demo_responder, seed_demo_workspace
from agentcore.testing.fake_server import RecordedRequest
from agentcore.testing.steps import Delay, Text, Thinking, ToolCall
from tests.agentcore.session_helpers import run_with
from tests.helpers import final

DemoFactory = Callable[..., Awaitable[AgentRuntime]]


@pytest.fixture
async def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DemoFactory]:
    monkeypatch.setenv("AGENTCORE_DEMO_DELAY_MS", "0")
    opened: list[AgentRuntime] = []

    async def factory(workdir: Path | None = None, **options: Any) -> AgentRuntime:
        root = workdir or tmp_path / "work"
        root.mkdir(exist_ok=True)
        runtime = await create_agent(provider="demo", workdir=str(root), **options)
        opened.append(runtime)
        return runtime

    yield factory
    for runtime in opened:
        await runtime.close()


def tool_names(events: list[Any]) -> list[str]:
    return [e.name for e in events if e.type == "tool" and e.phase == "end"]


def request(body: dict[str, Any]) -> RecordedRequest:
    return RecordedRequest(0, "POST", "/v1/responses", "openai-responses", {}, body, None, 0.0)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "input_text", "text": text}]}


def call(name: str, arguments: dict[str, Any], call_id: str) -> list[dict[str, Any]]:
    return [{"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(arguments)}]


def output(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


TOOLS = [{"type": "function", "name": n} for n in ("ls", "read", "update_plan")]


async def test_an_empty_workspace_is_reported_empty_not_as_one_entry(demo: DemoFactory, tmp_path: Path) -> None:
    """The headline prompt in a fresh, empty workspace said "1 entry (. is empty.)"."""
    empty = tmp_path / "empty"
    empty.mkdir()
    agent = await demo(empty)
    events = await run_with(agent, "What files are here?")
    assert final(events).text == "I listed the workspace: it is empty."


async def test_a_seeded_workspace_is_listed_and_its_readme_read(demo: DemoFactory, tmp_path: Path) -> None:
    root = tmp_path / "seeded"
    written = seed_demo_workspace(root)
    assert sorted(str(p.relative_to(root)) for p in written) == sorted(DEMO_FILES)
    agent = await demo(root)
    events = await run_with(agent, DEMO_PROMPTS[0].prompt)
    assert tool_names(events) == ["ls", "read"]
    text = final(events).text
    assert "4 entries (data/, garden.py, notes/, README.md)" in text and "“# Copper Tulips”" in text


def test_seeding_never_overwrites_a_file_that_exists(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("mine\n")
    written = seed_demo_workspace(tmp_path)
    assert (tmp_path / "README.md").read_text() == "mine\n"
    assert tmp_path / "README.md" not in written and (tmp_path / "garden.py") in written


async def test_it_thinks_at_any_effort_but_off(demo: DemoFactory) -> None:
    thinking = await demo(effort="high")
    events = await run_with(thinking, "hello")
    assert "".join(e.delta for e in events if e.type == "thinking_delta").strip()
    plain = await demo(effort="off")
    assert not [e for e in await run_with(plain, "hello") if e.type == "thinking_delta"]


async def test_the_markdown_prompt_answers_with_a_table_and_a_code_block(demo: DemoFactory) -> None:
    agent = await demo()
    text = final(await run_with(agent, DEMO_PROMPTS[1].prompt)).text
    assert "| file | what it holds |\n|---|---|" in text and "```python\ndef plan(" in text


async def test_the_checklist_ticks_through_every_step_then_answers(demo: DemoFactory) -> None:
    agent = await demo(session={})
    events = await run_with(agent, {"prompt": DEMO_PROMPTS[2].prompt, "request_id": "c1"})
    assert tool_names(events) == ["update_plan"] * 4
    assert final(events).text.startswith("Done: every step of the checklist is completed.")


def test_the_checklist_and_the_long_task_pause_between_steps_at_the_default_pace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each tick after the first and each file of a long task waits a visible moment (a person
    can watch it tick, or steer), and the pauses vanish at AGENTCORE_DEMO_DELAY_MS=0."""
    monkeypatch.setenv("AGENTCORE_DEMO_DELAY_MS", "15")
    items = {"items": [{"id": "step-1", "text": "x", "status": "in_progress"}]}
    ticked = {
        "tools": TOOLS,
        "input": [user("do it with a checklist"), *call("update_plan", items, "u1"), output("u1", "ok")],
    }
    assert [s.seconds for s in demo_responder(request(ticked)) if isinstance(s, Delay)] == [1.2]
    long = {"tools": TOOLS, "input": [user("Do a long task"), *call("ls", {}, "l1"), output("l1", "a.txt\nb.txt")]}
    assert [s.seconds for s in demo_responder(request(long)) if isinstance(s, Delay)] == [1.5]
    monkeypatch.setenv("AGENTCORE_DEMO_DELAY_MS", "0")
    assert not [s for s in demo_responder(request(long)) if isinstance(s, Delay)]


async def test_the_long_task_reads_every_file_in_separate_calls(demo: DemoFactory, tmp_path: Path) -> None:
    root = tmp_path / "seeded"
    seed_demo_workspace(root)
    agent = await demo(root)
    events = await run_with(agent, DEMO_PROMPTS[3].prompt)
    assert tool_names(events) == ["ls", "read", "read"]  # the two top-level files, one call each
    assert "Reviewed 2 files:" in final(events).text and "| `garden.py` |" in final(events).text


def test_a_steer_is_acknowledged_and_a_stop_in_it_ends_the_review(monkeypatch: pytest.MonkeyPatch) -> None:
    """A steer joins the turn as a user message after a tool result: the next step says it
    heard it, and one that says stop ends the review there."""
    monkeypatch.setenv("AGENTCORE_DEMO_DELAY_MS", "0")
    history = [user("Do a long task: review every file"), *call("ls", {}, "l1"), output("l1", "a.txt\nb.txt\nc.txt")]
    steered = {"tools": TOOLS, "input": [*history, user("look at b.txt closely")]}
    steps = demo_responder(request(steered))
    said = "".join(s.text for s in steps if isinstance(s, Text))
    assert "Noted your steer: “look at b.txt closely”." in said
    assert [s.arguments for s in steps if isinstance(s, ToolCall)] == [{"path": "a.txt"}]
    stopped = {
        "tools": TOOLS,
        "input": [*history, *call("read", {"path": "a.txt"}, "r1"), output("r1", "x"), user("stop now")],
    }
    steps = demo_responder(request(stopped))
    assert not [s for s in steps if isinstance(s, ToolCall)]
    assert "Stopping the review after 1 of 3 files" in "".join(s.text for s in steps if isinstance(s, Text))


def test_a_prompt_for_another_task_after_a_stopped_long_task_starts_that_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stopped turn's last item is a tool result too: a new prompt that asks for another of
    the demo's tasks is that task, not a steer of the stopped review."""
    monkeypatch.setenv("AGENTCORE_DEMO_DELAY_MS", "0")
    stopped = [user("Do a long task: review every file"), *call("ls", {}, "l1"), output("l1", "a.txt\nb.txt")]
    body = {"tools": TOOLS, "input": [*stopped, user("Show me a Markdown sample")]}
    steps = demo_responder(request(body))
    assert not [s for s in steps if isinstance(s, ToolCall)]
    assert "## A Markdown sample" in "".join(s.text for s in steps if isinstance(s, Text))


def test_a_new_turn_after_an_answer_is_not_mistaken_for_a_steer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCORE_DEMO_DELAY_MS", "0")
    body = {
        "tools": TOOLS,
        "input": [
            user("hi"),
            {"role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
            user("Do a long task"),
        ],
    }
    steps = demo_responder(request(body))
    assert [s.name for s in steps if isinstance(s, ToolCall)] == ["ls"]
    assert "Noted your steer" not in "".join(s.text for s in steps if isinstance(s, Text))


async def test_the_script_prompt_runs_a_codemode_script_with_nested_calls(demo: DemoFactory, tmp_path: Path) -> None:
    root = tmp_path / "seeded"
    seed_demo_workspace(root)
    agent = await demo(root, session={"code_mode": {}})
    events = await run_with(agent, {"prompt": DEMO_PROMPTS[4].prompt, "request_id": "s1"})
    assert tool_names(events) == ["codemode"]
    (script,) = [e for e in events if e.type == "tool" and e.phase == "end"]
    assert not script.is_error and '"entries": 4' in script.result.replace(":4", ": 4")
    assert final(events).text.startswith("The script ran.")


async def test_the_web_search_prompt_searches_and_cites_its_sources(demo: DemoFactory) -> None:
    agent = await demo()
    events = await run_with(agent, DEMO_PROMPTS[5].prompt)
    searches = [e.search for e in events if e.type == "web_search"]
    assert searches and searches[-1]["status"] == "success" and searches[-1]["query"] == "durable agent runtimes"
    (sources,) = [e.sources for e in events if e.type == "sources"]
    assert [s["url"] for s in sources] == ["https://example.org/durable-agents", "https://example.org/effect-sandwich"]
    off = await demo(web_search=False)
    assert final(await run_with(off, DEMO_PROMPTS[5].prompt)).text.startswith("Web search is off for this session")


async def test_the_plan_prompt_asks_questions_first(demo: DemoFactory) -> None:
    from agentcore import AgentHost, AgentInput, UserInputRequired

    def ask(payload: object) -> None:
        raise UserInputRequired("a person answers")

    agent = await demo()
    prompt = next(p for p in DEMO_PROMPTS if p.mode == "plan")
    events = await run_with(agent, AgentInput(prompt=prompt.prompt, agent="plan"), host=AgentHost(approve_plan=ask))
    end = final(events)
    assert end.status == "paused" and end.pending is not None and end.pending["kind"] == "ask_user"


def test_every_named_prompt_has_a_rule_that_is_not_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """None of the suggestions falls through to "You said: …" when the session offers its tool."""
    monkeypatch.setenv("AGENTCORE_DEMO_DELAY_MS", "0")
    for prompt in DEMO_PROMPTS:
        tools = [{"type": "function", "name": n} for n in ("ls", "read", "ask_user", prompt.needs or "ls")]
        if prompt.needs == "web_search":
            tools.append({"type": "web_search"})
        body = {
            "tools": tools,
            "input": [user(prompt.prompt)],
            "instructions": "PLAN MODE" if prompt.mode == "plan" else "",
        }
        said = "".join(s.text for s in demo_responder(request(body)) if isinstance(s, Text | Thinking))
        assert "You said:" not in said, prompt.prompt


def test_compact_summarizes_the_conversation_with_the_persons_wishes() -> None:
    """C3/P3: asked to compact (the request ``build_summary_request`` makes), the demo writes a
    summary in the sections the compaction prompt asks for — the user's requests, the files
    touched, the person's instructions — not one of its canned answers."""
    from agentcore.compaction.plan import build_summary_request
    from agentcore.messages import AssistantMessage, TextContent, ToolResultMessage, user_text
    from agentcore.messages import ToolCall as Call

    messages = [
        user_text("What files are here? Read the README."),
        AssistantMessage([Call("c1", "read", {"path": "README.md"})]),
        ToolResultMessage("c1", "read", [TextContent("# Copper Tulips")]),
        AssistantMessage([TextContent("The README starts with Copper Tulips.")]),
        user_text("Show me a Markdown sample with a table and some code."),
    ]
    system, text = build_summary_request(messages, instructions="keep the README's title")
    steps = demo_responder(request({"instructions": system, "input": [user(text)]}))
    summary = "".join(step.text for step in steps if isinstance(step, Text))
    assert "## User requests" in summary and "What files are here? Read the README." in summary
    assert "read: README.md" in summary and "keep the README's title" in summary
    assert "| file |" not in summary and "offline demo" in summary


def test_markup_that_names_a_script_tag_is_echoed_not_run_as_code_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """P3/W6: the word "script" in markup (a hostile prompt's ``<script>``) is no request for a
    code-mode script: the demo echoes the prompt, which is how Studio shows markup as text."""
    monkeypatch.setenv("AGENTCORE_DEMO_DELAY_MS", "0")
    tools = [{"type": "function", "name": n} for n in ("ls", "read", "codemode")]
    for prompt in ("<script>window.__pwned=1</script>", "a script tag", "my script is broken"):
        steps = demo_responder(request({"tools": tools, "input": [user(prompt)], "instructions": ""}))
        assert "You said:" in "".join(s.text for s in steps if isinstance(s, Text)), prompt
    for prompt in ("Run a code-mode script that counts the files.", "use codemode", "run a script"):
        steps = demo_responder(request({"tools": tools, "input": [user(prompt)], "instructions": ""}))
        assert "You said:" not in "".join(s.text for s in steps if isinstance(s, Text)), prompt
