"""What Django's request cycle costs Studio per request, with its CSP middleware sync-only (as
shipped) or sync-and-async capable (``django.utils.decorators.sync_and_async_middleware``).

Django builds one chain from ``MIDDLEWARE``: a middleware that cannot run async turns the chain
above it sync, so the ASGI handler hops into a thread for it and back onto the loop (async_to_sync)
for the async views. Making the bottom (CSP) middleware async-capable lets every
``MiddlewareMixin`` above it run async too, which for a mixin means one ``sync_to_async`` hop per
``process_request`` / ``process_response`` it has. This harness counts the hops
(``SyncToAsync`` / ``AsyncToSync`` calls) and measures the CPU (``time.process_time``) of the
requests that still take the whole cycle: a session page's GET, the prompt's multipart POST
(refused by the form — an unknown agent — so no turn runs and only the cycle and the form are
timed), and a cheap async GET refused by its view (the chain alone); and, for comparison, the
same refused prompt as one frame on the page's socket (the composer's way now: no request
cycle). In one process, through ``httpx.ASGITransport`` and Channels' ``WebsocketCommunicator``
(what daphne calls, minus its sockets).

    python bench/middleware_chain.py [--requests 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.utils.decorators import sync_and_async_middleware
from studio_inprocess import QueryLog, setup_django

from studio.middleware import STUDIO_CSP

CSP_SYNC = "studio.middleware.ContentSecurityPolicyMiddleware"
CSP_BOTH = "middleware_chain.content_security_policy"
#: A prompt the form refuses (an unknown agent): the transport, authentication and parsing are
#: timed, not the host's command.
REFUSED_PROMPT = {"prompt": "x", "agent": "chaos"}


@sync_and_async_middleware
def content_security_policy(get_response: Callable[..., Any]) -> Callable[..., Any]:
    """The CSP middleware, sync and async (the variant measured against the shipped one)."""

    def add(request: Any, response: Any) -> Any:
        if not request.path.startswith("/admin/"):
            response.headers.setdefault("Content-Security-Policy", STUDIO_CSP)
        return response

    if iscoroutinefunction(get_response):

        async def amiddleware(request: Any) -> Any:
            return add(request, await get_response(request))

        return amiddleware

    def middleware(request: Any) -> Any:
        return add(request, get_response(request))

    return middleware


def count_hops() -> Counter[str]:
    """Patch asgiref's adapters to count each call (any thread)."""
    from asgiref import sync

    hops: Counter[str] = Counter()
    for cls in (sync.SyncToAsync, sync.AsyncToSync):
        original = cls.__call__

        def counted(self: Any, *args: Any, __original: Any = original, __name: str = cls.__name__, **kw: Any) -> Any:
            hops[__name] += 1
            return __original(self, *args, **kw)

        cls.__call__ = counted  # type: ignore[method-assign]
    return hops


