"""``manage.py studio``: first user, demo model, idempotent."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from studio.models import RegisteredModel

pytestmark = pytest.mark.django_db


def test_studio_command_prepares_a_fresh_install(studio_data_dir: Path) -> None:
    out = io.StringIO()
    call_command("studio", "--no-serve", "--port", "8123", stdout=out)
    text = out.getvalue()
    user = get_user_model().objects.get()
    assert user.username == "admin" and user.is_superuser
    login = (studio_data_dir / "initial-login.txt").read_text()
    password = login.split("password: ", 1)[1].strip()
    assert user.check_password(password)
    assert password in text and "http://127.0.0.1:8123/" in text
    assert (studio_data_dir / "initial-login.txt").stat().st_mode & 0o077 == 0
    demo = RegisteredModel.objects.get()
    assert demo.provider == "demo" and demo.display_name == "Offline demo model"

    again = io.StringIO()
    call_command("studio", "--no-serve", stdout=again)
    assert get_user_model().objects.count() == 1
    assert RegisteredModel.objects.count() == 1
    assert password not in again.getvalue()
