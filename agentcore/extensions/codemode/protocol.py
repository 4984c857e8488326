"""The host's side of the worker protocol (SPEC X4): limits, the start message, and strict
parsing of what the worker says.

The worker is sandboxed code's neighbour, so the host trusts nothing it reads from it: every
line must be one JSON object of a known shape within the size limits, or the script is
stopped with a protocol error. See ``worker.py`` for the other side.

This is also where a script's text becomes text the host can commit. A JavaScript string may
hold a lone UTF-16 surrogate (``'\\ud800'``); the worker sends it as a JSON escape, and decoded
it is a Python ``str`` that no UTF-8 store can hold — a result holding it would fail its
commit on every resume. ``parse_message`` therefore repairs every text of a message the way
tool results are repaired (``display.clean_text``: the surrogate becomes the six characters
``\\ud800``): output, errors, tool names, stored keys and values, the return value. A call's
arguments are repaired where every call's arguments are (``NestedCalls.call``, as for a call
of the model).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeAlias

from agentcore.json_depth import text_nests_deeper_than
from agentcore.tools.display import clean_text

STACK_BYTES = 1 << 20
MAX_SCRIPT_CHARS = 100_000
MAX_CALLS = 500  # nested calls per script: a bound for `while (true) { await tools.x() }`
MAX_OUTPUT_CHARS = 50_000  # text() output kept (the rest is counted, not kept)
MAX_MESSAGE_CHARS = 1_000_000  # one call's arguments or the return value, as JSON
MAX_LINE_BYTES = 16 << 20  # a worker line: the largest message (ASCII-escaped) with room to spare
STORE_KEY_CHARS = 200
STORE_VALUE_CHARS = 65_536
STORE_KEYS = 1_000
STORE_TOTAL_CHARS = 1 << 20
STORE_VALUE_DEPTH = 64  # arrays and objects in one stored value


class ProtocolError(Exception):
    """The worker said something that is not part of the protocol."""


@dataclass(slots=True, frozen=True)
class CallRequest:
    index: int
    name: str
    arguments: Any


@dataclass(slots=True, frozen=True)
class TextOutput:
    text: str


@dataclass(slots=True, frozen=True)
class Finished:
    """The script settled: returned (``ok``) or threw (``error``)."""

    ok: bool
    value_json: str | None
    value_truncated: int
    error: str
    stores: dict[str, str | None]  # key → JSON text, None = removed
    dropped_chars: int


@dataclass(slots=True, frozen=True)
class Fatal:
    """The sandbox failed (``memory``, ``stalled``, ``internal``)."""

    kind: str
    error: str


WorkerMessage: TypeAlias = CallRequest | TextOutput | Finished | Fatal


def start_message(
    *,
    script: str,
    header: dict[str, Any],
    store: dict[str, str],
    tools: list[str],
) -> dict[str, Any]:
    limits = header["limits"]
    return {
        "type": "start",
        "script": script,
        "memory_limit_bytes": int(limits["memory_limit_bytes"]),
        "timeout_ms": int(limits["timeout_ms"]),
        "stack_bytes": STACK_BYTES,
        "seed": int(header["seed"]),
        "clock_ms": int(header["clock_ms"]),
        "store": store,
        "tools": tools,
        "max_output_chars": MAX_OUTPUT_CHARS,
        "max_message_chars": MAX_MESSAGE_CHARS,
        "store_key_chars": STORE_KEY_CHARS,
        "store_value_chars": STORE_VALUE_CHARS,
        "store_keys": STORE_KEYS,
        "store_total_chars": STORE_TOTAL_CHARS,
        "store_value_depth": STORE_VALUE_DEPTH,
    }


def answer_message(index: int, ok: bool, value: Any, error: str) -> bytes:
    payload: dict[str, Any] = {"type": "result", "id": index, "ok": ok}
    if ok:
        payload["value"] = value
    else:
        payload["error"] = error
    return (json.dumps(payload, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


def parse_message(line: bytes) -> WorkerMessage:
    """One worker line → a message whose texts are valid UTF-8, or ``ProtocolError`` naming
    what is wrong."""
    return _repaired(_message(line))


def _repaired(message: WorkerMessage) -> WorkerMessage:
    """``message`` with each of its texts valid UTF-8 (see the module docstring)."""
    match message:
        case CallRequest():
            return CallRequest(message.index, clean_text(message.name), message.arguments)
        case TextOutput():
            return TextOutput(clean_text(message.text))
        case Finished():
            return Finished(
                ok=message.ok,
                value_json=None if message.value_json is None else clean_text(message.value_json),
                value_truncated=message.value_truncated,
                error=clean_text(message.error),
                stores={clean_text(k): None if v is None else clean_text(v) for k, v in message.stores.items()},
                dropped_chars=message.dropped_chars,
            )
        case Fatal():
            return Fatal(clean_text(message.kind), clean_text(message.error))


def _message(line: bytes) -> WorkerMessage:
    try:
        data = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError("not a JSON object")
    kind = data.get("type")
    if kind == "call":
        index, name = data.get("id"), data.get("name")
        if not isinstance(index, int) or isinstance(index, bool) or not isinstance(name, str) or "args" not in data:
            raise ProtocolError("a call needs an integer id, a name and args")
        return CallRequest(index, name, data["args"])
    if kind == "text":
        text = data.get("text")
        if not isinstance(text, str):
            raise ProtocolError("text must be a string")
        return TextOutput(text)
    if kind == "done":
        return _finished(data)
    if kind == "fatal":
        return Fatal(str(data.get("kind") or "internal"), str(data.get("error") or "")[:4000])
    raise ProtocolError(f"unknown message type {kind!r}")


def _finished(data: dict[str, Any]) -> Finished:
    ok = data.get("ok")
    value = data.get("value_json")
    stores = data.get("stores")
    if not isinstance(ok, bool) or (value is not None and not isinstance(value, str)) or not isinstance(stores, dict):
        raise ProtocolError("done needs ok, stores and an optional value_json text")
    checked: dict[str, str | None] = {}
    for key, text in stores.items():
        if not isinstance(key, str) or not 0 < len(key) <= STORE_KEY_CHARS:
            raise ProtocolError("a stored key is not a short string")
        if text is not None:
            _check_stored_value(key, text)
        checked[key] = text
    return Finished(
        ok=ok,
        value_json=value,
        value_truncated=_count(data, "value_truncated"),
        error=str(data.get("error") or "")[:8000],
        stores=checked,
        dropped_chars=_count(data, "dropped_chars"),
    )


def _check_stored_value(key: str, text: Any) -> None:
    """A stored value is a JSON text within the size and depth limits (the depth checked first,
    so decoding it cannot recurse too deep)."""
    if not isinstance(text, str) or len(text) > STORE_VALUE_CHARS:
        raise ProtocolError(f"the stored value of {key!r} is not a JSON text within the limit")
    if text_nests_deeper_than(text, STORE_VALUE_DEPTH):
        raise ProtocolError(f"the stored value of {key!r} is nested deeper than {STORE_VALUE_DEPTH} levels")
    try:
        json.loads(text)
    except ValueError:
        raise ProtocolError(f"the stored value of {key!r} is not a JSON text within the limit") from None


def _count(data: dict[str, Any], key: str) -> int:
    value = data.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ProtocolError(f"{key} must be a count")
    return value
