"""Page contexts and region rendering: a view's state (``HostState``) plus Studio's rows → HTML.

Wagtail's *one view, two templates*: one context per region renders the region inside the
full page and as the out-of-band fragment a live push replaces, so a page patched by pushes
and a page rendered fresh from the store cannot disagree. Reads go through
``studio.selectors``; nothing here writes.

``render_regions`` renders exactly the regions a push names (``Regions``): the host marks each
region dirty on its own (a Trace tab when its part of the snapshot changed, the conversation
when a turn ended), so a push costs what changed, not the whole page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from studio import (
    controls_html,
    rendering,
    selectors,
    text_stream,
    trace,
    trace_records,
    turn_html,
    usage_html,
)
from studio.confinement import ToolConfinement, confinement_of
from studio.demo_prompts import Suggestion, suggestions
from studio.host.contract import HostState, Regions, live_prefix
from studio.host.live import DELIVERY_PREFIX, LiveBlock, LiveTurn, message_text
from studio.model_capabilities import capabilities
from studio.models import Effort, PermissionPolicy, SessionKind, StudioSession
from studio.stores import location_of
from studio.trace import code_mode_runs

#: What a host keeps for one view between pushes (``View.cache``): rows and contexts that change
#: only with the session's settings, keyed by what they depend on.
Cache = dict[Any, Any]

#: What the view's pages show of the controls, by partial (``controls_html.NAMES``): the markup
#: the last pushes sent. Kept in ``View.cache`` under ``SHOWN``; dropped whenever a page renders
#: from the host's state (a page load, a resync) or a full push goes out — the page then shows
#: what the host has now, which the next push's partials are compared with afresh.
Shown = dict[str, str]
SHOWN = "shown"

#: The composer's web search menu (SPEC P2 per conversation: ``configure`` web_search).
WEB_SEARCH_CHOICES = (("auto", "auto"), ("on", "on"), ("off", "off"))

#: Settled turns a page shows at first; older ones load on request ("Show earlier").
CONVERSATION_WINDOW = 40
TURNS_PAGE = 40


def cached(cache: Cache | None, key: Any, build: Callable[[], Any]) -> Any:
    """``build()``, kept in ``cache`` under ``key`` (no cache: built every time)."""
    if cache is None:
        return build()
    if key not in cache:
        cache[key] = build()
    return cache[key]


def live_turn(state: HostState) -> dict[str, Any] | None:
    """The live turn for the templates: its blocks, and its user message as the store has it
    (the first message of its request), or the prompt the host knows when the store's messages
    were not read (a live patch)."""
    if not state.live:
        return None
    live = {**state.live, "blocks": [LiveBlock(**b) for b in state.live["blocks"]]}
    live["prompt"] = None if live.get("resumed") else live.get("prompt")
    live["session_id"] = state.session_id
    live.setdefault("images", [])
    first = next(iter(state.live_transcript), None)
    if first is not None and not live.get("resumed") and first.get("role") == "user":
        text = message_text(first)
        live["images"] = rendering.image_refs(first)
        if first.get("synthetic"):
            live["prompt"] = None
            if text.startswith(DELIVERY_PREFIX):
                notice = LiveBlock(
                    key="start", kind="notice", status="info", text=text.split("]", 1)[0].lstrip("[") + "."
                )
                live["blocks"] = [notice, *live["blocks"]]
        else:
            live["prompt"] = text
    return live


def normalize_questions(questions: list[Any]) -> list[dict[str, Any]]:
    """``ask_user`` questions in one shape for the form: options as plain strings."""
    out = []
    for index, q in enumerate(questions):
        if not isinstance(q, dict):
            continue
        options = []
        for option in q.get("options") or []:
            label = option.get("label") if isinstance(option, dict) else option
            if label is not None and str(label):
                options.append(str(label))
        out.append(
            {
                "id": str(q.get("id") or f"q{index + 1}"),
                "question": str(q.get("question") or ""),
                "options": options,
                "multi_select": bool(q.get("multi_select")),
                "allow_free_text": bool(q.get("allow_free_text", not options)),
            }
        )
    return out


def _store_facts(session: StudioSession, schema: int | None) -> dict[str, Any]:
    """Where the store is (a file, or a PostgreSQL store's URL without password), its size and
    schema version, read without taking the owner's lock. ``schema``: the version the open
    runtime reports (the snapshot's ``records``: an open store is always at agentcore's); read
    from the store only when no runtime said (a read-only connection of its own)."""
    location = location_of(session)
    try:
        size = location.size()
    except Exception:
        size = None
    if schema is None:
        try:
            schema = location.schema_version()
        except Exception:
            schema = None
    return {"store_path": location.label, "size": size, "schema_version": schema}


def records_context(
    session: StudioSession, state: HostState, cache: Cache | None = None
) -> dict[str, Any]:
    """The Records tab: what the snapshot's ``records`` say, plus Studio's own facts (the store's
    size and schema read from disk: per settings version in ``cache``) and where the tools run
    — as the host configured the runtime when it says (``HostState.confinement``), else worked
    out from the row."""
    snapshot = state.snapshot
    root = session.root or session
    model = root.registered_model
    sections = trace_records.records_sections((snapshot or {}).get("records"))
    confinement = ToolConfinement(**state.confinement) if state.confinement is not None else confinement_of(root)
    context: dict[str, Any] = next(
        (c for c in (snapshot or {}).get("contexts", []) if c.get("target_id") == session.target_id), {}
    )
    version = int((context.get("config") or {}).get("version") or 0)
    storage = sections["storage"]
    reported = storage.get("schema_version") if isinstance(storage, dict) else None
    schema = reported if isinstance(reported, int) and not isinstance(reported, bool) else None
    facts = cached(cache, ("store_facts", version), lambda: _store_facts(root, schema))
    return {
        "records": {
            "model": model.public_description(),
            "is_demo": model.is_demo,
            "tools": confinement.tools,
            "tools_run": confinement.summary,
            "permission_policy": PermissionPolicy(confinement.permission_policy).label,  # as the runtime has it
            "workdir": root.workdir,
            "owner": root.owner.get_username(),
            **facts,
        },
        "sections": sections,
        "runtime_model": sections["model"],
        "tool_confinement": confinement,
    }


def plan_context(session: StudioSession, snapshot: dict[str, Any] | None) -> dict[str, Any]:
    approvals = selectors.approvals_of(session)
    latest = approvals[-1] if approvals else None
    return {
        "approvals": list(reversed(approvals)),
        "latest_plan": latest,
        "latest_plan_items": rendering.plan_items(latest.plan) if latest else [],
        "latest_plan_html": rendering.render_markdown(latest.plan) if latest else "",
        "checklist": trace.plan_of(snapshot, session.target_id),
    }


def tasks_context(session: StudioSession, state: HostState, *, page: int = 0) -> dict[str, Any]:
    """The Tasks tab and its count: the snapshot's task tree with Studio's tool timings."""
    snapshot = state.snapshot
    ids = [
        str(t.get("task_id"))
        for t in [*(snapshot or {}).get("tasks", []), *(snapshot or {}).get("history", [])]
        if t.get("kind") in ("tool", "subagent")
    ]
    timings = selectors.tool_timings(session.root_id_str, ids) if ids else {}
    tree = trace.task_tree(snapshot, session.target_id, timings=timings, page=page)
    return {"tree": tree, "tasks_running": tree.running}


def usage_tab_context(session: StudioSession, state: HostState) -> dict[str, Any]:
    """The Usage tab and the header's totals: the snapshot's per-context usage, Studio's ledger."""
    targets = trace.subtree_targets(state.snapshot or {}, session.target_id)
    return {"usage": trace.usage_for(state.snapshot, session.target_id), **selectors.usage_context(session, targets)}


def trace_context(session: StudioSession, state: HostState, *, page: int = 0) -> dict[str, Any]:
    """Every Trace tab."""
    return {
        "session": session,
        **tasks_context(session, state, page=page),
        **usage_tab_context(session, state),
        **plan_context(session, state.snapshot),
        **records_context(session, state),
    }


def controls_context(
    session: StudioSession, state: HostState, cache: Cache | None = None, models: selectors.ModelMenu | None = None
) -> dict[str, Any]:
    """The snapshot-driven controls: status, queue chips, model and effort, links. The models
    offered and what they can do change only with the registered models: ``models`` (the host's
    catalog at its version) has them; without it they are read now."""
    context = state.context() or {}
    config = context.get("config") or {}
    root = session.root or session
    choices = models.choices(root.registered_model) if models else selectors.model_choices(root.registered_model)
    configured = config.get("model") or {}
    current_model = next((m for m in choices if m.model_id == configured.get("model_id")), None)
    if current_model is None and not configured:
        current_model = root.registered_model
    parent = None
    if session.kind != SessionKind.MAIN:
        parent_target = context.get("parent_target_id")
        if parent_target is None and context.get("forked_from"):
            parent_target = context["forked_from"].get("target_id")
        target = int(parent_target or 0)
        parent = (
            cached(cache, ("parent", target), lambda: selectors.view_for_target(root, target))
            if parent_target is not None
            else root
        )
    status = context.get("status") or "idle"
    running = state.running
    in_use = current_model or root.registered_model
    abilities = models.capabilities(in_use) if models else capabilities(in_use)
    return {
        "context_status": status,
        "busy": running or status in ("running", "queued"),
        "queue": [q for q in context.get("queue") or [] if q.get("kind") == "input"],
        "config": {
            "version": int(config.get("version") or 0),
            "effort": config.get("effort") or root.effort,
            "model_id": (configured.get("model_id") if configured else None) or root.registered_model.model_id,
            "model_pk": current_model.pk if current_model is not None else None,
            "label": current_model.display_name if current_model is not None else configured.get("model_id", ""),
            "web_search": config.get("web_search") or "auto",
        },
        "capabilities": abilities,
        "web_search_choices": WEB_SEARCH_CHOICES,
        "model_choices": choices,
        # The header names the model the next request runs on (a switch changes it), not the
        # model the session was created with.
        "model_in_use": current_model or root.registered_model,
        "effort_choices": Effort.choices,
        "parent_view": parent,
        "read_only": session.read_only,
        "view_status": _status_of(session, state),
    }


def _status_of(session: StudioSession, state: HostState) -> tuple[str, str]:
    """(css class, label) of the status pill, from the snapshot (honest about background work)."""
    if state.snapshot is None:
        return session.status, session.get_status_display()
    status = trace.view_status(state.snapshot, session.target_id, live=state.live is not None)
    labels = {"running": "Running", "waiting": "Waiting for you", "failed": "Failed", "idle": "Idle"}
    context = state.context() or {}
    if status == "running" and context.get("status") == "idle" and state.live is None:
        return "running", "Working in the background"
    return status, labels.get(status, status)


def conversation_context(session: StudioSession, state: HostState) -> dict[str, Any]:
    """The conversation: the newest settled turns (a window) and the live turn (or, in an
    empty demo session, the demo's prompts to try)."""
    live = live_turn(state)
    turns = rendering.transcript_turns(state.settled_transcript)
    total = len(turns)
    first = max(0, total - CONVERSATION_WINDOW)
    window = turns[first:]
    _attach_timings(session, window)
    _attach_notices(session, turns, window)
    return {
        "suggestions": _suggestions(session, state) if not turns and live is None else [],
        "turns": window,
        "turns_first": first,
        "turns_total": total,
        "turns_generation": rendering.generation_of(state.settled_transcript),
        "live": live,
        "live_prefix": live_prefix(live["request_id"]) if live else "",
        "code_mode_runs": code_mode_runs(state.snapshot),
    }


def _suggestions(session: StudioSession, state: HostState) -> list[Suggestion]:
    """The demo's prompts for an empty demo session, each checked against its tools."""
    root = session.root or session
    if not root.registered_model.is_demo or session.read_only:
        return []
    choice = ((state.context() or {}).get("config") or {}).get("web_search") or "auto"
    searching = choice == "on" or (choice == "auto" and capabilities(root.registered_model).web_search_default)
    return suggestions(state.snapshot, web_search=searching)


def turns_page(session: StudioSession, state: HostState, start: int, end: int) -> dict[str, Any]:
    """Settled turns ``[start, end)`` for "Show earlier" (clamped to what exists)."""
    turns = rendering.transcript_turns(state.settled_transcript)
    start = max(0, min(start, len(turns)))
    end = max(start, min(end, len(turns), start + TURNS_PAGE))
    page = turns[start:end]
    _attach_timings(session, page)
    _attach_notices(session, turns, page)
    return {
        "turns": page,
        "start": start,
        "end": end,
        "generation": rendering.generation_of(state.settled_transcript),
        "code_mode_runs": code_mode_runs(state.snapshot),
    }


def _attach_timings(session: StudioSession, turns: list[rendering.Turn]) -> None:
    tools = [b for t in turns for b in t.blocks if b.kind == "tool"]
    if not tools:
        return
    timings = selectors.tool_timings(session.root_id_str, [b.tool_call_id for b in tools])
    for block in tools:
        timing = timings.get(block.tool_call_id) or {}
        if block.status == "pending" and timing.get("status"):
            block.status = str(timing["status"])
        block.duration_ms = timing.get("duration_ms")


def _attach_notices(session: StudioSession, all_turns: list[rendering.Turn], shown: list[rendering.Turn]) -> None:
    notices = selectors.run_notices(str(session.pk), {t.prompt for t in shown if t.prompt is not None})
    if not notices:
        return
    seen: dict[str, int] = {}
    shown_keys = {t.key for t in shown}
    for turn in all_turns:
        if turn.prompt is None:
            continue
        n = seen.get(turn.prompt, 0)
        seen[turn.prompt] = n + 1
        options = notices.get(turn.prompt) or []
        if turn.key in shown_keys and n < len(options):
            turn.notice = options[n]


def pending_context(session: StudioSession, state: HostState) -> dict[str, Any]:
    """The review card or the question form of a paused turn (nothing while a turn is live, or
    when the host knows no turn of this view waits: ``HostState.waiting``)."""
    pending = selectors.pending_run(str(session.pk)) if state.live is None and state.waiting is not False else None
    pending_info = (pending or {}).get("pending")
    if pending_info and pending_info.get("kind") == "ask_user":
        pending_info = {**pending_info, "questions": normalize_questions(pending_info.get("questions") or [])}
    plan = pending_info.get("plan") or "" if pending_info and pending_info.get("kind") == "plan" else None
    return {
        "pending": pending_info,
        "pending_plan_items": rendering.plan_items(plan) if plan is not None else [],
        "pending_plan_html": rendering.render_markdown(plan) if plan is not None else "",
    }


def base_context(session: StudioSession, state: HostState) -> dict[str, Any]:
    """What every region's template may read: the view, its store's main session, the model."""
    root = session.root or session
    return {
        "session": session,
        "root": root,
        "model": root.registered_model,
        "running": state.running,
        "context_usage": (state.live or {}).get("context_usage") or state.context_usage,
        "host_epoch": state.epoch,
        "host_seq": state.seq,
    }


def session_page_context(session: StudioSession, state: HostState) -> dict[str, Any]:
    """Everything the page shows: the full page and a watcher's full re-render. ``session`` is
    the view's row read after ``state`` (``selectors.session_view``: the status and totals the
    host's opening reconciled, with the rows the page shows loaded)."""
    context = base_context(session, state)
    pending = pending_context(session, state)
    conversation = conversation_context(session, state)
    if pending["pending"] and pending["pending"].get("kind") == "plan":
        rendering.drop_plan_answer(conversation["turns"], pending["pending"].get("plan") or "")
    context.update(conversation)
    context.update(pending)
    context.update(controls_context(session, state))
    context.update(trace_context(session, state))
    return context


def task_history_page(session: StudioSession, state: HostState, page: int) -> dict[str, Any]:
    return trace_context(session, state, page=page)


# --- regions ------------------------------------------------------------------------------------

#: Each region's partials (one partial per live-updated fragment, reused by the full page). A push
#: renders ``controls``, ``usage`` and ``conversation`` in plain Python (``controls_html``,
#: ``usage_html``, ``turn_html``: proven equal to these templates by their tests), the rest
#: through the templates.
REGION_TEMPLATES: dict[str, tuple[str, ...]] = {
    "conversation": ("studio/_conversation.html",),
    "pending": ("studio/_pending.html",),
    "ring": ("studio/_context_ring.html",),
    "config": ("studio/_session_config.html",),
    "controls": rendering.CONTROL_REGIONS,
    "tasks": ("studio/_tab_tasks.html", "studio/_tab_counts.html"),
    "plan": ("studio/_tab_plan.html",),
    "usage": ("studio/_tab_usage.html", "studio/_session_stats.html"),
    "records": ("studio/_tab_records.html",),
}
ALL_REGIONS = tuple(REGION_TEMPLATES)


def render_full_regions(session_id: str, state: HostState) -> str:
    """Every region as out-of-band fragments: a full push or a watcher's re-render."""
    return rendering.render_regions(session_page_context(selectors.session_view(session_id), state))


def reads_rows(regions: Regions, state: HostState) -> bool:
    """Whether rendering ``regions`` reads Studio's rows (else it can run on the event loop)."""
    if regions.full or regions.conversation:
        return True
    return any(getattr(regions, name) for name in ALL_REGIONS if name not in ("ring", "conversation"))


def render_regions(
    session_id: str,
    state: HostState,
    regions: Regions,
    *,
    added: list[LiveBlock] | None = None,
    changed: list[LiveBlock] | None = None,
    sent: dict[str, text_stream.StreamState] | None = None,
    cache: Cache | None = None,
    shown: Shown | None = None,
    live_blocks: bool = True,
    models: selectors.ModelMenu | None = None,
) -> str:
    """One push: the regions ``regions`` names, and the live turn's added and changed blocks.
    ``shown``: the control partials the view's pages show (``View.cache[SHOWN]``), kept up to date
    here; a partial equal to the one shown is left out. ``live_blocks=False``: no block of the
    live turn (the caller sends those from the live turn as it is when the push goes out).
    ``models``: the host's catalog of the registered models (``controls_context``).

    The session's row is read only when a region needs it (a push of streamed text reads
    none); a region whose render includes the live turn (the conversation, a turn's opening)
    already carries its blocks, so they are not sent twice."""
    if regions.full:
        return render_full_regions(session_id, state)
    parts: list[str] = []
    live = live_turn(state)
    names = [name for name in ALL_REGIONS if getattr(regions, name)]
    whole_turn = regions.conversation or (regions.opening and live is not None)
    if live is not None and not whole_turn and live_blocks:
        parts.extend(
            live_block_parts(
                live_prefix(live["request_id"]),
                code_mode_runs(state.snapshot),
                live.get("streams") or {},
                added or [],
                changed or [],
                every=live["blocks"] if regions.tasks else None,
                sent=sent,
            )
        )
    if regions.ring:
        parts.append(
            rendering.render_context_ring((state.live or {}).get("context_usage") or state.context_usage, oob=True)
        )
        names.remove("ring")
    if not names:
        if regions.opening and live is not None:
            parts.insert(0, opening_html(state, live))
        return "".join(parts)
    session = cached(cache, "session", lambda: selectors.session_view(session_id))
    context = base_context(session, state)
    context["oob"] = True
    if regions.conversation:
        pending = pending_context(session, state)
        conversation = conversation_context(session, state)
        if pending["pending"] and pending["pending"].get("kind") == "plan":
            rendering.drop_plan_answer(conversation["turns"], pending["pending"].get("plan") or "")
        context.update(conversation)
        context.update(pending)
        if "conversation" not in names:
            names.insert(0, "conversation")
    elif regions.opening and live is not None:
        parts.append(opening_html(state, live))
    if "pending" in names and "pending" not in context:
        context.update(pending_context(session, state))
    if {"controls", "config", "records", "conversation"} & set(names):
        context.update(controls_context(session, state, cache, models))
    if "tasks" in names:
        context.update(tasks_context(session, state))
    if "usage" in names:
        context.update(usage_tab_context(session, state))
    if "plan" in names:
        context.update(plan_context(session, state.snapshot))
    if "records" in names:
        context.update(records_context(session, state, cache))
    for name in names:
        if name == "controls":
            parts.extend(_changed_controls(context, shown))
        elif name == "usage":
            parts.extend(usage_html.render(context))
        elif name == "conversation":
            parts.append(turn_html.conversation(context))
        else:
            parts.extend(rendering.render_template(template, context) for template in REGION_TEMPLATES[name])
    return "".join(parts)


def _changed_controls(context: dict[str, Any], shown: Shown | None) -> list[str]:
    """The control partials (plain Python, ``studio.controls_html``) that differ from what the
    view's pages show (``shown``: what the last pushes sent, by partial; None: send all). A turn's
    start and end change the status pill and the run buttons, rarely the title, the model badge
    or the queue: those are not sent again."""
    out: list[str] = []
    for name, html in controls_html.render(context).items():
        if shown is not None:
            if shown.get(name) == html:
                continue
            shown[name] = html
        out.append(html)
    return out


def opening_html(state: HostState, live: dict[str, Any]) -> str:
    """A turn going live: its user message and reply so far, appended to the conversation — in
    place of the greeting when it is the conversation's first (the page a fresh render gives).
    Reads no row: the prompt is the host's or the store's."""
    html = turn_html.live_turn(live, live_prefix(live["request_id"]), code_mode_runs(state.snapshot)).strip()
    if state.base_len == 0:
        return html.replace("<section ", '<section hx-swap-oob="outerHTML:#conversation-empty" ', 1)
    return rendering.oob(html, "beforeend:#conversation")


def live_block_parts(
    prefix: str,
    runs: dict[str, Any],
    streams: dict[str, Any],
    added: list[LiveBlock],
    changed: list[LiveBlock],
    *,
    every: list[LiveBlock] | None = None,
    sent: dict[str, text_stream.StreamState] | None = None,
) -> list[str]:
    """The live turn's new blocks (appended), its changed ones (a text block: what it gained,
    ``text_stream``; others replaced in place, keeping an open ``<details>`` open), and — given
    ``every`` block, when the snapshot changed — its ``codemode`` blocks again (a script's nested
    calls settle in snapshots, not in events). ``prefix``: the turn's DOM prefix; ``runs``: the
    snapshot's code-mode runs; ``streams``: each text block's streaming state now (as data),
    ``sent`` the one the page has before this push."""
    parts: list[str] = []

    def html(block: LiveBlock) -> Any:
        if block.kind != "text":
            return None
        return text_stream.live_block_html(block.text, f"{prefix}-{block.key}", streams, block.key)

    if added:
        blocks = "".join(rendering.render_block(b, prefix, runs, html(b)) for b in added)
        parts.append(rendering.oob(blocks, "beforeend:#live-blocks"))
    for block in changed:
        before = (sent or {}).get(block.key)
        after = text_stream.from_data(streams.get(block.key))
        if block.kind == "text" and before is not None and after is not None:
            parts.append(text_stream.patch_html(block.text, f"{prefix}-{block.key}", before, after))
        else:
            parts.append(
                rendering.render_block_parts(block, prefix, runs)
                if block.kind != "text"
                else rendering.oob(rendering.render_block(block, prefix, runs, html(block)))
            )
    if every is not None and runs:
        pushed = {b.key for b in [*added, *changed]}
        parts.extend(rendering.render_code_mode_parts(every, prefix, runs, skip=pushed))
    return parts


def render_live_patch(
    live: LiveTurn,
    added: list[LiveBlock],
    changed: list[LiveBlock],
    *,
    snapshot: dict[str, Any] | None,
    streams: dict[str, Any],
    sent: dict[str, text_stream.StreamState],
    ring: dict[str, int] | Literal[False] | None = False,
) -> str:
    """A push of streamed work only — the live turn's new and changed blocks and, unless ``ring``
    is False, the context ring — rendered from the live turn itself: no ``HostState`` is built and
    no row is read, so what each token costs is its own markup. The same parts ``render_regions``
    sends for such a push."""
    parts = live_block_parts(live_prefix(live.request_id), code_mode_runs(snapshot), streams, added, changed, sent=sent)
    if ring is not False:
        parts.append(rendering.render_context_ring(ring, oob=True))
    return "".join(parts)
