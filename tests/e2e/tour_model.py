"""The model behind the screenshot tour: the offline demo with one extra, richer answer.

The demo model answers with fixed sentences; a product tour wants to show what a real answer
looks like — tool calls, then Markdown with a table and a highlighted code block. This
factory opens the *real* runtime (real ``openai-responses`` adapter, real store) against a
scripted provider server whose responder answers "explain … app.py" prompts like a model
would and hands everything else to the demo's own responder. The model is still labelled
"Offline demo model" everywhere. ``HOLD:<token>`` holds a turn at a gate the tour opens
(``slow_demo.release_tool``), so the tour can show messages queued while the agent works.
"""

from __future__ import annotations

import threading
from typing import Any

from agentcore.demo import _conversation, _tool_names, _usage, demo_responder
from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import Step, Stop, Text, ToolCall
from studio.host.contract import SessionConfig
from studio.host.factory import agentcore_runtime_factory
from tests.e2e.slow_demo import HOLD, release_tool

EXPLANATION = """\
`src/app.py` keeps the todo list **in memory** and exposes it through one small class:

| Method | What it does |
| --- | --- |
| `add(title, due=None)` | creates a `Todo` with the next id and returns it |
| `complete(todo_id)` | marks one item done (raises `KeyError` for an unknown id) |
| `pending()` | the open items, sorted by due date — undated ones last |

Using it from a script:

```python
from app import TodoList

todos = TodoList()
milk = todos.add("Buy oat milk", due="2025-06-03")
todos.add("Call the plumber")
todos.complete(milk.id)
print([t.title for t in todos.pending()])  # ['Call the plumber']
```

`tests/test_app.py` covers `add` and `complete`, but nothing checks the ordering of \
`pending()` yet — that would be a good first test to add.
"""


ORDERING = """\
`pending()` sorts by the key `(t.due is None, t.due or date.max)`, so:

1. todos **with** a due date come first, earliest date first;
2. todos **without** one follow, in the order they were added.

Completed todos are never returned.
"""


def _say(body: dict[str, Any], text: str) -> list[Step]:
    return [Text(text, chunk_size=10, pace_s=0.004), _usage(body, text), Stop("stop")]


def tour_responder(request: RecordedRequest) -> list[Step]:
    body = request.json
    user, calls, _outputs = _conversation(body)
    tools = _tool_names(body)
    if "app.py" in user and "explain" in user.lower() and {"ls", "read"} <= tools:
        if not calls:
            return [ToolCall("ls", {"path": "src"}), _usage(body, "ls"), Stop("tool_use")]
        if len(calls) == 1:
            return [ToolCall("read", {"path": "src/app.py"}), _usage(body, "read"), Stop("tool_use")]
        return _say(body, EXPLANATION)
    if "pending()" in user and "first" in user.lower():
        return _say(body, ORDERING)
    hold = HOLD.search(user)
    if hold and "wait_for_release" in tools:
        if not calls:
            return [ToolCall("wait_for_release", {"token": hold.group(1)}), _usage(body, "hold"), Stop("tool_use")]
        return _say(body, "Done: the migration ran and every test passes.")
    return demo_responder(request)


_server: FakeProviderServer | None = None
_lock = threading.Lock()


def _base_url() -> str:
    global _server
    with _lock:
        if _server is None:
            _server = FakeProviderServer(responder=tour_responder).start_in_thread()
        return _server.base_url


async def open_runtime(config: SessionConfig) -> Any:
    config.model_options["base_url"] = _base_url()
    return await agentcore_runtime_factory(config, extra_tools=[release_tool()])
