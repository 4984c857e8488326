"""The offline demo model's prompts as suggestions for an empty session (``agentcore.demo``).

A newcomer's first minute should show what Studio can do without reading anything. The demo
names a prompt per feature (``DEMO_PROMPTS``); each says the agent mode it needs and the tool
the session must offer. A suggestion whose tool this session lacks is listed with what to turn
on instead of being offered, so a click never gets the demo's "I can't do that here".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: What to turn on when a demo prompt needs a tool this session does not offer.
TURN_ON: dict[str, str] = {
    "codemode": "needs code mode: STUDIO_CODE_MODE=demo (the default) or on, with quickjs installed",
    "web_search": "needs web search: set it to auto or on beside the message box",
    "start_timer": "needs the example extension (STUDIO_EXTENSIONS=studio.extensions.example)",
    "subagent": "needs subagents (STUDIO_SUBAGENT_TOOLS)",
}
#: Tools every Studio session offers (the session protocol is always on, with subagents).
SESSION_TOOLS = frozenset({"update_plan", "subagent", "ls", "read"})


@dataclass(frozen=True, slots=True)
class Suggestion:
    prompt: str
    shows: str
    mode: str  # build | plan: the composer switches to it
    missing: str  # what to turn on ("" when the session can run it)


def session_tools(snapshot: dict[str, Any] | None, *, web_search: bool) -> set[str]:
    """The tools a session's snapshot says it has: the session's own, the installed
    extensions' (``records.extensions``), ``codemode`` when code mode is on, and
    ``web_search`` when the next request will search."""
    records = (snapshot or {}).get("records") or {}
    tools = set(SESSION_TOOLS)
    for extension in records.get("extensions") or []:
        tools.update(str(name) for name in extension.get("tools") or [])
    if records.get("code_mode"):
        tools.add("codemode")
    if web_search:
        tools.add("web_search")
    return tools


def suggestions(snapshot: dict[str, Any] | None, *, web_search: bool) -> list[Suggestion]:
    """Every demo prompt, each with what it needs turned on (nothing for most)."""
    from agentcore.demo import DEMO_PROMPTS

    tools = session_tools(snapshot, web_search=web_search)
    out = []
    for demo in DEMO_PROMPTS:
        missing = ""
        if demo.needs is not None and demo.needs not in tools:
            missing = TURN_ON.get(demo.needs, f"needs the {demo.needs} tool, which this session does not offer")
        out.append(Suggestion(demo.prompt, demo.shows, demo.mode, missing))
    return out
