"""What ``import agentcore`` loads: the runtime never drags in its test doubles, argparse or Django.

Each check runs in a fresh interpreter (``sys.modules`` of this pytest process is full of
everything), prints the loaded module names as JSON and asserts on them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_DOUBLES = ("agentcore.testing", "agentcore.testing.fake_server", "agentcore.testing.steps")
NEVER_FOR_THE_RUNTIME = (*TEST_DOUBLES, "argparse", "django", "channels", "daphne", "agentcore.cli")


def loaded_after(code: str) -> set[str]:
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    return set(json.loads(result.stdout.splitlines()[-1]))


def test_import_agentcore_loads_no_test_doubles_argparse_or_django() -> None:
    """R1: ``import agentcore`` loads none of the fake server, its steps, argparse or Django."""
    loaded = loaded_after("import agentcore")
    assert not loaded & set(NEVER_FOR_THE_RUNTIME), sorted(loaded & set(NEVER_FOR_THE_RUNTIME))


def test_every_public_name_resolves_without_test_doubles() -> None:
    """R1/R5: resolving every public name (the runtime, run_sync, compaction, backups, the demo
    provider's module) still loads no test double, argparse or Django — the demo's fake server
    is loaded only when a demo model is served."""
    loaded = loaded_after(
        "import agentcore\n"
        "for name in agentcore.__all__:\n"
        "    assert getattr(agentcore, name) is not None, name\n"
        "import agentcore.demo"
    )
    assert {"agentcore.runtime", "agentcore.sync", "agentcore.demo"} <= loaded, "the names really resolved"
    assert not loaded & set(NEVER_FOR_THE_RUNTIME), sorted(loaded & set(NEVER_FOR_THE_RUNTIME))


def test_public_names_are_the_submodules_objects() -> None:
    """The lazy package hands out the very objects its submodules define, and lists them in dir()."""
    import agentcore
    from agentcore.inputs import AgentInput
    from agentcore.runtime import create_agent

    assert agentcore.create_agent is create_agent
    assert agentcore.AgentInput is AgentInput
    assert set(agentcore.__all__) <= set(dir(agentcore))


def test_an_unknown_name_is_an_attribute_error() -> None:
    import agentcore

    try:
        agentcore.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


def test_the_demo_still_serves_through_the_fake_server() -> None:
    """P3: loading on demand still works: a demo run loads the fake server and answers."""
    loaded = loaded_after(
        "import os\n"
        "os.environ['AGENTCORE_DEMO_DELAY_MS'] = '0'\n"
        "from agentcore import run_sync\n"
        "final = run_sync('hello', provider='demo', workdir='.')\n"
        "assert final.status == 'completed' and 'offline demo model' in final.text, final"
    )
    assert "agentcore.testing.fake_server" in loaded
