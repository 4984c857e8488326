"""Model resolution: catalog + fallback + runtime attributes + per-run attributes (SPEC M1–M5)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from agentcore.errors import InputValidationError
from agentcore.messages import Cost
from agentcore.models.attributes import (
    EFFORT_LEVELS,
    ModelAttributes,
    ResolvedModel,
    parse_model_attributes,
)
from agentcore.models.catalog import (
    API_KEY_ENV,
    DEFAULT_API_KINDS,
    DEFAULT_BASE_URLS,
    DEFAULT_MODELS,
    FALLBACK_MAX_TOKENS,
    KNOWN_MODELS,
    find_known_model,
    guess_context_window,
)
from agentcore.models.effort import clamp_effort, normalize_effort, resolve_effort, supported_levels

__all__ = [
    "EFFORT_LEVELS",
    "KNOWN_MODELS",
    "ModelAttributes",
    "ResolvedModel",
    "check_api_key",
    "clamp_effort",
    "normalize_effort",
    "parse_model_attributes",
    "resolve_effort",
    "resolve_model",
    "supported_levels",
]

API_KINDS = ("openai-responses", "anthropic-messages", "openai-completions")
DEMO_PROVIDER = "demo"


def _merge(base: ModelAttributes | None, override: ModelAttributes | None) -> ModelAttributes:
    """Per-field override: a field set in ``override`` wins over ``base``."""
    data = base.model_dump(exclude_none=True) if base else {}
    if override is not None:
        data.update(override.model_dump(exclude_none=True))
    return ModelAttributes.model_validate(data)


def check_api_key(provider: str, base_url: str, api_key: str | None) -> None:
    """Refuse a built-in provider's own endpoint with no key (SPEC R4).

    Anthropic's and OpenAI's public APIs always need one; without it every request would be
    refused (or, offline, never connect) and the retry policy would spend its whole budget
    before the run failed. So it is an ``input_validation`` error up front, naming the
    environment variable to set. Custom endpoints (``base_url`` other than the provider's
    own, e.g. a local server or a gateway) often need no key and are not checked.
    """
    variable = API_KEY_ENV.get(provider)
    if variable is None or (api_key is not None and api_key.strip()):
        return
    if base_url.rstrip("/") != DEFAULT_BASE_URLS[provider].rstrip("/"):
        return
    raise InputValidationError(
        f"provider {provider!r} needs an API key: set {variable} (or pass api_key)", field="api_key"
    )


def resolve_model(
    *,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    api_kind: str | None,
    runtime_attributes: ModelAttributes | None = None,
    run_attributes: ModelAttributes | None = None,
    context_window: int | None = None,
    max_tokens: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> ResolvedModel:
    """Merge every source of model facts into one ``ResolvedModel``.

    Precedence (SPEC M2): explicit ``context_window``/``max_tokens`` > per-run attributes >
    runtime attributes > catalog entry > fallback. Raises ``input_validation`` when no model
    can be determined, a custom endpoint lacks ``base_url``, or a built-in provider's own
    endpoint has no API key (``check_api_key``).
    """
    env = os.environ if environ is None else environ
    if provider is None and model is None:
        raise InputValidationError(
            "no model configured: pass provider/model (or provider='demo' for the offline demo model)",
            field="model",
        )
    if model is None:
        if provider not in DEFAULT_MODELS:
            raise InputValidationError(f"model is required for provider {provider!r}", field="model")
        model = DEFAULT_MODELS[provider]
    known = find_known_model(provider, model)
    if provider is None:
        provider = known.provider if known else "custom"
    if api_kind is not None and api_kind not in API_KINDS:
        raise InputValidationError(f"api_kind must be one of {', '.join(API_KINDS)}", field="api_kind")
    kind = api_kind or (known.api_kind if known else DEFAULT_API_KINDS.get(provider, "openai-completions"))
    url = base_url or DEFAULT_BASE_URLS.get(provider)
    if url is None:
        raise InputValidationError(f"base_url is required for the custom provider {provider!r}", field="base_url")
    key = api_key if api_key is not None else env.get(API_KEY_ENV.get(provider, ""), None)
    check_api_key(provider, url, key)

    attrs = _merge(runtime_attributes, run_attributes)
    cost = (
        Cost(attrs.cost.input, attrs.cost.output, attrs.cost.cache_read, attrs.cost.cache_write)
        if attrs.cost
        else (known.cost if known else Cost())
    )
    window = context_window or attrs.context_window or (known.context_window if known else guess_context_window(model))
    out_max = max_tokens or attrs.max_tokens or (known.max_tokens if known else FALLBACK_MAX_TOKENS)
    return ResolvedModel(
        provider=provider,
        model_id=model,
        api_kind=kind,
        base_url=url.rstrip("/"),
        api_key=key,
        name=attrs.name or (known.name if known else model),
        reasoning=attrs.reasoning if attrs.reasoning is not None else (known.reasoning if known else True),
        web_search=attrs.web_search if attrs.web_search is not None else (known.web_search if known else None),
        input=tuple(attrs.input) if attrs.input else (known.input if known else ("text", "image")),
        cost=cost,
        context_window=window,
        max_tokens=min(out_max, window),
        thinking_level_map=dict(attrs.thinking_level_map or {}),
        effort_levels=(known.efforts if known and known.reasoning else None),
    )
