"""The offline demo model (SPEC P3): deterministic answers with no API key and no network.

It is served by the scripted fake provider server on 127.0.0.1 and reached through the real
``openai-responses`` adapter, so the demo exercises the same code paths as a real model. The
"brain" is a small rule set over the request: asked about files, it calls ``ls`` then
``read`` and summarises what it saw; in plan mode it asks nothing and writes a short
numbered plan; otherwise it answers briefly. Every UI labels it "offline demo model".

When the request offers the tools for it (session mode, Studio's example extension), it also
starts durable work on request — "start a timer for 5 seconds" calls ``start_timer``, "run
the example tasks" calls ``run_example_tasks``, "delegate …" / "use a subagent …" calls
``subagent`` with the rest of the prompt as the child's task, and "… with a checklist" ticks
an ``update_plan`` checklist through three steps before answering. Without those tools these
prompts get the ordinary answer.

The runtime imports this module on every start, so it loads the fake server and its step
types only when a demo model is actually served (``DemoServer``, ``demo_responder``).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from agentcore.models.attributes import ModelAttributes

if TYPE_CHECKING:
    from agentcore.testing.fake_server import RecordedRequest
    from agentcore.testing.steps import Step, Usage

DEMO_LABEL = "Offline demo model"
DEMO_WINDOW = 32_000
_FILE_WORDS = re.compile(r"\b(files?|folders?|director(y|ies)|here|ls|list|read|repo|project|workspace|readme)\b", re.I)
_README = re.compile(r"^(readme(\.[a-z]+)?)/?$", re.I)
_ASK = re.compile(r"\b(ask me|questions?)\b", re.I)
_TIMER = re.compile(r"\btimers?\b", re.I)
_EXAMPLE_TASKS = re.compile(r"\bexample tasks?\b", re.I)
_DELEGATE = re.compile(r"\b(delegate|subagent)\b", re.I)
_CHECKLIST = re.compile(r"\bchecklist\b", re.I)
_SECONDS = re.compile(r"\b(\d{1,5})\s*(s|secs?|seconds?)\b", re.I)
_MINUTES = re.compile(r"\b(\d{1,4})\s*(m|mins?|minutes?)\b", re.I)
CHECKLIST = ["Look at the request", "Do the work", "Check the result"]
DEMO_QUESTIONS: dict[str, Any] = {
    "questions": [
        {"id": "scope", "question": "How big should the first version be?", "options": ["Tiny", "Small", "Complete"]},
        {
            "id": "extras",
            "question": "Which extras do you want?",
            "options": ["Tests", "Docs", "CI"],
            "multi_select": True,
            "allow_free_text": True,
        },
    ]
}


def demo_model_options(base_url: str) -> dict[str, Any]:
    return {
        "base_url": base_url,
        "model_attributes": ModelAttributes(
            name=DEMO_LABEL,
            reasoning=False,
            web_search=False,
            input=["text", "image"],
            context_window=DEMO_WINDOW,
            max_tokens=4_096,
        ),
    }


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _conversation(body: dict[str, Any]) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """The last user text and the function calls/outputs that followed it."""
    items = body.get("input") or []
    last_user = -1
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get("role") == "user":
            last_user = index
    user = _text_of(items[last_user].get("content")) if last_user >= 0 else ""
    after = items[last_user + 1 :] if last_user >= 0 else []
    calls = [i for i in after if isinstance(i, dict) and i.get("type") == "function_call"]
    outputs = [i for i in after if isinstance(i, dict) and i.get("type") == "function_call_output"]
    return user, calls, outputs


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {t.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)}


def _usage(body: dict[str, Any], answer: str) -> Usage:
    from agentcore.testing.steps import Usage

    prompt_chars = len(str(body.get("instructions", ""))) + len(str(body.get("input", "")))
    return Usage(input=max(1, prompt_chars // 4), output=max(1, len(answer) // 4))


def _say(body: dict[str, Any], text: str) -> list[Step]:
    """Stream ``text`` in small chunks; AGENTCORE_DEMO_DELAY_MS paces them (default 15 ms) so
    the demo streams visibly like a real model, and 0 makes it instant (tests, benchmarks)."""
    from agentcore.testing.steps import Stop, Text

    chunk = int(os.environ.get("AGENTCORE_DEMO_CHUNK", "12") or 12)
    delay_ms = float(os.environ.get("AGENTCORE_DEMO_DELAY_MS", "15") or 0)
    return [Text(text, chunk_size=max(1, chunk), pace_s=max(0.0, delay_ms) / 1000), _usage(body, text), Stop("stop")]


def _call(body: dict[str, Any], name: str, arguments: dict[str, Any]) -> list[Step]:
    from agentcore.testing.steps import Stop, ToolCall

    return [ToolCall(name, arguments), _usage(body, str(arguments)), Stop("tool_use")]


def _entries(count: int) -> str:
    return "1 entry" if count == 1 else f"{count} entries"


def _plan(user: str) -> str:
    topic = user.strip().splitlines()[0][:80] if user.strip() else "the task"
    if "reviewer rejected" in user.lower():
        notes = user.split("Reviewer's notes:", 1)[-1].split("Revise the plan", 1)[0].strip()
        return (
            "Revised plan\n\n"
            f"1. Address the review notes: {notes or 'none given'}.\n"
            "2. Inspect the files involved with `ls` and `read`.\n"
            "3. Make the smallest change that does it.\n"
            "4. Verify the result and summarise what changed."
        )
    return (
        f"Plan: {topic}\n\n"
        "1. Inspect the workspace with `ls` and read the relevant files.\n"
        "2. Make the smallest change that does what was asked.\n"
        "3. Verify the result.\n"
        "4. Summarise what changed and what is left."
    )


def _duration_s(user: str, default: int = 10) -> int:
    minutes = _MINUTES.search(user)
    if minutes:
        return max(1, int(minutes.group(1)) * 60)
    seconds = _SECONDS.search(user)
    return max(1, int(seconds.group(1))) if seconds else default


def _delegated_task(user: str) -> str:
    """The child's task: the prompt after the words that asked for delegation."""
    rest = _DELEGATE.split(user, maxsplit=1)[-1]
    rest = re.sub(r"^\W*(to\s+(a\s+)?(subagent\b)?|it\b)?\W*", "", rest, flags=re.I).strip()
    return rest[:400] or "What files are here? Read the README."


