"""Interop fixtures: the real LiteLLM proxy, started once per test session on loopback in front
of the fake provider server (which runs in a thread for the whole session).

The proxy's model list names one entry per upstream kind: ``openai/<id>`` (the proxy passes
Chat Completions and Responses requests through), ``anthropic/<id>`` (it passes Messages
through and translates the others) and ``hosted_vllm/<id>`` (it translates everything to Chat
Completions), plus ``drop-params`` (an ``openai/`` entry with ``drop_params: true``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentcore.testing.fake_server import FakeProviderServer
from tests.interop.tools import free_port, program, serving

UPSTREAM_MODEL = "upstream-model"


@dataclass(frozen=True)
class Proxy:
    base_url: str  # http://127.0.0.1:PORT (agentcore appends /v1 for the OpenAI kinds)
    log: Path  # the proxy's output, quoted by failing tests


@pytest.fixture(scope="session")
def upstream_server() -> Iterator[FakeProviderServer]:
    server = FakeProviderServer().start_in_thread()
    try:
        yield server
    finally:
        server.stop_in_thread()


@pytest.fixture
def fake(upstream_server: FakeProviderServer) -> Iterator[FakeProviderServer]:
    """The session's fake provider, emptied for this test (and checked to be used up after it)."""
    upstream_server.reset()
    yield upstream_server
    assert upstream_server.pending == 0, "the test left scripted responses unread"


def litellm_config(fake: FakeProviderServer) -> dict[str, object]:
    def entry(name: str, model: str, api_base: str, **extra: object) -> dict[str, object]:
        return {
            "model_name": name,
            "litellm_params": {"model": model, "api_base": api_base, "api_key": "sk-up", **extra},
        }

    return {
        "model_list": [
            entry("openai", f"openai/{UPSTREAM_MODEL}", fake.base_url),
            entry("anthropic", f"anthropic/{UPSTREAM_MODEL}", fake.url),
            entry("hosted_vllm", f"hosted_vllm/{UPSTREAM_MODEL}", fake.base_url),
            entry("drop-params", f"openai/{UPSTREAM_MODEL}", fake.base_url, drop_params=True),
        ],
        "litellm_settings": {"drop_params": False, "num_retries": 0, "request_timeout": 30},
        "router_settings": {"num_retries": 0},  # agentcore's own retries are what is tested
    }


@pytest.fixture(scope="session")
def litellm(upstream_server: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    """``litellm --config`` (LiteLLM 1.80.5, its own venv) on a free loopback port. No master key
    and no database: the proxy accepts any key, as a local gateway usually does."""
    executable = program("litellm", "litellm")
    root = tmp_path_factory.mktemp("litellm")
    config = root / "config.yaml"
    config.write_text(json.dumps(litellm_config(upstream_server)))  # JSON is YAML
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI", "ANTHROPIC", "LITELLM"))}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_TELEMETRY="False", NO_PROXY="*", no_proxy="*")
    base = f"http://127.0.0.1:{port}"
    command = [str(executable), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    with serving(command, what="the LiteLLM proxy", health_url=f"{base}/health/liveliness", root=root, env=env):
        yield Proxy(base, root / "server.log")
