"""Child process for the remote-environment tests: an "agent" that runs one bash call in a worker.

Usage: ``environment_child.py ROOT COMMAND``. Starts a worker rooted at ROOT, runs COMMAND
through the bash tool there, prints ``{"result", "is_error", "worker_pid"}`` (one JSON line,
flushed), then blocks until the parent SIGKILLs it. Not collected by pytest (no ``test_``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from agentcore.extensions.environment.remote import start_worker
from tests.agentcore.tool_helpers import Target, call, text
from tests.child_guard import die_with_parent


async def main() -> None:
    root, command = Path(sys.argv[1]), sys.argv[2]
    env = await start_worker(root)
    result = await call(Target("remote", env).ctx(root), "bash", command=command)
    sys.stdout.write(json.dumps({"result": text(result), "is_error": result.is_error, "worker_pid": env.worker_pid}))
    sys.stdout.write("\n")
    sys.stdout.flush()
    await asyncio.Event().wait()  # the parent kills us here


if __name__ == "__main__":
    die_with_parent()
    asyncio.run(main())
