"""Keeping credentials out of what the Trace shows and exports (SPEC W8, S3: no credentials).

The store never holds the runtime's API keys or auth headers, but what a model or a tool wrote
can: a tool that printed the environment, a pasted key, a URL with a password. Everything the
Trace hands out (span attributes, span details, both exports) passes through ``Redactor``:

- a value under a key that names a credential (``api_key``, ``authorization``, ``password``,
  ``secret``, ``*_token``, ``cookie``, ...) becomes ``"[redacted]"``;
- in text: ``Bearer``/``Basic`` credentials, ``sk-...`` style API keys, the password of a URL
  (``scheme://user:password@host``) and the value of every environment variable of this
  process whose name names a credential (``OPENAI_API_KEY``, ``GITHUB_TOKEN``, ...) are replaced.

Token counts (``input_tokens``) are not credentials: only exact credential key names match.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"
_KEY = re.compile(
    r"(?i)^(x-)?(api[-_]?key|apikey|authorization|proxy-authorization|password|passwd|pwd|secret|client[-_]secret|"
    r"access[-_]token|refresh[-_]token|id[-_]token|auth[-_]token|session[-_]token|bearer|cookie|set-cookie|"
    r"private[-_]key|aws[-_]secret[-_]access[-_]key|credentials?)$"
)
_ENV_NAME = re.compile(r"(?i)(api[-_]?key|token|secret|password|passwd|credential|private[-_]key)")
_TEXT = (
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
)
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+):[^/\s@]+@")
MIN_SECRET = 8  # shorter environment values are too likely to occur by chance


class Redactor:
    """Replaces credentials in values; see the module docstring. ``environ`` defaults to this
    process's environment, read once."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self._secrets = sorted(
            {value for name, value in env.items() if _ENV_NAME.search(name) and len(value) >= MIN_SECRET},
            key=len,
            reverse=True,
        )

    def text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        for pattern in _TEXT:
            if pattern.search(text):
                text = pattern.sub(REDACTED, text)
        if "@" in text and "://" in text:
            text = _URL_PASSWORD.sub(rf"\1:{REDACTED}@", text)
        return text

    def value(self, value: Any) -> Any:
        """``value`` with every credential in it replaced (a new object; ``value`` is unchanged)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                key: REDACTED if isinstance(key, str) and _KEY.match(key) and value[key] else self.value(item)
                for key, item in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [self.value(item) for item in value]
        return value