def _first_line(output: dict[str, Any]) -> str:
    text = str(output.get("output", "")).strip()
    return (text.splitlines() or [""])[0][:240]


def _durable_work(body: dict[str, Any], user: str, calls: list[Any], outputs: list[Any]) -> list[Step] | None:
    """Session-mode rules: start durable tasks, delegate, tick a checklist (see the module doc)."""
    tools = _tool_names(body)
    names = [c.get("name") for c in calls]
    if _DELEGATE.search(user) and "subagent" in tools:
        if "subagent" not in names:
            return _call(body, "subagent", {"task": _delegated_task(user)})
        if outputs:
            return _say(body, f"The subagent finished. It reported: “{_first_line(outputs[-1])}”")
    if _EXAMPLE_TASKS.search(user) and "run_example_tasks" in tools:
        seconds = _duration_s(user, default=5)
        if "run_example_tasks" not in names:
            return _call(body, "run_example_tasks", {"seconds": seconds})
        return _say(
            body,
            f"Started the example tasks: a parent task that waits on two timers ({seconds} s and {seconds + 3} s). "
            "Watch them in the Trace → Tasks tab. " + _first_line(outputs[-1] if outputs else {}),
        )
    if _TIMER.search(user) and "start_timer" in tools:
        seconds = _duration_s(user)
        if "start_timer" not in names:
            return _call(body, "start_timer", {"seconds": seconds, "label": f"{seconds} s timer"})
        return _say(
            body,
            f"Started a durable timer for {seconds} s; it keeps running in the background (and across restarts). "
            + _first_line(outputs[-1] if outputs else {}),
        )
    if _CHECKLIST.search(user) and "update_plan" in tools:
        done = names.count("update_plan")
        if done < len(CHECKLIST):
            items = [
                {
                    "id": f"step-{n + 1}",
                    "text": text,
                    "status": "completed" if n < done else "in_progress" if n == done else "pending",
                }
                for n, text in enumerate(CHECKLIST)
            ]
            return _call(body, "update_plan", {"items": items})
        if done == len(CHECKLIST):
            items = [{"id": f"step-{n + 1}", "text": t, "status": "completed"} for n, t in enumerate(CHECKLIST)]
            return _call(body, "update_plan", {"items": items})
        return _say(body, "Done: every step of the checklist is completed. (This is the offline demo model.)")
    return None


def demo_responder(request: RecordedRequest) -> list[Step]:
    """Decide the demo model's next response from the request it received."""
    body = request.json
    user, calls, outputs = _conversation(body)
    tools = _tool_names(body)
    plan_mode = "PLAN MODE" in str(body.get("instructions", ""))
    lowered = user.lower()
    if not plan_mode and (work := _durable_work(body, user, calls, outputs)) is not None:
        return work
    if "plan was approved" in lowered:
        return _say(body, "Done: I followed the approved plan step by step. (This is the offline demo model.)")
    if plan_mode:
        asked = [c for c in calls if c.get("name") == "ask_user"]
        if _ASK.search(user) and "ask_user" in tools and not asked:
            return _call(body, "ask_user", DEMO_QUESTIONS)
        if asked and outputs:
            answers = str(outputs[-1].get("output", "")).strip()
            return _say(body, _plan(user) + f"\n\nBased on your answers:\n{answers}")
        return _say(body, _plan(user))
    if _FILE_WORDS.search(user) and "ls" in tools:
        if not outputs:
            return _call(body, "ls", {"path": "."})
        listing = str(outputs[0].get("output", ""))
        names = [line.strip() for line in listing.splitlines() if line.strip() and not line.startswith("[")]
        read_done = any(c.get("name") == "read" for c in calls)
        readme = next((n for n in names if _README.match(n)), None)
        if readme and not read_done and "read" in tools:
            return _call(body, "read", {"path": readme.rstrip("/")})
        shown = ", ".join(names[:8]) + (" …" if len(names) > 8 else "")
        summary = f"I listed the workspace: {_entries(len(names))} ({shown or 'empty'})."
        if read_done and len(outputs) > 1:
            lines = [re.sub(r"^\s*\d+\t", "", ln) for ln in str(outputs[-1].get("output", "")).splitlines()]
            first = next((ln for ln in lines if ln.strip()), "")
            summary += f" The README starts with: “{first.strip()[:120]}”"
        return _say(body, summary)
    echo = user.strip()[:200] or "(an image)"
    return _say(
        body,
        f"This is the offline demo model, running without an API key. You said: “{echo}”. "
        "Ask me “what files are here?” to watch me use tools, or switch to plan mode for a plan.",
    )


class DemoServer:
    """A fake provider server answering with ``demo_responder``, on its own thread."""

    def __init__(self) -> None:
        from agentcore.testing.fake_server import FakeProviderServer

        self._server = FakeProviderServer(responder=demo_responder)
        self._server.start_in_thread()

    @property
    def base_url(self) -> str:
        return self._server.base_url

    def stop(self) -> None:
        self._server.stop_in_thread()
