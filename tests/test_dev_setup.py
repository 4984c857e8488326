"""``dev.py``'s install stamp: switching between ``studio`` and ``test`` never reinstalls.

The pure decision (``pending_install``) runs over the project's real ``pyproject.toml``; the
end-to-end check runs the real ``dev.ensure_venv`` in a subprocess inside a copy of the project
whose ``.venv/bin/python`` is a stand-in that records each pip invocation instead of reaching
a package index (tests never leave the machine).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = (ROOT / "pyproject.toml").read_bytes()


def load_dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev_under_test", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dev = load_dev()


def run_commands(commands: list[str], pyproject: bytes = PYPROJECT, stamp: str | None = None) -> list[set[str]]:
    """The extras each of ``commands`` would install, in order, carrying the stamp along."""
    installs: list[set[str]] = []
    for command in commands:
        plan = dev.pending_install(pyproject, stamp, set(dev.EXTRAS[command]))
        if plan is not None:
            extras, stamp = plan
            installs.append(extras)
    return installs


def test_test_then_studio_and_back_installs_once() -> None:
    """``test``'s extra includes ``studio``: after it, neither command installs anything."""
    assert run_commands(["test", "studio", "test", "studio", "test"]) == [{"test"}]


def test_studio_then_test_installs_each_extra_once() -> None:
    assert run_commands(["studio", "test", "studio", "test"]) == [{"studio"}, {"studio", "test"}]


def test_a_changed_pyproject_reinstalls_once_keeping_every_installed_extra() -> None:
    _, stamp = dev.pending_install(PYPROJECT, None, {"studio"})
    _, stamp = dev.pending_install(PYPROJECT, stamp, {"test"})
    changed = PYPROJECT + b"\n# a comment changes the hash\n"
    assert run_commands(["studio", "test", "studio"], changed, stamp) == [{"studio", "test"}]


@pytest.mark.parametrize("stamp", ["11cd56d0fbe5bea23dde667f0800be9c0afd044232336896cb8f22f01f3eaa4a", "[]", "{bad"])
def test_an_old_or_damaged_stamp_reinstalls(stamp: str) -> None:
    assert run_commands(["studio", "studio"], stamp=stamp) == [{"studio"}]


def test_an_unknown_extra_is_refused() -> None:
    with pytest.raises(ValueError, match="nosuch"):
        dev.pending_install(PYPROJECT, None, {"nosuch"})


def test_the_runtime_install_is_lean_and_studio_is_an_extra() -> None:
    """The default install is the runtime's four packages; Django & co. come with ``[studio]``,
    and ``test`` pulls in ``studio`` (plus ``mcp``, ``codemode``, ``otel`` and ``postgres``)
    through the project's own extras."""
    import tomllib

    project = tomllib.loads(PYPROJECT.decode())["project"]
    names = {dev._normalize(req.split(">")[0].split("<")[0].split("[")[0]).strip() for req in project["dependencies"]}
    assert names == {"httpx", "sniffio", "pydantic", "jsonschema"}
    studio = " ".join(project["optional-dependencies"]["studio"])
    assert all(name in studio for name in ("django", "channels", "daphne", "channels-redis"))
    closure = dev._extras_closure({"test"}, project["optional-dependencies"], project["name"])
    assert closure == {"test", "studio", "mcp", "codemode", "otel", "postgres"}
    assert project["license"] == "MIT", "the SPDX string form; the {text=...} table is deprecated"


def test_ensure_venv_runs_pip_only_when_needed(tmp_path: Path) -> None:
    """The real ``ensure_venv`` across ``test``, ``studio``, ``test``, ``studio``: pip runs for the
    first command only (one ``pip install -e .[test]`` after upgrading pip)."""
    shutil.copy(ROOT / "dev.py", tmp_path / "dev.py")
    (tmp_path / "pyproject.toml").write_bytes(PYPROJECT)
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    log = tmp_path / "pip-calls.log"
    stand_in = bin_dir / "python"
    stand_in.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n')
    stand_in.chmod(0o755)
    for command in ("test", "studio", "test", "studio"):
        subprocess.run(
            [sys.executable, "-c", f"import dev; dev.ensure_venv(*dev.EXTRAS[{command!r}])"],
            cwd=tmp_path,
            check=True,
            capture_output=True,
            timeout=60,
        )
    calls = log.read_text().splitlines()
    assert calls == ["-m pip install --quiet --upgrade pip", "-m pip install --quiet -e .[test]"]


def test_debian_packages_are_found_by_glob_so_any_postgresql_version_counts(tmp_path: Path, monkeypatch) -> None:
    """``postgresql`` is installed when any ``/usr/lib/postgresql/<major>/bin/initdb`` exists."""
    (tmp_path / "15" / "bin").mkdir(parents=True)
    (tmp_path / "15" / "bin" / "initdb").write_text("")
    monkeypatch.setattr(
        dev, "APT_PACKAGES", {"postgresql": f"{tmp_path}/*/bin/initdb", "redis-server": f"{tmp_path}/redis-server"}
    )
    assert dev.missing_debian_packages() == ["redis-server"]
    (tmp_path / "15" / "bin" / "initdb").unlink()
    assert dev.missing_debian_packages() == ["postgresql", "redis-server"]


# --- interop tools (tests/interop): own virtual environments, exact pins ----------------------


def test_interop_tools_are_exact_pins_and_never_a_compromised_release() -> None:
    """Every interop tool is pinned exactly; LiteLLM is 1.80.5 and 1.107.0 (compromised) is refused."""
    for requirements in dev.INTEROP_TOOLS.values():
        dev.check_pins(requirements)
    assert dev.INTEROP_TOOLS["litellm"] == ("litellm[proxy]==1.80.5",)
    with pytest.raises(ValueError, match="compromised"):
        dev.check_pins(("litellm[proxy]==1.107.0",))
    with pytest.raises(ValueError, match="exact pin"):
        dev.check_pins(("litellm>=1.80",))


def test_interop_tool_environments_are_named_by_their_pins_and_complete_only_with_a_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool's environment is found only once its install finished (the stamp); a changed pin
    is a new environment, so a half-built or outdated one is never used."""
    assert dev.missing_tools(tmp_path) == list(dev.INTEROP_TOOLS)
    venv_dir = dev.tool_venv("litellm", tmp_path)
    (venv_dir / "bin").mkdir(parents=True)
    (venv_dir / "bin" / "litellm").write_text("")
    assert dev.tool_program("litellm", "litellm", tmp_path) is None, "no stamp: not installed"
    (venv_dir / dev.TOOLS_STAMP).write_text("[]")
    assert dev.tool_program("litellm", "litellm", tmp_path) == venv_dir / "bin" / "litellm"
    assert "litellm" not in dev.missing_tools(tmp_path)
    monkeypatch.setitem(dev.INTEROP_TOOLS, "litellm", ("litellm[proxy]==1.80.6",))
    assert dev.tool_venv("litellm", tmp_path) != venv_dir and "litellm" in dev.missing_tools(tmp_path)

