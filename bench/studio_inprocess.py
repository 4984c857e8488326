"""Studio's work per session, in one process: SQL queries and CPU per phase, for profiling.

``bench/studio_overhead.py`` measures a real daphne from outside; this harness runs Studio's
ASGI application *in this process* (HTTP through ``httpx.ASGITransport``, the WebSocket through
Channels' ``WebsocketCommunicator``, the session host on this event loop — what daphne does,
minus Twisted's sockets), against the same stamping provider (``studio_overhead.py --serve`` in
a child process). So every SQL query Studio makes can be counted, per phase and per Studio
function that made it, and one phase can be profiled alone:

- *open*: the page's GET (which opens the runtime) and its socket's first frame;
- *turn*: the prompt sent to the turn's end (the idle status pill after the last token). The
  prompt goes over the page's socket as the browser's composer sends it (``--prompt-via post``:
  the POST, through Django's whole request cycle, as a prompt with images does).

CPU is this process's (``time.process_time``: Studio plus the harness's own small client side).

    python bench/studio_inprocess.py [--sessions 50] [--tokens 60] [--pace-ms 20] [--rounds 2]
                                     [--queries] [--profile open|turn --out FILE]
                                     [--prompt-via socket|post]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from loopkit import ROOT, ProviderProcess, py_spy, stop_py_spy

HERE = Path(__file__).resolve().parent


class QueryLog:
    """Counts every SQL statement Django runs (any thread) under the current phase label."""

    def __init__(self) -> None:
        self.phase = "setup"
        self.by_phase: Counter[str] = Counter()
        self.by_caller: dict[str, Counter[str]] = {}
        self.detail = False

    def wrapper(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.by_phase[self.phase] += 1
        if self.detail:
            caller = "?"
            for frame in reversed(traceback.extract_stack(limit=40)):
                # studio/sql.py runs most statements for its callers: name the caller instead
                ours = "/studio/" in frame.filename and "/bench/" not in frame.filename
                if ours and not frame.filename.endswith("/studio/sql.py"):
                    caller = f"{Path(frame.filename).name}:{frame.name}"
                    break
            shape = re.sub(r"\s+", " ", sql)[:90]
            self.by_caller.setdefault(self.phase, Counter())[f"{caller}  {shape}"] += 1
        return execute(sql, params, many, context)


#: Sync functions whose CPU (``time.thread_time``, inclusive of what they call) ``--components``
#: reports per session and phase: Studio's rendering, its table writes and reads.
COMPONENTS = (
    "studio.pages.render_regions",
    "studio.pages.render_full_regions",
    "studio.pages.session_page_context",
    "studio.pages.usage_tab_context",
    "studio.pages.conversation_context",
    "studio.pages.pending_context",
    "studio.pages.controls_context",
    "studio.pages.live_block_parts",
    "studio.turn_html.conversation",
    "studio.turn_html.live_turn",
    "studio.usage_html.render",
    "studio.controls_html.render",
    "studio.host.effects.write",
    "studio.host.effects:_LedgerSync.run",
    "studio.services.run_submitted",
    "studio.selectors.session_model_table",
    "studio.selectors.session_for_user",
    "studio.selectors.session_config",
    "studio.rendering.render_template",
    "studio.ledger.read_usage_ledger",
    "django.template.loader.render_to_string",
    "django.shortcuts.render",
    "studio.host.fold.fold_event",
    "studio.host.fold.fold_snapshot",
    "studio.host.publisher:Publisher.state",
    "studio.host.publisher:Publisher._advance_text",
    "studio.text_stream.patch_html",
    "studio.rendering.render_context_ring",
    "studio.consumers:SessionConsumer.session_push",
    "studio.host.publisher:Publisher.push_live",
    "studio.host.publisher:Publisher.push_rows",
    "studio.host.publisher:Publisher.send",
    "studio.host.serving.hold",
    "studio.host.session_host:SessionHost.prompt",
    "studio.views.session_prompt",
    "studio.consumers:SessionConsumer.receive",
    "studio.composer.parse_prompt",
    "studio.composer.submit_prompt",
    "studio.views.session_detail",
    "studio.consumers:SessionConsumer.connect",
    "channels.layers:InMemoryChannelLayer.group_send",
    "agentcore.session.driver:SessionDriver.session_event",
    "agentcore.session.driver:SessionDriver.snapshot",
    "agentcore.session.snapshot:SessionSnapshot.model_validate",
    "agentcore.harness.sqlite_store:SqliteStorage.commit",
)


class ComponentClock:
    """Thread CPU per wrapped function, per phase (outermost call of each name only)."""

    def __init__(self, log: QueryLog) -> None:
        self.log = log
        self.cpu: dict[str, Counter[str]] = {}
        self.calls: dict[str, Counter[str]] = {}
        self._depth: dict[tuple[int, str], int] = {}

    def wrap(self, dotted: str) -> None:
        import functools
        import importlib
        import threading

        owner_name = ""
        raw: Any = None
        if ":" in dotted:
            module_name, owner_name = dotted.split(":")
            owner_name, name = owner_name.split(".")
            module = importlib.import_module(module_name)
            owner = getattr(module, owner_name)
            # The attribute as the class that defines it holds it (an inherited one too), so the
            # wrapper is bound the same way: self, cls or nothing.
            raw = next(klass.__dict__[name] for klass in owner.__mro__ if name in klass.__dict__)
            inner = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
        else:
            module_name, name = dotted.rsplit(".", 1)
            module = importlib.import_module(module_name)
            inner = getattr(module, name)

        if asyncio.iscoroutinefunction(inner):

            @functools.wraps(inner)
            async def atimed(*args: Any, **kwargs: Any) -> Any:
                # an async function's own steps only: the CPU of its thread while each step runs
                self.calls.setdefault(self.log.phase, Counter())[dotted] += 1
                coro = inner(*args, **kwargs)
                value: Any = None
                error: BaseException | None = None
                while True:
                    start = time.thread_time()
                    try:
                        step = coro.send(value) if error is None else coro.throw(error)
                    except StopIteration as done:
                        self.cpu.setdefault(self.log.phase, Counter())[dotted] += time.thread_time() - start
                        return done.value
                    finally:
                        pass
                    self.cpu.setdefault(self.log.phase, Counter())[dotted] += time.thread_time() - start
                    try:
                        value, error = await _Yield(step), None
                    except BaseException as exc:
                        value, error = None, exc

            setattr(owner if owner_name else module, name, atimed)
            return

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            key = (threading.get_ident(), dotted)
            depth = self._depth.get(key, 0)
            self._depth[key] = depth + 1
            start = time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self._depth[key] = depth
                if depth == 0:
                    self.cpu.setdefault(self.log.phase, Counter())[dotted] += time.thread_time() - start
                    self.calls.setdefault(self.log.phase, Counter())[dotted] += 1

        if owner_name:
            if isinstance(raw, staticmethod):
                setattr(owner, name, staticmethod(timed))
            else:
                setattr(owner, name, classmethod(timed) if isinstance(raw, classmethod) else timed)
            return
        setattr(module, name, timed)
        # modules that imported the name directly keep their own reference: patch those too
        for other in list(sys.modules.values()):
            if other is not None and getattr(other, "__name__", "").startswith(("studio", "django")):
                if getattr(other, name, None) is inner:
                    setattr(other, name, timed)


class _Yield:
    """Awaitable that hands one yielded value of a driven coroutine to the event loop."""

    def __init__(self, step: Any) -> None:
        self.step = step

    def __await__(self) -> Any:
        return (yield self.step)


def setup_django(data_dir: Path, log: QueryLog) -> None:
    os.environ.update(
        {
            "STUDIO_DATA_DIR": str(data_dir),
            "DJANGO_SETTINGS_MODULE": "studio.settings",
            "DJANGO_DEBUG": "0",
            "DJANGO_SECRET_KEY": "bench-only-secret-key-not-for-production-0123456789",
            "DJANGO_ALLOWED_HOSTS": "testserver,127.0.0.1,localhost",
            "STUDIO_LOG_LEVEL": "WARNING",
            "STUDIO_HOST_MODE": "inprocess",
        }
    )
    subprocess.run([sys.executable, "manage.py", "studio", "--no-serve"], cwd=ROOT, check=True, capture_output=True)
    import django

    django.setup()
    from django.db.backends.signals import connection_created

    def install(sender: Any, connection: Any, **kwargs: Any) -> None:
        if log.wrapper not in connection.execute_wrappers:  # fired again at every reconnect
            connection.execute_wrappers.append(log.wrapper)

    connection_created.connect(install, weak=False)


async def one_round(
    app: Any, cookie: str, csrf: str, ids: list[str], tokens: int, log: QueryLog, spy: Any, via: str = "socket"
) -> dict[str, Any]:
    import httpx
    from channels.testing import WebsocketCommunicator

    headers = {"Cookie": cookie, "X-CSRFToken": csrf, "Host": "testserver"}
    transport = httpx.ASGITransport(app=app)
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver", headers=headers) as http:

        async def open_one(session_id: str) -> Any:
            page = await http.get(f"/sessions/{session_id}/")
            page.raise_for_status()
            ws_path = re.search(r'ws-connect="([^"]+)"', page.text)
            path = ws_path.group(1).replace("&amp;", "&") if ws_path else f"/ws/sessions/{session_id}/"
            ws = WebsocketCommunicator(
                app,
                path,
                headers=[(b"cookie", cookie.encode()), (b"origin", b"http://testserver"), (b"host", b"testserver")],
            )
            connected, _code = await ws.connect(timeout=60)
            assert connected
            await ws.receive_from(timeout=60)
            return ws

        async def turn(k: int, session_id: str, ws: Any) -> None:
            text = f"bench session {k}: answer in {tokens} tokens"
            if via == "socket":  # the browser's composer: one JSON frame on the page's socket
                await ws.send_to(text_data=json.dumps({"command": "prompt", "prompt": text, "agent": "build"}))
            else:
                response = await http.post(
                    f"/sessions/{session_id}/prompt/",
                    data={"prompt": text, "agent": "build"},
                    headers={"HX-Request": "true"},
                )
                response.raise_for_status()
                assert not response.text.strip(), response.text
            last = f"zq{k:03d}x{tokens - 1:04d}"
            shown = False
            while True:
                frame = await ws.receive_from(timeout=120)
                assert 'data-reply="refused"' not in frame, frame[:200]
                shown = shown or last in frame
                if shown and "pill-idle" in frame:
                    return

        with phase(log, spy, "open") as cpu_open:
            sockets = await asyncio.gather(*(open_one(i) for i in ids))
        from studio.host.session_host import get_session_host

        host = get_session_host()
        with phase(log, spy, "turn") as cpu_turn:
            await asyncio.gather(*(turn(k, i, ws) for k, (i, ws) in enumerate(zip(ids, sockets, strict=True))))
            await asyncio.gather(*(host.wait_idle(i) for i in ids))  # the turn's trailing bookkeeping too
        for ws in sockets:
            await ws.disconnect()
    out["open_ms"] = cpu_open[0] * 1000 / len(ids)
    out["turn_ms"] = cpu_turn[0] * 1000 / len(ids)
    return out


class Spy:
    """py-spy on this process for one phase (``--profile``), appended to ``--out``."""

    def __init__(self, phase: str | None, out: Path | None, rate: int) -> None:
        self.phase, self.out, self.rate = phase, out, rate
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, phase: str) -> None:
        if phase != self.phase or self.out is None:
            return
        self._part = self.out.with_suffix(".part")
        self._proc = py_spy(self._part, rate=self.rate)

    def stop(self, phase: str) -> None:
        if self._proc is None or phase != self.phase:
            return
        stop_py_spy(self._proc)
        self._proc = None
        assert self.out is not None
        with self.out.open("a") as out:
            out.write(self._part.read_text() if self._part.exists() else "")
        self._part.unlink(missing_ok=True)


@contextmanager
def phase(log: QueryLog, spy: Spy, name: str) -> Any:
    spy.start(name)
    log.phase = name
    cpu = [0.0]
    start = time.process_time()
    try:
        yield cpu
    finally:
        cpu[0] = time.process_time() - start
        log.phase = "between"
        spy.stop(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--tokens", type=int, default=60)
    parser.add_argument("--pace-ms", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--queries", action="store_true", help="list the queries of each phase by Studio caller")
    parser.add_argument(
        "--components",
        nargs="?",
        const="all",
        help="thread CPU and calls of Studio's main functions (all, or a comma-separated list)",
    )
    parser.add_argument("--profile", choices=("open", "turn"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument(
        "--agent-window-ms",
        type=float,
        help="what-if: pin every runtime's stream window (agentcore's fragment commit window; studio_whatif.py)",
    )
    parser.add_argument("--flush-interval", type=float, help="STUDIO_FLUSH_INTERVAL (seconds)")
    parser.add_argument(
        "--prompt-via",
        choices=("socket", "post"),
        default="socket",
        help="send each prompt over the page's socket (the browser's way) or as the POST (images, no socket)",
    )
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="studio-inprocess-"))
    log = QueryLog()
    log.detail = args.queries
    spy = Spy(args.profile, args.out, args.rate)
    if args.out is not None:
        args.out.write_text("")
    server = [str(HERE / "studio_overhead.py"), "--serve", str(args.tokens), str(args.pace_ms)]
    try:
        setup_django(data_dir, log)
        with ProviderProcess(server) as provider:
            asyncio.run(run(args, provider, log, spy))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


async def run(args: argparse.Namespace, provider: ProviderProcess, log: QueryLog, spy: Spy) -> None:
    from asgiref.sync import sync_to_async
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.utils.crypto import get_random_string

    from studio import services
    from studio.asgi import application
    from studio.models import RegisteredModel

    def prepare() -> tuple[str, str, Any, Any]:
        user = get_user_model().objects.create_user("bench", password="bench-pass-123")
        client = Client()
        client.force_login(user)
        csrf = get_random_string(32)
        cookie = f"sessionid={client.cookies['sessionid'].value}; csrftoken={csrf}"
        model = RegisteredModel.objects.create(
            name="bench stamped model",
            provider="custom",
            model_id="bench-model",
            base_url=provider.base_url,
            api_kind="openai-completions",
            api_key="k",
            attributes={"context_window": 128000, "max_tokens": 4096, "reasoning": False},
        )
        return cookie, csrf, user, model

    if args.agent_window_ms is not None:  # every runtime the host opens keeps this window
        from django.conf import settings

        os.environ["BENCH_AGENT_FLUSH_S"] = str(args.agent_window_ms / 1000)
        settings.STUDIO_RUNTIME_FACTORY = "studio_whatif.factory"
    if args.flush_interval is not None:
        from django.conf import settings

        settings.STUDIO_FLUSH_INTERVAL = args.flush_interval
    cookie, csrf, user, model = await sync_to_async(prepare)()
    clock = ComponentClock(log)
    if args.components:
        import studio.host.effects
        import studio.host.publisher
        import studio.views  # noqa: F401  (so their imported names get patched too)

        for dotted in COMPONENTS if args.components == "all" else args.components.split(","):
            clock.wrap(dotted)

    def sessions(n: int) -> list[str]:
        return [
            str(
                services.session_create(
                    owner=user,
                    registered_model=model,
                    workdir="",
                    permission_policy="read-only",
                    effort="low",
                    mode="build",
                ).pk
            )
            for _ in range(n)
        ]

    warm = await sync_to_async(sessions)(1)
    await one_round(application, cookie, csrf, warm, args.tokens, log, Spy(None, None, 0), args.prompt_via)
    results = []
    log.by_phase.clear()
    log.by_caller.clear()
    clock.cpu.clear()
    for _ in range(args.rounds):
        ids = await sync_to_async(sessions)(args.sessions)
        results.append(await one_round(application, cookie, csrf, ids, args.tokens, log, spy, args.prompt_via))
    n = args.sessions * args.rounds
    via = "the socket" if args.prompt_via == "socket" else "the POST"
    print(
        f"{args.sessions} sessions x {args.rounds} rounds, {args.tokens} tokens {args.pace_ms:g} ms apart, "
        f"prompts via {via}"
    )
    for key in ("open_ms", "turn_ms"):
        values = [r[key] for r in results]
        rounds = ", ".join(f"{v:.1f}" for v in values)
        print(f"  cpu {key[:-3]:>5}: {statistics.median(values):6.1f} ms per session (rounds: {rounds})")
    for name in ("open", "turn"):
        calls = clock.calls.get(name, Counter())
        for what, cpu in sorted(clock.cpu.get(name, Counter()).items(), key=lambda kv: -kv[1]):
            print(f"  {name:>5} {cpu * 1000 / n:6.2f} ms  {calls[what] / n:6.1f} calls  {what}")
    for name in ("open", "turn"):
        print(f"  queries {name}: {log.by_phase[name] / n:.1f} per session")
        for what, count in sorted(log.by_caller.get(name, Counter()).items(), key=lambda kv: -kv[1]):
            print(f"      {count / n:5.2f}  {what}")
    from studio.host.session_host import get_session_host

    await get_session_host().close()


if __name__ == "__main__":
    main()
