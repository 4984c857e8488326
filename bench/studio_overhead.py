"""The delay Studio itself adds to every streamed token, for 1, 10, 50 and 200 concurrent sessions.

A fake provider (``agentcore.testing.FakeProviderServer`` in a child process, its writer
wrapped) streams each session's answer as numbered tokens (``zq<session>x<token>``) paced like a
model (``--pace-ms`` apart) and stamps the moment each token's bytes are handed to the socket.
Studio (a real daphne, in-process session host, in-memory channel layer, ``DJANGO_DEBUG=0``)
runs one session per WebSocket client; each client stamps every frame as it arrives. All three
processes read the same clock (``time.monotonic``, CLOCK_MONOTONIC). Per token:

    added delay = first frame that shows the token at the client − token sent by the provider

so the model's pacing and the tools are out of the number; the client's own frame handling is
in it (kept to a timestamp and a copy; parsing happens after the run). One untimed session
warms daphne up first (agentcore's imports, template loading). Reported, per size:
median and p95 over every token of every session; the **TTFT overhead** (the same delay for each
session's first token); submit → request (prompt POST → the provider receives the request);
frames and KB per session; daphne's CPU ms per session (the run's whole cost in Studio).

``STUDIO_FLUSH_INTERVAL`` (the host's batching window, default 0.075 s) bounds what any frame
can do: pass ``--flush-interval 0.02`` to see how much of the delay is that window.
``--profile out.txt`` samples daphne with py-spy for the whole run (read it with
``bench/profile_top.py``).

    python bench/studio_overhead.py [--sizes 1,10,50,200] [--tokens 60] [--pace-ms 20]
                                    [--rounds-1 5] [--flush-interval S] [--profile out.txt] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopkit import ProviderProcess, machine
from studiokit import ROOT, StudioProcess

from agentcore.engine.fragments import FLUSH_INTERVAL_S

MARK = re.compile(r"zq(\d{3})x(\d{4})")
MARK_BYTES = re.compile(rb"zq\d{3}x\d{4}")
SESSION = re.compile(r"bench session (\d+)")


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


# --- the stamping provider (child process) ----------------------------------------------------


def _serve(tokens: int, pace_s: float) -> None:
    from agentcore.testing import http11
    from agentcore.testing.fake_server import FakeProviderServer, RecordedRequest
    from agentcore.testing.steps import Step, Stop, Text, Usage

    stamps: dict[str, float] = {}

    class StampingWriter:
        """The connection's writer, stamping each token marker as its bytes are written."""

        def __init__(self, inner: asyncio.StreamWriter) -> None:
            self._inner = inner

        def write(self, data: bytes) -> None:
            now = time.monotonic()
            self._inner.write(data)
            for match in MARK_BYTES.finditer(data):
                stamps.setdefault(match.group().decode(), now)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    def responder(request: RecordedRequest) -> list[Step]:
        messages = request.json.get("messages") or []
        text = json.dumps(messages[-1]) if messages else ""
        match = SESSION.search(text)
        if match is None:  # anything else Studio may ask (a title, a summary)
            return [Text("ok"), Usage(input=10, output=1), Stop("stop")]
        k = int(match.group(1))
        stamps.setdefault(f"request {k}", time.monotonic())
        chunks = [f"zq{k:03d}x{i:04d} " for i in range(tokens)]
        return [Text("", chunks=chunks, pace_s=pace_s), Usage(input=100, output=tokens), Stop("stop")]

    class StampingServer(FakeProviderServer):
        async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await super()._handle(reader, StampingWriter(writer))  # type: ignore[arg-type]

        async def _control(self, raw: Any, path: str, writer: asyncio.StreamWriter) -> bool:
            if path != "/_fake/stamps":
                return await super()._control(raw, path, writer)
            writer.write(http11.full_response(200, json.dumps(stamps).encode(), {}))
            await writer.drain()
            return True

    async def serve() -> None:
        async with StampingServer(responder=responder) as server:
            print(f"port {server.port}", flush=True)
            await asyncio.Event().wait()

    asyncio.run(serve())


# --- the watching clients ----------------------------------------------------------------------


