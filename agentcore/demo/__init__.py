"""The offline demo model (SPEC P3): deterministic answers with no API key and no network.

It is served by the scripted fake provider server on 127.0.0.1 and reached through the real
``openai-responses`` adapter, so the demo exercises the same code paths as a real model. Its
"brain" (``responder``) is a small rule set over the request; ``DEMO_PROMPTS`` names the prompts
that show each thing it can do, so a UI can offer them as suggestions and the docs can list them.
Every UI labels it "offline demo model".

The runtime imports this package on every start, so the fake server and its step types load
only when a demo model is actually served (``DemoServer``, ``demo_responder``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentcore.demo.responder import _conversation, _tool_names, _usage, demo_responder
from agentcore.demo.workspace import DEMO_FILES, seed_demo_workspace
from agentcore.models.attributes import ModelAttributes

DEMO_LABEL = "Offline demo model"
DEMO_WINDOW = 32_000


@dataclass(frozen=True, slots=True)
class DemoPrompt:
    """A prompt the demo answers in a way that shows one feature (``mode``: the agent mode it
    needs; ``needs``: the tool the session must offer, when it needs one)."""

    prompt: str
    shows: str
    mode: str = "build"
    needs: str | None = None


DEMO_PROMPTS: tuple[DemoPrompt, ...] = (
    DemoPrompt("What files are here? Read the README.", "tools: it lists the workspace and reads the README"),
    DemoPrompt(
        "Show me a Markdown sample with a table and some code.", "Markdown, a table and a highlighted code block"
    ),
    DemoPrompt(
        "Work through the sample files with a checklist.", "a checklist that ticks step by step", needs="update_plan"
    ),
    DemoPrompt(
        "Do a long task: review every file, one at a time.",
        "a long turn of spaced-out tool calls: steer it, queue a follow-up or stop it",
    ),
    DemoPrompt(
        "Run a code-mode script that counts the files.", "a code-mode script and its nested calls", needs="codemode"
    ),
    DemoPrompt("Search the web for durable agent runtimes.", "web search activity and sources", needs="web_search"),
    DemoPrompt("Start a timer for 30 seconds.", "a durable task with a countdown", needs="start_timer"),
    DemoPrompt("Delegate to a subagent: what files are here?", "a subagent run", needs="subagent"),
    DemoPrompt("Plan a todo app, ask me questions first.", "questions (ask_user), then a plan to review", mode="plan"),
)
"""What to try first. Thinking shows on any prompt when the session's effort is not off."""


def demo_model_options(base_url: str) -> dict[str, Any]:
    return {
        "base_url": base_url,
        "model_attributes": ModelAttributes(
            name=DEMO_LABEL,
            reasoning=True,  # streamed thinking at any effort but off (the demo's thinking costs nothing)
            web_search=True,  # "search the web …" answers with made-up, clearly labelled sources
            input=["text", "image"],
            context_window=DEMO_WINDOW,
            max_tokens=4_096,
        ),
    }


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


__all__ = [
    "DEMO_FILES",
    "DEMO_LABEL",
    "DEMO_PROMPTS",
    "DEMO_WINDOW",
    "DemoPrompt",
    "DemoServer",
    "_conversation",
    "_tool_names",
    "_usage",
    "demo_model_options",
    "demo_responder",
    "seed_demo_workspace",
]
