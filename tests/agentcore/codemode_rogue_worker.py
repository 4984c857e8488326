"""A code-mode worker taken over by an attacker, for the host's protocol tests (SPEC X4).

Started by the host in place of ``worker.py`` (same command line, same empty environment): it
reads the start message, writes the script's text to the host as if it were its own message
line, and waits until the host stops it. Not collected by pytest.
"""

from __future__ import annotations

import json
import sys

start = json.loads(sys.stdin.readline())
sys.stdout.write(start["script"] + "\n")
sys.stdout.flush()
sys.stdin.read()  # until the host closes the pipe or kills the process
