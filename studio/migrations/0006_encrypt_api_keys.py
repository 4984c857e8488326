"""Data: encrypt the API keys stored in plain text, and keep staff sessions on the server.

Keys are encrypted with the credentials key (``studio.credentials``: ``STUDIO_CREDENTIALS_KEY``
or the key file, which is created here when neither exists); going back decrypts them again.
Sessions that existed before tool confinement run their tools as they did when their owner is
staff; everyone else's are sandboxed from now on (the new column's default).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations


def encrypt_keys(apps: Any, schema_editor: Any) -> None:
    from studio.credentials import encrypt, is_encrypted

    model = apps.get_model("studio", "RegisteredModel")
    for row in model.objects.exclude(api_key="").only("pk", "api_key"):
        if not is_encrypted(row.api_key):
            model.objects.filter(pk=row.pk).update(api_key=encrypt(row.api_key))


def decrypt_keys(apps: Any, schema_editor: Any) -> None:
    from studio.credentials import decrypt, is_encrypted

    model = apps.get_model("studio", "RegisteredModel")
    for row in model.objects.exclude(api_key="").only("pk", "api_key"):
        if is_encrypted(row.api_key):
            model.objects.filter(pk=row.pk).update(api_key=decrypt(row.api_key))


def staff_sessions_on_the_host(apps: Any, schema_editor: Any) -> None:
    session = apps.get_model("studio", "StudioSession")
    session.objects.filter(owner__is_staff=True).update(tool_isolation="host")


class Migration(migrations.Migration):
    dependencies = [("studio", "0005_tool_isolation_and_encrypted_keys")]

    operations = [
        migrations.RunPython(encrypt_keys, decrypt_keys),
        migrations.RunPython(staff_sessions_on_the_host, migrations.RunPython.noop),
    ]
