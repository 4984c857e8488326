"""Fork, reset, configure, plan, update_plan, cancel and background compaction (SPEC S2–S5, C5)."""

from __future__ import annotations

import json

import pytest

from agentcore import AgentError
from agentcore.testing.steps import Hang, Text, ToolCall, Usage
from tests.agentcore.session_helpers import Gate, ends, last_snapshot, run_with, user_texts

COMPLETIONS = "openai-completions"


async def test_fork_from_a_committed_entry_is_an_independent_conversation(make_agent, fake_server) -> None:
    """S2: a fork starts from the chosen committed entry (later messages are not in it), has its
    own queue and provider identity, and copies nothing active."""
    fake_server.enqueue([Text("answer one")], [Text("answer two")], [Text("fork answer")], [Text("main answer")])
    agent = await make_agent("openai-responses", session={})
    await run_with(agent, {"prompt": "question one", "request_id": "q1"})
    await run_with(agent, {"prompt": "question two", "request_id": "q2"})
    transcript = agent.read_transcript(entry_ids=True)
    first_answer = next(m for m in transcript if m["role"] == "assistant")
    receipts = []

    async def on_event(event) -> None:
        if event.type == "session" and not receipts:
            fork = await agent.control({"type": "fork", "request_id": "f", "entry_id": first_answer["entry_id"]})
            receipts.append(fork)
            submit = {"type": "submit", "request_id": "in-fork", "prompt": "fork question"}
            receipts.append(await agent.control({**submit, "target_id": fork["target_id"]}))

    events = await run_with(agent, {"prompt": "question three", "request_id": "q3"}, on_event)
    fork = receipts[0]
    assert fork["status"] == "created" and fork["target_id"] == 1 and fork["fork_id"]
    fork_request = next(r for r in fake_server.requests if "fork question" in json.dumps(r.json))
    texts = json.dumps(fork_request.json)
    assert "question one" in texts and "answer one" in texts
    assert "question two" not in texts and "question three" not in texts
    assert fork_request.json["prompt_cache_key"] == fork["fork_id"] != agent.session_id
    main_request = next(r for r in fake_server.requests if "question three" in json.dumps(r.json))
    assert main_request.json["prompt_cache_key"] == agent.session_id
    forked = [e for e in ends(events) if e.target_id == 1]
    assert [e.request_id for e in forked] == ["in-fork"]
    contexts = {c["target_id"]: c for c in last_snapshot(events)["contexts"]}
    assert contexts[1]["kind"] == "fork" and contexts[1]["forked_from"] == {
        "target_id": 0,
        "entry_id": first_answer["entry_id"],
    }
    fork_transcript = agent.read_transcript(target_id=1)
    assert [m["role"] for m in fork_transcript] == ["user", "assistant", "user", "assistant"]


async def test_fork_of_an_unknown_entry_names_the_field(make_agent, fake_server) -> None:
    fake_server.enqueue([Text("ok")])
    agent = await make_agent(COMPLETIONS, session={})
    errors = []

    async def on_event(event) -> None:
        if event.type == "session" and not errors:
            with pytest.raises(AgentError) as info:
                await agent.control({"type": "fork", "request_id": "f", "entry_id": "no-such-entry"})
            errors.append(info.value.field)

    await run_with(agent, "go", on_event)
    assert errors == ["entry_id"]
    assert agent.snapshot()["contexts"][1:] == []


@pytest.mark.parametrize(("plan_fork", "expected"), [("as_of", ["old"]), ("initial", []), ("current", ["new"])])
async def test_plan_fork_options(make_agent, fake_server, plan_fork, expected) -> None:
    """S2: a fork's plan is the plan as of the fork entry, empty, or the current one."""
    fake_server.enqueue([Text("answer")], [Text("next")])
    agent = await make_agent(COMPLETIONS, session={"plan_fork": plan_fork})
    forks = []

    async def first(event) -> None:
        if event.type == "session" and not forks:
            forks.append(True)
            item = {"id": "a", "text": "old", "status": "pending"}
            await agent.control({"type": "plan", "request_id": "p1", "expected_version": 0, "items": [item]})

    await run_with(agent, "go", first)
    entry = agent.read_transcript(entry_ids=True)[-1]["entry_id"]
    created = []

    async def second(event) -> None:
        if event.type == "session" and not created:
            item = {"id": "a", "text": "new", "status": "in_progress"}
            await agent.control({"type": "plan", "request_id": "p2", "expected_version": 1, "items": [item]})
            created.append(await agent.control({"type": "fork", "request_id": "f", "entry_id": entry}))

    events = await run_with(agent, "more", second)
    contexts = {c["target_id"]: c for c in last_snapshot(events)["contexts"]}
    assert [item["text"] for item in contexts[created[0]["target_id"]]["plan"]["items"]] == expected
    assert [item["text"] for item in contexts[0]["plan"]["items"]] == ["new"]


