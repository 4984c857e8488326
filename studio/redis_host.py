"""How Studio connects channels_redis to Redis: one place for the options, which the settings,
the tests and the benchmarks share.

No client-side read timeout (``socket_timeout: None``), as channels_redis expects; connecting
still gives up after 5 s. The reads need none: channels_redis's blocking pop times out on the
server after 5 s and pops again, which bounds every read while Redis is up. A read timeout does
harm with redis-py 8, which reads with 5 s unless told:

- at 5 s (the default) it races the pop's own 5 s, and an idle receive fails with "Timeout
  reading from …" (a quiet page loses its socket);
- at any value (30 s was tried) it makes redis-py swallow, now and then, the cancellation of a
  receive whose pop has just brought another channel's message. The cancelled receive then
  reads on for good, holding the process's receive lock, and no consumer of the process gets a
  push again — a web process that cancelled a request's reply receive because the worker it
  asked had stopped never rendered the page again.

``tests/studio/test_redis_layer.py`` holds both on a real redis-server.
"""

from __future__ import annotations

from typing import Any

CONNECT_TIMEOUT = 5.0


def redis_host(url: str) -> dict[str, Any]:
    """A ``hosts`` entry of channels_redis's ``RedisChannelLayer`` for the server at ``url``."""
    return {"address": url, "socket_timeout": None, "socket_connect_timeout": CONNECT_TIMEOUT}
