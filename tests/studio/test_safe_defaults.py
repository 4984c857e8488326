"""Issue #15, safe defaults: production-safe settings with no configuration at all.

The settings module is imported in a child process with a clean environment (no
``DJANGO_DEBUG``, no secret key), exactly as ``python manage.py studio`` or ``daphne
studio.asgi:application`` would load it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

ROOT = Path(__file__).resolve().parents[2]
TLS_ONLY = {"security.W004", "security.W008", "security.W012", "security.W016"}


def _clean_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "STUDIO_"))}
    env.update({"STUDIO_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT), **extra})
    return env


def _deploy_check(env: dict[str, str]) -> tuple[set[str], str]:
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = result.stdout + result.stderr
    ids = {word.strip("():") for word in output.split() if word.startswith("(security.") or word.startswith("(")}
    return {i for i in ids if "." in i and i.split(".")[0] in {"security", "admin", "staticfiles", "urls"}}, output


def test_default_settings_pass_the_deploy_check_except_what_only_tls_fixes(tmp_path: Path) -> None:
    """DEBUG is off unless asked for; `check --deploy` lists only TLS-only settings."""
    issues, output = _deploy_check(_clean_env(tmp_path / "data"))
    assert issues == TLS_ONLY, output
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)",
        ],
        cwd=ROOT,
        env=_clean_env(tmp_path / "data", DJANGO_SETTINGS_MODULE="studio.settings"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.strip() == "False", probe.stderr
    key_file = tmp_path / "data" / "secret_key"
    assert key_file.stat().st_mode & 0o077 == 0 and len(key_file.read_text().strip()) >= 50


def test_behind_tls_the_deploy_check_is_clean(tmp_path: Path) -> None:
    issues, output = _deploy_check(_clean_env(tmp_path / "data", STUDIO_HTTPS="1"))
    assert issues == set(), output


@pytest.mark.django_db
def test_unknown_pages_get_the_styled_404_without_the_url_list(logged_in: Client) -> None:
    response = logged_in.get("/no/such/page/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "Nothing here" in html and "studio/studio.css" in html
    assert "URLconf" not in html and "sessions/&lt;uuid" not in html


@pytest.mark.django_db
def test_a_refused_form_post_gets_the_styled_403(user: Any, make_session: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    session = make_session(user)
    response = client.post(reverse("studio:session_prompt", args=[session.pk]), {"prompt": "hi"})
    assert response.status_code == 403
    assert "Not allowed" in response.content.decode() and "studio/studio.css" in response.content.decode()


def test_the_500_page_renders_without_request_context(rf: Any) -> None:
    from django.views.defaults import server_error

    response = server_error(rf.get("/boom/"))
    assert response.status_code == 500 and b"Something went wrong" in response.content


def test_static_files_are_served_without_debug_and_without_login(client: Client, settings: Any) -> None:
    assert settings.DEBUG is False
    response = client.get("/static/studio/studio.css")
    assert response.status_code == 200
    assert b"".join(response.streaming_content if response.streaming else [response.content])  # type: ignore[attr-defined]
    assert client.get("/static/vendor/htmx-2.0.11.min.js").status_code == 200
    assert client.get("/static/admin/css/forms.css").status_code == 200  # the admin is styled too


def test_a_refused_request_is_logged_as_one_line_without_traceback() -> None:
    """A 403 carries its exception to the logger; the record keeps the line, not the traceback."""
    from studio.logging import ClientErrorsOneLine

    def record(status: int) -> logging.LogRecord:
        try:
            raise PermissionError("denied")
        except PermissionError:
            rec = logging.getLogger("django.request").makeRecord(
                "django.request", logging.WARNING, __file__, 1, "Forbidden: %s", ("/x/",), sys.exc_info()
            )
        rec.status_code = status
        return rec

    denied, failed = record(403), record(500)
    assert ClientErrorsOneLine().filter(denied) and denied.exc_info is None
    assert ClientErrorsOneLine().filter(failed) and failed.exc_info is not None
    for name in ("django", "studio"):
        assert logging.getLogger(name).propagate is False  # daphne's root handler would print it again
