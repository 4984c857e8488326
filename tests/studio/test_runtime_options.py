"""The settings that turn features on for every runtime Studio opens (``studio.runtime_options``):
``STUDIO_CODE_MODE``, ``STUDIO_CATALOGS``, ``STUDIO_ENVIRONMENT`` and ``STUDIO_OTLP_*`` (X3, X4,
X5, issue 16). Every bad value is an ``ImproperlyConfigured`` naming the setting, raised when
Django starts, and never echoing a secret; nothing is started or connected by checking."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from studio import runtime_options

ROOT = Path(__file__).resolve().parents[2]
SERVER = str(ROOT / "tests" / "fixtures" / "mcp_catalog_server.py")
SECRET = "tok-settings-secret-4711"


def _mcp(start_log: Path, **extra: Any) -> dict[str, Any]:
    return {
        "id": "fx",
        "command": sys.executable,
        "args": [SERVER],
        "env": {"FIXTURE_START_LOG": str(start_log), "API_TOKEN": SECRET},
        "allowed_tools": ["add", "lookup"],
        **extra,
    }


# --- code mode ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", "off", "0", "false", " OFF ", False, None])
def test_code_mode_is_off_by_default_and_by_any_off_switch(settings: Any, value: Any) -> None:
    settings.STUDIO_CODE_MODE = value
    assert runtime_options.code_mode_option() is None
    assert "code_mode" not in runtime_options.session_options(registry=None)


@pytest.mark.parametrize("value", ["demo", " Demo "])
def test_code_mode_demo_is_on_for_demo_sessions_only(settings: Any, value: Any) -> None:
    """The default: a newcomer's demo session gets code mode (the defaults), others do not."""
    settings.STUDIO_CODE_MODE = value
    assert runtime_options.session_options(registry=None, demo=True)["code_mode"] == {}
    assert "code_mode" not in runtime_options.session_options(registry=None)
    runtime_options.check_settings()  # a valid value


def test_the_default_is_demo(settings: Any) -> None:
    import os

    from studio import settings as studio_settings

    assert studio_settings.STUDIO_CODE_MODE == os.environ.get("STUDIO_CODE_MODE", "demo")
    del settings.STUDIO_CODE_MODE
    assert runtime_options.code_mode_option(demo=True) == {} and runtime_options.code_mode_option() is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("on", {}),
        ("1", {}),
        ("true", {}),
        (True, {}),
        ("{}", {}),
        ('{"timeout_ms": 60000}', {"timeout_ms": 60000}),
        ({"memory_limit_bytes": 33554432}, {"memory_limit_bytes": 33554432}),
    ],
)
def test_code_mode_on_or_with_limits_reaches_the_session(settings: Any, value: Any, expected: dict[str, Any]) -> None:
    settings.STUDIO_CODE_MODE = value
    assert runtime_options.session_options(registry=None)["code_mode"] == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("maybe", "STUDIO_CODE_MODE must be demo, on, off, or the limits as a JSON object"),
        ('{"timeout_ms": 0}', "STUDIO_CODE_MODE.timeout_ms must be an integer from 1 to 300000"),
        ('{"timeout_ms": 400000}', "STUDIO_CODE_MODE.timeout_ms must be an integer"),
        ('{"memory_limit_bytes": 1}', "STUDIO_CODE_MODE.memory_limit_bytes must be an integer"),
        ('{"colour": "red"}', "STUDIO_CODE_MODE.colour: unknown option"),
        ("[1, 2]", "STUDIO_CODE_MODE must be demo, on, off, or a JSON object of limits; got list"),
        (42, "STUDIO_CODE_MODE must be demo, on, off, or a JSON object of limits; got int"),
    ],
)
def test_bad_code_mode_values_name_the_setting(settings: Any, value: Any, message: str) -> None:
    settings.STUDIO_CODE_MODE = value
    with pytest.raises(ImproperlyConfigured) as caught:
        runtime_options.check_settings()
    assert str(caught.value).startswith(message), str(caught.value)


# --- catalogs -------------------------------------------------------------------------------------


def test_mcp_catalogs_from_json_become_catalogs_and_start_nothing(settings: Any, tmp_path: Path) -> None:
    """X3: JSON MCP servers are validated into catalogs (ids ``fx_add`` …) — no process starts,
    and the env's secret is not in the catalog's public info."""
    import json

    start_log = tmp_path / "starts.log"
    settings.STUDIO_CATALOGS = json.dumps([_mcp(start_log)])
    runtime_options.check_settings()
    options = runtime_options.session_options(registry=None)
    [catalog] = options["tool_search"]["catalogs"]
    assert (catalog.id, catalog.kind, tuple(catalog.allowed_tools)) == ("fx", "mcp", ("fx_add", "fx_lookup"))
    assert SECRET not in repr(catalog) and SECRET not in str(catalog.info)
    assert not start_log.exists(), "checking and building the catalog started no server"


