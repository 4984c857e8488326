"""The demo model's rules: what it answers, decided from the request it received.

Asked about files, it calls ``ls`` then ``read`` and summarises what it saw; asked to compact
the conversation (C3) it summarises the requests and files the compaction request lists; asked for Markdown
it answers with a table and a highlighted code block; "… with a checklist" ticks an
``update_plan`` checklist visibly, one step at a time; "a long task" reviews the workspace in
spaced-out tool calls, so a person can steer it (a steer is acknowledged in the next step),
queue a follow-up or stop it; "a code-mode script" calls ``codemode`` when the session offers
it; "search the web …" runs a (made-up, labelled) web search with sources; in plan mode it
writes a short numbered plan, asking ``ask_user`` questions first when asked to. With a
reasoning effort other than off it thinks before each answer (streamed thinking).

When the request offers the tools for it (session mode, Studio's example extension), it also
starts durable work on request — "start a timer for 5 seconds" calls ``start_timer``, "run the
example tasks" calls ``run_example_tasks``, "delegate …" / "use a subagent …" calls
``subagent`` with the rest of the prompt as the child's task. Without those tools these prompts
get the ordinary answer.

Pacing: ``AGENTCORE_DEMO_DELAY_MS`` (default 15 ms) paces streamed text and thinking, and the
pauses between a long task's or a checklist's steps scale with it; 0 makes everything instant
(tests, benchmarks).
"""

from __future__ import annotations

import itertools
import os
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentcore.testing.fake_server import RecordedRequest
    from agentcore.testing.steps import Step, Usage

_FILE_WORDS = re.compile(r"\b(files?|folders?|director(y|ies)|here|ls|list|read|repo|project|workspace|readme)\b", re.I)
_README = re.compile(r"^(readme(\.[a-z]+)?)/?$", re.I)
_ASK = re.compile(r"\b(ask me|questions?)\b", re.I)
_TIMER = re.compile(r"\btimers?\b", re.I)
_EXAMPLE_TASKS = re.compile(r"\bexample tasks?\b", re.I)
_DELEGATE = re.compile(r"\b(delegate|subagent)\b", re.I)
_CHECKLIST = re.compile(r"\bchecklist\b", re.I)
_MARKDOWN = re.compile(r"\b(markdown|table|code (sample|block|example)|some code)\b", re.I)
_LONG_TASK = re.compile(r"\b(long task|review every file|one at a time)\b", re.I)
_SCRIPT = re.compile(r"\bcode[- ]?mode\b|\b(run|write) a script\b", re.I)  # not any "script": markup has <script>
_WEB = re.compile(r"\b(search|look up|browse)\b.*\b(web|online|internet)\b|\bweb search\b", re.I)
_STOP_WORDS = re.compile(r"\b(stop|enough|skip the rest|that's all|finish)\b", re.I)
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


def _searches_the_web(body: dict[str, Any]) -> bool:
    return any(isinstance(t, dict) and t.get("type") == "web_search" for t in body.get("tools") or [])


def _steers(body: dict[str, Any]) -> list[str]:
    """Texts that joined the running turn (steers): user messages right after a tool result.
    A new turn's prompt follows the previous answer instead, so it is never counted here."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict) and i.get("type") != "reasoning"]
    steers: list[str] = []
    for before, item in itertools.pairwise(items):
        if item.get("role") == "user" and before.get("type") == "function_call_output":
            steers.append(_text_of(item.get("content")))
    return steers


def _turn(body: dict[str, Any]) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """The prompt that started this turn and the function calls/outputs since: like
    ``_conversation``, but a steer (a user message right after a tool result) does not start a
    new turn, so a steered turn keeps its task and the calls it already made."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict) and i.get("type") != "reasoning"]
    start = -1
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if item.get("role") == "user" and (index == 0 or items[index - 1].get("type") != "function_call_output"):
            start = index
            break
    prompt = _text_of(items[start].get("content")) if start >= 0 else ""
    after = items[start + 1 :] if start >= 0 else []
    calls = [i for i in after if i.get("type") == "function_call"]
    outputs = [i for i in after if i.get("type") == "function_call_output"]
    return prompt, calls, outputs