async def measure(variant: str, n: int, hops: Counter[str]) -> dict[str, tuple[float, float]]:
    """CPU ms and hops per request, for each kind of request, with ``variant``'s CSP."""
    import httpx
    from asgiref.sync import sync_to_async
    from django.contrib.auth import get_user_model
    from django.core.handlers.asgi import ASGIHandler
    from django.test import Client, override_settings
    from django.utils.crypto import get_random_string

    from studio import services
    from studio.management.commands.studio import ensure_demo_model
    from studio.models import RegisteredModel

    def prepare() -> tuple[str, str, str]:
        user, _ = get_user_model().objects.get_or_create(username="chain")
        client = Client()
        client.force_login(user)
        ensure_demo_model()
        model = RegisteredModel.objects.get(provider="demo")
        session = services.session_create(
            owner=user, registered_model=model, workdir="", permission_policy="read-only", effort="low", mode="build"
        )
        csrf = get_random_string(32)
        return f"sessionid={client.cookies['sessionid'].value}; csrftoken={csrf}", csrf, str(session.pk)

    cookie, csrf, sid = await sync_to_async(prepare)()
    from django.conf import settings

    middleware = [CSP_BOTH if m == CSP_SYNC else m for m in settings.MIDDLEWARE] if variant == "both" else None
    with override_settings(**({"MIDDLEWARE": middleware} if middleware else {})):
        app = ASGIHandler()
    headers = {"Cookie": cookie, "X-CSRFToken": csrf, "Host": "testserver", "HX-Request": "true"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver", headers=headers) as http:
        kinds: dict[str, Callable[[], Awaitable[Any]]] = {
            "page GET": lambda: http.get(f"/sessions/{sid}/"),
            # as the composer posted it before (multipart, an empty file part), refused by the form
            "prompt POST (multipart)": lambda: http.post(
                f"/sessions/{sid}/prompt/", data=REFUSED_PROMPT, files={"images": ("", b"")}
            ),
            "refused GET (chain only)": lambda: http.get(f"/sessions/{sid}/turns/?start=x"),
        }
        out = {}
        for name, request in kinds.items():
            response = await request()  # warm
            assert response.status_code in (200, 400), (name, response.status_code)
            assert "Content-Security-Policy" in response.headers
            hops.clear()
            start = time.process_time()
            for _ in range(n):
                await request()
            cpu = (time.process_time() - start) * 1000 / n
            out[name] = (cpu, sum(hops.values()) / n)
        if variant == "sync":  # the socket takes no middleware: measured once
            out["prompt frame on the socket"] = await measure_socket(cookie, sid, n, hops)
    return out


async def measure_socket(cookie: str, sid: str, n: int, hops: Counter[str]) -> tuple[float, float]:
    """The same refused prompt as one frame on the page's socket (Studio's ASGI application),
    answered by its ``#composer-error`` reply: CPU ms and hops per prompt."""
    import json

    from channels.testing import WebsocketCommunicator

    from studio.asgi import application

    headers = [(b"cookie", cookie.encode()), (b"origin", b"http://testserver"), (b"host", b"testserver")]
    ws = WebsocketCommunicator(application, f"/ws/sessions/{sid}/", headers=headers)
    connected, _code = await ws.connect(timeout=30)
    assert connected
    await ws.receive_from(timeout=30)  # the first render
    frame = json.dumps({"command": "prompt", **REFUSED_PROMPT})

    async def one() -> None:
        await ws.send_to(text_data=frame)
        reply = await ws.receive_from(timeout=30)
        assert 'data-reply="refused"' in reply, reply[:200]

    await one()  # warm
    hops.clear()
    start = time.process_time()
    for _ in range(n):
        await one()
    cpu = (time.process_time() - start) * 1000 / n
    await ws.disconnect()
    return cpu, sum(hops.values()) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    setup_django(Path(tempfile.mkdtemp(prefix="middleware-chain-")), QueryLog())
    logging.getLogger("django.request").setLevel(logging.ERROR)  # the refused GETs' warnings, not timed
    hops = count_hops()

    async def run() -> None:
        results: dict[str, dict[str, list[tuple[float, float]]]] = {"sync": {}, "both": {}}
        for _ in range(args.rounds):  # interleaved, so a busy moment of the machine hits both
            for variant in ("sync", "both"):
                for name, value in (await measure(variant, args.requests, hops)).items():
                    results[variant].setdefault(name, []).append(value)
        print(f"{args.requests} requests x {args.rounds} rounds each; CPU ms per request (median of rounds), hops")
        for variant, label in (("sync", "CSP sync-only (shipped)"), ("both", "CSP sync-and-async")):
            for name, values in results[variant].items():
                cpu = statistics.median(v[0] for v in values)
                shown = "no request cycle" if name == "prompt frame on the socket" else label
                print(f"  {shown:<24} {name:<27} {cpu:6.2f} ms  {values[0][1]:4.1f} hops")
        from studio.host.session_host import get_session_host

        await get_session_host().close()

    asyncio.run(run())


if __name__ == "__main__":
    main()
