"""Shared parts of the tool-loop benchmarks (``loop_overhead.py``, ``peers.py``).

- ``ProviderProcess``: the fake provider server (``agentcore.testing``) in a child process, so
  the measured process's CPU time is the client's alone and the server runs on the other core.
  A subclass of the server keeps every request's exact bytes and headers, which the floor
  replays (``GET /_fake/raw``).
- ``loop_script(n)``: N responses that each call the benchmark's one tool, then a final answer.
- ``Counter``: what the tool increments; every benchmark asserts it reached N.
- ``replay_floor``: raw ``httpx`` posting given request bytes and reading the SSE bytes
  unparsed, on one pooled connection: the transport floor.
- ``py_spy`` / ``stop_py_spy``: sample this process (or another) with py-spy into a file of
  collapsed stacks (``bench/profile_top.py`` reads them).

Run ``python bench/loopkit.py --serve`` to start the server alone (prints ``port N``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing it
    sys.path.insert(0, str(ROOT))

TOOL_NAME = "increment"
TOOL_DESCRIPTION = "Add one to the benchmark's counter and return the new value."
TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "integer", "description": "the turn number"}},
    "required": ["n"],
}
SYSTEM_PROMPT = "You are a benchmark. Call the increment tool when asked."
PROMPT = "Count with the increment tool."
PATHS = {
    "openai-completions": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "anthropic-messages": "/v1/messages",
}
_HOP_HEADERS = {"host", "content-length", "connection", "transfer-encoding"}


@dataclass
class Counter:
    """The benchmark tool's state: a benchmark is valid only if ``calls`` reached N."""

    calls: int = 0
    arguments: list[int] = field(default_factory=list)

    def bump(self, n: Any) -> str:
        self.calls += 1
        self.arguments.append(int(n))
        return f"counter is {self.calls}"

    def check(self, who: str, turns: int) -> None:
        if self.calls != turns or self.arguments != list(range(turns)):
            raise AssertionError(
                f"{who}: the tool ran {self.calls} times (arguments {self.arguments[:5]}…), not {turns}"
            )


def loop_script(turns: int) -> list[list[dict[str, Any]]]:
    """N responses each carrying a short text and one ``increment`` call, then the answer (N + 1 requests)."""
    script: list[list[dict[str, Any]]] = [
        [
            {"step": "text", "text": "Working on it."},
            {"step": "tool_call", "name": TOOL_NAME, "arguments": {"n": i}, "id": f"call_{i}"},
            {"step": "usage", "input": 100 + i, "output": 20},
        ]
        for i in range(turns)
    ]
    script.append([{"step": "text", "text": "All done."}, {"step": "usage", "input": 200, "output": 5}])
    return script


@dataclass(slots=True)
class RawRequest:
    path: str
    headers: dict[str, str]
    body: bytes