def _usage(body: dict[str, Any], answer: str) -> Usage:
    from agentcore.testing.steps import Usage

    prompt_chars = len(str(body.get("instructions", ""))) + len(str(body.get("input", "")))
    return Usage(input=max(1, prompt_chars // 4), output=max(1, len(answer) // 4))


def _delay_ms() -> float:
    return max(0.0, float(os.environ.get("AGENTCORE_DEMO_DELAY_MS", "15") or 0))


def _pause(seconds: float) -> list[Step]:
    """A pause of ``seconds`` at the default pace, scaled with ``AGENTCORE_DEMO_DELAY_MS`` (none at 0):
    long enough for a person to watch a checklist tick or to steer between tool calls."""
    from agentcore.testing.steps import Delay

    scaled = seconds * _delay_ms() / 15
    return [Delay(scaled)] if scaled > 0 else []


def _thinking(body: dict[str, Any], thought: str) -> list[Step]:
    """Streamed thinking before the answer when the request asks for reasoning (any effort but off)."""
    from agentcore.testing.steps import Thinking

    if not isinstance(body.get("reasoning"), dict):
        return []
    chunk = int(os.environ.get("AGENTCORE_DEMO_CHUNK", "12") or 12)
    return [Thinking(thought, chunk_size=max(1, chunk), pace_s=_delay_ms() / 1000)]


def _say(body: dict[str, Any], text: str, *, thought: str | None = None) -> list[Step]:
    """Stream ``text`` in small chunks; AGENTCORE_DEMO_DELAY_MS paces them (default 15 ms) so
    the demo streams visibly like a real model, and 0 makes it instant (tests, benchmarks)."""
    from agentcore.testing.steps import Stop, Text

    chunk = int(os.environ.get("AGENTCORE_DEMO_CHUNK", "12") or 12)
    thinking = _thinking(body, thought or "The request is clear; I can answer directly, briefly.")
    return [
        *thinking,
        Text(text, chunk_size=max(1, chunk), pace_s=_delay_ms() / 1000),
        _usage(body, text),
        Stop("stop"),
    ]


def _call(
    body: dict[str, Any],
    name: str,
    arguments: dict[str, Any],
    *,
    say: str = "",
    thought: str | None = None,
    pause_s: float = 0,
) -> list[Step]:
    """A tool call, optionally after a pause and a line of narration (text before a call)."""
    from agentcore.testing.steps import Stop, Text, ToolCall

    steps: list[Step] = [*_pause(pause_s), *_thinking(body, thought or f"Next step: call {name}.")]
    if say:
        steps.append(Text(say, chunk_size=12, pace_s=_delay_ms() / 1000))
    return [*steps, ToolCall(name, arguments), _usage(body, say + str(arguments)), Stop("tool_use")]


def _entries(count: int) -> str:
    return "1 entry" if count == 1 else f"{count} entries"


def _listing(output: dict[str, Any]) -> list[str]:
    """The names an ``ls`` result lists (an empty directory's result, "… is empty.", lists none)."""
    text = str(output.get("output", ""))
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("[")]
    if len(lines) == 1 and lines[0].endswith(" is empty."):
        return []
    return lines


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
            return _call(
                body, "update_plan", {"items": items}, pause_s=1.2 if done else 0, thought="Tick the checklist."
            )
        if done == len(CHECKLIST):
            items = [{"id": f"step-{n + 1}", "text": t, "status": "completed"} for n, t in enumerate(CHECKLIST)]
            return _call(body, "update_plan", {"items": items}, pause_s=1.2, thought="Every step is done.")
        return _say(body, "Done: every step of the checklist is completed. (This is the offline demo model.)")
    return None


MARKDOWN_SAMPLE = """## A Markdown sample

The demo model writes **bold**, *italics*, `inline code`, lists and links like a real model:

1. a numbered step
2. another, with a [link](https://example.org/copper-tulips)

| file | what it holds |
|---|---|
| `README.md` | the project's introduction |
| `garden.py` | the planting logic |
| `data/beds.csv` | three garden beds |

```python
def plan(beds: list[dict[str, str]]) -> dict[str, int]:
    \"\"\"Twelve tulips per square metre of each bed.\"\"\"
    return {bed["name"]: int(bed["size"]) * 12 for bed in beds}
```

> This is the offline demo model: the answer is canned, the rendering is real."""

CODEMODE_SCRIPT = """const listing = await tools.ls({path: "."});
const entries = listing.split("\\n").filter((line) => line && !line.startsWith("["));
const files = entries.filter((name) => !name.endsWith("/"));
text(`The workspace has ${entries.length} entries, ${files.length} of them files.`);
let lines = 0;
for (const name of files) {
  const body = await tools.read({path: name});
  lines += body.split("\\n").length;
}
return {entries: entries.length, files: files.length, lines};"""

SEARCH_SOURCES = [
    {"url": "https://example.org/durable-agents", "title": "Durable agents: keep the store as the truth"},
    {"url": "https://example.org/effect-sandwich", "title": "The effect sandwich: intent, effect, settlement"},
]


def _long_task(body: dict[str, Any], calls: list[Any], outputs: list[Any]) -> list[Step]:
    """Review the workspace one file at a time, pausing before each call so a person can steer,
    queue or stop; a steer is acknowledged in the next step and "stop" in one ends the review."""
    steers = _steers(body)
    heard = f"Noted your steer: “{steers[-1].strip()[:160]}”. " if steers else ""
    if not calls:
        return _call(
            body,
            "ls",
            {"path": "."},
            say="I'll review the workspace one file at a time. ",
            thought="List first, then read each file.",
        )
    files = [name for name in _listing(outputs[0])[:6] if not name.endswith("/") and " -> " not in name]
    read = [c for c in calls if c.get("name") == "read"]
    if steers and _STOP_WORDS.search(steers[-1]):
        return _say(body, f"{heard}Stopping the review after {len(read)} of {len(files)} files, as you asked.")
    if len(read) < len(files):
        name = files[len(read)]
        return _call(
            body, "read", {"path": name}, say=f"{heard}Reading `{name}`. ", pause_s=1.5, thought=f"Read {name} next."
        )
    rows = "\n".join(
        f"| `{name}` | {_first_line(out)[:60] or '(empty)'} |" for name, out in zip(files, outputs[1:], strict=False)
    )
    table = f"| file | first line |\n|---|---|\n{rows}" if rows else "The workspace has no files to review."
    return _say(body, f"{heard}Reviewed {len(files)} files:\n\n{table}", thought="Every file is read; summarise.")


_OTHER_TASKS = (_FILE_WORDS, _MARKDOWN, _SCRIPT, _WEB, _CHECKLIST, _TIMER, _DELEGATE, _EXAMPLE_TASKS, _ASK)


def _long_task_turn(body: dict[str, Any], latest: str) -> tuple[list[Any], list[Any]] | None:
    """The calls and outputs of a long task this request continues, or None.

    A request cannot say whether a user message after a tool result is a steer or the prompt
    of a new turn after a stopped one: both look the same. The demo reads it as a steer when
    the turn it would join is a long task, unless it asks for another of the demo's tasks.
    """
    prompt, calls, outputs = _turn(body)
    if not _LONG_TASK.search(prompt) or "PLAN MODE" in str(body.get("instructions", "")):
        return None
    if latest != prompt and any(rule.search(latest) for rule in _OTHER_TASKS):
        return None  # a new turn after a stopped long task, asking for something else
    return calls, outputs


def _web_search(body: dict[str, Any], user: str) -> list[Step]:
    from agentcore.testing.steps import Stop, Text, WebSearch

    if not _searches_the_web(body):
        return _say(
            body, "Web search is off for this session, so I can't look that up. Turn it on in the session's settings."
        )
    query = re.sub(r"^.*?\b(search( the)? (web|online|internet) for|look up|web search( for)?)\b", "", user, flags=re.I)
    query = query.strip(" .?!") or "durable agent runtimes"
    answer = (
        f"Here is what the (made-up, offline) web says about {query}: keep the store as the truth, and "
        "commit an intent before every effect. The sources below are examples: this is the offline demo model."
    )
    return [
        *_thinking(body, f"Search the web for {query}."),
        WebSearch(query=query, sources=SEARCH_SOURCES),
        Text(answer, chunk_size=12, pace_s=_delay_ms() / 1000),
        _usage(body, answer),
        Stop("stop"),
    ]


def _files(body: dict[str, Any], calls: list[Any], outputs: list[Any]) -> list[Step]:
    tools = _tool_names(body)
    if not outputs:
        return _call(body, "ls", {"path": "."}, thought="The user asks about files: list the workspace.")
    names = _listing(outputs[0])
    read_done = any(c.get("name") == "read" for c in calls)
    readme = next((n for n in names if _README.match(n)), None)
    if readme and not read_done and "read" in tools:
        return _call(body, "read", {"path": readme.rstrip("/")}, thought="There is a README: read it.")
    if not names:
        return _say(body, "I listed the workspace: it is empty.", thought="Nothing to read.")
    shown = ", ".join(names[:8]) + (" …" if len(names) > 8 else "")
    summary = f"I listed the workspace: {_entries(len(names))} ({shown})."
    if read_done and len(outputs) > 1:
        lines = [re.sub(r"^\s*\d+\t", "", ln) for ln in str(outputs[-1].get("output", "")).splitlines()]
        first = next((ln for ln in lines if ln.strip()), "")
        summary += f" The README starts with: “{first.strip()[:120]}”"
    return _say(body, summary, thought="Summarise the listing and the README.")


_COMPACTING = "You are compacting the history"
_LISTED = re.compile(r"^- (.+)$", re.M)


def _summary(user: str) -> list[Step]:
    """A compaction request (C3): a summary in the prompt's sections, from what the request
    lists — the user's requests, the files touched and the person's instructions."""

    def section(title: str) -> str:
        head, _, rest = user.partition(title)
        return rest.split("\n\n", 1)[0] if head != user else ""

    requests = _LISTED.findall(section("User requests (keep these verbatim):"))
    files = _LISTED.findall(section("Files touched by tool calls:"))
    wishes = section("Additional instructions for this summary:").strip()
    lines = ["## Goal", "Try Studio with the offline demo model.", "", "## User requests"]
    lines += [f"- {r}" for r in requests] or ["- (none)"]
    if files:
        lines += ["", "## Files", *(f"- {f}" for f in files)]
    if wishes:
        lines += ["", "## Kept as asked", wishes]
    lines += ["", "## Unfinished work", "Nothing: this summary was written by the offline demo model."]
    text = "\n".join(lines)
    from agentcore.testing.steps import Stop, Text, Usage

    return [Text(text, chunk_size=40), Usage(input=max(1, len(user) // 4), output=max(1, len(text) // 4)), Stop("stop")]


def demo_responder(request: RecordedRequest) -> list[Step]:
    """Decide the demo model's next response from the request it received."""
    body = request.json
    user, calls, outputs = _conversation(body)
    if str(body.get("instructions", "")).startswith(_COMPACTING):
        return _summary(user)
    tools = _tool_names(body)
    if {"ls", "read"} <= tools and (long_task := _long_task_turn(body, user)) is not None:
        return _long_task(body, *long_task)
    plan_mode = "PLAN MODE" in str(body.get("instructions", ""))
    lowered = user.lower()
    if not plan_mode and (work := _durable_work(body, user, calls, outputs)) is not None:
        return work
    if "plan was approved" in lowered:
        return _say(body, "Done: I followed the approved plan step by step. (This is the offline demo model.)")
    if plan_mode:
        asked = [c for c in calls if c.get("name") == "ask_user"]
        if _ASK.search(user) and "ask_user" in tools and not asked:
            return _call(body, "ask_user", DEMO_QUESTIONS, thought="Ask before planning.")
        if asked and outputs:
            answers = str(outputs[-1].get("output", "")).strip()
            return _say(body, _plan(user) + f"\n\nBased on your answers:\n{answers}", thought="Plan from the answers.")
        return _say(body, _plan(user), thought="Write a short numbered plan.")
    if _SCRIPT.search(user) and "codemode" in tools:
        if not calls:
            return _call(
                body, "codemode", {"code": CODEMODE_SCRIPT}, thought="One script can list and read every file."
            )
        return _say(body, f"The script ran. It returned: {_first_line(outputs[-1]) if outputs else '(nothing)'}")
    if _WEB.search(user):
        return _web_search(body, user)
    if _MARKDOWN.search(user):
        return _say(body, MARKDOWN_SAMPLE, thought="Show Markdown, a table and a code block.")
    if _FILE_WORDS.search(user) and "ls" in tools:
        return _files(body, calls, outputs)
    echo = user.strip()[:200] or "(an image)"
    return _say(
        body,
        f"This is the offline demo model, running without an API key. You said: “{echo}”. "
        "Ask me “what files are here?” to watch me use tools, or switch to plan mode for a plan.",
    )
