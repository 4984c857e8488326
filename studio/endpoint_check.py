"""Can the endpoint of a registered model be reached? A check the new-session form makes.

A session on a dead endpoint used to find out only when its first turn failed (a minute of
retries). The form checks when a model is picked: one TCP connect to the model's host and
port, bounded by ``CHECK_TIMEOUT_S``, so a refused port is reported in milliseconds, in the
runtime's own words (``agentcore.providers.streaming.connect_reason``). No request is sent and
no key is used — the admin's "Test connection" sends a real prompt; this costs nothing.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from studio.models import RegisteredModel

#: The longest a check waits for the endpoint to accept a connection.
CHECK_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class EndpointCheck:
    ok: bool
    message: str


async def check_endpoint(model: RegisteredModel, *, within: float = CHECK_TIMEOUT_S) -> EndpointCheck:
    """Connect to ``model``'s endpoint once; what happened, said plainly."""
    from agentcore.providers.streaming import connect_reason, endpoint_of

    if model.is_demo:
        return EndpointCheck(True, "The offline demo model needs no network and no API key.")
    url = _base_url(model)
    if not url:
        return EndpointCheck(False, "This model has no endpoint (base URL) to check.")
    endpoint = endpoint_of(url)
    host, _, port = endpoint.rpartition(":")
    started = time.monotonic()
    try:
        async with asyncio.timeout(within):
            _reader, writer = await asyncio.open_connection(host.strip("[]"), int(port))
    except TimeoutError:
        return EndpointCheck(False, f"Cannot connect to {endpoint}: no answer within {within:g} s.")
    except OSError as exc:
        return EndpointCheck(False, f"Cannot connect to {endpoint}: {connect_reason(exc)}.")
    writer.close()
    took = (time.monotonic() - started) * 1000
    return EndpointCheck(True, f"{endpoint} accepts connections ({took:.0f} ms).")


def _base_url(model: RegisteredModel) -> str:
    """The URL a runtime would call (the model's base URL, else its provider's default)."""
    if model.base_url:
        return str(model.base_url)
    from agentcore.models.catalog import DEFAULT_BASE_URLS

    return str(DEFAULT_BASE_URLS.get(str(model.provider), ""))
