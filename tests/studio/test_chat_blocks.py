"""Issue #27, the chat's blocks: what a turn shows live and after a reload (W13, W14, P2, C3, I1).

Pure: typed events folded into the live turn (``studio.host.live``), the store's transcript
grouped into turns (``studio.rendering``), the fold's reading of snapshots
(``studio.host.fold``) and the partials they render. The live turn and the reloaded page must
say the same thing.
"""

from __future__ import annotations

from typing import Any

from agentcore.compaction.plan import summary_message
from agentcore.events import CompactionEvent, RetryEvent, SourcesEvent, WebSearchEvent
from agentcore.messages import message_to_dict
from agentcore.session.snapshot import SessionSnapshot
from studio.host.contract import SessionConfig
from studio.host.fold import fold_event, fold_snapshot
from studio.host.live import STEER_MISSED, LiveTurn
from studio.host.state import HostedSession, View
from studio.rendering import render_block, transcript_turns
from studio.stores import StoreLocation

SOURCES = [
    {"url": "https://example.org/durable", "title": "Durable agents"},
    {"url": "javascript:alert(1)", "title": "A hostile source"},
]


def test_a_connect_retry_names_the_endpoint_the_delay_and_the_attempt_with_stop_beside_it() -> None:
    """W14: "cannot connect to 127.0.0.1:9 — retrying in 4 s, attempt 3 of 5", with a Stop."""
    live = LiveTurn("r")
    live.apply(
        RetryEvent(
            attempt=3,
            max_attempts=5,
            reason="cannot connect to 127.0.0.1:9: connection refused (nothing listens on that port)",
            kind="connect",
            delay_s=4.0,
            endpoint="127.0.0.1:9",
        )
    )
    (block,) = live.blocks
    assert (block.kind, block.status, block.endpoint, block.delay_s) == ("retry", "connect", "127.0.0.1:9", 4.0)
    html = " ".join(render_block(block, "lv").split())
    assert 'Cannot connect to <b class="mono">127.0.0.1:9</b> — retrying' in html
    assert "in 4 s</span>, attempt 3 of 5" in html
    assert "· connection refused (nothing listens on that port)" in html and "retry-stop" in html
    assert html.count("127.0.0.1:9") == 1, "the endpoint is named once"
    assert "Connection dropped" not in html


def test_a_dropped_stream_still_says_dropped() -> None:
    live = LiveTurn("r")
    live.apply(RetryEvent(attempt=1, max_attempts=10, reason="connection error: reset", kind="dropped", delay_s=0.5))
    html = render_block(live.blocks[0], "lv")
    assert "Connection dropped — retrying" in html and "in 0.5 s" in html and "attempt 1 of 10" in html


def test_a_web_search_goes_from_running_to_its_results_and_sources_link_safely() -> None:
    """P2/W13: one search block per search id (running → success, the query), one sources block
    per response (links deduplicated); a source that is not an http(s) link is no link."""
    live = LiveTurn("r")
    live.apply(WebSearchEvent(search={"id": "ws1", "status": "running", "sources": []}))
    live.apply(WebSearchEvent(search={"id": "ws1", "status": "success", "query": "durable agents", "sources": []}))
    live.apply(SourcesEvent(sources=SOURCES[:1]))
    live.apply(SourcesEvent(sources=SOURCES))
    search, sources = live.blocks
    assert (search.kind, search.status, search.text) == ("search", "success", "durable agents")
    assert sources.kind == "sources" and [s["url"] for s in sources.sources] == [s["url"] for s in SOURCES]
    search_html = render_block(search, "lv")
    assert "Searched the web" in search_html and "durable agents" in search_html
    html = render_block(sources, "lv")
    assert (
        '<a href="https://example.org/durable" target="_blank" rel="noopener noreferrer nofollow">Durable agents</a>'
        in html
    )
    assert "javascript:" not in html.split("A hostile source")[0].rsplit("<li>", 1)[-1]
    assert "example.org" in html  # the host beside the title


def test_after_a_reload_the_search_and_its_sources_are_the_same_blocks() -> None:
    """P2/W13: the stored answer (native search content and its ``sources``) renders the search
    with its query and the sources with their titles — Responses and Anthropic alike."""
    responses = {
        "role": "assistant",
        "content": [
            {
                "type": "native",
                "api_kind": "openai-responses",
                "model": "m",
                "payload": {
                    "type": "web_search_call",
                    "id": "ws1",
                    "status": "completed",
                    "action": {"query": "durable agents", "sources": [{"url": SOURCES[0]["url"]}]},
                },
            },
            {"type": "text", "text": "Here is what I found."},
        ],
        "sources": SOURCES[:1],
    }
    anthropic = {
        "role": "assistant",
        "content": [
            {
                "type": "native",
                "api_kind": "anthropic-messages",
                "model": "m",
                "payload": {"type": "server_tool_use", "id": "st1", "name": "web_search", "input": {"query": "q2"}},
            },
            {
                "type": "native",
                "api_kind": "anthropic-messages",
                "model": "m",
                "payload": {
                    "type": "web_search_tool_result",
                    "tool_use_id": "st1",
                    "content": [{"type": "web_search_result", "url": SOURCES[0]["url"], "title": "Durable agents"}],
                },
            },
            {"type": "text", "text": "Found it."},
        ],
    }
    user = {"role": "user", "content": [{"type": "text", "text": "search"}]}
    first, second = transcript_turns([user, responses, user, anthropic])
    kinds = [b.kind for b in first.blocks]
    assert kinds == ["search", "text", "sources"]
    assert first.blocks[0].text == "durable agents" and first.blocks[0].status == "success"
    assert first.blocks[2].sources == SOURCES[:1]
    assert [b.kind for b in second.blocks] == ["search", "text"]
    assert second.blocks[0].text == "q2" and second.blocks[0].sources[0]["title"] == "Durable agents"


