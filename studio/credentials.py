"""API keys at rest: encrypted with a key that is never in the database (SPEC W5, W15).

A registered model's ``api_key`` column holds ``fernet:<token>`` (``cryptography``'s Fernet:
AES-128-CBC with an HMAC-SHA256, a random IV per value). The key that opens it comes from

- ``STUDIO_CREDENTIALS_KEY``: one or more Fernet keys, comma separated (``Fernet.generate_key()``;
  the first encrypts, every one decrypts — so a key can be rotated: put the new one first,
  re-save the models, then drop the old one), or else
- the key file (``STUDIO_CREDENTIALS_KEY_FILE``, default ``<data dir>/credentials_key``), mode
  0600, written with a new random key the first time a key is stored.

A database copied without that key (a backup, a leaked file, an agent reading the database —
which the sandbox cannot, see ``studio.confinement``) yields no key. A value that cannot be
opened (the key changed or was lost, or a plaintext value someone wrote past Studio) is a
``CredentialsError`` saying so and what to do, never a crash and never the stored bytes.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Final

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

PREFIX: Final = "fernet:"


class CredentialsError(Exception):
    """A stored API key that cannot be read; the message says why and what to do."""


def key_file() -> Path:
    configured = getattr(settings, "STUDIO_CREDENTIALS_KEY_FILE", "") or ""
    return Path(configured) if configured else Path(settings.STUDIO_DATA_DIR) / "credentials_key"


def is_encrypted(stored: str) -> bool:
    return stored.startswith(PREFIX)


def encrypt(plain: str) -> str:
    """The column value for ``plain`` ("" stays "": no key)."""
    if not plain:
        return ""
    return PREFIX + _fernet(create=True).encrypt(plain.encode("utf-8")).decode("ascii")


def decrypt(stored: str, *, what: str = "the API key") -> str:
    """The key a column value stands for; ``CredentialsError`` when it cannot be opened."""
    if not stored:
        return ""
    if not is_encrypted(stored):
        raise CredentialsError(
            f"{what} is stored unencrypted (written past Studio): run `manage.py migrate` to encrypt it, "
            "or enter it again in the admin"
        )
    try:
        return _fernet(create=False).decrypt(stored[len(PREFIX) :].encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError, ValueError):
        raise CredentialsError(
            f"{what} cannot be decrypted with the credentials key in use ({_key_source()}): the key changed or "
            "was lost. Restore it, or enter the API key again in the admin."
        ) from None


def check_credentials_key() -> None:
    """Start-up check of ``STUDIO_CREDENTIALS_KEY`` (never echoing it)."""
    _configured_keys()


def _key_source() -> str:
    return "STUDIO_CREDENTIALS_KEY" if _configured_keys() else f"the key file {key_file()}"


def _configured_keys() -> list[Fernet]:
    raw = getattr(settings, "STUDIO_CREDENTIALS_KEY", "") or ""
    keys = []
    for n, part in enumerate(p.strip() for p in raw.split(",") if p.strip()):
        try:
            keys.append(Fernet(part.encode("ascii")))
        except (ValueError, UnicodeError):
            raise ImproperlyConfigured(
                f"STUDIO_CREDENTIALS_KEY: key {n + 1} is not a Fernet key (32 url-safe base64-encoded bytes, "
                "as Fernet.generate_key() makes)"
            ) from None
    return keys


def _fernet(*, create: bool) -> MultiFernet:
    keys = _configured_keys()
    if keys:
        return MultiFernet(keys)
    path = key_file()
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        if not create:
            raise CredentialsError(
                f"no credentials key: {path} is missing and STUDIO_CREDENTIALS_KEY is not set, so the stored "
                "API keys cannot be read. Restore the key file, or enter the API keys again in the admin."
            ) from None
        text = _new_key_file(path)
    try:
        return MultiFernet([Fernet(text.encode("ascii"))])
    except (ValueError, UnicodeError):
        raise CredentialsError(f"the credentials key file {path} does not hold a Fernet key") from None


def _new_key_file(path: Path) -> str:
    """Write a new key, readable by this user only. The file appears whole or not at all (a
    link of a finished temporary file), and a concurrent writer's key wins."""
    path.parent.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key().decode("ascii")
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".credentials-")  # mode 0600
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(key + "\n")
        os.link(temporary, path)
    except FileExistsError:
        return path.read_text().strip()
    finally:
        os.unlink(temporary)
    return key
