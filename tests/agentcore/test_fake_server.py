"""The scripted fake provider server speaks the real wire framing and injects faults (SPEC T5, P3).

These tests read the raw bytes with plain httpx, independent of our adapters, so a framing
mistake in the server cannot hide behind a matching mistake in an adapter.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import httpx
import pytest

from agentcore.testing import (
    Delay,
    Disconnect,
    Endless,
    FakeProviderServer,
    Hang,
    HttpError,
    NoTerminal,
    Overflow,
    RecordedRequest,
    Step,
    Text,
    ToolCall,
    Usage,
    step_from_json,
)

BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def post(server: FakeProviderServer, path: str, body: dict | None = None, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(server.base_url + path, json=body or BODY, headers=headers)


def frames(response: httpx.Response) -> list[tuple[str | None, str]]:
    """(event, data) pairs of an SSE body."""
    out = []
    for block in response.text.split("\n\n"):
        if not block.strip():
            continue
        event = None
        data = ""
        for line in block.split("\n"):
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        out.append((event, data))
    return out


async def test_responses_framing_and_terminal_event(fake_server) -> None:
    """T5: event lines match ``data.type``, sequence numbers rise, response.completed ends it."""
    fake_server.enqueue([Text("hello"), ToolCall("read", {"path": "a"}), Usage(10, 5, cached_input=3)])
    response = await post(fake_server, "/responses")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = [(event, json.loads(data)) for event, data in frames(response)]
    assert all(event == data["type"] for event, data in events)
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert events[0][0] == "response.created" and events[-1][0] == "response.completed"
    usage = events[-1][1]["response"]["usage"]
    assert usage["input_tokens"] == 13 and usage["input_tokens_details"]["cached_tokens"] == 3
    kinds = [e for e, _ in events]
    assert "response.function_call_arguments.delta" in kinds and "response.output_text.delta" in kinds


async def test_anthropic_framing_has_event_lines_and_message_stop(fake_server) -> None:
    fake_server.enqueue([Text("hello"), Usage(7, 2, cached_input=1, cache_creation=4)])
    response = await post(fake_server, "/messages", {"model": "m", "stream": True, "messages": []})
    events = frames(response)
    assert all(event is not None for event, _ in events)
    names = [event for event, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    usage = json.loads(events[0][1])["message"]["usage"]
    assert (usage["input_tokens"], usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]) == (7, 1, 4)
    assert json.loads(events[-2][1])["usage"]["output_tokens"] == 2


@pytest.mark.parametrize("include_usage", [True, False])
async def test_chat_completions_chunks_usage_and_done(fake_server, include_usage) -> None:
    """T5: every chunk is a chat.completion.chunk; usage only when asked for; ``[DONE]`` last."""
    fake_server.enqueue([Text("hello"), Usage(4, 2)])
    body = dict(BODY, stream_options={"include_usage": include_usage})
    events = frames(await post(fake_server, "/chat/completions", body))
    assert events[-1] == (None, "[DONE]")
    chunks = [json.loads(data) for _, data in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    usage_chunks = [c for c in chunks if c.get("usage")]
    assert len(usage_chunks) == (1 if include_usage else 0)
    if include_usage:
        assert usage_chunks[0]["choices"] == [] and usage_chunks[0]["usage"]["prompt_tokens"] == 4


async def test_requests_are_recorded_with_both_auth_styles(fake_server) -> None:
    fake_server.enqueue([Text("a")], [Text("b")])
    await post(fake_server, "/responses", authorization="Bearer key-1")
    await post(fake_server, "/messages", {"model": "m", "stream": True}, **{"x-api-key": "key-2"})
    first, second = fake_server.requests
    assert (first.path, first.api_kind, first.api_key) == ("/v1/responses", "openai-responses", "key-1")
    assert (second.path, second.api_kind, second.api_key) == ("/v1/messages", "anthropic-messages", "key-2")
    assert first.json == BODY and first.completed and first.status == 200


async def test_wrong_api_key_gets_the_protocol_401() -> None:
    async with FakeProviderServer(api_key="right") as server:
        server.enqueue([Text("never")])
        response = await post(server, "/messages", {"stream": True}, **{"x-api-key": "wrong"})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


async def test_http_error_with_retry_after_headers(fake_server) -> None:
    fake_server.enqueue([HttpError(429, "slow down", retry_after=3, retry_after_ms=2500)])
    response = await post(fake_server, "/chat/completions")
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3" and response.headers["retry-after-ms"] == "2500"
    assert response.json()["error"]["message"] == "slow down"


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("/responses", "context_length_exceeded"),
        ("/messages", "prompt is too long"),
        ("/chat/completions", "maximum context length"),
    ],
)
async def test_overflow_uses_each_providers_real_error(fake_server, path, needle) -> None:
    fake_server.enqueue([Overflow()])
    response = await post(fake_server, path)
    assert response.status_code == 400 and needle in response.text


async def test_disconnect_leaves_the_chunked_body_unterminated(fake_server) -> None:
    """T5: the client sees a protocol error, exactly as with a dropped connection."""
    fake_server.enqueue([Text("partial"), Disconnect()])
    with pytest.raises(httpx.RemoteProtocolError):
        await post(fake_server, "/chat/completions")
    assert fake_server.requests[0].cut


async def test_disconnect_after_n_events(fake_server) -> None:
    fake_server.enqueue([Text("abcdefgh", chunk_size=1), Disconnect(after_events=3)])
    seen: list[str] = []
    async with httpx.AsyncClient() as client:
        async with client.stream("POST", fake_server.base_url + "/chat/completions", json=BODY) as response:
            with pytest.raises(httpx.RemoteProtocolError):
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        seen.append(line)
    assert len(seen) == 3  # preamble chunk + two text chunks


async def test_no_terminal_ends_cleanly_without_the_terminal_event(fake_server) -> None:
    fake_server.enqueue([Text("half"), NoTerminal()], [Text("half"), NoTerminal()])
    chat = await post(fake_server, "/chat/completions")
    assert "[DONE]" not in chat.text and "half" in chat.text
    anthropic = await post(fake_server, "/messages")
    assert "message_delta" in anthropic.text and "message_stop" not in anthropic.text


async def test_hang_holds_until_release(fake_server) -> None:
    """T5: a held response continues after ``release()``; the hold is observable without sleeping."""
    fake_server.enqueue([Text("before"), Hang(), Text("after")])
    task = asyncio.create_task(post(fake_server, "/chat/completions"))
    await fake_server.until_hanging(1)
    assert fake_server.hanging == 1 and not task.done()
    fake_server.release()
    response = await task
    assert "before" in response.text and "after" in response.text and "[DONE]" in response.text
    assert fake_server.hanging == 0 and fake_server.requests[0].hung


async def test_release_before_the_hang_is_not_lost(fake_server) -> None:
    fake_server.release()
    fake_server.enqueue([Hang(), Text("through")])
    response = await post(fake_server, "/chat/completions")
    assert "through" in response.text


async def test_hang_on_an_asyncio_event(fake_server) -> None:
    gate = asyncio.Event()
    fake_server.enqueue([Hang(gate), Text("go")])
    task = asyncio.create_task(post(fake_server, "/messages"))
    await fake_server.until_hanging(1)
    gate.set()
    assert "go" in (await task).text


async def test_client_hanging_up_is_recorded(fake_server) -> None:
    fake_server.enqueue([Text("x"), Hang()])
    async with httpx.AsyncClient() as client:
        async with client.stream("POST", fake_server.base_url + "/responses", json=BODY) as response:
            await fake_server.until_hanging(1)
            assert response.status_code == 200
    await fake_server.until(lambda s: s.requests[0].client_disconnected)


@pytest.mark.parametrize("before_headers", [True, False])
async def test_hang_before_headers_sends_nothing_until_released(fake_server, before_headers: bool) -> None:
    """T5: ``Hang(before_headers=True)`` accepts the request and sends not one byte (not even
    the status line) until released; a plain ``Hang`` first sends the headers. Checked on a
    raw socket: on loopback, bytes the server wrote are already in our receive queue."""
    fake_server.enqueue([Hang(before_headers=before_headers), Text("late")])
    body = json.dumps(BODY).encode()
    head = f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n"
    sock = socket.create_connection((fake_server.host, fake_server.port))
    try:
        sock.sendall(head.encode() + body)
        await fake_server.until_hanging(1)
        if before_headers:
            with pytest.raises(BlockingIOError):
                sock.recv(1, socket.MSG_DONTWAIT)
        else:
            assert sock.recv(8, socket.MSG_DONTWAIT).startswith(b"HTTP/1.1")
        fake_server.release()

        def read_to_end() -> bytes:
            data = b""
            while not data.endswith(b"\r\n0\r\n\r\n"):  # a previous chunk's end, then the last chunk
                received = sock.recv(65536)
                if not received:
                    break
                data += received
            return data

        data = await asyncio.to_thread(read_to_end)
    finally:
        sock.close()
    assert b"late" in data and b"[DONE]" in data
    assert data.startswith(b"HTTP/1.1 200") == before_headers


@pytest.mark.parametrize(
    ("path", "kind", "marker"),
    [
        ("/responses", "comments", b": ping"),
        ("/chat/completions", "pings", b": ping"),  # no keep-alive event in this protocol
        ("/messages", "pings", b"event: ping"),
        ("/responses", "text", b'"delta":"again "'),
        ("/chat/completions", "text", b'"content":"again "'),
        ("/messages", "text", b'"text_delta","text":"again "'),
    ],
)
async def test_endless_streams_until_the_client_hangs_up(fake_server, path: str, kind: str, marker: bytes) -> None:
    """T5: ``Endless`` writes keep-alives or text deltas forever; hanging up ends it."""
    fake_server.enqueue([Endless(kind, chunk="again ", interval_s=0.001)])  # type: ignore[arg-type]
    seen = 0
    async with httpx.AsyncClient() as client:
        async with client.stream("POST", fake_server.base_url + path, json=BODY) as response:
            async for chunk in response.aiter_raw():
                seen += chunk.count(marker)
                if seen >= 20:
                    break
    await fake_server.until(lambda s: s.requests[0].client_disconnected)
    assert fake_server.requests[0].endless_frames >= 19  # Anthropic's preamble has one ping too
    with pytest.raises(ValueError):
        Endless("forever")  # type: ignore[arg-type]


async def test_delay_slows_the_stream_without_breaking_it(fake_server) -> None:
    fake_server.enqueue([Text("a"), Delay(0.01), Text("b")])
    response = await post(fake_server, "/chat/completions")
    assert '"content":"a"' in response.text and '"content":"b"' in response.text


async def test_responder_answers_when_the_queue_is_empty() -> None:
    seen: list[RecordedRequest] = []

    def responder(request: RecordedRequest) -> list[Step]:
        seen.append(request)
        return [Text(f"you sent {len(request.json['messages'])} message(s)", chunk_size=100)]

    async with FakeProviderServer(responder=responder) as server:
        server.enqueue([Text("scripted first")])
        first = await post(server, "/chat/completions")
        second = await post(server, "/chat/completions")
    assert "scripted first" in first.text and "you sent 1 message(s)" in second.text
    assert [r.index for r in seen] == [1]


async def test_async_responder_is_awaited() -> None:
    async def responder(request: RecordedRequest) -> list[Step]:
        return [Text("async answer")]

    async with FakeProviderServer(responder=responder) as server:
        assert "async answer" in (await post(server, "/messages")).text


async def test_unscripted_request_fails_fast_without_retry_bait(fake_server) -> None:
    response = await post(fake_server, "/responses")
    assert response.status_code == 400 and "no scripted response" in response.text


def test_runs_in_a_background_thread_for_sync_and_child_process_tests() -> None:
    """T5: ``with`` starts it on its own loop; sync waits work from the test thread."""
    with FakeProviderServer() as server:
        server.enqueue([Text("threaded")], [Text("held"), Hang(), Text("released")])
        with httpx.Client() as client:
            assert "threaded" in client.post(server.base_url + "/chat/completions", json=BODY).text
            result: list[str] = []
            thread = threading.Thread(
                target=lambda: result.append(client.post(server.base_url + "/chat/completions", json=BODY).text)
            )
            thread.start()
            server.wait_hanging(1)
            server.release()
            thread.join()
        assert "released" in result[0]


def test_hang_on_a_threading_event() -> None:
    gate = threading.Event()
    with FakeProviderServer() as server:
        server.enqueue([Hang(gate), Text("opened")])
        with httpx.Client() as client:
            result: list[str] = []
            thread = threading.Thread(
                target=lambda: result.append(client.post(server.base_url + "/messages", json=BODY).text)
            )
            thread.start()
            server.wait_hanging(1)
            gate.set()
            thread.join()
    assert "opened" in result[0]


async def test_control_api_drives_a_server_from_another_process(fake_server) -> None:
    async with httpx.AsyncClient() as client:
        script = [[{"step": "text", "text": "from json"}, {"step": "usage", "input": 3, "output": 1}]]
        assert (await client.post(fake_server.url + "/_fake/enqueue", json=script)).status_code == 200
        response = await client.post(fake_server.base_url + "/chat/completions", json=BODY)
        assert "from json" in response.text
        listed = (await client.get(fake_server.url + "/_fake/requests")).json()["requests"]
        assert listed[0]["path"] == "/v1/chat/completions" and listed[0]["completed"]
        bad = await client.post(fake_server.url + "/_fake/enqueue", json=[[{"step": "nope"}]])
        assert bad.status_code == 400


def test_steps_from_json_reject_unknown_fields() -> None:
    assert step_from_json({"step": "http_error", "status": 503, "retry_after": 2}) == HttpError(503, retry_after=2)
    with pytest.raises(ValueError, match="unknown field"):
        step_from_json({"step": "text", "txt": "typo"})


async def test_connections_are_kept_alive_between_requests(fake_server) -> None:
    """Adapters reuse pooled connections, so the server must serve several requests per socket."""
    fake_server.enqueue([Text("one")], [HttpError(500)], [Text("three")])
    async with httpx.AsyncClient() as client:
        texts = []
        for _ in range(3):
            response = await client.post(fake_server.base_url + "/chat/completions", json=BODY)
            texts.append((response.status_code, "one" in response.text or "three" in response.text))
    assert texts == [(200, True), (500, False), (200, True)]
