"""Helpers shared by the provider adapter tests: a model pointed at the fake server, a
request builder, and a collector that runs one stream to its ``StreamEnd``."""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field

from agentcore.messages import Cost, ImageContent, Message, user_text
from agentcore.models.attributes import ResolvedModel
from agentcore.providers.base import (
    BlockStart,
    Provider,
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

PNG_1PX = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000100ffff03000006000557bfabd40000000049454e44ae426082"
    )
).decode()

PRICES = Cost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)  # per million tokens

READ_TOOL = ToolSpec(
    "read",
    "Read a file",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


def make_model(
    api_kind: str,
    base_url: str,
    *,
    reasoning: bool = True,
    images: bool = True,
    max_tokens: int = 32_000,
    thinking_level_map: dict[str, str | None] | None = None,
    model_id: str = "fake-model",
    api_key: str | None = "test-key",
) -> ResolvedModel:
    return ResolvedModel(
        provider="fake",
        model_id=model_id,
        api_kind=api_kind,
        base_url=base_url,
        api_key=api_key,
        name="Fake model",
        reasoning=reasoning,
        web_search=True,
        input=("text", "image") if images else ("text",),
        cost=PRICES,
        context_window=200_000,
        max_tokens=max_tokens,
        thinking_level_map=thinking_level_map or {},
    )


def make_request(
    model: ResolvedModel,
    messages: list[Message] | None = None,
    *,
    tools: list[ToolSpec] | None = None,
    effort: str | None = None,
    web_search: bool = False,
    system_prompt: str = "You are terse.",
    max_tokens: int | None = None,
) -> ProviderRequest:
    return ProviderRequest(
        model=model,
        system_prompt=system_prompt,
        messages=messages if messages is not None else [user_text("hello")],
        tools=tools or [],
        effort=effort,
        max_tokens=max_tokens,
        web_search=web_search,
        session_id="session-1",
    )


def image_message(text: str = "what is this?") -> Message:
    return user_text(text, [ImageContent(PNG_1PX, "image/png")])


@dataclass
class Collected:
    events: list[StreamEvent] = field(default_factory=list)

    @property
    def end(self) -> StreamEnd:
        last = self.events[-1]
        assert isinstance(last, StreamEnd), f"last event is {last!r}"
        return last

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    @property
    def thinking(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, ThinkingDelta))

    @property
    def tool_ends(self) -> list[ToolCallEnd]:
        return [e for e in self.events if isinstance(e, ToolCallEnd)]

    @property
    def tool_deltas(self) -> list[ToolCallDelta]:
        return [e for e in self.events if isinstance(e, ToolCallDelta)]

    @property
    def starts(self) -> list[BlockStart]:
        return [e for e in self.events if isinstance(e, BlockStart)]

    @property
    def searches(self) -> list[WebSearchUpdate]:
        return [e for e in self.events if isinstance(e, WebSearchUpdate)]

    @property
    def sources(self) -> list[SourcesFound]:
        return [e for e in self.events if isinstance(e, SourcesFound)]


async def collect(provider: Provider, request: ProviderRequest, abort: asyncio.Event | None = None) -> Collected:
    """Run one stream; asserts the contract that exactly one ``StreamEnd`` comes last."""
    out = Collected()
    async for event in provider.stream(request, abort):
        out.events.append(event)
    assert sum(isinstance(e, StreamEnd) for e in out.events) == 1
    return out
