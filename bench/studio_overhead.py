"""The delay Studio itself adds to every streamed token, for 1, 10, 50 and 200 concurrent sessions.

A fake provider (``agentcore.testing.FakeProviderServer`` in a child process, its writer
wrapped) streams each session's answer as numbered tokens (``zq<session>x<token>``) paced like a
model (``--pace-ms`` apart) and stamps the moment each token's bytes are handed to the socket.
Studio (a real daphne with its default single-machine set-up, ``DJANGO_DEBUG=0``) runs one
session per WebSocket client; each client stamps every frame as it arrives. All processes read
the same clock (``time.monotonic``, CLOCK_MONOTONIC). Per token:

    added delay = first frame that shows the token at the client − token sent by the provider

so the model's pacing and the tools are out of the number; the client's own frame handling is
in it (kept to a timestamp and a copy; parsing happens after the run).

**The sessions really run at once.** Each size first opens all N pages (a GET that opens the
session's runtime) and their WebSockets (each waits for its first full render), and only then
posts the N prompts together; ``overlap`` says how many streams the provider had in flight at
one instant (N when the prompts are truly concurrent). One untimed session warms daphne up
first (imports, template loading). Reported per size: median / p95 / max over every token of
every session; the **TTFT overhead** (the same delay for each session's first token); the
first token's time after the prompt was sent (p95, seconds: the 200-session target); submit →
request (prompt sent → the provider has the request); frames per session, **bytes on the
socket per token** and the largest frame; **Studio's CPU per session** (daphne plus every
process below it, e.g. session-host workers) split into *open* (page + socket + runtime) and
*turn* (prompt sent → the turn's end); and the **steal** during the size (CPU time the
hypervisor gave other guests: a noisy neighbour slows every process without raising the load
average, so a size measured with seconds of steal was not measured on a quiet machine). Prompts
go over each page's socket, as the browser's composer sends them (``--prompt-via post``: the
POST, as a prompt with images does). A long-answer case (``--long-tokens``, default 2,000
tokens, at ``--long-sizes``) shows whether bytes per token stay constant as the answer grows.

**The machine's speed in the same run.** After each size, with Studio idle, a child process
streams the same N short answers raw at once on the host client's lanes (``lanes_floor``: the
transport and SSE parsing no runtime avoids) and the row's notes give its CPU per stream, the
**floor**, and Studio's CPU per turn and per opening as multiples of it. This VM's speed moves
from day to day (the floor read ~5 ms at N = 50 on one day, ~8–9 ms on the next) and every
absolute CPU figure moves with it; the multiples compare runs across such days. ``--no-floor``
skips it.

``--flush-interval S`` sets ``STUDIO_FLUSH_INTERVAL``; ``--env NAME=VALUE`` any other setting.
``--profile out.txt`` samples daphne with py-spy for the whole run (read it with
``bench/profile_top.py``); ``--profile-phase open`` or ``turn`` samples only that phase of every
size (each phase's samples appended to the file).

    python bench/studio_overhead.py [--sizes 1,10,50,200] [--tokens 60] [--long-tokens 2000]
                                    [--long-sizes 1] [--pace-ms 20] [--rounds-1 5]
                                    [--flush-interval S] [--env K=V] [--profile out.txt] [--json out.json]
                                    [--prompt-via socket|post]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopkit import ProviderProcess, machine, stolen_seconds
from studiokit import ROOT, StudioProcess

from agentcore.engine.fragments import FLUSH_INTERVAL_S
from studio.host.supervisor import worker_count

MARK = re.compile(r"zq(\d{3})x(\d{4})")
MARK_BYTES = re.compile(rb"zq\d{3}x\d{4}")
SESSION = re.compile(r"bench session (\d+)")
TOKENS = re.compile(r"answer in (\d+) tokens")


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
        wanted = TOKENS.search(text)
        count = int(wanted.group(1)) if wanted else tokens
        chunks = [f"zq{k:03d}x{i:04d} " for i in range(count)]
        return [Text("", chunks=chunks, pace_s=pace_s), Usage(input=100, output=count), Stop("stop")]

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
    ended: float = 0.0
    page: str = ""  # the page as its GET returned it
    opening: str = ""  # the socket's first frame (a full render, or the sign the page is current)
    frames: list[tuple[float, str]] = field(default_factory=list)
    error: str = ""


async def open_page(studio: StudioProcess, http: Any, w: Watch, limit: float) -> Any:
    """Open the session's page (which opens its runtime) and its socket; returns the socket
    once the initial full render arrived."""
    import websockets

    page = await http.get(f"/sessions/{w.session_id}/")
    page.raise_for_status()
    w.page = page.text
    ws_path = re.search(r'ws-connect="([^"]+)"', w.page)
    ws_url = studio.base.replace("http", "ws") + (
        ws_path.group(1).replace("&amp;", "&") if ws_path else f"/ws/sessions/{w.session_id}/"
    )
    headers = {"Cookie": studio.cookie, "Origin": studio.base}
    ws = await websockets.connect(ws_url, additional_headers=headers, max_size=None)
    first = await asyncio.wait_for(ws.recv(), limit)  # the initial render (or the sign the page is current)
    w.opening = first if isinstance(first, str) else first.decode()
    return ws


#: How a prompt is sent: over the page's socket (what the browser's composer does) or as the POST
#: (a prompt with images, or a client without the socket).
PROMPT_VIA = ("socket", "post")
REPLY = '<div id="composer-error" hx-swap-oob="true"'


async def send_prompt(http: Any, ws: Any, w: Watch, tokens: int, via: str) -> None:
    """The prompt as the browser sends it: one JSON frame on the socket (its answer, the
    ``#composer-error`` reply, arrives among the frames ``stream`` records), or the POST."""
    text = f"bench session {w.k}: answer in {tokens} tokens"
    if via == "socket":
        await ws.send(json.dumps({"command": "prompt", "prompt": text, "agent": "build"}))
        return
    response = await http.post(
        f"/sessions/{w.session_id}/prompt/", data={"prompt": text, "agent": "build"}, headers={"HX-Request": "true"}
    )
    response.raise_for_status()
    if response.text.strip():
        raise RuntimeError(f"prompt refused: {response.text[:200]}")


async def stream(http: Any, ws: Any, w: Watch, tokens: int, limit: float, via: str = "socket") -> None:
    """Send the prompt, record every frame until the turn ended (the last token was shown,
    then a frame with the idle status pill)."""
    last = f"zq{w.k:03d}x{tokens - 1:04d}"
    try:
        w.posted = time.monotonic()
        await send_prompt(http, ws, w, tokens, via)
        deadline = time.monotonic() + limit
        shown_last = False
        while True:
            frame = await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic()))
            w.frames.append((time.monotonic(), frame if isinstance(frame, str) else frame.decode()))
            text = w.frames[-1][1]
            if text.startswith(REPLY) and 'data-reply="refused"' in text:
                raise RuntimeError(f"prompt refused: {text[:200]}")
            shown_last = shown_last or last in text
            if shown_last and "pill-idle" in text:
                w.ended = time.monotonic()
                return
    except Exception as exc:
        w.error = f"{type(exc).__name__}: {exc}"


