"""Writer conformance: the order and grouping of transactions around effects (DURABILITY 7–9)."""

from __future__ import annotations

from typing import Any

from agentcore import AgentTool, ToolResult
from agentcore.harness import Commit, MemoryStorageFactory
from agentcore.testing.steps import Text, ToolCall
from tests.helpers import collect, final


class RecordingFactory:
    """A user-style storage= factory that records every commit's content."""

    label = "recording"

    def __init__(self) -> None:
        self.inner = MemoryStorageFactory()
        self.commits: list[Commit] = []

    def open(self) -> Any:
        storage, release = self.inner.open()
        commits = self.commits

        class Recording:
            label = "recording"

            def load(self) -> Any:
                return storage.load()

            def commit(self, commit: Commit) -> int:
                commits.append(commit)
                return storage.commit(commit)

            def close(self) -> None:
                storage.close()

        return Recording(), release


def kinds(commit: Commit) -> list[str]:
    out = [e.kind + (":" + e.payload["message"]["role"] if e.kind == "message" else "") for e in commit.entries]
    out += [f"usage:{u.record_id}" for u in commit.usage]
    return out


def effect_tool(name: str, replay: str, seen: list[int], factory: RecordingFactory) -> AgentTool:
    async def execute(arguments: dict[str, Any], ctx: Any) -> ToolResult:
        seen.append(len(factory.commits))  # how many transactions existed when the effect started
        return ToolResult.text("done")

    return AgentTool(name, "effect", {"type": "object", "properties": {}}, execute, replay=replay)  # type: ignore[arg-type]


async def test_response_usage_and_next_state_are_one_transaction(make_agent, fake_server) -> None:
    """Invariant 7: an assistant response is committed with its usage row and the next state."""
    factory = RecordingFactory()
    fake_server.enqueue([Text("hi")])
    agent = await make_agent(storage=factory)
    assert final(await collect(agent, "hello")).status == "completed"
    [answer] = [c for c in factory.commits if "message:assistant" in kinds(c)]
    assert any(k.startswith("usage:") for k in kinds(answer))
    assert answer.receipts and answer.receipts[0].payload["status"] == "completed"
    assert any(r.value is None for r in answer.registers), "the terminal transaction removes the program counter"


async def test_intent_is_committed_before_every_effect(make_agent, fake_server) -> None:
    """Invariant 9: each tool starts only after its intent is durable. A call that needs no
    decision has its intent in the response's own transaction (safe and never alike); a call a
    host must approve gets its intent in a transaction of its own, after the approval."""
    factory = RecordingFactory()
    seen_safe: list[int] = []
    seen_never: list[int] = []
    tools = [
        effect_tool("safe_probe", "safe", seen_safe, factory),
        effect_tool("never_probe", "never", seen_never, factory),
    ]
    fake_server.enqueue([ToolCall("safe_probe", {}, id="s")], [ToolCall("never_probe", {}, id="n")], [Text("ok")])
    agent = await make_agent(storage=factory, extra_tools=tools)
    assert final(await collect(agent, "go")).status == "completed"
    safe_intent, never_intent = [i for i, c in enumerate(factory.commits) if "tool_intent" in kinds(c)]
    assert "message:assistant" in kinds(factory.commits[safe_intent]), "the intent rides with the response"
    assert "message:assistant" in kinds(factory.commits[never_intent]), "also for a never-replay call"
    assert seen_safe == [safe_intent + 1] and seen_never == [never_intent + 1], "each started after its intent"
    results = [i for i, c in enumerate(factory.commits) if "message:tool_result" in kinds(c)]
    assert results[0] > safe_intent and results[1] > never_intent


async def test_an_approved_call_gets_its_intent_after_the_approval(make_agent, fake_server) -> None:
    """Invariant 9/11: with a host approving calls, the intent is committed only once the call is
    approved — in its own transaction, right before the effect."""
    from agentcore import AgentHost

    factory = RecordingFactory()
    seen: list[int] = []
    approvals: list[int] = []

    def approve(payload: dict) -> None:
        approvals.append(len(factory.commits))

    fake_server.enqueue([ToolCall("never_probe", {}, id="n")], [Text("ok")])
    agent = await make_agent(storage=factory, extra_tools=[effect_tool("never_probe", "never", seen, factory)])
    assert final(await collect(agent, "go", AgentHost(approve_tool_call=approve))).status == "completed"
    (intent,) = [i for i, c in enumerate(factory.commits) if "tool_intent" in kinds(c)]
    assert kinds(factory.commits[intent]) == ["tool_intent"]
    assert approvals == [intent] and seen == [intent + 1], "approve, then the intent, then the effect"