def studio_test_catalogs() -> list[dict[str, Any]]:
    """A ``STUDIO_CATALOGS`` factory (dotted path ``tests.studio.test_runtime_options.…``)."""
    return [{"id": "docs", "command": "docs-mcp", "allowed_tools": ["search"]}]


def studio_test_broken_catalogs() -> list[Any]:
    raise RuntimeError("the catalog service is down")


def test_a_dotted_path_gives_catalogs_built_anew_for_every_session(settings: Any) -> None:
    settings.STUDIO_CATALOGS = "tests.studio.test_runtime_options.studio_test_catalogs"
    first = runtime_options.session_options(registry=None)["tool_search"]["catalogs"]
    second = runtime_options.session_options(registry=None)["tool_search"]["catalogs"]
    assert [c.id for c in first] == ["docs"] and first[0] is not second[0]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('[{"id": "fx", "command": "x"}]', "STUDIO_CATALOGS[0] ('fx'): allowed_tools is required"),
        ('[{"id": "f x", "command": "x", "allowed_tools": ["a"]}]', "STUDIO_CATALOGS[0] ('f x'): definition.id"),
        ('[{"id": "fx", "allowed_tools": ["a"]}]', "STUDIO_CATALOGS[0] ('fx'): definition: give either command"),
        ('[{"id": "fx", "command": "x", "allowed_tools": []}]', "STUDIO_CATALOGS[0] ('fx'): allowed_tools"),
        ('[{"id": "a", "command": "x", "allowed_tools": ["t"]}, {"id": "a", "command": "y", "allowed_tools": ["u"]}]',
         "STUDIO_CATALOGS.catalogs.1.id: catalog id 'a' is used twice"),
        ('[{"id": "fx", "command": "x"', "STUDIO_CATALOGS is not valid JSON"),
        ("[42]", "STUDIO_CATALOGS[0] must be an MCP server definition"),
        ('"just text"', "STUDIO_CATALOGS must be JSON or a dotted path"),
        ("no.such.module.catalogs", "STUDIO_CATALOGS: cannot import 'no.such.module'"),
        ("tests.studio.test_runtime_options.nothing_here",
         "STUDIO_CATALOGS: 'tests.studio.test_runtime_options' has no attribute 'nothing_here'"),
        ("tests.studio.test_runtime_options.studio_test_broken_catalogs",
         "STUDIO_CATALOGS: studio_test_broken_catalogs() failed: the catalog service is down"),
    ],
)  # fmt: skip
def test_bad_catalog_settings_name_the_setting(settings: Any, value: str, message: str) -> None:
    settings.STUDIO_CATALOGS = value
    with pytest.raises(ImproperlyConfigured) as caught:
        runtime_options.check_settings()
    assert str(caught.value).startswith(message), str(caught.value)


def test_a_bad_catalog_error_never_echoes_its_env_values(settings: Any, tmp_path: Path) -> None:
    import json

    settings.STUDIO_CATALOGS = json.dumps([_mcp(tmp_path / "s.log", env={"API_TOKEN": SECRET, "N": 5})])
    with pytest.raises(ImproperlyConfigured) as caught:
        runtime_options.check_settings()
    assert "definition.env.N" in str(caught.value) and SECRET not in str(caught.value)


# --- environment -----------------------------------------------------------------------------------


def test_the_environment_is_off_local_remote_or_a_factory(settings: Any) -> None:
    """X5: empty → no option (tools run in the Studio process); ``remote`` → a worker confined to
    the session's workdir, under one fixed id (so sessions keep opening across restarts)."""
    settings.STUDIO_ENVIRONMENT = ""
    assert "environment" not in runtime_options.session_options(registry=None)
    settings.STUDIO_ENVIRONMENT = "remote"
    remote = runtime_options.session_options(registry=None)["environment"]
    assert (remote["id"], callable(remote["open"])) == ("studio-worker", True)
    settings.STUDIO_ENVIRONMENT = "local"
    assert runtime_options.environment_option()["id"] == "local"  # type: ignore[index]
    settings.STUDIO_ENVIRONMENT = "tests.studio.test_runtime_options.studio_test_environment"
    assert runtime_options.environment_option()["label"] == "Test box"  # type: ignore[index]


def studio_test_environment() -> dict[str, Any]:
    async def open_box(target: Any, context: Any) -> Any:
        raise RuntimeError("never opened in these tests")

    return {"id": "box", "label": "Test box", "open": open_box}