async def test_reset_starts_a_new_context_with_the_handoff(make_agent, fake_server) -> None:
    """S2: reset at an input boundary: the model sees only the handoff; the old text is kept in
    the store and the plan survives."""
    fake_server.enqueue([Text("old answer")], [Text("fresh answer")])
    agent = await make_agent(COMPLETIONS, session={})
    receipts = []

    async def on_event(event) -> None:
        if event.type == "session" and not receipts:
            item = {"id": "a", "text": "keep me", "status": "pending"}
            await agent.control({"type": "plan", "request_id": "p", "expected_version": 0, "items": [item]})
            receipts.append(await agent.control({"type": "reset", "request_id": "r", "handoff": "We chose Rust."}))

    events = await run_with(agent, {"prompt": "old question", "request_id": "q1"}, on_event)
    assert receipts[0]["status"] == "queued", "the reset waits for the running turn's boundary"
    await run_with(agent, {"prompt": "new question", "request_id": "q2"})
    last = fake_server.requests[-1]
    assert "old question" not in json.dumps(last.json)
    assert user_texts(last)[0].endswith("We chose Rust.") and user_texts(last)[-1] == "new question"
    assert agent.snapshot()["plan"]["items"][0]["text"] == "keep me"
    assert agent.log.receipts["r"].payload["status"] == "applied"
    assert ends(events)[0].text == "old answer"


async def test_configure_is_compare_and_swap_and_applies_at_the_next_request(make_agent, fake_server) -> None:
    """S2: configure with the current version changes model/effort from the next request; a
    stale version is version_conflict and changes nothing."""
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g")], [Text("done")])
    agent = await make_agent(COMPLETIONS, session={}, extra_tools=[gate.tool()])
    receipts = []

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start":
            change = {"provider": "fake", "model_id": "bigger-model"}
            receipts.append(
                await agent.control(
                    {"type": "configure", "request_id": "c1", "expected_version": 0, "model": change, "effort": "low"}
                )
            )
            with pytest.raises(AgentError) as info:
                await agent.control({"type": "configure", "request_id": "c2", "expected_version": 0, "effort": "high"})
            assert info.value.code == "version_conflict" and info.value.details["current_version"] == 1
            gate.open()

    events = await run_with(agent, "go", on_event)
    assert receipts[0] == {"request_id": "c1", "type": "configure", "status": "applied", "version": 1}
    assert fake_server.requests[0].json["model"] == "fake-model"
    assert fake_server.requests[1].json["model"] == "bigger-model", "effective at the next request"
    assert fake_server.requests[1].json.get("reasoning_effort") == "low"
    config = last_snapshot(events)["contexts"][0]["config"]
    model = {"provider": "fake", "model_id": "bigger-model"}
    assert config == {"version": 1, "model": model, "effort": "low", "web_search": None}


async def test_configure_racing_the_next_request(make_agent, fake_server) -> None:
    """S2 race, both orders: committed before a request starts → that request uses it; sent
    while a request is in flight → the following request does."""
    fake_server.enqueue([Text("part "), Hang()], [Text("second turn")])
    agent = await make_agent(COMPLETIONS, session={})
    sent = []

    async def on_event(event) -> None:
        if event.type == "text_delta" and not sent:
            sent.append(True)
            model = {"provider": "fake", "model_id": "model-b"}
            await agent.control({"type": "configure", "request_id": "c", "expected_version": 0, "model": model})
            await agent.control({"type": "submit", "request_id": "f", "prompt": "next"})
            fake_server.release()

    await run_with(agent, "go", on_event)
    assert [r.json["model"] for r in fake_server.requests] == ["fake-model", "model-b"]


