"""A scripted model for the code-mode, catalog and environment tests (Studio + Chromium).

The runtime is the real one (``studio.host.factory.agentcore_runtime_factory``, so Studio's
``runtime_options`` apply: code mode, catalogs, the environment, tracing) talking to the
scripted fake provider server on loopback. The responder decides each response from the
request alone (the prompt and the calls already made in this turn):

- ``CODEMODE`` runs ``SCRIPT`` through ``codemode``; with ``HOLD:<token>`` the script waits in
  its third nested call (``wait_for_release``, see ``slow_demo``) until the test releases it;
- ``SEARCH ADD`` searches the catalogs (``tool_search``), then calls ``fx_add``;
- ``ADD AGAIN`` calls ``fx_add`` (offered since the search), ``CRASH`` calls ``fx_crash``;
- ``BASH <command>`` runs one bash command;
- anything else goes to the offline demo's own responder.

Hostile text is part of the script on purpose: the page must show it as text.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from agentcore.demo import _conversation, _tool_names, _usage, demo_responder
from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
from agentcore.testing.steps import Step, Stop, Text, ToolCall
from studio.host.contract import SessionConfig
from studio.host.factory import agentcore_runtime_factory
from tests.e2e.slow_demo import HOLD, release_tool

HOSTILE = '<img src=x onerror="window.__pwned=1">'
SCRIPT = """// count the README's lines; HOSTILE stays text
const listing = (await tools.ls({})).split("\\n");
text("listed", listing.length, "entries");
const body = await tools.read({path: "README.md"});
text("README has", body.split("\\n").length, "lines");
HOLD_LINE
return {entries: listing.length, note: "</pre><script>window.__pwned = 2</script>"};
""".replace("HOSTILE", HOSTILE)
BASH = re.compile(r"BASH (.+)", re.S)


def script(token: str | None = None) -> str:
    hold = f'await tools.wait_for_release({{token: "{token}"}});' if token else 'text("no hold");'
    return SCRIPT.replace("HOLD_LINE", hold)


def _call(body: dict[str, Any], name: str, arguments: dict[str, Any]) -> list[Step]:
    return [ToolCall(name, arguments), _usage(body, str(arguments)), Stop("tool_use")]


def _say(body: dict[str, Any], text: str) -> list[Step]:
    return [Text(text, chunk_size=16), _usage(body, text), Stop("stop")]


def _output(outputs: list[dict[str, Any]]) -> str:
    return str(outputs[-1].get("output", "")) if outputs else ""


def responder(request: RecordedRequest) -> list[Step]:
    body = request.json
    user, calls, outputs = _conversation(body)
    tools = _tool_names(body)
    made = [c.get("name") for c in calls]
    if "CODEMODE" in user and "codemode" in tools:
        if "codemode" not in made:
            hold = HOLD.search(user)
            return _call(body, "codemode", {"code": script(hold.group(1) if hold else None)})
        return _say(body, "The script finished: " + _output(outputs).splitlines()[0][:200])
    if "SEARCH ADD" in user:
        if "tool_search" not in made:
            return _call(body, "tool_search", {"query": "add two integers; kill the server process"})
        if "fx_add" not in made and "fx_add" in tools:
            return _call(body, "fx_add", {"a": 2, "b": 3})
        return _say(body, "fx_add said: " + _output(outputs)[:200])
    for marker, tool, arguments in (("ADD AGAIN", "fx_add", {"a": 1, "b": 2}), ("CRASH", "fx_crash", {})):
        if marker in user and tool in tools:
            if tool not in made:
                return _call(body, tool, arguments)
            return _say(body, f"{tool} said: " + _output(outputs)[:300])
    bash = BASH.search(user)
    if bash and "bash" in tools:
        if "bash" not in made:
            return _call(body, "bash", {"command": bash.group(1).strip()})
        return _say(body, "bash said: " + _output(outputs)[:300])
    return demo_responder(request)


_server: FakeProviderServer | None = None
_lock = threading.Lock()


def base_url() -> str:
    global _server
    with _lock:
        if _server is None:
            _server = FakeProviderServer(responder=responder).start_in_thread()
        return _server.base_url


async def open_runtime(config: SessionConfig) -> Any:
    """``STUDIO_RUNTIME_FACTORY`` for the browser tests (the hold tool reads STUDIO_DATA_DIR)."""
    config.model_options["base_url"] = base_url()
    return await agentcore_runtime_factory(config, extra_tools=[release_tool()])
