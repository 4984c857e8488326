"""The runtime's scratch directory (where bash keeps the full output of a cut command).

Studio opens one runtime per session and reopens it after idling, so a directory made per
runtime and never removed piles up in the temp dir (tens of thousands were found after a day
of test runs). It is made only when a command's output is cut, and removed by ``close()``.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from agentcore.testing.steps import Text, ToolCall
from tests.helpers import collect, final


async def test_no_scratch_directory_unless_output_is_cut(make_agent, fake_server) -> None:
    fake_server.enqueue([ToolCall("bash", {"command": "echo short"}, id="b1")], [Text("done")])
    agent = await make_agent()
    assert final(await collect(agent, "run it")).status == "completed"
    scratch = agent.config.scratch
    assert not scratch.exists(), "nothing was spooled, so nothing was created"
    await agent.close()
    assert not scratch.exists()


async def test_spooled_output_is_readable_until_close_then_removed(make_agent, fake_server) -> None:
    """T1: a cut command's full output is saved where the model can read it during the
    runtime's life; closing the runtime removes the directory and what it held."""
    fake_server.enqueue(
        [ToolCall("bash", {"command": "seq 1 200000"}, id="b1")],
        [Text("read it")],
    )
    agent = await make_agent()
    events = await collect(agent, "count")
    assert final(events).status == "completed"
    result = next(e for e in events if e.type == "tool" and e.phase == "end").result
    saved = Path(re.search(r"(/\S+\.log)", result).group(1))
    assert saved.parent == agent.config.scratch
    head = (await asyncio.to_thread(saved.read_text)).splitlines()[0]
    assert head == "1", "the whole output, its head included"
    await agent.close()
    assert not agent.config.scratch.exists()
