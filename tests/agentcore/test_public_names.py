"""Each public name imports on its own, in a fresh interpreter (issue 24).

A name that only imports after some other module happened to be loaded first is an import
circle waiting for a user to trip on it: ``from agentcore import AgentTool`` in a script must not
depend on the script having touched ``create_agent`` before. The lazy package resolves each
name from its submodule, so every name gets an interpreter of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import agentcore

ROOT = Path(__file__).resolve().parents[2]


def import_alone(name: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    code = f"from agentcore import {name}\nassert {name} is not None"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_every_public_name_imports_alone_in_a_fresh_interpreter() -> None:
    names = sorted(agentcore.__all__)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(names, pool.map(import_alone, names), strict=True))
    failed = {name: r.stderr.strip().splitlines()[-1:] for name, r in results.items() if r.returncode != 0}
    assert not failed, failed
    assert len(results) == len(agentcore.__all__) >= 30  # every name was tried, not an empty list