def studio_test_bad_environment() -> dict[str, Any]:
    return {"id": "box", "label": "Test box", "open": "not callable"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ssh", "STUDIO_ENVIRONMENT must be local, remote or a dotted path; 'ssh' is none of these"),
        ("tests.studio.test_runtime_options.studio_test_bad_environment",
         "STUDIO_ENVIRONMENT.open must be an async function"),
        ("tests.studio.test_runtime_options.SECRET", "STUDIO_ENVIRONMENT must give a session.environment option"),
        ({"id": "x", "label": "X", "open": None, "host": "h"}, "STUDIO_ENVIRONMENT.host: unknown option"),
    ],
)  # fmt: skip
def test_bad_environment_settings_name_the_setting(settings: Any, value: Any, message: str) -> None:
    settings.STUDIO_ENVIRONMENT = value
    with pytest.raises(ImproperlyConfigured) as caught:
        runtime_options.check_settings()
    assert str(caught.value).startswith(message), str(caught.value)


# --- OTLP --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
        ("http://collector:4318/", "http://collector:4318/v1/traces"),
        ("https://cloud.example/api/public/otel", "https://cloud.example/api/public/otel/v1/traces"),
        ("http://127.0.0.1:6006/v1/traces", "http://127.0.0.1:6006/v1/traces"),
    ],
)
def test_the_otlp_endpoint_is_a_receiver_base_url_or_its_traces_url(settings: Any, endpoint: str, url: str) -> None:
    settings.STUDIO_OTLP_ENDPOINT = endpoint
    export = runtime_options.otlp_settings()
    assert export is not None and export.endpoint == url and export.service_name == "agentcore-studio"


def test_otlp_headers_are_parsed_and_never_shown(settings: Any) -> None:
    settings.STUDIO_OTLP_ENDPOINT = "http://127.0.0.1:4318"
    settings.STUDIO_OTLP_HEADERS = f"Authorization=Basic%20{SECRET},x-scope=team-a"
    export = runtime_options.otlp_settings()
    assert export is not None and dict(export.headers) == {"Authorization": f"Basic {SECRET}", "x-scope": "team-a"}
    assert SECRET not in repr(export)


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("STUDIO_OTLP_ENDPOINT", "ftp://127.0.0.1:4318", "STUDIO_OTLP_ENDPOINT must be an http(s) URL"),
        ("STUDIO_OTLP_ENDPOINT", "127.0.0.1:4318", "STUDIO_OTLP_ENDPOINT must be an http(s) URL"),
        ("STUDIO_OTLP_ENDPOINT", "http://127.0.0.1:99999", "STUDIO_OTLP_ENDPOINT is not a valid URL"),
        ("STUDIO_OTLP_HEADERS", f"Authorization: Bearer {SECRET}", "STUDIO_OTLP_HEADERS item 1 has no '='"),
        ("STUDIO_OTLP_HEADERS", f"Bad Name={SECRET}", "STUDIO_OTLP_HEADERS: 'Bad Name' is not a valid header name"),
        ("STUDIO_OTLP_HEADERS", f"X-Token={SECRET}%0D%0AX-Evil=1",
         "STUDIO_OTLP_HEADERS: the value of 'X-Token' is not a valid header value"),
        ("STUDIO_OTLP_SERVICE_NAME", "bad\nname", "STUDIO_OTLP_SERVICE_NAME must be a printable name"),
        ("STUDIO_OTLP_CAPTURE_CONTENT", "yes", "STUDIO_OTLP_CAPTURE_CONTENT must be a boolean"),
    ],
)  # fmt: skip
def test_bad_otlp_settings_name_the_setting_and_hide_secrets(
    settings: Any, setting: str, value: str, message: str
) -> None:
    settings.STUDIO_OTLP_ENDPOINT = "http://127.0.0.1:4318"
    setattr(settings, setting, value)
    with pytest.raises(ImproperlyConfigured) as caught:
        runtime_options.check_settings()
    assert str(caught.value).startswith(message) and SECRET not in str(caught.value), str(caught.value)


# --- start-up --------------------------------------------------------------------------------------


def _manage_check(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("STUDIO_", "DJANGO_"))}
    environment = {
        **clean,
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "STUDIO_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
        **env,
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def test_a_bad_setting_stops_django_at_start_up_naming_it(tmp_path: Path) -> None:
    """The check runs when Django starts (``StudioConfig.ready``): a bad value stops the process
    before any session exists; a good configuration starts."""
    bad = _manage_check(
        tmp_path,
        STUDIO_OTLP_ENDPOINT="http://127.0.0.1:4318",
        STUDIO_OTLP_HEADERS=f"Authorization Bearer {SECRET}",
    )
    assert bad.returncode != 0
    assert "ImproperlyConfigured: STUDIO_OTLP_HEADERS item 1 has no '='" in bad.stderr
    assert SECRET not in bad.stderr + bad.stdout
    good = _manage_check(tmp_path, STUDIO_CODE_MODE='{"timeout_ms": 60000}', STUDIO_ENVIRONMENT="remote")
    assert good.returncode == 0, good.stderr
