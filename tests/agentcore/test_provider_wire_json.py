"""Wire JSON decoding: lone surrogates become U+FFFD, everything else decodes as ``json.loads``
does (SPEC P1, D1)."""

from __future__ import annotations

import json

import pytest

from agentcore.providers.wire_json import loads


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        (r'"ok \ud83d\ude00"', "ok \U0001f600"),  # a valid pair written as two escapes
        (r'"ok \uD83D\uDE00"', "ok \U0001f600"),  # upper-case hex
        (r'"bad \ud83d here"', "bad \ufffd here"),  # lone high
        (r'"bad \ude00 here"', "bad \ufffd here"),  # lone low
        (r'"\ude00\ud83d"', "\ufffd\ufffd"),  # low before high is not a pair
        (r'"\ud83d\ud83d\ude00"', "\ufffd\U0001f600"),  # a lone high, then a pair
        (r'"\ud83d\\ude00"', "\ufffd\\ude00"),  # an escaped backslash: the second half is text
        (r'"literal \\ud83d"', "literal \\ud83d"),  # only text, no surrogate at all
        (r'"\ud55c\uae00"', "\ud55c\uae00"),  # Hangul starts with \ud but is no surrogate
        ('"caf\u00e9 \\n"', "caf\u00e9 \n"),
    ],
)
def test_strings(wire: str, expected: str) -> None:
    assert loads(wire) == expected
    expected.encode("utf-8")  # whatever came in, the result can be stored as UTF-8


def test_keys_and_nested_values_are_scrubbed() -> None:
    value = loads(r'{"k\ud83d": [{"x": "a\udc00"}, 1, null, true, 2.5], "ok": "\ud83d\ude00"}')
    assert value == {"k\ufffd": [{"x": "a\ufffd"}, 1, None, True, 2.5], "ok": "\U0001f600"}
    json.dumps(value, ensure_ascii=False).encode("utf-8")


def test_without_surrogates_the_value_is_json_loads() -> None:
    wire = r'{"type":"x","delta":"line\nnext \"quoted\" \u00e9","n":[1,2]}'
    assert loads(wire) == json.loads(wire)


def test_invalid_json_raises_like_json_loads() -> None:
    with pytest.raises(json.JSONDecodeError):
        loads('{"a": ')