async def test_plan_command_and_update_plan_tool(make_agent, fake_server) -> None:
    """S2/S5: the plan command is CAS on its version; the model's update_plan replaces the plan
    and the snapshot shows its items live."""
    items = [
        {"id": "s1", "text": "Read", "status": "completed"},
        {"id": "s2", "text": "Write", "status": "in_progress"},
    ]
    fake_server.enqueue([ToolCall("update_plan", {"items": items}, id="u")], [Text("planned")])
    agent = await make_agent(COMPLETIONS, session={})
    conflicts = []

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "end" and event.name == "update_plan":
            with pytest.raises(AgentError) as info:
                await agent.control({"type": "plan", "request_id": "p", "expected_version": 0, "items": []})
            conflicts.append(info.value.code)

    events = await run_with(agent, "plan it", on_event)
    tools = {t["function"]["name"] for t in fake_server.requests[0].json["tools"]}
    assert "update_plan" in tools and "subagent" not in tools
    assert conflicts == ["version_conflict"]
    plan = last_snapshot(events)["plan"]
    assert plan["version"] == 1 and [i["status"] for i in plan["items"]] == ["completed", "in_progress"]


async def test_cancel_foreground_during_a_tool_aborts_the_turn(make_agent, fake_server) -> None:
    """S2: cancel (foreground) stops the running tool and ends the turn aborted; a queued
    follow-up still runs; the snapshot showed the task stopping."""
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g")], [Text("follow-up done")])
    agent = await make_agent(COMPLETIONS, session={}, extra_tools=[gate.tool()])
    seen = []

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start":
            await agent.control({"type": "submit", "request_id": "f", "prompt": "after"})
            receipt = await agent.control({"type": "cancel", "request_id": "c", "scope": "foreground"})
            seen.append(receipt)
            seen.append(next(t for t in agent.snapshot()["tasks"] if t["kind"] == "tool"))

    events = await run_with(agent, {"prompt": "go", "request_id": "r"}, on_event)
    assert seen[0]["status"] == "cancelled" and seen[0]["cancelled"] == ["r"]
    assert seen[1]["stopping"] is True
    assert [(e.request_id, e.status) for e in ends(events)] == [("r", "aborted"), ("f", "completed")]
    history = [t for t in last_snapshot(events)["history"] if t["kind"] == "tool"]
    assert history and all(t["stopping"] is False for t in history)


async def test_cancel_all_drops_the_queue(make_agent, fake_server) -> None:
    """S2: cancel all ends the turn and the queued inputs (cancelled, never run)."""
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g")])
    agent = await make_agent(COMPLETIONS, session={}, extra_tools=[gate.tool()])

    async def on_event(event) -> None:
        if event.type == "tool" and event.phase == "start":
            await agent.control({"type": "submit", "request_id": "f", "prompt": "never"})
            await agent.control({"type": "cancel", "request_id": "c", "scope": "all"})

    events = await run_with(agent, {"prompt": "go", "request_id": "r"}, on_event)
    assert [(e.request_id, e.status) for e in ends(events)] == [("r", "aborted")]
    assert agent.log.receipts["f"].payload["status"] == "cancelled"
    assert len(fake_server.requests) == 1


async def test_cancel_racing_settlement(make_agent, fake_server) -> None:
    """S2 race, both orders: a cancel that lands before the response settles aborts the turn;
    one that lands after the turn ended finds nothing to cancel."""
    fake_server.enqueue([Text("partial"), Hang()], [Text("complete")])
    agent = await make_agent(COMPLETIONS, session={})
    receipts = []

    async def before(event) -> None:
        if event.type == "text_delta" and not receipts:
            receipts.append(await agent.control({"type": "cancel", "request_id": "c1"}))

    events = await run_with(agent, {"prompt": "one", "request_id": "r1"}, before)
    assert receipts[0]["status"] == "cancelled" and ends(events)[0].status == "aborted"

    after = []

    async def late(event) -> None:
        if event.type == "end" and not after:
            after.append(await agent.control({"type": "cancel", "request_id": "c2"}))

    events = await run_with(agent, {"prompt": "two", "request_id": "r2"}, late)
    assert after[0]["status"] == "idle" and ends(events)[0].status == "completed"


