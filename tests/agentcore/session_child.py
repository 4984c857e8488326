"""Child process for session crash tests: one ``run()`` in session mode against a file store.

Prints every event as one JSON line (flushed) and, for each command sent, a line
``{"type": "receipt", ...}``. ``--commands`` (a JSON list) are sent at the first ``session``
event, so they are recorded while the run is still busy. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from agentcore import create_agent
from tests.child_guard import die_with_parent


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--request-id", required=True)
    parser.add_argument("--prompt", default="go")
    parser.add_argument("--commands", default="[]")
    args = parser.parse_args()
    runtime = await create_agent(
        provider="fake",
        model="fake-model",
        base_url=args.base_url,
        api_key="k",
        api_kind="openai-completions",
        database_path=args.db,
        workdir=args.workdir,
        session={"subagents": {"tools": ["ls", "read"]}},
        sleep=_no_sleep,
    )
    commands: list[dict[str, Any]] = json.loads(args.commands)
    sent = False
    try:
        async for event in runtime.run({"prompt": args.prompt, "request_id": args.request_id}):
            _print(event.model_dump())
            if event.type == "session" and not sent:
                sent = True
                for command in commands:
                    _print({"type": "receipt", "receipt": await runtime.control(command)})
    finally:
        await runtime.close()


def _print(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


async def _no_sleep(seconds: float) -> None:
    return None


if __name__ == "__main__":
    die_with_parent()
    asyncio.run(main())
