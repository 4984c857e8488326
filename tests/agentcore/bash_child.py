"""Child process for the lifeline tests: runs one bash tool call, then waits to be killed.

Usage: ``bash_child.py WORKDIR TOKEN COMMAND``. Prints ``{"result": ...}`` (one JSON line,
flushed) when the call has returned, then blocks until the parent SIGKILLs it. Not collected
by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.agentcore.tool_helpers import call, make_ctx, text
from tests.child_guard import die_with_parent


async def main() -> None:
    workdir, token, command = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    result = await call(make_ctx(workdir, call_token=token), "bash", command=command)
    sys.stdout.write(json.dumps({"result": text(result), "is_error": result.is_error}) + "\n")
    sys.stdout.flush()
    await asyncio.Event().wait()  # the parent kills us here


if __name__ == "__main__":
    die_with_parent()
    asyncio.run(main())