@dataclass
class SizeRun:
    """What one round of N sessions measured besides the frames: CPU split by phase."""

    open_cpu_s: float = 0.0
    prompt_cpu_s: float = 0.0
    open_wall_s: float = 0.0
    open_roles: dict[str, float] = field(default_factory=dict)  # page + socket + runtime, CPU s per role
    turn_roles: dict[str, float] = field(default_factory=dict)  # prompt → turn end, CPU s per role


@dataclass
class PhaseProfile:
    """py-spy over one phase of every size (``--profile-phase``): started before it, stopped after."""

    out: Path | None = None
    phase: str = "all"
    gil: bool = True
    rate: int = 250

    def start(self, studio: StudioProcess, phase: str) -> None:
        if self.out is not None and self.phase == phase:
            studio.py_spy(self.out.with_suffix(f".{phase}.part"), rate=self.rate, gil=self.gil)
            time.sleep(1.0)  # py-spy attaches before the phase starts (waiting for a process to start)

    def stop(self, studio: StudioProcess, phase: str) -> None:
        if self.out is not None and self.phase == phase:
            studio.stop_py_spy()
            part = self.out.with_suffix(f".{phase}.part")
            with self.out.open("a") as out:
                out.write(part.read_text() if part.exists() else "")
            part.unlink(missing_ok=True)


