"""Wire-protocol adapters behind one streaming contract (SPEC P1): see ``base`` for the
contract, ``registry`` for lookup by API kind, ``shared`` for what the adapters share."""

from agentcore.providers.anthropic_messages import AnthropicMessagesProvider
from agentcore.providers.base import (
    RETRYABLE_KINDS,
    BlockStart,
    FailureKind,
    Provider,
    ProviderFailure,
    ProviderRequest,
    SourcesFound,
    StreamEnd,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolSpec,
    WebSearchUpdate,
)
from agentcore.providers.openai_completions import OpenAICompletionsProvider
from agentcore.providers.openai_responses import OpenAIResponsesProvider
from agentcore.providers.registry import API_KINDS, ProviderRegistry, create_provider
from agentcore.providers.shared import RAW_ARGUMENTS_KEY, is_overflow

__all__ = [
    "API_KINDS",
    "RAW_ARGUMENTS_KEY",
    "RETRYABLE_KINDS",
    "AnthropicMessagesProvider",
    "BlockStart",
    "FailureKind",
    "OpenAICompletionsProvider",
    "OpenAIResponsesProvider",
    "Provider",
    "ProviderFailure",
    "ProviderRegistry",
    "ProviderRequest",
    "SourcesFound",
    "StreamEnd",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolSpec",
    "WebSearchUpdate",
    "create_provider",
    "is_overflow",
]