def test_a_compaction_is_a_divider_holding_its_summary_live_and_after_a_reload() -> None:
    """C3: live, "Compacting…" then the summary (collapsed, Markdown); reloaded, the summary
    message at the head of the context is the same divider with the same summary."""
    live = LiveTurn("r")
    live.apply(CompactionEvent(phase="start"))
    assert live.blocks[0].kind == "compaction" and live.blocks[0].status == "running"
    assert "Compacting the context" in render_block(live.blocks[0], "lv")
    live.apply(CompactionEvent(phase="end", summary="**Goals**: ship it."))
    (block,) = live.blocks
    assert block.status == "manual" and block.text == "**Goals**: ship it."
    html = render_block(block, "lv")
    assert "<details" in html and "<strong>Goals</strong>" in html and "open" not in html.split(">")[0]
    summary = dict(message_to_dict(summary_message("**Goals**: ship it.")), synthetic=True)
    (turn,) = transcript_turns([summary, {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}])
    assert turn.blocks[0].kind == "compaction" and turn.blocks[0].text == "**Goals**: ship it."
    assert "conversation-summary" not in render_block(turn.blocks[0], "tx")


def test_a_turn_knows_its_prompt_entry_the_entry_before_it_its_images_and_its_answer() -> None:
    """I1 and edit-and-resend: the user message's entry (Retry, Regenerate, Edit), the entry
    before it (a fork for Edit; none for the first message), its stored images, and the
    answer's Markdown (what Copy copies)."""
    png = {"type": "image", "data": "iVBORw0KGgo=", "mime_type": "image/png"}
    transcript = [
        {"role": "user", "entry_id": "e1", "content": [{"type": "text", "text": "first"}]},
        {"role": "assistant", "entry_id": "e2", "content": [{"type": "text", "text": "| a |\n|---|"}]},
        {"role": "user", "entry_id": "e3", "content": [png, png]},
        {"role": "assistant", "entry_id": "e4", "content": [{"type": "text", "text": "two images"}]},
    ]
    first, second = transcript_turns(transcript)
    assert (first.prompt_entry, first.before_entry, first.answer) == ("e1", None, "| a |\n|---|")
    assert (second.prompt, second.prompt_entry, second.before_entry) == ("", "e3", "e2")
    assert [(i.entry_id, i.index, i.mime_type) for i in second.images] == [
        ("e3", 0, "image/png"),
        ("e3", 1, "image/png"),
    ]


# --- the fold: a steer that missed its turn, a background compaction ---------------------------


def _hosted() -> HostedSession:
    config = SessionConfig("v", StoreLocation("sqlite", "/x"), "/w", "workspace", "", "build", {})
    hs = HostedSession(config=config)
    hs.views[0] = View("v", 0)
    return hs


def _snapshot(revision: int, **parts: Any) -> tuple[SessionSnapshot, dict[str, Any]]:
    data: dict[str, Any] = {
        "owner_id": "o",
        "revision": revision,
        "contexts": [{"target_id": 0, "conversation_id": "c", "kind": "main", "status": "idle"}],
        "tasks": [],
        "history": [],
        "history_total": 0,
        "turns": [],
        "turns_total": 0,
        "plan": {},
        "records": {},
        "receipts": [],
        "usage": [],
    } | parts
    snapshot = SessionSnapshot.model_validate(data)
    return snapshot, snapshot.model_dump(mode="json")


def test_the_turn_a_missed_steer_became_says_so_live() -> None:
    """S2/W14: the first event of a turn the snapshot marks ``steer_missed`` opens it with the
    notice "the turn ended before a tool call: sent as the next message"."""
    from agentcore.events import TextDeltaEvent

    hs = _hosted()
    turn = {"request_id": "s", "target_id": 0, "status": "running", "steer_missed": True}
    fold_snapshot(hs, *_snapshot(1, turns=[turn]))
    fold_event(hs, TextDeltaEvent(index=0, delta="hi", request_id="s", target_id=0))
    live = hs.contexts[0].live
    assert live is not None and live.blocks[0].kind == "notice" and live.blocks[0].text == STEER_MISSED
    assert "ended before a tool call" in STEER_MISSED and "next message" in STEER_MISSED


def test_a_background_compaction_starting_and_ending_rerenders_the_conversation_and_the_ring() -> None:
    """C3: "Compact now" is a background task with no events of its own: when it starts or
    ends, the conversation (its divider) and the ring (from the snapshot's estimate) follow."""
    hs = _hosted()
    fold_snapshot(hs, *_snapshot(1))
    hs.views[0].dirty.take()
    task = {"task_id": "compact:k", "kind": "compaction", "name": "compaction", "status": "running", "target_id": 0}
    fold_snapshot(hs, *_snapshot(2, tasks=[task]))
    assert hs.views[0].dirty.conversation and hs.views[0].dirty.ring
    hs.views[0].dirty.take()
    shrunk = [{"target_id": 0, "conversation_id": "c", "kind": "main", "status": "idle",
               "context_usage": {"used": 120, "total": 32000}}]  # fmt: skip
    fold_snapshot(hs, *_snapshot(3, contexts=shrunk, history=[dict(task, status="completed")], history_total=1))
    assert hs.views[0].dirty.conversation and hs.views[0].dirty.ring
    assert hs.contexts[0].context_usage == {"used": 120, "total": 32000}
