"""The bytes-level SSE parser against the WHATWG event-stream rules, at every chunk boundary."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import httpx
import pytest

from agentcore.providers.openai_completions import OpenAICompletionsProvider
from agentcore.providers.sse import ServerSentEvent, SSEDecoder
from tests.agentcore.provider_fixtures import collect, make_model, make_request


def parse(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)]


def sse(data: str, event: str = "message", id: str = "", retry: int | None = None) -> ServerSentEvent:
    return ServerSentEvent(event, data, id, retry)


RULES: list[tuple[str, bytes, list[ServerSentEvent]]] = [
    ("lf_line_ends", b"data: hello\n\n", [sse("hello")]),
    ("crlf_line_ends", b"event: a\r\ndata: x\r\n\r\n", [sse("x", "a")]),
    ("cr_line_ends", b"data: x\rdata: y\r\r", [sse("x\ny")]),
    ("mixed_line_ends", b"data: a\r\ndata: b\rdata: c\n\r\n", [sse("a\nb\nc")]),
    ("exactly_one_leading_space_is_stripped", b"data:  two\n\n", [sse(" two")]),
    ("no_space_after_colon", b"data:none\n\n", [sse("none")]),
    ("trailing_space_kept", b"data: x \n\n", [sse("x ")]),
    ("colon_inside_value", b'data: {"a":"b:c"}\n\n', [sse('{"a":"b:c"}')]),
    ("data_lines_join_with_lf", b"data: a\ndata: b\ndata: c\n\n", [sse("a\nb\nc")]),
    ("empty_data_line_is_an_empty_line_of_data", b"data\ndata\n\n", [sse("\n")]),
    ("data_with_empty_value_dispatches", b"data:\n\n", [sse("")]),
    ("comment_lines_are_ignored", b": keep-alive\ndata: x\n:\n\n", [sse("x")]),
    ("event_without_data_is_not_dispatched", b"event: ping\n\n", []),
    ("event_type_resets_after_each_blank_line", b"event: a\n\ndata: x\n\n", [sse("x")]),
    ("event_type_is_per_event", b"event: a\ndata: 1\n\ndata: 2\n\n", [sse("1", "a"), sse("2")]),
    ("field_without_colon_has_empty_value", b"event\ndata: x\n\n", [sse("x")]),
    ("unknown_fields_are_ignored", b"foo: bar\nDATA: no\ndata: x\n\n", [sse("x")]),
    ("last_event_without_blank_line_is_not_dispatched", b"data: a\n\ndata: b\n", [sse("a")]),
    ("unterminated_last_line_is_not_dispatched", b"data: a\n\ndata: b", [sse("a")]),
    ("blank_lines_alone_dispatch_nothing", b"\n\n\r\n\r", []),
    ("id_is_kept_across_events", b"id: 7\ndata: a\n\ndata: b\n\n", [sse("a", id="7"), sse("b", id="7")]),
    ("id_with_nul_is_ignored", b"id: 1\ndata: a\n\nid: 2\x00\ndata: b\n\n", [sse("a", id="1"), sse("b", id="1")]),
    ("empty_id_resets", b"id: 1\ndata: a\n\nid\ndata: b\n\n", [sse("a", id="1"), sse("b")]),
    (
        "retry_digits_only",
        b"retry: 1500\ndata: a\n\nretry: 15x\ndata: b\n\n",
        [sse("a", retry=1500), sse("b", retry=1500)],
    ),
    ("one_leading_bom_is_dropped", b"\xef\xbb\xbfdata: x\n\n", [sse("x")]),
    ("a_second_bom_is_not_dropped", b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\ndata: y\n\n", [sse("y")]),
    ("utf8_text", "event: é\ndata: héllo ✓ 🎉\n\n".encode(), [sse("héllo ✓ 🎉", "é")]),
    ("invalid_utf8_is_replaced", b"data: a\xffb\n\n", [sse("a\ufffdb")]),
]


@pytest.mark.parametrize(("stream", "expected"), [(s, e) for _, s, e in RULES], ids=[n for n, _, _ in RULES])
def test_event_stream_rules(stream: bytes, expected: list[ServerSentEvent]) -> None:
    assert parse(stream) == expected


@pytest.mark.parametrize(("stream", "expected"), [(s, e) for _, s, e in RULES], ids=[n for n, _, _ in RULES])
def test_event_stream_rules_byte_by_byte(stream: bytes, expected: list[ServerSentEvent]) -> None:
    assert parse(*(stream[i : i + 1] for i in range(len(stream)))) == expected


SAMPLE = (
    "\ufeff: comment\r\n"
    "event: content_block_delta\r\n"
    'data: {"text": "héllo ✓ 🎉"}\r\n'
    "\r\n"
    "id: 42\r"
    "data: line one\r"
    "data:  line two\r"
    "\r"
    "retry: 250\n"
    "data: 日本語\n"
    "\n"
    "event: ping\n"
    "\n"
    "data: [DONE]\n"
    "\n"
    "data: never dispatched\n"
).encode()
SAMPLE_EVENTS = [
    sse('{"text": "héllo ✓ 🎉"}', "content_block_delta"),
    sse("line one\n line two", id="42"),
    sse("日本語", id="42", retry=250),
    sse("[DONE]", id="42", retry=250),
]


def test_sample_in_one_chunk() -> None:
    assert parse(SAMPLE) == SAMPLE_EVENTS


@pytest.mark.parametrize("cut", range(1, len(SAMPLE)))
def test_sample_split_at_every_byte(cut: int) -> None:
    """A chunk boundary anywhere (inside a CRLF, a BOM, a multi-byte character) changes nothing."""
    assert parse(SAMPLE[:cut], SAMPLE[cut:]) == SAMPLE_EVENTS


def test_sample_split_at_every_pair_of_bytes() -> None:
    for first in range(1, len(SAMPLE)):
        for second in range(first, len(SAMPLE)):
            chunks = (SAMPLE[:first], SAMPLE[first:second], SAMPLE[second:])
            assert parse(*chunks) == SAMPLE_EVENTS, (first, second)


def test_sample_one_byte_per_chunk_with_empty_chunks_between() -> None:
    chunks = [part for i in range(len(SAMPLE)) for part in (SAMPLE[i : i + 1], b"")]
    assert parse(*chunks) == SAMPLE_EVENTS


def test_cr_at_chunk_end_then_lf_is_one_line_end() -> None:
    assert parse(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [sse("a\nb")]


def test_a_large_event_over_many_chunks() -> None:
    payload = "é" * 50_000 + "✓"
    stream = f"event: big\r\ndata: {payload}\r\n\r\n".encode()
    chunks = [stream[i : i + 1000] for i in range(0, len(stream), 1000)]
    assert parse(*chunks) == [sse(payload, "big")]


def test_event_json() -> None:
    assert sse('{"a": [1]}').json() == {"a": [1]}


# --- through an adapter: compressed bodies and wrong content types ---------------------------

COMPLETION = (
    b'data: {"choices":[{"delta":{"content":"hi \xc3\xa9"}}]}\n\n'
    b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'  # asked for: include_usage
    b"data: [DONE]\n\n"
)


class _Chunked(httpx.AsyncByteStream):
    """A body that arrives in 7-byte reads, like a network stream (not pre-read)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i in range(0, len(self.body), 7):
            yield self.body[i : i + 7]


async def _stream_from(response: httpx.Response) -> tuple[str, str | None]:
    async def handler(request: httpx.Request) -> httpx.Response:
        return response

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = OpenAICompletionsProvider(client)
    try:
        out = await collect(provider, make_request(make_model("openai-completions", "http://test/v1")))
    finally:
        await client.aclose()
    failure = out.end.failure
    return out.text, failure.message if failure is not None else None


async def test_gzip_encoded_stream_is_decompressed() -> None:
    headers = {"content-type": "text/event-stream", "content-encoding": "gzip"}
    text, failure = await _stream_from(httpx.Response(200, headers=headers, stream=_Chunked(gzip.compress(COMPLETION))))
    assert (text, failure) == ("hi é", None)


async def test_plain_stream() -> None:
    headers = {"content-type": "text/event-stream; charset=utf-8"}
    assert await _stream_from(httpx.Response(200, headers=headers, stream=_Chunked(COMPLETION))) == ("hi é", None)


async def test_a_200_that_is_not_an_event_stream_is_a_provider_error() -> None:
    response = httpx.Response(200, headers={"content-type": "application/json"}, stream=_Chunked(b"{}"))
    text, failure = await _stream_from(response)
    assert text == "" and failure is not None and failure.startswith("not an event stream")
