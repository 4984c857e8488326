"""Model and tool output → safe HTML, and session state → the live partials.

Everything a model or a tool wrote is untrusted. Markdown is parsed with raw HTML disabled,
links are limited to http(s)/mailto, and the produced HTML is sanitised once more with nh3
against a short allow-list, so neither a ``<script>``, an ``onerror`` attribute nor a
``javascript:`` link can reach the page. Plain-text output (tool arguments and results) goes
through Django's autoescaping only.

The same code renders a full page and every live push (one partial per live-updated fragment),
so a page patched by pushes looks exactly like one rendered fresh; a conversation block's markup
is plain Python (``studio.block_html``, proven equal to its templates by a test).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import nh3
from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from studio import block_html, trace
from studio.block_html import pretty_json
from studio.host.live import LiveBlock, clip, key_argument

_ALLOWED_TAGS = {
    "a", "p", "br", "hr", "em", "strong", "del", "s", "code", "pre", "blockquote",
    "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody",
    "tr", "th", "td", "span", "div", "input",
}  # fmt: skip
_ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "span": {"class"},
    "div": {"class"},
    "pre": {"class"},
    "th": {"align"},
    "td": {"align"},
    "ol": {"start"},
    "input": {"type", "checked", "disabled"},
}
_URL_SCHEMES = {"http", "https", "mailto"}
_FORMATTER = HtmlFormatter(cssclass="hl", nowrap=True)


def _highlight(code: str, lang: str, _attrs: str) -> str:
    """A fenced block in one box: ``<pre class="hl"><code>`` with Pygments token classes.

    It starts with ``<pre`` so markdown-it uses it as is (anything else gets wrapped in a
    second ``<pre><code>``, which draws a box inside a box).
    """
    if not lang:
        return ""
    try:
        lexer = get_lexer_by_name(lang.split()[0])
    except ClassNotFound:
        return ""
    body = highlight(code, lexer, _FORMATTER)
    name = escape(lexer.aliases[0] if lexer.aliases else "text")
    return f'<pre class="hl"><code class="language-{name}">{body}</code></pre>'


_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False, "highlight": _highlight})
_MD.enable(["table", "strikethrough"])


def sanitize_html(html: str) -> str:
    """The last wall: only allow-listed tags, attributes and URL schemes survive."""
    return _CLEANER.clean(_SURROGATE.sub("\ufffd", html))


def _filter_attribute(tag: str, attribute: str, value: str) -> str | None:
    if tag == "input":
        # markdown task lists only: a disabled checkbox and nothing else.
        if attribute == "type":
            return "checkbox" if value == "checkbox" else None
        if attribute == "disabled":
            return "disabled"
    return value


#: Built once: ``nh3.clean`` converts the allow-lists on every call (ten times the cleaning).
_CLEANER = nh3.Cleaner(
    tags=_ALLOWED_TAGS,
    attributes=_ALLOWED_ATTRIBUTES,
    url_schemes=_URL_SCHEMES,
    link_rel="noopener noreferrer nofollow",
    strip_comments=True,
    attribute_filter=_filter_attribute,
)
#: A lone surrogate (a broken ``\\ud800`` escape) cannot be encoded: shown as U+FFFD.
_SURROGATE = re.compile("[\ud800-\udfff]")


def render_markdown(text: str) -> SafeString:
    """Markdown → sanitised HTML. Safe for any input, including half-streamed text. One line of
    plain words (no ``_INLINE_MARKUP``, nothing to trim, no ``_BLOCK_STARTS``) is its own paragraph."""
    if not text:
        return mark_safe("")
    words = text.rstrip(" ")  # a paragraph's trailing spaces are not its text
    if words and _INLINE_MARKUP.search(words) is None and words[0] not in _BLOCK_STARTS and words == words.strip():
        return mark_safe(f"<p>{words}</p>\n")
    return mark_safe(sanitize_html(_MD.render(text)))


#: First characters that can make one line something other than a paragraph.
_BLOCK_STARTS = frozenset("#>-+=|0123456789")


def render_inline(text: str) -> SafeString:
    """Inline Markdown (no paragraph) → sanitised HTML: a streaming paragraph's pieces. Plain
    words (no ``_INLINE_MARKUP``: most of a streamed answer's pushes) are their own HTML."""
    if not text:
        return mark_safe("")
    if _INLINE_MARKUP.search(text) is None:
        return mark_safe(text)
    return mark_safe(sanitize_html(_MD.renderInline(text)))


#: What starts inline Markdown (escape, code, emphasis, strikethrough, link, image, autolink,
#: entity, line break) or what the parser or sanitiser rewrites (NUL, CR, no-break space, surrogate).
_INLINE_MARKUP = re.compile("[\\\\`*_~\\[\\]!<>&\n\r\x00\xa0\ud800-\udfff]")


def pygments_css() -> str:
    return _FORMATTER.get_style_defs(".hl")


def highlight_code(text: str, language: str) -> SafeString:
    """Code (a checkpoint's JSON, a script) as Pygments-highlighted HTML; escaped by Pygments."""
    try:
        lexer = get_lexer_by_name(language)
    except ClassNotFound:
        return mark_safe(escape(text))
    return mark_safe(highlight(text, lexer, _FORMATTER))


def highlight_json(value: Any) -> SafeString:
    return highlight_code(pretty_json(value), "json")


# --- plan -----------------------------------------------------------------------------------

_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s+(?:\[(?P<mark>[ xX])\]\s+)?(?P<text>.+)$")


@dataclass(slots=True)
class PlanItem:
    text: SafeString
    done: bool = False


def plan_items(plan: str) -> list[PlanItem]:
    """The plan's list items, for the checklist view (empty when the plan has no list)."""
    items: list[PlanItem] = []
    for line in plan.splitlines():
        match = _ITEM.match(line)
        if match:
            inline = mark_safe(sanitize_html(_MD.renderInline(match.group("text").strip())))
            items.append(PlanItem(text=inline, done=(match.group("mark") or " ").lower() == "x"))
    return items


# --- conversation items -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImageRef:
    """An image of a user message in the store: the message's entry and its place among the
    message's images (``studio:session_image`` serves it from the store)."""

    entry_id: str
    index: int
    mime_type: str


@dataclass(slots=True)
class Turn:
    """One user message and everything the agent did in reply (a section of the conversation).

    ``fork_entry`` is the committed entry of the turn's last message: a fork from it keeps the
    whole turn (``fork`` takes an entry id from ``read_transcript(entry_ids=True)``).
    ``before_entry`` is the entry just before the user message (editing the prompt forks from
    it; None for the conversation's first message).
    """

    key: str
    prompt: str | None
    blocks: list[LiveBlock] = field(default_factory=list)
    notice: dict[str, str] | None = None
    images: list[ImageRef] = field(default_factory=list)
    fork_entry: str | None = None
    before_entry: str | None = None
    prompt_entry: str | None = None  # the user message's own entry (Retry, Regenerate, Edit)
    index: int = 0

    @property
    def answer(self) -> str:
        """The reply's text, as the model wrote it (Markdown): what "Copy" copies."""
        return "\n\n".join(b.text for b in self.blocks if b.kind == "text" and b.text)


def image_refs(message: dict[str, Any]) -> list[ImageRef]:
    """The images of a stored user message (none before the store gave it an entry id)."""
    entry_id = message.get("entry_id")
    images = [c for c in message.get("content", []) if c.get("type") == "image"]
    if not entry_id:
        return []
    return [ImageRef(str(entry_id), n, str(c.get("mime_type") or "")) for n, c in enumerate(images)]


def _user_text(message: dict[str, Any]) -> str:
    return "\n".join(c.get("text", "") for c in message.get("content", []) if c.get("type") == "text")


def summary_of(message: dict[str, Any]) -> str:
    """The summary a compaction wrote (the text of its summary message)."""
    from agentcore.compaction.plan import summary_text_of
    from agentcore.messages import message_from_dict

    try:
        return summary_text_of(message_from_dict(message)) or ""
    except (KeyError, TypeError, ValueError):
        return ""


def synthetic_kind(message: dict[str, Any], text: str) -> str | None:
    """Why the runtime wrote this user message itself, or None for the user's own message.

    ``read_transcript()`` flags every runtime-written message (plan decisions, continuation
    prompts, compaction summaries) with ``"synthetic": true``; only the flag decides whether a
    message is synthetic. Its wording then just picks the notice shown in its place.
    """
    if not message.get("synthetic"):
        return None
    lowered = text.lower()
    if "reviewer's notes:" in lowered and "rejected" in lowered:
        return "rejected"
    if "plan was approved" in lowered:
        return "approved"
    if "previous reply" in lowered or "resend that tool call" in lowered:
        return "continued"
    if text.startswith("[Background subagent"):
        return "delivery"
    if text.startswith("Handoff from the previous context"):
        return "handoff"
    return "summary"


def _synthetic_block(kind: str, text: str, key: str) -> LiveBlock:
    if kind == "approved":
        return LiveBlock(key=key, kind="notice", status="info", text="Plan approved — building it now.")
    if kind == "rejected":
        note = (
            text.split("Reviewer's notes:", 1)[-1].strip().split("\n\n", 1)[0].strip()
            if "Reviewer's notes:" in text
            else ""
        )
        return LiveBlock(
            key=key, kind="notice", status="warning", text=f"Plan rejected: {note}" if note else "Plan rejected."
        )
    if kind == "summary":  # the divider of a compaction, its summary collapsed (``text``: filled by the caller)
        return LiveBlock(key=key, kind="compaction", status="done")
    if kind == "delivery":
        return LiveBlock(key=key, kind="notice", status="info", text=text.split("]", 1)[0].lstrip("[") + ".")
    if kind == "handoff":
        note = text.split("\n\n", 1)[-1].strip()
        return LiveBlock(key=key, kind="notice", status="info", text=f"The context was reset. Handoff note: {note}")
    return LiveBlock(key=key, kind="notice", status="info", text="The agent continued after an interruption.")


class _Continuation:
    """Where a continuation's notice goes in a turn's blocks: between blocks, never in a sentence.

    An interrupted reply is followed by the runtime's continuation prompt and the rest of the
    reply, which picks up mid-sentence. The rest is joined to the interrupted text (or thinking)
    block, and the notice is placed at the next block boundary: before the next block of another
    kind, or at the end of the turn. The interrupted message's own error (the dropped
    connection) is not shown in the middle either: the run's "Recovered after …" line says it.
    """

    def __init__(self) -> None:
        self.notice: LiveBlock | None = None  # waits for the next boundary
        self.joinable: LiveBlock | None = None  # the interrupted block the rest continues
        self.error: LiveBlock | None = None  # the last reply's error, until we know it was continued

    def add(self, turn: Turn, block: LiveBlock) -> None:
        self.settle_error(turn)
        joinable, self.joinable = self.joinable, None
        if self.notice is not None and joinable is not None and block.kind == joinable.kind:
            joinable.text += block.text
            return
        self.flush(turn)
        turn.blocks.append(block)

    def interrupted(self, turn: Turn, notice: LiveBlock) -> None:
        """A continuation prompt: the reply before it was cut and goes on after it."""
        self.error = None
        last = turn.blocks[-1] if turn.blocks else None
        self.joinable = last if last is not None and last.kind in ("text", "thinking") else None
        if self.notice is None:
            if self.joinable is None:
                turn.blocks.append(notice)  # nothing to continue: the boundary is here
            else:
                self.notice = notice

    def settle_error(self, turn: Turn) -> None:
        error, self.error = self.error, None
        if error is not None:
            self.flush(turn)
            turn.blocks.append(error)

    def flush(self, turn: Turn | None) -> None:
        """The boundary: a new block, a new turn or the end of the transcript."""
        notice, self.notice = self.notice, None
        if turn is not None:
            if self.error is not None:
                self.settle_error(turn)
            if notice is not None:
                turn.blocks.append(notice)


def transcript_turns(
    transcript: list[dict[str, Any]],
    *,
    tool_timings: dict[str, dict[str, Any]] | None = None,
    run_notices: list[dict[str, str] | None] | None = None,
) -> list[Turn]:
    """Group transcript messages into turns of display blocks (the same blocks as live).

    Tool calls are keyed by the runtime's display id (``<assistant entry[:12]>:<call id>``,
    what ``tool`` events and the snapshot's tasks carry) when the transcript has entry ids.
    ``tool_timings`` and ``run_notices`` (per prompt-carrying turn, in order, used only when
    the counts agree) are for callers that have them at hand; the page attaches both itself.
    """
    tool_timings = tool_timings or {}
    turns: list[Turn] = []
    tools: dict[str, LiveBlock] = {}
    searches: dict[str, LiveBlock] = {}
    current: Turn | None = None
    continuation = _Continuation()
    for m_index, message in enumerate(transcript):
        role = message.get("role")
        entry_id = message.get("entry_id")
        if role == "user":
            text = _user_text(message)
            synthetic = synthetic_kind(message, text)
            if synthetic == "continued" and current is not None:
                continuation.interrupted(current, _synthetic_block(synthetic, text, f"m{m_index}-syn"))
                current.fork_entry = entry_id or current.fork_entry
                continue
            if synthetic is not None and synthetic != "delivery":
                if current is None:  # a compaction summary or a handoff opens the context
                    current = Turn(key=f"t{m_index}", prompt=None, index=len(turns))
                    turns.append(current)
                block = _synthetic_block(synthetic, text, f"m{m_index}-syn")
                if block.kind == "compaction":
                    block.text = summary_of(message) or text
                continuation.add(current, block)
                current.fork_entry = entry_id or current.fork_entry
                continue
            continuation.flush(current)
            current = Turn(
                key=f"t{m_index}",
                prompt=text if synthetic is None else None,
                images=image_refs(message),
                index=len(turns),
                before_entry=transcript[m_index - 1].get("entry_id") if m_index else None,
                prompt_entry=entry_id if synthetic is None else None,
            )
            if synthetic == "delivery":
                current.blocks.append(_synthetic_block(synthetic, text, f"m{m_index}-syn"))
            current.fork_entry = entry_id
            turns.append(current)
            continue
        if current is None:
            current = Turn(key=f"t{m_index}", prompt=None, index=len(turns))
            turns.append(current)
        current.fork_entry = entry_id or current.fork_entry
        if role == "assistant":
            for c_index, block in enumerate(message.get("content", [])):
                kind = block.get("type")
                key = f"m{m_index}-{c_index}"
                if kind == "text" and block.get("text"):
                    continuation.add(current, LiveBlock(key=key, kind="text", text=block["text"]))
                elif kind == "thinking" and block.get("thinking") and not block.get("redacted"):
                    continuation.add(current, LiveBlock(key=key, kind="thinking", text=block["thinking"]))
                elif kind == "tool_call":
                    call_id = str(block.get("id"))
                    shown_id = f"{str(entry_id)[:12]}:{call_id}" if entry_id else call_id
                    timing = tool_timings.get(shown_id) or tool_timings.get(call_id) or {}
                    tool = LiveBlock(
                        key=key,
                        kind="tool",
                        tool_call_id=shown_id,
                        name=str(block.get("name")),
                        arguments=block.get("arguments") or {},
                        status=timing.get("status") or "pending",
                        duration_ms=timing.get("duration_ms"),
                    )
                    tools[call_id] = tool
                    continuation.add(current, tool)
                elif kind == "native":
                    search = native_search(block.get("payload") or {}, searches, key)
                    if search is not None:
                        continuation.add(current, search)
            if message.get("sources"):
                sources = [dict(s) for s in message["sources"] if isinstance(s, dict) and s.get("url")]
                continuation.add(current, LiveBlock(key=f"m{m_index}-src", kind="sources", sources=sources))
            # A stop the person asked for is not a failure: the run's one "Stopped" notice says it.
            if message.get("error_message") and message.get("stop_reason") == "error":
                continuation.settle_error(current)
                continuation.error = LiveBlock(
                    key=f"m{m_index}-err", kind="notice", status="error", text=message["error_message"]
                )
        elif role == "tool_result":
            result_of = tools.get(str(message.get("tool_call_id")))
            if result_of is not None:
                texts = [c.get("text", "") for c in message.get("content", []) if c.get("type") == "text"]
                result_of.result = clip("\n".join(texts))
                result_of.status = "error" if message.get("is_error") else "ok"
    continuation.flush(current)
    if run_notices:
        prompted = [t for t in turns if t.prompt is not None]
        if len(prompted) == len(run_notices):
            for turn, notice in zip(prompted, run_notices, strict=True):
                turn.notice = notice
        elif run_notices[-1] and turns:
            turns[-1].notice = run_notices[-1]
    return turns


def native_search(payload: dict[str, Any], searches: dict[str, LiveBlock], key: str) -> LiveBlock | None:
    """A web search from the provider-native content stored with an answer (P2), as the live
    turn showed it: a Responses ``web_search_call``, or Anthropic's ``server_tool_use`` (the
    query; a new block) and ``web_search_tool_result`` (its results: fills that block in)."""
    kind = payload.get("type")
    if kind == "web_search_call":
        action = payload.get("action") or {}
        failed = payload.get("status") == "failed"
        return LiveBlock(
            key=key,
            kind="search",
            tool_call_id=str(payload.get("id") or ""),
            text=str(action.get("query") or ""),
            status="failed" if failed else "success",
            result="web search failed" if failed else "",
            sources=[{"url": s["url"]} for s in action.get("sources") or [] if isinstance(s, dict) and s.get("url")],
        )
    if kind == "server_tool_use" and payload.get("name") == "web_search":
        query = (payload.get("input") or {}).get("query") if isinstance(payload.get("input"), dict) else None
        block = LiveBlock(
            key=key, kind="search", tool_call_id=str(payload.get("id") or ""), text=str(query or ""), status="success"
        )
        searches[block.tool_call_id] = block
        return block
    if kind == "web_search_tool_result":
        found = searches.get(str(payload.get("tool_use_id") or ""))
        content = payload.get("content")
        if found is not None and isinstance(content, list):
            found.sources = [
                {"url": r["url"], "title": r.get("title") or ""}
                for r in content
                if isinstance(r, dict) and r.get("url")
            ]
        elif found is not None:
            found.status = "failed"
            found.result = str((content or {}).get("error_code") or "failed") if isinstance(content, dict) else "failed"
    return None


def generation_of(transcript: list[dict[str, Any]]) -> str:
    """Which context generation a transcript is (its first entry): a reset or a compaction
    changes it, and with it the numbering of turns ("Show earlier" starts over)."""
    return str(transcript[0].get("entry_id") or "") if transcript else ""


def drop_plan_answer(turns: list[Turn], plan: str) -> None:
    """While a plan waits for review, its text lives in the review card only.

    The plan is the text the last answer ended with (PL3); showing it in the answer too put
    the same plan on screen twice. Trailing text blocks of the last turn that are part of the
    plan are removed (thinking, tools and notices stay).
    """
    wanted = " ".join(plan.split())
    if not turns or not wanted:
        return
    blocks = turns[-1].blocks
    while blocks and blocks[-1].kind == "text" and " ".join(blocks[-1].text.split()) in wanted:
        blocks.pop()


# --- partials ---------------------------------------------------------------------------------


#: Executions by the ``codemode`` call's display id (``trace.code_mode_runs(snapshot)``).
CodeModeRuns = dict[str, dict[str, Any]]


def is_code_mode(block: LiveBlock) -> bool:
    return block.kind == "tool" and block.name == "codemode"


def block_context(
    block: LiveBlock, dom_prefix: str, code_mode: CodeModeRuns | None = None, html: SafeString | None = None
) -> dict[str, Any]:
    """What a block's partials need. A ``codemode`` call also gets its script and, when
    ``code_mode`` (the snapshot's executions) has it, the nested calls: ``code_run``."""
    code_run = None
    key_arg = ""
    if is_code_mode(block):
        code_run = trace.code_mode_run((code_mode or {}).get(block.tool_call_id), block.arguments)
        key_arg = trace.script_summary(block.arguments)
    elif block.kind == "tool":
        key_arg = key_argument(block.name, block.arguments)
    return {
        "b": block,
        "dom_id": f"{dom_prefix}-{block.key}",
        "html": (html if html is not None else render_markdown(block.text))
        if block.kind == "text"
        else render_markdown(block.text)
        if block.kind == "compaction"
        else "",
        "key_arg": key_arg,
        "args_json": pretty_json(block.arguments) if block.kind == "tool" and code_run is None else "",
        "code_run": code_run,
        # The call started but no snapshot lists its execution yet (not "no longer listed").
        "code_starting": code_run is not None and code_run.execution is None and block.status == "running",
    }


def render_block(
    block: LiveBlock, dom_prefix: str, code_mode: CodeModeRuns | None = None, html: SafeString | None = None
) -> str:
    """One block; ``html`` is a text block's markup when the caller rendered it (a live stream).
    Plain Python (``studio.block_html``) but for a ``codemode`` call, which the templates render."""
    if is_code_mode(block):
        return render_to_string("studio/_block.html", block_context(block, dom_prefix, code_mode, html))
    dom_id = f"{dom_prefix}-{block.key}"
    if block.kind == "text":
        return block_html.block(block, dom_id, html=html if html is not None else render_markdown(block.text))
    if block.kind == "compaction":
        return block_html.block(block, dom_id, html=render_markdown(block.text))
    return block_html.block(block, dom_id)


def render_block_parts(block: LiveBlock, dom_prefix: str, code_mode: CodeModeRuns | None = None) -> str:
    """OOB fragments that update a block already on the page, keeping a <details> open."""
    if is_code_mode(block):
        return render_to_string("studio/_block_parts.html", block_context(block, dom_prefix, code_mode))
    if block.kind in ("thinking", "tool"):
        return block_html.parts(block, f"{dom_prefix}-{block.key}")
    return oob(render_block(block, dom_prefix, code_mode))


def render_code_mode_parts(
    blocks: list[LiveBlock], dom_prefix: str, code_mode: CodeModeRuns, *, skip: set[str] | None = None
) -> list[str]:
    """The live turn's ``codemode`` blocks again, for a push whose snapshot changed. The snapshot
    that lists a nested call (or the script's end) can arrive after the script's last ``tool``
    event, so the block follows the snapshots like the Trace does. ``skip``: keys already sent."""
    skip = skip or set()
    return [
        render_block_parts(block, dom_prefix, code_mode)
        for block in blocks
        if is_code_mode(block) and block.key not in skip
    ]


def oob(html: str, how: str = "true") -> str:
    """Mark the first element of ``html`` as an out-of-band swap (htmx ws extension)."""
    html = html.strip()
    if how == "true":
        return re.sub(r"^<(\w+)", r'<\1 hx-swap-oob="true"', html, count=1)
    return f'<div hx-swap-oob="{escape(how)}">{html}</div>'


# --- regions ------------------------------------------------------------------------------------

#: Regions replaced whole by a full push; the page includes the same partials.
FULL_REGIONS = (
    "studio/_conversation.html",
    "studio/_pending.html",
    "studio/_context_ring.html",
    "studio/_session_config.html",
)
#: Regions that follow the session snapshot (status, what the composer offers, the queue).
CONTROL_REGIONS = (
    "studio/_session_title.html",
    "studio/_session_model.html",
    "studio/_status.html",
    "studio/_run_controls.html",
    "studio/_queue.html",
)
TRACE_REGIONS = (
    "studio/_session_stats.html",
    "studio/_tab_tasks.html",
    "studio/_tab_plan.html",
    "studio/_tab_records.html",
    "studio/_tab_usage.html",
    "studio/_tab_counts.html",
)


def ring_geometry(usage: dict[str, int] | None) -> dict[str, Any] | None:
    """The context ring's arc (SVG presentation attributes, no inline style: CSP)."""
    if not usage or not usage.get("total"):
        return None
    used, total = int(usage["used"]), int(usage["total"])
    fraction = max(0.0, min(1.0, used / total))
    circumference = 2 * 3.14159265 * 15.9155
    return {
        "used": used,
        "total": total,
        "percent": round(fraction * 100),
        "dash": f"{fraction * circumference:.2f} {circumference:.2f}",
        "level": "high" if fraction >= 0.9 else "warn" if fraction >= 0.7 else "ok",
    }


def tokens(value: Any) -> str:
    """A token count the way a person reads it: 950, 1.2k, 3.45M (the ``tokens`` filter)."""
    value = int(value or 0)
    if value < 1000:
        return str(value)
    if value < 1_000_000:
        return f"{value / 1000:.1f}k".replace(".0k", "k")
    return f"{value / 1_000_000:.2f}M"


def thousands(value: Any) -> str:
    """A number with thousands separators (the ``thousands`` filter)."""
    return f"{int(value or 0):,}"


def render_context_ring(usage: dict[str, int] | None, *, oob: bool = False) -> str:
    """The context ring (``_context_ring.html`` includes it). Plain Python, not a template: it is
    re-rendered with the context usage every ~100 ms of a streaming answer, and Django's template
    engine cost twenty times the markup's own formatting."""
    ring = ring_geometry(usage)
    swap = ' hx-swap-oob="true"' if oob else ""
    if ring is None:
        return (
            f'<span id="context-ring" class="ring"{swap}\n  title="Context usage appears after the first request">\n'
            f'  <svg viewBox="0 0 36 36" class="ring-svg" role="img" aria-label="Context usage unknown">\n'
            f'    <circle class="ring-track" cx="18" cy="18" r="15.9155" fill="none" stroke-width="3.5"/>\n'
            f"    \n  </svg>\n"
            f'  <span class="ring-label"><span class="ring-word">context</span> —</span>\n</span>'
        )
    used, total, percent = ring["used"], ring["total"], ring["percent"]
    return (
        f'<span id="context-ring" class="ring ring-{escape(ring["level"])}"{swap}\n'
        f'  title="Context: {thousands(used)} of {thousands(total)} tokens ({percent}%)">\n'
        f'  <svg viewBox="0 0 36 36" class="ring-svg" role="img" aria-label="Context {percent} percent used">\n'
        f'    <circle class="ring-track" cx="18" cy="18" r="15.9155" fill="none" stroke-width="3.5"/>\n'
        f'    <circle class="ring-arc" cx="18" cy="18" r="15.9155" fill="none" stroke-width="3.5" '
        f'stroke-linecap="round" stroke-dasharray="{escape(ring["dash"])}" transform="rotate(-90 18 18)"/>\n'
        f"  </svg>\n"
        f'  <span class="ring-label"><span class="ring-word">context</span> '
        f"{tokens(used)} / {tokens(total)}</span>\n</span>"
    )


def render_regions(context: dict[str, Any]) -> str:
    """Every live region as out-of-band fragments: a full push or a watcher's re-render."""
    ctx = {**context, "oob": True, "ring": ring_geometry(context.get("context_usage"))}
    regions = "".join(render_to_string(name, ctx) for name in FULL_REGIONS + CONTROL_REGIONS + TRACE_REGIONS)
    return regions + TIMELINE_RESYNC


#: A full render carries no Timeline (the host renders it once a page opened it): this mark
#: tells a page that has it to load it again (``static/studio/timeline.js``).
TIMELINE_RESYNC = '<span id="timeline-resync" hx-swap-oob="true" hidden></span>'


def render_template(name: str, context: dict[str, Any]) -> str:
    return render_to_string(name, context)
