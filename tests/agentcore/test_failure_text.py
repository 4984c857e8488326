"""Text from the caller's side enters the store as valid UTF-8, or is refused before anything is
written (D5, PL4; issue 22).

A host hook is the caller's code and may raise with any text: an ``approve_plan`` that raised
``RuntimeError('…\\ud800')`` made the rejection it stands for (its notes are the exception's
text) refuse to commit (``StoreError: … not valid UTF-8``), and the run ended with a store error.
The hook's text is repaired where the decision is committed, like tool results (a lone surrogate
becomes ``\\ud800``). Text a caller hands in — resume answers, notes, a system prompt, session
commands — is refused at the boundary, naming the field, with the store unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentcore import AgentHost, AgentInput, InputValidationError
from agentcore.session.commands import parse_command
from agentcore.testing.steps import Text


async def test_a_plan_hook_raising_a_lone_surrogate_rejects_with_repaired_notes_and_the_run_goes_on(
    make_agent, fake_server, tmp_path: Path
) -> None:
    verdicts = iter([RuntimeError("the reviewer broke: \ud800"), True])

    def review(payload: object) -> bool:
        verdict = next(verdicts)
        if isinstance(verdict, Exception):
            raise verdict
        return verdict

    fake_server.enqueue([Text("1. Do the thing.")], [Text("1. Do the thing, carefully.")], [Text("Done.")])
    agent = await make_agent(database_path=str(tmp_path / "s.sqlite"))
    events = [
        e
        async for e in agent.run(
            AgentInput(prompt="plan it", request_id="r1", agent="plan"), AgentHost(approve_plan=review)
        )
    ]
    decisions = [e for e in events if e.type == "approval"]
    assert [d.decision for d in decisions] == ["rejected", "approved"]
    assert decisions[0].notes == "the reviewer broke: \\ud800"
    assert events[-1].type == "end" and events[-1].status == "completed"
    assert "the reviewer broke: \\\\ud800" in json.dumps(fake_server.requests[1].json)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"ask_resume": {"answers": {"scope": "Small \ud800"}}}, "ask_resume.answers.scope"),
        ({"plan_resume": {"approval_id": "a1", "approved": False, "notes": "no \udc80"}}, "plan_resume.notes"),
        ({"system_prompt": "be brief \ud801"}, "system_prompt"),
        ({"image_files": ["pic\ud800.png"]}, "image_files.0"),
    ],
)
def test_caller_text_with_a_lone_surrogate_is_refused_naming_the_field(
    overrides: dict[str, object], field: str
) -> None:
    with pytest.raises(InputValidationError) as refused:
        AgentInput(prompt="hi", request_id="r1", **overrides)
    assert refused.value.field == field and "lone surrogate" in str(refused.value)


@pytest.mark.parametrize(
    ("command", "field"),
    [
        ({"type": "submit", "request_id": "s1", "prompt": "hi \ud800"}, "prompt"),
        (
            {"type": "resume", "request_id": "s2", "input_id": "r1", "ask_resume": {"answers": {"q": ["\udc80"]}}},
            "ask_resume.answers.q.0",
        ),
    ],
)
def test_a_session_command_with_a_lone_surrogate_is_refused_naming_the_field(
    command: dict[str, object], field: str
) -> None:
    """S1: commands are parsed (and so refused) before any of them touches the store."""
    with pytest.raises(InputValidationError) as refused:
        parse_command(command)
    assert refused.value.field == field and "lone surrogate" in str(refused.value)
