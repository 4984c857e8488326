"""Code mode (SPEC X4): ``session={"code_mode": {...}}`` gives the model ``codemode(code)``,
JavaScript run by QuickJS in a separate, killable worker process, whose ``tools.<name>(args)``
calls go through the engine like direct calls and survive a crash (see ``tool.py``,
``replay.py`` and ``agentcore/engine/nested.py``).

This module is what the session's extension registry loads: ``parse_option`` (strict; nothing
is opened) and ``create``. QuickJS is optional (``pip install 'agentcore-studio[codemode]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentcore.errors import InputValidationError
from agentcore.extensions.codemode.options import WHERE, CodeModeOptions
from agentcore.extensions.codemode.options import parse_option as _parse_option

if TYPE_CHECKING:
    from agentcore.session.extension import ExtensionHost, SessionExtension


def parse_option(raw: Any) -> CodeModeOptions:
    options = _parse_option(raw)
    from agentcore.extensions.codemode.sandbox import SandboxUnavailable, quickjs_location

    try:
        quickjs_location()
    except SandboxUnavailable as exc:
        raise InputValidationError(f"{WHERE}: {exc}", field=WHERE) from None
    return options


def create(session: ExtensionHost, parsed: CodeModeOptions) -> SessionExtension:
    from agentcore.extensions.codemode.extension import CodeModeExtension

    return CodeModeExtension(session, parsed)


__all__ = ["CodeModeOptions", "create", "parse_option"]