async def test_background_compaction_command(make_agent, fake_server) -> None:
    """S2/C5: compact runs as a background task beside the turn; its summary replaces the older
    context at the next boundary; its usage counts for the session, not for any turn."""

    def responder(request):
        if "You are compacting the history" in json.dumps(request.json):
            return [Text("Summary: four questions were asked."), Usage(input=500, output=20)]
        return [Text("answer " + "words " * 200), Usage(input=100, output=50)]

    fake_server.responder = responder
    agent = await make_agent(COMPLETIONS, session={"compaction": {"keep_recent_tokens": 300}})
    for n in range(3):
        await run_with(agent, f"question {n} " + "detail " * 200)
    receipts = []

    async def on_event(event) -> None:
        if event.type == "session" and not receipts:
            receipts.append(await agent.control({"type": "compact", "request_id": "k"}))

    events = await run_with(agent, "question 3", on_event)
    task_id = receipts[0]["task_id"]
    snapshot = last_snapshot(events)
    history = {t["task_id"]: t for t in snapshot["history"]}
    assert history[task_id]["kind"] == "compaction" and history[task_id]["status"] == "completed"
    transcript = agent.read_transcript()
    assert "four questions were asked" in transcript[0]["content"][0]["text"]
    assert "question 3" in json.dumps(transcript), "the newest messages are kept verbatim"
    turn_calls = sum(t["usage"]["calls"] for t in snapshot["turns"])
    assert snapshot["usage"][0]["own"]["calls"] == turn_calls + 1, "the summary counts once, for the session"


async def test_compact_without_keeping_recent_messages_summarizes_everything(make_agent, fake_server) -> None:
    """S2/C3: ``keep_recent: false`` (Studio's "Compact now") summarizes the whole context like
    ``/compact`` — even a short one, which the default (keep ``keep_recent_tokens`` verbatim)
    leaves alone ("nothing to do")."""

    def responder(request):
        if "You are compacting the history" in json.dumps(request.json):
            return [Text("Summary: two short questions.")]
        return [Text("short answer")]

    fake_server.responder = responder
    agent = await make_agent(COMPLETIONS, session={})
    await run_with(agent, "question 0")
    receipts = []

    async def on_event(event) -> None:
        if event.type == "session" and len(receipts) < 2:
            receipts.append(await agent.control({"type": "compact", "request_id": f"k{len(receipts)}"}))
            receipts.append(await agent.control({"type": "compact", "request_id": "all", "keep_recent": False}))

    events = await run_with(agent, "question 1", on_event)
    history = {t["task_id"]: t for t in last_snapshot(events)["history"]}
    kept, everything = history[receipts[0]["task_id"]], history[receipts[1]["task_id"]]
    assert kept["status"] == "completed" and kept["detail"]["note"] == "nothing to do"
    assert everything["status"] == "completed" and everything["detail"].get("note") is None
    transcript = agent.read_transcript()
    assert "two short questions" in transcript[0]["content"][0]["text"]
    assert "question 0" not in json.dumps(transcript), "the whole older context was summarized"


async def test_background_tokens_start_compaction_early(make_agent, fake_server) -> None:
    """C5: past compaction.background_tokens (well below the 90% threshold) a background
    compaction starts by itself, once per context generation."""

    def responder(request):
        if "You are compacting the history" in json.dumps(request.json):
            return [Text("Summary: the earlier turns.")]
        return [Text("answer " + "words " * 150)]  # the fake server reports usage from the request size

    fake_server.responder = responder
    agent = await make_agent(
        COMPLETIONS, session={"compaction": {"background_tokens": 1_500, "keep_recent_tokens": 300}}
    )
    for n in range(4):
        await run_with(agent, f"question {n} " + "detail " * 150)
    snapshot = agent.snapshot()
    compactions = [t for t in snapshot["history"] if t["kind"] == "compaction"]
    assert compactions and compactions[0]["status"] == "completed" and compactions[0]["detail"]["auto"] is True
    summaries = [r for r in fake_server.requests if "You are compacting the history" in json.dumps(r.json)]
    assert len(summaries) == len(compactions), "one summary per trigger"
    assert "the earlier turns" in json.dumps(agent.read_transcript())
    assert snapshot["contexts"][0]["context_usage"]["used"] < 128_000 * 0.9