@dataclass
class Watch:
    k: int
    session_id: str
    posted: float = 0.0
    frames: list[tuple[float, str]] = field(default_factory=list)
    error: str = ""


async def watch(studio: StudioProcess, http: Any, w: Watch, tokens: int, limit: float) -> None:
    import websockets

    last = f"zq{w.k:03d}x{tokens - 1:04d}"
    ws_url = studio.base.replace("http", "ws") + f"/ws/sessions/{w.session_id}/"
    headers = {"Cookie": studio.cookie, "Origin": studio.base}
    try:
        async with websockets.connect(ws_url, additional_headers=headers, max_size=None) as ws:
            await asyncio.wait_for(ws.recv(), limit)  # the initial full render
            w.posted = time.monotonic()
            response = await http.post(
                f"/sessions/{w.session_id}/prompt/",
                data={"prompt": f"bench session {w.k}: stream please", "agent": "build"},
                headers={"HX-Request": "true"},
            )
            response.raise_for_status()
            deadline = time.monotonic() + limit
            while True:
                frame = await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic()))
                w.frames.append((time.monotonic(), frame if isinstance(frame, str) else frame.decode()))
                text = w.frames[-1][1]
                if last in text and 'id="live-turn"' not in text and "pill-idle" in text:
                    return
    except Exception as exc:
        w.error = f"{type(exc).__name__}: {exc}"


async def run_size(studio: StudioProcess, sessions: list[Watch], tokens: int, limit: float) -> None:
    import httpx

    headers = {"Cookie": studio.cookie, "X-CSRFToken": studio.csrf}
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    async with httpx.AsyncClient(base_url=studio.base, headers=headers, limits=limits, timeout=limit) as http:
        await asyncio.gather(*(watch(studio, http, w, tokens, limit) for w in sessions))


