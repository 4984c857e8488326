"""Built-in catalog of well-known models (SPEC M4) and the fallback for unknown ones (M2).

Prices are USD per million tokens as published by the providers; a custom endpoint should
declare its own attributes because the fallback (reasoning, images, zero price, a window
guessed from the id prefix) is almost always wrong for a real model.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentcore.messages import Cost


@dataclass(slots=True, frozen=True)
class CatalogModel:
    provider: str
    model_id: str
    api_kind: str
    name: str
    context_window: int
    max_tokens: int
    cost: Cost
    reasoning: bool = True
    web_search: bool = False
    input: tuple[str, ...] = ("text", "image")
    efforts: tuple[str, ...] = ("minimal", "low", "medium", "high")


_ANTHROPIC_EFFORTS = ("minimal", "low", "medium", "high", "xhigh", "max")

KNOWN_MODELS: tuple[CatalogModel, ...] = (
    CatalogModel(
        "anthropic",
        "claude-opus-4-5",
        "anthropic-messages",
        "Claude Opus 4.5",
        200_000,
        64_000,
        Cost(5.0, 25.0, 0.5, 6.25),
        web_search=True,
        efforts=_ANTHROPIC_EFFORTS,
    ),
    CatalogModel(
        "anthropic",
        "claude-sonnet-4-5",
        "anthropic-messages",
        "Claude Sonnet 4.5",
        200_000,
        64_000,
        Cost(3.0, 15.0, 0.3, 3.75),
        web_search=True,
        efforts=_ANTHROPIC_EFFORTS,
    ),
    CatalogModel(
        "anthropic",
        "claude-haiku-4-5",
        "anthropic-messages",
        "Claude Haiku 4.5",
        200_000,
        64_000,
        Cost(1.0, 5.0, 0.1, 1.25),
        web_search=True,
        efforts=_ANTHROPIC_EFFORTS,
    ),
    CatalogModel(
        "openai",
        "gpt-5.1",
        "openai-responses",
        "GPT-5.1",
        400_000,
        128_000,
        Cost(1.25, 10.0, 0.125, 0.0),
        web_search=True,
        efforts=("low", "medium", "high"),
    ),
    CatalogModel(
        "openai", "gpt-5", "openai-responses", "GPT-5", 400_000, 128_000, Cost(1.25, 10.0, 0.125, 0.0), web_search=True
    ),
    CatalogModel(
        "openai",
        "gpt-5-mini",
        "openai-responses",
        "GPT-5 mini",
        400_000,
        128_000,
        Cost(0.25, 2.0, 0.025, 0.0),
        web_search=True,
    ),
    CatalogModel(
        "openai", "gpt-5-nano", "openai-responses", "GPT-5 nano", 400_000, 128_000, Cost(0.05, 0.4, 0.005, 0.0)
    ),
    CatalogModel(
        "openai",
        "gpt-4.1",
        "openai-responses",
        "GPT-4.1",
        1_047_576,
        32_768,
        Cost(2.0, 8.0, 0.5, 0.0),
        reasoning=False,
        web_search=True,
        efforts=(),
    ),
    CatalogModel(
        "openai",
        "gpt-4o",
        "openai-responses",
        "GPT-4o",
        128_000,
        16_384,
        Cost(2.5, 10.0, 1.25, 0.0),
        reasoning=False,
        web_search=True,
        efforts=(),
    ),
    CatalogModel(
        "openai",
        "o3",
        "openai-responses",
        "o3",
        200_000,
        100_000,
        Cost(2.0, 8.0, 0.5, 0.0),
        efforts=("low", "medium", "high"),
    ),
    CatalogModel(
        "openai",
        "o4-mini",
        "openai-responses",
        "o4-mini",
        200_000,
        100_000,
        Cost(1.1, 4.4, 0.275, 0.0),
        efforts=("low", "medium", "high"),
    ),
)

DEFAULT_MODELS: dict[str, str] = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5.1"}
DEFAULT_BASE_URLS: dict[str, str] = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
}
DEFAULT_API_KINDS: dict[str, str] = {"anthropic": "anthropic-messages", "openai": "openai-responses"}
API_KEY_ENV: dict[str, str] = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}

_WINDOW_BY_PREFIX: tuple[tuple[str, int], ...] = (
    ("claude", 200_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("gemini", 1_000_000),
    ("qwen", 131_072),
    ("llama", 131_072),
    ("deepseek", 128_000),
    ("mistral", 128_000),
)
FALLBACK_WINDOW = 128_000
FALLBACK_MAX_TOKENS = 32_000


def find_known_model(provider: str | None, model_id: str) -> CatalogModel | None:
    for entry in KNOWN_MODELS:
        if entry.model_id == model_id and (provider is None or provider == entry.provider):
            return entry
    return None


def guess_context_window(model_id: str) -> int:
    """The fallback window, guessed from the model id's family prefix (SPEC M2)."""
    short = model_id.rsplit("/", 1)[-1].lower()
    for prefix, window in _WINDOW_BY_PREFIX:
        if short.startswith(prefix):
            return window
    return FALLBACK_WINDOW
