"""Wire-protocol adapters behind one streaming contract (SPEC P1): see ``base`` for the
contract, ``registry`` for lookup by API kind, ``streaming`` for the one stream loop the
adapters share (bounded by ``stream_limits``), ``shared`` for the rest they share and
``wire_json`` for how wire JSON is decoded."""

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
from agentcore.providers.stream_limits import StreamTimeouts, output_cap_chars

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
    "StreamTimeouts",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolSpec",
    "WebSearchUpdate",
    "create_provider",
    "is_overflow",
    "output_cap_chars",
]
