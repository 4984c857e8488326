"""Issue #25, Studio at scale: a server process settles its collector (``studio.heap``).

Each check runs in a child process with a clean environment, as ``daphne
studio.server:application`` or ``manage.py runworker`` would start: the collector is a setting
of the whole process, so the test process's own must not be the one looked at.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from studio import heap

ROOT = Path(__file__).resolve().parents[2]

#: What the child reports: the frozen objects, the thresholds, and whether a cycle made after
#: start-up is still collected.
REPORT = """
import gc, json, weakref
class Node: pass
a, b = Node(), Node()
a.other, b.other = b, a
gone = weakref.ref(a)
del a, b
gc.collect()
print(json.dumps({"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold(), "cycle_collected": gone() is None}))
"""


def _run(argv: list[str], data_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``argv`` in a clean environment (no ``DJANGO_``/``STUDIO_`` settings of the test process)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "STUDIO_"))}
    clean.update({"STUDIO_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT), **env})
    return subprocess.run(argv, cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120)


def _child(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-c", code], tmp_path, DJANGO_SETTINGS_MODULE="studio.settings", **env)


def _report(prelude: str, tmp_path: Path, **env: str) -> dict[str, object]:
    result = _child(prelude + REPORT, tmp_path, **env)
    assert result.returncode == 0, result.stderr
    report: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


def test_the_server_application_freezes_its_start_up_heap_and_raises_the_young_threshold(tmp_path: Path) -> None:
    """The served application: every object of the start-up frozen (modules, settings, URL
    patterns: tens of thousands), the young generation at the setting, older ones as Python's;
    a cycle made afterwards is still collected."""
    plain = _report("", tmp_path)
    report = _report("import studio.server\n", tmp_path, STUDIO_GC_YOUNG_THRESHOLD="12345")
    assert isinstance(plain["threshold"], list) and plain["frozen"] == 0
    assert isinstance(report["frozen"], int) and report["frozen"] > 20_000
    assert report["threshold"] == [12345, *plain["threshold"][1:]]
    assert report["cycle_collected"] is True


def test_the_default_threshold_is_twenty_thousand(tmp_path: Path) -> None:
    report = _report("import studio.server\n", tmp_path)
    assert isinstance(report["threshold"], list) and report["threshold"][0] == 20_000


def test_zero_keeps_pythons_thresholds_and_still_freezes(tmp_path: Path) -> None:
    plain = _report("", tmp_path)
    report = _report("import studio.server\n", tmp_path, STUDIO_GC_YOUNG_THRESHOLD="0")
    assert report["threshold"] == plain["threshold"]
    assert isinstance(report["frozen"], int) and report["frozen"] > 20_000


def test_importing_the_application_alone_leaves_the_collector_as_python_has_it(tmp_path: Path) -> None:
    """Tests and in-process benchmarks import ``studio.asgi``: their process is not a server's."""
    plain = _report("", tmp_path)
    report = _report("import studio.asgi\n", tmp_path)
    assert report["frozen"] == 0
    assert report["threshold"] == plain["threshold"]


def test_a_session_host_worker_settles_its_collector_before_it_serves(tmp_path: Path) -> None:
    """``manage.py runworker studio-host``: the collector is settled when channels' worker
    would start serving (its loop is replaced here by a report of the collector's state)."""
    prelude = (
        "import django; django.setup()\n"
        "import gc, json\n"
        "from channels.management.commands.runworker import Command as Channels\n"
        "seen = {}\n"
        "def serve(self, *args, **options):\n"
        "    seen.update(frozen=gc.get_freeze_count(), threshold=gc.get_threshold())\n"
        "Channels.handle = serve\n"
        "from studio.management.commands.runworker import Command\n"
        "Command().handle(channels=['studio-host'])\n"
        "print(json.dumps(seen))\n"
    )
    result = _child(prelude, tmp_path, STUDIO_GC_YOUNG_THRESHOLD="15000")
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["frozen"] > 20_000
    assert seen["threshold"][0] == 15_000


@pytest.mark.parametrize("raw", ["many", "-5", "1.5", ""])
def test_a_bad_threshold_is_refused_by_name(raw: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="STUDIO_GC_YOUNG_THRESHOLD"):
        heap.young_threshold(raw)


def test_a_bad_threshold_stops_the_server_before_it_serves(tmp_path: Path) -> None:
    result = _child("import studio.server\n", tmp_path, STUDIO_GC_YOUNG_THRESHOLD="lots")
    assert result.returncode != 0
    assert "STUDIO_GC_YOUNG_THRESHOLD" in result.stderr and "'lots'" in result.stderr


def test_manage_py_studio_refuses_a_bad_threshold_before_it_prepares_anything(tmp_path: Path) -> None:
    """``manage.py studio`` names the setting and leaves the data directory as it was (no
    database migrated, no first user made)."""
    data_dir = tmp_path / "data"
    result = _run([sys.executable, "manage.py", "studio", "--no-serve"], data_dir, STUDIO_GC_YOUNG_THRESHOLD="-1")
    assert result.returncode != 0
    assert "STUDIO_GC_YOUNG_THRESHOLD" in result.stderr
    assert not (data_dir / "initial-login.txt").exists()
    assert not any(data_dir.glob("*.sqlite3"))
