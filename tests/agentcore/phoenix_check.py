"""Import an exported trace into a real Arize Phoenix (SPEC W11) — run by hand, not collected.

Phoenix is not a test dependency (it brings hundreds of packages and takes ~30 s to start), so
this check runs against a Phoenix the caller started on loopback:

    python -m venv /tmp/phoenix-venv && /tmp/phoenix-venv/bin/pip install arize-phoenix
    PHOENIX_WORKING_DIR=/tmp/phx PHOENIX_PORT=16006 PHOENIX_HOST=127.0.0.1 /tmp/phoenix-venv/bin/phoenix serve &
    python -m tests.agentcore.phoenix_check --phoenix http://127.0.0.1:16006

It runs one real turn (a tool call, a retried request, a code-mode script) against the fake
provider into a SQLite store, exports the store's trace as OTLP/JSON, turns it into the protobuf
request an OTLP/JSON receiver would (Phoenix takes only ``application/x-protobuf``), posts it to
``/v1/traces`` and reads the spans back from Phoenix's REST API: every span, under one trace,
with its parent, its GenAI attributes and the span kind Phoenix gives it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import httpx

from agentcore import AgentInput, build_trace, create_agent, otlp_document
from agentcore.testing.fake_server import FakeProviderServer
from agentcore.testing.steps import HttpError, Text, ToolCall, Usage
from tests.agentcore.test_trace_export import parsed


async def make_store(path: Path) -> None:
    async with FakeProviderServer() as server:
        server.enqueue(
            [ToolCall("ls", {"path": "."}, id="c1"), Usage(input=100, output=10, cached_input=40)],
            [HttpError(503, "busy")],
            [ToolCall("codemode", {"code": "await tools.ls({}); return 2"}, id="k1")],
            [Text("done"), Usage(input=120, output=4)],
        )
        runtime = await create_agent(
            provider="fake",
            model="fake-model",
            base_url=server.base_url,
            api_key="k",
            api_kind="openai-completions",
            database_path=str(path),
            workdir=str(path.parent),
            session={"code_mode": {}},
            sleep=lambda _s: asyncio.sleep(0),
        )
        try:
            async for _event in runtime.run(AgentInput(prompt="go", request_id=f"r-{uuid.uuid4().hex[:8]}")):
                pass
        finally:
            await runtime.close()


def check(phoenix: str) -> dict[str, Any]:
    project = f"agentcore-trace-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "s.sqlite"
        asyncio.run(make_store(store))
        document = otlp_document(build_trace(store), resource_attributes={"openinference.project.name": project})
    exported = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    body = parsed(document).SerializeToString()
    with httpx.Client(base_url=phoenix, timeout=30) as client:
        posted = client.post("/v1/traces", content=body, headers={"content-type": "application/x-protobuf"})
        posted.raise_for_status()
        spans: list[dict[str, Any]] = []
        for _ in range(50):  # Phoenix inserts spans in the background
            got = client.get(f"/v1/projects/{project}/spans", params={"limit": 1000})
            if got.status_code == 200:
                spans = got.json()["data"]
                if len(spans) >= len(exported):
                    break
            client.get("/healthz")  # a round trip, not a sleep: give the insert a moment
    names = sorted(s["name"] for s in spans)
    kinds = {s["name"]: s.get("span_kind") for s in spans}
    traces = {s["context"]["trace_id"] for s in spans}
    ids = {s["context"]["span_id"] for s in spans}
    orphans = [s["name"] for s in spans if s.get("parent_id") and s["parent_id"] not in ids]
    chat = next(s for s in spans if s["name"].startswith("chat "))
    result = {
        "posted": posted.status_code,
        "exported": len(exported),
        "stored": len(spans),
        "traces": len(traces),
        "orphans": orphans,
        "names": names,
        "span_kinds": kinds,
        "chat_attributes": {k: v for k, v in chat["attributes"].items() if k.startswith(("gen_ai.", "llm."))},
    }
    assert result["stored"] == result["exported"], result
    assert result["traces"] == 1 and not orphans, result
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phoenix", default="http://127.0.0.1:16006")
    args = parser.parse_args()
    json.dump(check(args.phoenix), sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