def analyse(sessions: list[Watch], stamps: dict[str, float], tokens: int) -> dict[str, Any]:
    delays: list[float] = []
    ttft: list[float] = []
    submit: list[float] = []
    missing = 0
    frames = 0
    size = 0
    for w in sessions:
        seen: dict[int, float] = {}
        for at, text in w.frames:
            frames += 1
            size += len(text)
            for match in MARK.finditer(text):
                if int(match.group(1)) == w.k:
                    seen.setdefault(int(match.group(2)), at)
        for i in range(tokens):
            sent = stamps.get(f"zq{w.k:03d}x{i:04d}")
            if sent is None or i not in seen:
                missing += 1
                continue
            delays.append((seen[i] - sent) * 1000)
            if i == 0:
                ttft.append((seen[i] - sent) * 1000)
        if f"request {w.k}" in stamps and w.posted:
            submit.append((stamps[f"request {w.k}"] - w.posted) * 1000)
    return {
        "sessions": len(sessions),
        "errors": [w.error for w in sessions if w.error],
        "missing_tokens": missing,
        "delay_median_ms": statistics.median(delays) if delays else None,
        "delay_p95_ms": _p95(delays) if delays else None,
        "delay_max_ms": max(delays) if delays else None,
        "ttft_median_ms": statistics.median(ttft) if ttft else None,
        "ttft_p95_ms": _p95(ttft) if ttft else None,
        "submit_median_ms": statistics.median(submit) if submit else None,
        "frames_per_session": frames / max(1, len(sessions)),
        "kb_per_session": size / 1024 / max(1, len(sessions)),
    }


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,50,200")
    parser.add_argument("--tokens", type=int, default=60)
    parser.add_argument("--pace-ms", type=float, default=20.0)
    parser.add_argument("--rounds-1", type=int, default=5, help="sequential rounds pooled for N = 1")
    parser.add_argument("--flush-interval", help="STUDIO_FLUSH_INTERVAL for daphne (seconds)")
    parser.add_argument(
        "--agent-flush-ms",
        type=float,
        help="what-if: agentcore's fragment commit window in daphne (default 20 ms), see studio_whatif.py",
    )
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--debug", action="store_true", help="DJANGO_DEBUG=1 (records every SQL query)")
    parser.add_argument("--profile", type=Path, help="sample daphne with py-spy into this file (collapsed stacks)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--serve", nargs=2, type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(int(args.serve[0]), args.serve[1] / 1000)
        return
    sizes = [int(n) for n in args.sizes.split(",")]
    env = {"STUDIO_FLUSH_INTERVAL": args.flush_interval} if args.flush_interval else {}
    if args.agent_flush_ms is not None:
        env |= {
            "STUDIO_RUNTIME_FACTORY": "studio_whatif.factory",
            "BENCH_AGENT_FLUSH_S": str(args.agent_flush_ms / 1000),
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(Path(__file__).resolve().parent), str(ROOT), os.environ.get("PYTHONPATH")])
            ),
        }
    server_cmd = [str(Path(__file__).resolve()), "--serve", str(args.tokens), str(args.pace_ms)]
    results: list[dict[str, Any]] = []
    print(machine())
    print(
        f"{args.tokens} tokens per answer, {args.pace_ms:g} ms apart; STUDIO_FLUSH_INTERVAL="
        f"{args.flush_interval or 'default (0.075)'}; agentcore fragment window "
        f"{args.agent_flush_ms if args.agent_flush_ms is not None else f'default ({FLUSH_INTERVAL_S * 1000:g})'} ms; "
        f"DEBUG={'1' if args.debug else '0'}; delays in ms"
    )
    print(
        f"{'N':>4}{'delay med':>11}{'delay p95':>11}{'max':>8}{'TTFT med':>10}{'TTFT p95':>10}"
        f"{'submit→req':>12}{'frames':>8}{'KB':>7}{'daphne cpu/sess':>18}  notes"
    )
    with ProviderProcess(server_cmd) as provider, StudioProcess(debug=args.debug, env=env) as studio:
        from studio import services
        from studio.models import RegisteredModel

        model = RegisteredModel.objects.create(
            name="bench stamped model",
            provider="custom",
            model_id="bench-model",
            base_url=provider.base_url,
            api_kind="openai-completions",
            api_key="k",
            attributes={"context_window": 128000, "max_tokens": 4096, "reasoning": False},
        )
        k = 0
        warm = services.session_create(
            owner=studio.user,
            registered_model=model,
            workdir="",
            permission_policy="read-only",
            effort="low",
            mode="build",
        )
        asyncio.run(run_size(studio, [Watch(999, str(warm.pk))], args.tokens, args.timeout))  # imports, first renders
        if args.profile:
            studio.py_spy(args.profile)
        for n in sizes:
            rounds = args.rounds_1 if n == 1 else 1
            watched: list[Watch] = []
            cpu_start = studio.cpu_seconds()
            for _ in range(rounds):
                batch = []
                for _ in range(n):
                    session = services.session_create(
                        owner=studio.user,
                        registered_model=model,
                        workdir="",
                        permission_policy="read-only",
                        effort="low",
                        mode="build",
                    )
                    batch.append(Watch(k, str(session.pk)))
                    k += 1
                asyncio.run(run_size(studio, batch, args.tokens, args.timeout))
                watched += batch
            cpu = studio.cpu_seconds() - cpu_start
            result = analyse(watched, provider.control("/_fake/stamps"), args.tokens)
            result.update(size=n, rounds=rounds, daphne_cpu_ms_per_session=cpu * 1000 / len(watched))
            results.append(result)
            notes = f"{len(result['errors'])} errors: {result['errors'][:1]}" if result["errors"] else ""
            if result["missing_tokens"]:
                notes += f" {result['missing_tokens']} tokens never seen"
            print(
                f"{n:>4}{_fmt(result['delay_median_ms']):>11}{_fmt(result['delay_p95_ms']):>11}"
                f"{_fmt(result['delay_max_ms']):>8}{_fmt(result['ttft_median_ms']):>10}{_fmt(result['ttft_p95_ms']):>10}"
                f"{_fmt(result['submit_median_ms']):>12}{result['frames_per_session']:>8.1f}"
                f"{result['kb_per_session']:>7.0f}{result['daphne_cpu_ms_per_session']:>18.1f}  {notes}",
                flush=True,
            )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"machine": machine(), "args": vars(args) | {"profile": str(args.profile)}, "results": results},
                indent=2,
                default=str,
            )
        )
    if any(r["errors"] for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