async def test_reused_call_ids_stay_tied_to_their_assistant_entry(make_agent, fake_server) -> None:
    """S4: a model that reuses call ids across turns gets distinct tool tasks; each keeps the
    arguments it was submitted with."""
    fake_server.enqueue(
        [ToolCall("ls", {"path": "."}, id="c1")],
        [ToolCall("read", {"path": "README.md"}, id="c1")],
        [Text("done")],
    )
    agent = await make_agent(COMPLETIONS, session={})
    events = await run_with(agent, "look around")
    tools = [t for t in last_snapshot(events)["history"] if t["kind"] == "tool"]
    assert len(tools) == 2 and len({t["task_id"] for t in tools}) == 2
    assert [(t["name"], t["arguments"]) for t in tools] == [("ls", {"path": "."}), ("read", {"path": "README.md"})]
    shown = {e.tool_call_id for e in events if e.type == "tool" and e.phase == "end"}
    assert shown == {t["task_id"] for t in tools}, "tool events and tasks share one stable identity"


async def test_a_failed_run_cancels_queued_work_and_does_not_resume(make_agent, fake_server, tmp_path) -> None:
    """D5: an exception in the runtime (here: the host's usage hook) fails the run, records the
    reason, cancels queued inputs, and a reopened runtime does not continue it."""
    from agentcore import AgentHost

    db = str(tmp_path / "failed.sqlite")
    gate = Gate()
    fake_server.enqueue([ToolCall("gate", {}, id="g")], [Text("never settled")])

    def report_usage(payload) -> None:
        if payload["record_id"] == "r:0:0":
            raise RuntimeError("the host's ledger is gone")

    agent = await make_agent(COMPLETIONS, session={}, database_path=db, extra_tools=[gate.tool()])

    async def on_event(event) -> None:
        if event.type == "session" and "f" not in agent.log.receipts:
            await agent.control({"type": "submit", "request_id": "f", "prompt": "queued"})

    with pytest.raises(AgentError) as info:
        await run_with(agent, {"prompt": "go", "request_id": "r"}, on_event, host=AgentHost(report_usage=report_usage))
    assert info.value.code == "run_failed"
    receipts = agent.log.receipts
    assert receipts["r"].payload["status"] == "failed" and "ledger is gone" in receipts["r"].payload["final"]["error"]
    assert receipts["f"].payload["status"] == "cancelled"
    await agent.close()
    reopened = await make_agent(COMPLETIONS, session={}, database_path=db, extra_tools=[Gate().tool()])
    assert reopened.pending_request_id is None
    fake_server.enqueue([Text("fresh")])
    events = await run_with(reopened, {"prompt": "new", "request_id": "n"})
    assert [e.request_id for e in ends(events)] == ["n"]


async def test_delete_cancels_and_hides_a_fork(make_agent, fake_server) -> None:
    """S2: delete cancels a child context's work and hides it; the main context cannot be deleted."""
    fake_server.enqueue([Text("answer")], [Text("again")])
    agent = await make_agent(COMPLETIONS, session={})
    await run_with(agent, "first")
    entry = agent.read_transcript(entry_ids=True)[-1]["entry_id"]
    results = []

    async def on_event(event) -> None:
        if event.type == "session" and not results:
            fork = await agent.control({"type": "fork", "request_id": "f", "entry_id": entry})
            results.append(await agent.control({"type": "delete", "request_id": "d", "target_id": fork["target_id"]}))
            with pytest.raises(AgentError) as info:
                await agent.control({"type": "delete", "request_id": "d0"})
            results.append(info.value.field)
            with pytest.raises(AgentError) as info:
                await agent.control({"type": "snapshot", "request_id": "s", "target_id": fork["target_id"]})
            results.append(info.value.field)

    events = await run_with(agent, "second", on_event)
    assert results[0]["status"] == "deleted" and results[1:] == ["target_id", "target_id"]
    assert [c["kind"] for c in last_snapshot(events)["contexts"]] == ["main"]
