"""A scripted stand-in for an agentcore runtime, for tests that must hold a run mid-stream.

Most Studio tests use the real runtime with the offline demo model. This fake exists for the
few that need to *stop time* inside a run (reload mid-stream, stop a running tool) without
sleeping: the script waits on ``gate`` at each ``HOLD`` step and sets ``reached`` first, so a
test awaits ``reached`` (a real condition), inspects the page, then opens the gate.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

HOLD = object()


class ScriptedRuntime:
    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.transcript: list[dict[str, Any]] = []
        self.gate = asyncio.Event()
        self.reached = asyncio.Event()
        self.closed = False
        self.inputs: list[Any] = []

    def read_transcript(self) -> list[dict[str, Any]]:
        return list(self.transcript)

    def get_context_usage(self) -> dict[str, int] | None:
        return {"used": 1200, "total": 32000}

    async def close(self) -> None:
        self.closed = True

    async def run(self, agent_input: Any, host: Any = None) -> AsyncIterator[dict[str, Any]]:
        self.inputs.append(agent_input)
        request_id = agent_input.request_id
        if agent_input.ask_resume is not None:
            answers = agent_input.ask_resume.answers
            text = f"Thanks, you chose {answers}."
            self.transcript.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
            yield {"type": "text_delta", "index": 0, "delta": text}
            yield {"type": "end", "status": "completed", "request_id": request_id, "text": text}
            return
        self.transcript.append({"role": "user", "content": [{"type": "text", "text": agent_input.prompt}]})
        text = ""
        abort = getattr(host, "abort_signal", None)
        for step in self.script:
            if step is HOLD:
                self.reached.set()
                gate = asyncio.ensure_future(self.gate.wait())
                waits = [gate] + ([asyncio.ensure_future(abort.wait())] if abort is not None else [])
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for w in waits:
                    w.cancel()
                self.gate.clear()
                if abort is not None and abort.is_set():
                    if text:
                        self.transcript.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
                    yield {
                        "type": "end",
                        "status": "aborted",
                        "request_id": request_id,
                        "error_code": "execution_aborted",
                        "error": "the run was cancelled",
                    }
                    return
                continue
            if step["type"] == "end":
                yield step
                return
            if step["type"] == "text_delta":
                text += step["delta"]
            yield step
        self.transcript.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
        yield {"type": "end", "status": "completed", "request_id": request_id, "text": text}


def text_script(*chunks: str, hold_after: int = 1) -> list[Any]:
    """Text deltas with a HOLD after the first ``hold_after`` chunks."""
    steps: list[Any] = [{"type": "context_usage", "used": 900, "total": 32000}]
    for i, chunk in enumerate(chunks):
        steps.append({"type": "text_delta", "index": 0, "delta": chunk})
        if i + 1 == hold_after:
            steps.append(HOLD)
    steps.append(
        {
            "type": "usage",
            "record_id": "u1",
            "input_tokens": 100,
            "output_tokens": 20,
            "cached_input_tokens": 0,
            "cache_creation_tokens": 0,
            "reasoning_tokens": 0,
            "cost": 0.0,
            "model": "fake",
        }
    )
    return steps