async def run_size(
    studio: StudioProcess,
    sessions: list[Watch],
    tokens: int,
    limit: float,
    profile: PhaseProfile | None = None,
    via: str = "socket",
) -> SizeRun:
    """All N pages (and their runtimes) and sockets open first, then the N prompts at once."""
    import httpx

    headers = {"Cookie": studio.cookie, "X-CSRFToken": studio.csrf}
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    run = SizeRun()
    async with httpx.AsyncClient(base_url=studio.base, headers=headers, limits=limits, timeout=limit) as http:
        profile = profile or PhaseProfile()
        profile.start(studio, "open")
        cpu0, roles0, wall0 = studio.cpu_seconds(), studio.cpu_by_role(), time.monotonic()
        sockets = await asyncio.gather(*(open_page(studio, http, w, limit) for w in sessions))
        cpu1, roles1 = studio.cpu_seconds(), studio.cpu_by_role()
        profile.stop(studio, "open")
        profile.start(studio, "turn")
        cpu1, roles1 = studio.cpu_seconds(), studio.cpu_by_role()
        run.open_cpu_s, run.open_wall_s = cpu1 - cpu0, time.monotonic() - wall0
        run.open_roles = {role: cpu - roles0.get(role, 0.0) for role, cpu in roles1.items()}
        # One gather: every task posts its prompt in the same turn of the loop.
        await asyncio.gather(
            *(stream(http, ws, w, tokens, limit, via) for ws, w in zip(sockets, sessions, strict=True))
        )
        run.prompt_cpu_s = studio.cpu_seconds() - cpu1
        run.turn_roles = {role: cpu - roles1.get(role, 0.0) for role, cpu in studio.cpu_by_role().items()}
        profile.stop(studio, "turn")
        for ws in sockets:
            await ws.close()
    return run


#: The session numbers of the floor's streams (``lanes_floor``): far above any size's sessions.
FLOOR_FIRST = 1_000_000


