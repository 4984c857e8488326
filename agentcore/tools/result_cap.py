"""The one cap on every tool result (SPEC T3; issue 22).

Whatever a tool returns is committed to the store, shown in the ``tool`` event and sent to the
model on every later request. The built-in tools bound their own output (``read`` keeps the
head, ``bash`` the tail, 50 KB each), but an extra tool, an MCP server or a catalog service can
answer with anything: a 50 MB MCP answer once travelled whole into the event, grew the store by
100 MB and failed the turn. ``cap_result`` is applied by ``executor.execute_call`` — the
boundary every tool result crosses, a code-mode script's nested calls included — after the
result was made safe to commit and checked against its output schema:

- **text**: the text blocks together keep at most ``max_bytes`` UTF-8 bytes from the start (cut
  at a line end when one is in the second half of what is kept, else at a character boundary);
  text blocks after the cut are dropped;
- **structured content** whose JSON is larger than ``max_bytes`` is not kept (it is committed
  and sent as it is, and the text already says what the tool found);
- what was cut is saved whole in the runtime's scratch directory (text as ``.txt``, structured
  content as ``.json``), which the file tools may then read, and a note at the end of the text
  tells the model how much it got and where the rest is;
- images keep their own bound (``inputs.MAX_IMAGE_BYTES`` each, checked by the executor);
- a progress update (``ctx.on_update``) is cut to the same cap (``cap_update``): it is shown,
  never committed, so nothing is saved.

The default (``inputs.MAX_TOOL_RESULT_BYTES``, 64 KiB) sits above what the built-in tools keep,
so they are never cut twice; ``create_agent(max_tool_result_bytes=...)`` sets another cap for
every tool (``ToolContext.max_result_bytes``).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from agentcore.messages import TextContent, UserContent
from agentcore.tools.base import ToolContext, ToolResult
from agentcore.tools.display import display_name
from agentcore.tools.truncate import format_size

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_-]")


def cap_result(result: ToolResult, ctx: ToolContext, tool_name: str, structured_json: str | None) -> ToolResult:
    """``result`` within ``ctx.max_result_bytes`` (see the module docstring); ``structured_json``
    is the result's structured content as the executor encoded it (None when it has none)."""
    limit = ctx.max_result_bytes
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    text_bytes = _utf8_size(texts, limit)
    structured_bytes = _utf8_size([structured_json], limit) if structured_json is not None else 0
    if text_bytes <= limit and structured_bytes <= limit:
        return result
    content: list[UserContent] = list(result.content)
    notes: list[str] = []
    if text_bytes > limit:
        content, kept = _head_of_text(result.content, limit)
        total = text_bytes + len(texts) - 1  # saved joined by newlines
        where = _saved(ctx, tool_name, ".txt", "\n".join(texts), f"The full text ({format_size(total)})")
        notes.append(
            f"[Result cut: showing the first {format_size(kept)} of the {format_size(total)} ({total:,} bytes) "
            f"of text this tool returned (the cap on a tool result is {format_size(limit)}). {where}]"
        )
    if structured_json is not None and structured_bytes > limit:
        where = _saved(ctx, tool_name, ".json", structured_json, "It")
        notes.append(
            f"[The structured content ({format_size(structured_bytes)}) is larger than the {format_size(limit)} "
            f"a tool result may keep, so it was not kept. {where}]"
        )
    content.append(TextContent("\n\n".join(notes)))
    structured = None if structured_bytes > limit else result.structured_content
    return ToolResult(content, is_error=result.is_error, structured_content=structured, terminate=result.terminate)


def cap_update(text: str, limit: int) -> str:
    """A progress update within ``limit`` UTF-8 bytes, with a note when it was cut."""
    size = _utf8_size([text], limit)
    if size <= limit:
        return text
    head = text.encode()[:limit].decode("utf-8", "ignore")
    return f"{head}… [update cut at {format_size(limit)}: {size:,} bytes]"


def _utf8_size(texts: list[str], limit: int) -> int:
    """The UTF-8 size of ``texts``; not encoded when it cannot exceed ``limit`` (4 bytes per
    character at most), which is every result on the hot path."""
    if sum(len(text) for text in texts) * 4 <= limit:
        return 0
    return sum(len(text.encode()) for text in texts)


def _head_of_text(blocks: list[UserContent], limit: int) -> tuple[list[UserContent], int]:
    """The blocks with their text cut to ``limit`` bytes from the start, and the bytes kept."""
    kept: list[UserContent] = []
    used = 0
    cut = False
    for block in blocks:
        if not isinstance(block, TextContent):
            kept.append(block)
            continue
        if cut:
            continue
        data = block.text.encode()
        if used + len(data) <= limit:
            kept.append(block)
            used += len(data)
            continue
        head = data[: limit - used].decode("utf-8", "ignore")
        line_end = head.rfind("\n")
        if line_end >= len(head) // 2:
            head = head[: line_end + 1]
        if head:
            kept.append(TextContent(head))
        used += len(head.encode())
        cut = True
    return kept, used


def _saved(ctx: ToolContext, tool_name: str, suffix: str, data: str, subject: str) -> str:
    """Save ``data`` in the scratch directory; the sentence that tells the model where it is."""
    directory = ctx.scratch_dir
    try:
        if directory is None:
            directory = Path(tempfile.mkdtemp(prefix="agentcore-results-"))
        else:
            directory.mkdir(parents=True, exist_ok=True)
        prefix = f"{_UNSAFE_NAME.sub('_', tool_name)[:40] or 'tool'}-"
        fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
    except OSError as exc:
        return f"{subject} could not be saved ({exc.strerror or exc})."
    path = Path(name)
    if ctx.env is not None and ctx.env.kind != "local":
        return (
            f"{subject} is saved on the agent's host in {display_name(path)}, outside this session's "
            "execution environment, so the file tools cannot open it."
        )
    if ctx.guard is not None:
        ctx.guard.allow_read_file(path)
    return f"{subject} is saved in {display_name(path)}; read it with the read tool (offset, limit) or grep."
