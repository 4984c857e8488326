"""The model for failover tests: a scripted provider the *test process* serves, so the test reads
every request the workers made (``server.requests``) after killing one of them.

The workers open real agentcore runtimes (``open_runtime``, via ``STUDIO_RUNTIME_FACTORY``)
against ``STUDIO_FAKE_PROVIDER_URL``. ``responder``:

- a prompt with ``ESSAY:<token>`` streams ``essay(token)`` slowly (``ESSAY_PACE_S`` between small
  chunks), so a test can kill the worker mid-answer. A continuation request (the runtime's
  "your previous reply was interrupted" prompt, after the partial answer it committed) gets
  exactly the rest of the essay — so the final transcript holds the whole answer once if, and
  only if, nothing committed was lost or repeated;
- a prompt with ``BRIEF:<token>`` streams a short ``brief(token)`` (benchmarks: many sessions);
- anything else (a follow-up after an essay included) is the offline demo's answer (plans,
  approvals, tools).
"""

from __future__ import annotations

import os
import re
from typing import Any

from agentcore.demo import _usage, demo_responder
from agentcore.testing.fake_server import RecordedRequest
from agentcore.testing.steps import Step, Stop, Text
from studio.host.contract import SessionConfig
from studio.host.factory import agentcore_runtime_factory

ESSAY = re.compile(r"ESSAY:(\w{1,40})")
ESSAY_PACE_S = 0.05
SENTENCES = 40
CONTINUATION = "Your previous reply was interrupted"


def essay(token: str) -> str:
    """The whole answer to ``ESSAY:<token>`` (numbered sentences: any loss or repeat shows)."""
    return " ".join(f"[{token} {n:02d}] Every committed word stays, once." for n in range(SENTENCES))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def essay_request(body: dict[str, Any]) -> tuple[str, str, bool] | None:
    """``(token, partial answer so far, is a continuation)`` for an essay request, else None."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    users = [n for n, i in enumerate(items) if i.get("role") == "user"]
    for n in reversed(users):
        said = _text(items[n].get("content"))
        if CONTINUATION in said:
            continue  # the runtime's own prompt after a cut answer: the request is still the essay's
        found = ESSAY.search(said)
        if found is None:
            return None  # the person's latest prompt is something else (a follow-up)
        after = items[n + 1 :]
        partial = "".join(_text(i.get("content")) for i in after if i.get("role") == "assistant")
        continuing = any(CONTINUATION in _text(i.get("content")) for i in after if i.get("role") == "user")
        return found.group(1), partial, continuing
    return None


BRIEF = re.compile(r"BRIEF:(\w{1,40})")


def brief(token: str) -> str:
    """A short answer to ``BRIEF:<token>`` (benchmarks: many sessions at once)."""
    return " ".join(f"[{token} {n:02d}] Short and sweet." for n in range(8))


def _latest_prompt(body: dict[str, Any]) -> str:
    users = [i for i in body.get("input") or [] if isinstance(i, dict) and i.get("role") == "user"]
    return _text(users[-1].get("content")) if users else ""


def responder(request: RecordedRequest) -> list[Step]:
    body = request.json
    short = BRIEF.search(_latest_prompt(body))
    if short is not None:
        text = brief(short.group(1))
        return [Text(text, chunk_size=12, pace_s=ESSAY_PACE_S), _usage(body, text), Stop("stop")]
    found = essay_request(body)
    if found is None:
        return demo_responder(request)
    token, partial, _continuing = found
    whole = essay(token)
    rest = whole[len(partial) :] if whole.startswith(partial) else f"(unexpected partial answer: {partial[:80]!r})"
    return [Text(rest, chunk_size=12, pace_s=ESSAY_PACE_S), _usage(body, rest), Stop("stop")]


async def open_runtime(config: SessionConfig) -> Any:
    config.model_options["base_url"] = os.environ["STUDIO_FAKE_PROVIDER_URL"]
    return await agentcore_runtime_factory(config)