class ProviderProcess:
    """The fake provider server in a child process (context manager). Not thread-safe.

    ``command`` starts a server that prints ``port N`` on its first line (default: this
    module's recording server)."""

    def __init__(self, command: list[str] | None = None) -> None:
        self._command = command or [str(Path(__file__).resolve()), "--serve"]
        self._proc: subprocess.Popen[str] | None = None
        self.url = ""
        self._http: httpx.Client | None = None

    def __enter__(self) -> ProviderProcess:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self._proc = subprocess.Popen(
            [sys.executable, *self._command],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.startswith("port "):
            self._proc.kill()
            raise RuntimeError(f"fake provider process did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"
        self._http = httpx.Client(base_url=self.url, timeout=60)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._http is not None:
            self._http.close()
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def script(self, responses: list[list[dict[str, Any]]]) -> None:
        """Forget earlier requests and queue ``responses``."""
        assert self._http is not None
        self._http.post("/_fake/reset").raise_for_status()
        self._http.post("/_fake/enqueue", content=json.dumps(responses)).raise_for_status()

    def raw_requests(self) -> list[RawRequest]:
        """Every request since the last ``script``, byte for byte (hop-by-hop headers dropped)."""
        assert self._http is not None
        response = self._http.post("/_fake/raw")
        response.raise_for_status()
        return [
            RawRequest(
                item["path"],
                {k: v for k, v in item["headers"].items() if k not in _HOP_HEADERS},
                item["body"].encode("latin-1"),
            )
            for item in response.json()
        ]

    def control(self, path: str) -> Any:
        """POST a control path (``/_fake/...``) and return its JSON answer."""
        assert self._http is not None
        response = self._http.post(path)
        response.raise_for_status()
        return response.json()

    def request_count(self) -> int:
        """Requests the server answered since the last ``script``."""
        assert self._http is not None
        return int(self._http.post("/_fake/count").json())


async def replay_floor(url: str, requests: list[RawRequest]) -> tuple[float, float]:
    """(wall s, CPU s) to post ``requests`` as they are and read every response byte, unparsed."""
    async with httpx.AsyncClient(timeout=60) as client:
        cpu = time.process_time()
        start = time.perf_counter()
        for request in requests:
            async with client.stream("POST", url + request.path, content=request.body, headers=request.headers) as r:
                async for _chunk in r.aiter_raw():
                    pass
                if r.status_code != 200:
                    raise AssertionError(f"floor: HTTP {r.status_code} from the fake provider")
        return time.perf_counter() - start, time.process_time() - cpu


def completions_bodies(turns: int, model: str = "bench-model") -> list[RawRequest]:
    """The smallest Chat Completions requests of the same loop (system, user, then one call and
    one result per turn, the one tool declared), pre-encoded: the floor no framework can beat."""
    tool = {
        "type": "function",
        "function": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": TOOL_PARAMETERS},
    }
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": PROMPT}]
    bodies: list[RawRequest] = []
    headers = {"authorization": "Bearer k", "content-type": "application/json"}
    for i in range(turns + 1):
        body = {
            "model": model,
            "messages": messages,
            "tools": [tool],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        bodies.append(
            RawRequest(PATHS["openai-completions"], headers, json.dumps(body, separators=(",", ":")).encode())
        )
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": json.dumps({"n": i})},
        }
        messages = [
            *messages,
            {"role": "assistant", "content": "Working on it.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": f"counter is {i + 1}"},
        ]
    return bodies


@dataclass(slots=True)
class Sample:
    wall: float
    cpu: float


def median_ms_per_turn(samples: list[Sample], turns: int, attr: str = "wall") -> float:
    return statistics.median(getattr(s, attr) for s in samples) / turns * 1000


async def timed(body: Callable[[], Awaitable[None]]) -> Sample:
    cpu = time.process_time()
    start = time.perf_counter()
    await body()
    return Sample(time.perf_counter() - start, time.process_time() - cpu)


def machine() -> str:
    """One line naming the machine: cores, CPU model, Python, load when measured."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores, {model}, Python {platform.python_version()}, load average {load}"


def stolen_seconds() -> float | None:
    """CPU time the hypervisor gave to other guests since boot (``steal`` in ``/proc/stat``, all
    cores), or None where the kernel does not say. Why: on a shared VM a noisy neighbour slows
    every process without raising the load average; the steal taken during a run says whether
    its numbers were measured on a quiet machine."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def py_spy(out: Path, *, pid: int | None = None, rate: int = 500, gil: bool = True) -> subprocess.Popen[bytes]:
    """Start py-spy sampling ``pid`` (default: this process) into ``out`` (raw collapsed
    stacks); ``gil``: only the thread holding the GIL (Python CPU), else every thread on the
    CPU. Returns once py-spy has had a second to attach; stop it with ``stop_py_spy``."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        raise RuntimeError("py-spy is not installed: pip install py-spy (it is in the bench extra)")
    which = ["--gil"] if gil else ["--threads"]
    target = ["--pid", str(pid or os.getpid())]
    proc = subprocess.Popen(
        [exe, "record", *target, *which, "--format", "raw", "--rate", str(rate), "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # py-spy attaches (a process starting, not synchronisation)
    return proc


def stop_py_spy(proc: subprocess.Popen[bytes]) -> None:
    """Stop a ``py_spy`` sampler; py-spy writes its output on SIGINT."""
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)


def _serve() -> None:
    from agentcore.testing import http11
    from agentcore.testing.fake_server import FakeProviderServer

    class RecordingServer(FakeProviderServer):
        """Keeps each request's exact bytes and headers, for the floor to replay."""

        def _record(self, raw: Any, path: str, api_kind: str, payload: Any, connection: int = 0) -> Any:
            # Keep the top-level scalars the encoders read; drop the history trees, which a
            # long loop would otherwise pile up (hundreds of MB) and make every GC pass slower.
            if isinstance(payload, dict):
                payload = {k: v for k, v in payload.items() if not isinstance(v, list)}
            record = super()._record(raw, path, api_kind, payload, connection)
            record.extra["raw"] = {"path": path, "headers": dict(raw.headers), "body": raw.body.decode("latin-1")}
            return record

        async def _control(self, raw: Any, path: str, writer: asyncio.StreamWriter) -> bool:
            if path == "/_fake/raw":
                body = json.dumps([r.extra["raw"] for r in self.requests]).encode()
            elif path == "/_fake/count":
                body = json.dumps(len(self.requests)).encode()
            else:
                return await super()._control(raw, path, writer)
            writer.write(http11.full_response(200, body, {}))
            await writer.drain()
            return True

    async def serve() -> None:
        async with RecordingServer() as server:
            print(f"port {server.port}", flush=True)
            await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", action="store_true", help="run the recording fake provider server")
    if parser.parse_args().serve:
        try:
            _serve()
        except KeyboardInterrupt:
            pass
