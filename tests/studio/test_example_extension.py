"""X1/X2 in Studio: extensions come from ``STUDIO_EXTENSIONS`` (dotted paths, like Django apps);
the example extension's timer and parent task; the demo model starts them on request."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured

from agentcore import define_agent_extension
from agentcore.demo import demo_responder
from agentcore.testing.fake_server import RecordedRequest
from agentcore.testing.steps import Text, ToolCall
from studio import store_admin
from studio.extensions import build_registry, extensions_from


def test_the_default_setting_installs_the_example_extension(settings: Any) -> None:
    assert settings.STUDIO_EXTENSIONS == ["studio.extensions.example"]
    registry = build_registry(settings.STUDIO_EXTENSIONS)
    assert set(registry.snapshot.extensions) == {"example"}
    assert {t.name for t in registry.snapshot.tools} == {"start_timer", "run_example_tasks"}
    assert registry.get("example.timer") is not None and registry.get("example.pair") is not None


def _module(name: str, **attributes: Any) -> str:
    module = types.ModuleType(name)
    for key, value in attributes.items():
        setattr(module, key, value)
    sys.modules[name] = module
    return name


def test_a_bad_extension_path_is_a_configuration_error_naming_it() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"cannot import 'no\.such\.module'"):
        extensions_from(["no.such.module"])
    empty = _module("studio_test_ext_empty")
    with pytest.raises(ImproperlyConfigured, match=r"studio_test_ext_empty.*neither EXTENSIONS"):
        extensions_from([empty])
    wrong = _module("studio_test_ext_wrong", EXTENSIONS=["not an extension"])
    with pytest.raises(ImproperlyConfigured, match="gave str, not an AgentExtension"):
        extensions_from([wrong])
    from studio.extensions.example import EXTENSIONS

    by_function = _module("studio_test_ext_function", extensions=lambda: list(EXTENSIONS))
    assert [e.name for e in extensions_from([by_function])] == ["example"]
    clash = _module(
        "studio_test_ext_clash", EXTENSIONS=[define_agent_extension(name="clash", tools=EXTENSIONS[0].tools)]
    )
    with pytest.raises(ImproperlyConfigured, match="'clash' cannot be installed"):  # the same tool names twice
        build_registry(["studio.extensions.example", clash])


def _request(prompt: str, tools: list[str], calls: list[dict[str, Any]] | None = None) -> RecordedRequest:
    items: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "input_text", "text": prompt}]}]
    items.extend(calls or [])
    body = {"instructions": "", "input": items, "tools": [{"type": "function", "name": n} for n in tools]}
    return RecordedRequest(
        index=0,
        method="POST",
        path="/v1/responses",
        api_kind="openai-responses",
        headers={},
        body=body,
        api_key=None,
        received_at=0.0,
    )


@pytest.mark.parametrize(
    ("prompt", "tool", "arguments"),
    [
        ("start a timer for 5 seconds", "start_timer", {"seconds": 5, "label": "5 s timer"}),
        ("please start a timer for 2 minutes", "start_timer", {"seconds": 120, "label": "120 s timer"}),
        ("run the example tasks", "run_example_tasks", {"seconds": 5}),
        ("Delegate to a subagent: what files are here?", "subagent", {"task": "what files are here?"}),
        ("work through a checklist", "update_plan", None),
    ],
)
def test_the_demo_starts_durable_work_when_the_tools_are_offered(
    prompt: str, tool: str, arguments: dict[str, Any] | None
) -> None:
    offered = ["ls", "read", "start_timer", "run_example_tasks", "subagent", "update_plan"]
    [call, *_rest] = demo_responder(_request(prompt, offered))
    assert isinstance(call, ToolCall) and call.name == tool
    if arguments is not None:
        assert call.arguments == arguments


def test_without_those_tools_the_demo_answers_as_before() -> None:
    steps = demo_responder(_request("start a timer for 5 seconds", ["ls", "read"]))
    assert isinstance(steps[0], Text) and "offline demo model" in steps[0].text
    files = demo_responder(_request("what files are here?", ["ls", "read", "start_timer", "subagent"]))
    assert isinstance(files[0], ToolCall) and files[0].name == "ls"


def test_the_checklist_ticks_through_three_steps_then_answers() -> None:
    statuses = []
    calls: list[dict[str, Any]] = []
    for _ in range(5):
        [step] = [
            s
            for s in demo_responder(_request("work through a checklist", ["update_plan"], calls))
            if isinstance(s, Text | ToolCall)
        ]
        if isinstance(step, Text):
            break
        statuses.append([item["status"] for item in step.arguments["items"]])
        calls += [
            {"type": "function_call", "name": "update_plan", "call_id": "c", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "ok"},
        ]
    assert statuses == [
        ["in_progress", "pending", "pending"],
        ["completed", "in_progress", "pending"],
        ["completed", "completed", "in_progress"],
        ["completed", "completed", "completed"],
    ]


@pytest.mark.django_db(transaction=True)
async def test_offline_cancel_runs_the_extensions_abort(user: Any, make_session: Any, host: Any) -> None:
    """D7 with Studio's registry: a sleeping timer left in a closed store ends ``aborted``
    (its definition's abort ran), not ``orphaned``."""
    from agentcore import create_agent

    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    await host.prompt(sid, prompt="start a timer for 30 minutes", agent="build")
    await host.wait_idle(sid)
    assert await host.release(sid) is True  # a sleeping timer does not keep the store from the admin
    result = await sync_to_async(store_admin.store_cancel_offline)(session)
    assert len(result["aborted_tasks"]) == 1 and result["orphaned_tasks"] == []
    agent = await create_agent(database_path=session.store_path, provider="demo", session={})
    try:
        [timer] = [t for t in agent.snapshot()["history"] if t["kind"] == "task"]
        assert timer["status"] == "aborted"
    finally:
        await agent.close()
