"""Provider lookup by API kind (SPEC P1, R1).

``create_provider(api_kind)`` builds one adapter. ``ProviderRegistry`` is what a runtime
holds: one adapter per API kind, all sharing one pooled ``httpx.AsyncClient`` (connection
reuse is a large part of the per-request floor) and one ``StreamTimeouts``, each keeping its
per-message wire cache across turns. Extra kinds are registered on the instance — no global
mutable state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import httpx

from agentcore.errors import InputValidationError
from agentcore.providers.anthropic_messages import AnthropicMessagesProvider
from agentcore.providers.base import Provider
from agentcore.providers.openai_completions import OpenAICompletionsProvider
from agentcore.providers.openai_responses import OpenAIResponsesProvider
from agentcore.providers.shared import new_http_client
from agentcore.providers.stream_limits import StreamTimeouts

ProviderFactory = Callable[[httpx.AsyncClient | None, StreamTimeouts], Provider]
"""Builds an adapter on a shared client (which it must not close) with the stream bounds."""

API_KINDS: Mapping[str, ProviderFactory] = MappingProxyType(
    {
        "openai-responses": OpenAIResponsesProvider,
        "anthropic-messages": AnthropicMessagesProvider,
        "openai-completions": OpenAICompletionsProvider,
    }
)


def create_provider(
    api_kind: str, *, client: httpx.AsyncClient | None = None, timeouts: StreamTimeouts | None = None
) -> Provider:
    """A new adapter for ``api_kind``; with ``client`` it shares that pool (and does not close it)."""
    factory = API_KINDS.get(api_kind)
    if factory is None:
        raise InputValidationError(
            f"unknown api_kind {api_kind!r}; expected one of {', '.join(API_KINDS)}", field="api_kind"
        )
    return factory(client, timeouts or StreamTimeouts())


class ProviderRegistry:
    """One adapter per API kind over one shared HTTP client. ``aclose()`` releases both.

    ``timeouts`` bounds every stream of every adapter (see ``stream_limits``)."""

    def __init__(self, client: httpx.AsyncClient | None = None, timeouts: StreamTimeouts | None = None) -> None:
        self._client = client
        self._owns_client = client is None
        self.timeouts = timeouts or StreamTimeouts()
        self._factories: dict[str, ProviderFactory] = dict(API_KINDS)
        self._providers: dict[str, Provider] = {}

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = new_http_client()
        return self._client

    def register(self, api_kind: str, factory: ProviderFactory) -> None:
        """Add or replace a kind on this registry (e.g. ``"demo"``)."""
        self._factories[api_kind] = factory
        self._providers.pop(api_kind, None)

    @property
    def api_kinds(self) -> list[str]:
        return list(self._factories)

    def get(self, api_kind: str) -> Provider:
        provider = self._providers.get(api_kind)
        if provider is None:
            factory = self._factories.get(api_kind)
            if factory is None:
                raise InputValidationError(
                    f"unknown api_kind {api_kind!r}; expected one of {', '.join(self._factories)}", field="api_kind"
                )
            provider = self._providers[api_kind] = factory(self.client, self.timeouts)
        return provider

    async def aclose(self) -> None:
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()
        if self._owns_client and self._client is not None:
            await self._client.aclose()
        self._client = None
