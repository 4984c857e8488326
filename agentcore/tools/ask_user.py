"""``ask_user`` (SPEC T1, PL2): the model asks the person questions in plan mode.

The engine intercepts this tool: a call pauses the run with ``user_input_required``
carrying the questions, and the answers (``ask_resume``) become the call's result, so the
same turn continues. ``execute`` is never reached in a normal run.
"""

from __future__ import annotations

from typing import Any

from agentcore.errors import ToolError
from agentcore.tools.base import AgentTool, ToolContext, ToolResult

ASK_USER = "ask_user"

ASK_USER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "questions": {
            "type": "array",
            "minItems": 1,
            "maxItems": 10,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "short stable id, e.g. 'q1'"},
                    "question": {"type": "string", "minLength": 1},
                    "options": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
                    "multi_select": {"type": "boolean", "description": "several options may be chosen"},
                    "allow_free_text": {"type": "boolean", "description": "offer an extra free-text answer"},
                },
                "required": ["question"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["questions"],
    "additionalProperties": False,
}


def normalize_questions(arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """Give every question an id and explicit flags, so hosts render them uniformly."""
    questions = []
    for number, raw in enumerate(arguments.get("questions", []), start=1):
        questions.append(
            {
                "id": str(raw.get("id") or f"q{number}"),
                "question": raw["question"],
                "options": list(raw.get("options") or []),
                "multi_select": bool(raw.get("multi_select", False)),
                "allow_free_text": bool(raw.get("allow_free_text", not raw.get("options"))),
            }
        )
    return questions


def format_answers(questions: list[dict[str, Any]], answers: dict[str, list[str] | str]) -> str:
    lines = []
    for question in questions:
        answer = answers.get(question["id"], "")
        text = ", ".join(answer) if isinstance(answer, list) else answer
        lines.append(f"Q: {question['question']}\nA: {text or '(no answer)'}")
    return "\n\n".join(lines)


async def _never_called(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    raise ToolError("ask_user is handled by the runtime")


def ask_user_tool() -> AgentTool:
    return AgentTool(
        name=ASK_USER,
        description=(
            "Ask the user one or more questions and wait for the answers. Each question may offer options "
            "(set multi_select to allow several) and an extra free-text answer. Use it only when an answer "
            "changes the plan."
        ),
        parameters=ASK_USER_PARAMETERS,
        execute=_never_called,
        replay="never",
        builtin=True,
    )