def lanes_floor(base_url: str, n: int, tokens: int, *, first: int, rounds: int = 3) -> float:
    """The machine's speed in this run: ``n`` raw streams of ``tokens`` chunks at once on the host
    client's lanes (``bench/agentcore_sessions.py --floor-only``, the transport and SSE parsing no
    runtime avoids), in a child process while Studio is idle; the median CPU ms per stream of
    ``rounds`` rounds. Studio's CPU per turn divided by it compares runs on machines (or hours) of
    different speed: this VM's floor moved from ~5 to ~9 ms between two days."""
    script = Path(__file__).resolve().with_name("agentcore_sessions.py")
    command = [sys.executable, str(script), "--floor-only", base_url, str(n), str(tokens), str(rounds), str(first)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True, timeout=120)
    return float(statistics.median(json.loads(done.stdout)))


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The largest number of intervals open at one instant."""
    edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    best = now = 0
    for _at, step in edges:
        now += step
        best = max(best, now)
    return best


def _text(node: Any) -> str:
    """The text of an element tree as shown (tags dropped), so a marker split across elements
    still reads whole; a ``<template>`` is not shown (a settled answer's copy source is one)."""
    return "".join(c if isinstance(c, str) else _text(c) for c in node.children if getattr(c, "tag", "") != "template")


def page_check(w: Watch, tokens: int) -> tuple[int, int, int]:
    """Apply the socket's frames to the page as htmx does (``tests/studio/oob.py``) and count this
    session's token markers in the conversation after every frame: (tokens ever shown twice at
    once, tokens missing from the final conversation, markers of other sessions seen)."""
    from tests.studio.oob import apply, parse

    page = parse(w.page)
    duplicated: set[int] = set()
    foreign = 0
    counts: dict[int, int] = {}
    for html in [w.opening, *(text for _at, text in w.frames)]:
        apply(page, html)
        conversation = page.find("conversation")
        counts = {}
        for match in MARK.finditer(_text(conversation) if conversation is not None else ""):
            if int(match.group(1)) != w.k:
                foreign += 1
                continue
            i = int(match.group(2))
            counts[i] = counts.get(i, 0) + 1
        duplicated.update(i for i, n in counts.items() if n > 1)
    missing = sum(1 for i in range(tokens) if counts.get(i, 0) != 1)
    return len(duplicated), missing, foreign


def analyse(sessions: list[Watch], stamps: dict[str, float], tokens: int) -> dict[str, Any]:
    delays: list[float] = []
    ttft: list[float] = []
    first_token: list[float] = []
    submit: list[float] = []
    streams: list[tuple[float, float]] = []
    missing = 0
    duplicated = page_missing = foreign = 0
    frames = 0
    size = 0
    largest = 0
    for w in sessions:
        if w.page and not w.error:
            twice, lost, other = page_check(w, tokens)
            duplicated, page_missing, foreign = duplicated + twice, page_missing + lost, foreign + other
        seen: dict[int, float] = {}
        for at, text in w.frames:
            frames += 1
            size += len(text.encode())
            largest = max(largest, len(text.encode()))
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
                if w.posted:
                    first_token.append(seen[i] - w.posted)
        first = stamps.get(f"zq{w.k:03d}x0000")
        final = stamps.get(f"zq{w.k:03d}x{tokens - 1:04d}")
        if first is not None and final is not None:
            streams.append((first, final))
        if f"request {w.k}" in stamps and w.posted:
            submit.append((stamps[f"request {w.k}"] - w.posted) * 1000)
    return {
        "sessions": len(sessions),
        "errors": [w.error for w in sessions if w.error],
        "missing_tokens": missing,
        "duplicated_tokens": duplicated,
        "page_missing_tokens": page_missing,
        "foreign_tokens": foreign,
        "max_overlap": max_overlap(streams),
        "delay_median_ms": statistics.median(delays) if delays else None,
        "delay_p95_ms": _p95(delays) if delays else None,
        "delay_max_ms": max(delays) if delays else None,
        "ttft_median_ms": statistics.median(ttft) if ttft else None,
        "ttft_p95_ms": _p95(ttft) if ttft else None,
        "first_token_p95_s": _p95(first_token) if first_token else None,
        "submit_median_ms": statistics.median(submit) if submit else None,
        "submits": sorted(submit),
        "frames_per_session": frames / max(1, len(sessions)),
        "kb_per_session": size / 1024 / max(1, len(sessions)),
        "bytes_per_token": size / max(1, len(sessions) * tokens),
        "largest_frame_kb": largest / 1024,
    }


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


HEADER = (
    f"{'N':>4}{'tokens':>7}{'overlap':>8}{'delay med':>10}{'p95':>7}{'max':>7}{'TTFT med':>9}{'p95':>7}"
    f"{'1st tok p95 s':>14}{'submit→req':>11}{'frames':>7}{'B/token':>8}{'max KB':>7}"
    f"{'cpu open':>9}{'cpu turn':>9}  notes"
)


def _row(r: dict[str, Any]) -> str:
    notes = f"{len(r['errors'])} errors: {r['errors'][:1]}" if r["errors"] else ""
    if r["missing_tokens"]:
        notes += f" {r['missing_tokens']} tokens never seen"
    if r["duplicated_tokens"] or r["page_missing_tokens"] or r["foreign_tokens"]:
        notes += (
            f" LOST/DUPLICATED on the page: {r['duplicated_tokens']} shown twice, {r['page_missing_tokens']} "
            f"not exactly once at the end, {r['foreign_tokens']} of other sessions"
        )
    else:
        notes += " page: every token exactly once"
    first = "—" if r["first_token_p95_s"] is None else f"{r['first_token_p95_s']:.2f}"
    roles = " ".join(f"{role} {ms:.0f}" for role, ms in r["cpu_turn_ms_by_role"].items())
    opening = " ".join(f"{role} {ms:.0f}" for role, ms in r["cpu_open_ms_by_role"].items())
    steal = "" if r.get("steal_s") is None else f"; steal {r['steal_s']:.2f} s"
    floor = ""
    if r.get("floor_ms"):
        turn, opening_x = (r[f"cpu_{phase}_ms_per_session"] / r["floor_ms"] for phase in ("turn", "open"))
        floor = f"; floor {r['floor_ms']:.1f} ms, turn {turn:.1f}x, open {opening_x:.1f}x"
    notes += f" [open cpu: {opening}; turn cpu: {roles}; submit→req max {_fmt(r['submit_max_ms'])}{steal}{floor}]"
    return (
        f"{r['size']:>4}{r['tokens']:>7}{r['max_overlap']:>8}{_fmt(r['delay_median_ms']):>10}"
        f"{_fmt(r['delay_p95_ms']):>7}{_fmt(r['delay_max_ms']):>7}{_fmt(r['ttft_median_ms']):>9}"
        f"{_fmt(r['ttft_p95_ms']):>7}{first:>14}{_fmt(r['submit_median_ms']):>11}{r['frames_per_session']:>7.1f}"
        f"{r['bytes_per_token']:>8.0f}{r['largest_frame_kb']:>7.1f}{r['cpu_open_ms_per_session']:>9.1f}"
        f"{r['cpu_turn_ms_per_session']:>9.1f}  {notes}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,50,200")
    parser.add_argument("--tokens", type=int, default=60)
    parser.add_argument("--long-tokens", type=int, default=2000, help="the long answer's tokens (0: no long case)")
    parser.add_argument("--long-sizes", default="1", help="concurrent sessions of the long case")
    parser.add_argument("--pace-ms", type=float, default=20.0)
    parser.add_argument("--rounds-1", type=int, default=5, help="sequential rounds pooled for N = 1")
    parser.add_argument("--flush-interval", help="STUDIO_FLUSH_INTERVAL for daphne (seconds)")
    parser.add_argument(
        "--agent-flush-ms",
        type=float,
        help="what-if: agentcore's fragment commit window in daphne (default 20 ms), see studio_whatif.py",
    )
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--debug", action="store_true", help="DJANGO_DEBUG=1 (records every SQL query)")
    parser.add_argument("--profile", type=Path, help="sample daphne with py-spy into this file (collapsed stacks)")
    parser.add_argument("--profile-threads", action="store_true", help="profile every thread, not only the GIL's")
    parser.add_argument("--profile-phase", choices=("all", "open", "turn"), default="all")
    parser.add_argument("--profile-rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for Studio's processes")
    parser.add_argument(
        "--workers",
        default=os.environ.get("STUDIO_WORKERS", "0"),
        help="run Studio as `manage.py studio --workers N` (0, Studio's default: host in daphne; auto: one per core); "
        "'daphne' runs daphne alone with the in-process host (the first Studio's set-up)",
    )
    parser.add_argument(
        "--isolation",
        choices=("default", "host", "sandbox"),
        default="default",
        help="where the sessions' tools run: default (the benchmark's user is not staff: a sandbox), or forced",
    )
    parser.add_argument(
        "--prompt-via",
        choices=PROMPT_VIA,
        default="socket",
        help="send each prompt over the page's socket (the browser's way) or as the POST (images, no socket)",
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-floor", action="store_true", help="skip the raw-stream floor after each size")
    parser.add_argument("--serve", nargs=2, type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(int(args.serve[0]), args.serve[1] / 1000)
        return
    cases = [(int(n), args.tokens) for n in args.sizes.split(",") if n]
    if args.long_tokens:
        cases += [(int(n), args.long_tokens) for n in args.long_sizes.split(",") if n]
    env = {"STUDIO_FLUSH_INTERVAL": args.flush_interval} if args.flush_interval else {}
    env |= dict(item.split("=", 1) for item in args.env)
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
        f"{args.pace_ms:g} ms between tokens; STUDIO_FLUSH_INTERVAL="
        f"{args.flush_interval or 'default'}; agentcore fragment window "
        f"{args.agent_flush_ms if args.agent_flush_ms is not None else f'default ({FLUSH_INTERVAL_S * 1000:g})'} ms; "
        f"DEBUG={'1' if args.debug else '0'}; {env or ''}"
    )
    print(
        f"every page, socket and runtime opens first, then all prompts are sent at once (prompts via "
        f"{'the socket' if args.prompt_via == 'socket' else 'the POST'}); overlap = most streams in flight "
        "together; submit→req = prompt sent → the provider has the request; delays in ms; cpu = Studio's "
        "processes (daphne + workers), ms per session"
    )
    print(HEADER)
    workers = None if args.workers == "daphne" else worker_count(args.workers)
    print(f"Studio: {'daphne alone' if workers is None else f'manage.py studio --workers {workers}'}")
    with ProviderProcess(server_cmd) as provider, StudioProcess(debug=args.debug, env=env, workers=workers) as studio:
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

        def new_session() -> str:
            return str(
                services.session_create(
                    owner=studio.user,
                    registered_model=model,
                    workdir="",
                    permission_policy="read-only",
                    effort="low",
                    mode="build",
                    tool_isolation="" if args.isolation == "default" else args.isolation,
                ).pk
            )

        k = 0
        warm = [Watch(999, new_session())]
        asyncio.run(run_size(studio, warm, args.tokens, args.timeout, via=args.prompt_via))  # imports, renders
        phases = PhaseProfile(args.profile, args.profile_phase, not args.profile_threads, args.profile_rate)
        if args.profile and args.profile_phase == "all":
            studio.py_spy(args.profile, rate=args.profile_rate, gil=not args.profile_threads)
            phases = PhaseProfile()
        for n, tokens in cases:
            rounds = args.rounds_1 if n == 1 and tokens == args.tokens else 1
            watched: list[Watch] = []
            runs: list[SizeRun] = []
            steal0 = stolen_seconds()
            for _ in range(rounds):
                batch = []
                for _ in range(n):
                    batch.append(Watch(k, new_session()))
                    k += 1
                runs.append(asyncio.run(run_size(studio, batch, tokens, args.timeout, phases, args.prompt_via)))
                watched += batch
            result = analyse(watched, provider.control("/_fake/stamps"), tokens)
            result.update(
                size=n,
                tokens=tokens,
                rounds=rounds,
                cpu_open_ms_per_session=sum(r.open_cpu_s for r in runs) * 1000 / len(watched),
                cpu_turn_ms_per_session=sum(r.prompt_cpu_s for r in runs) * 1000 / len(watched),
                open_wall_s=max(r.open_wall_s for r in runs),
                cpu_turn_ms_by_role={
                    role: sum(r.turn_roles.get(role, 0.0) for r in runs) * 1000 / len(watched)
                    for role in sorted({role for r in runs for role in r.turn_roles})
                },
                cpu_open_ms_by_role={
                    role: sum(r.open_roles.get(role, 0.0) for r in runs) * 1000 / len(watched)
                    for role in sorted({role for r in runs for role in r.open_roles})
                },
                submit_max_ms=max(submits) if (submits := result.get("submits")) else None,
                steal_s=None if steal0 is None or (steal1 := stolen_seconds()) is None else steal1 - steal0,
                # the machine's speed: measured with the short answers (a long one's floor takes minutes)
                floor_ms=None
                if args.no_floor or tokens != args.tokens
                else lanes_floor(provider.base_url, n, tokens, first=FLOOR_FIRST + k),
            )
            results.append(result)
            print(_row(result), flush=True)
    if args.json:
        args.json.write_text(
            json.dumps(
                {"machine": machine(), "args": vars(args) | {"profile": str(args.profile)}, "results": results},
                indent=2,
                default=str,
            )
        )
    if any(
        r["errors"] or r["missing_tokens"] or r["duplicated_tokens"] or r["page_missing_tokens"] or r["foreign_tokens"]
        for r in results
    ):
        sys.exit(1)


if __name__ == "__main__":
    main()
