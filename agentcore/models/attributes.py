"""Model attributes: what the runtime knows about a model (window, prices, modalities, effort).

``ModelAttributes`` is the strict boundary model for attributes written as JSON (CLI flag,
Studio admin, project settings): unknown keys, wrong types and out-of-range values are
rejected with ``input_validation`` naming the field — a silently dropped misspelt field would
look like the model ignoring it. ``ResolvedModel`` is the plain internal result after merging
catalog, fallback, runtime and per-run attributes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentcore.errors import InputValidationError
from agentcore.messages import Cost, Usage

EFFORT_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
THINKING_LEVELS: tuple[str, ...] = EFFORT_LEVELS[1:]


class CostAttributes(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    input: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    output: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    cache_read: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    cache_write: float = Field(default=0.0, ge=0, allow_inf_nan=False)


class ModelAttributes(BaseModel):
    """Declared attributes of a model on a custom endpoint (SPEC M1/M3). Every field optional."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str | None = Field(default=None, max_length=200)
    reasoning: bool | None = None
    web_search: bool | None = None
    input: list[Literal["text", "image"]] | None = None
    cost: CostAttributes | None = None
    context_window: int | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    thinking_level_map: dict[str, str | None] | None = None

    @field_validator("thinking_level_map")
    @classmethod
    def _known_levels(cls, value: dict[str, str | None] | None) -> dict[str, str | None] | None:
        if value is None:
            return value
        for level in value:
            if level == "ultra":
                raise ValueError("'ultra' is not a level (it is folded into 'max' before the model)")
            if level not in EFFORT_LEVELS:
                raise ValueError(f"unknown level {level!r}; expected one of {', '.join(EFFORT_LEVELS)}")
        return value


def _first_error_field(exc: ValidationError) -> tuple[str, str]:
    error = exc.errors()[0]
    loc = ".".join(str(part) for part in error["loc"])
    return loc, error["msg"]


def parse_model_attributes(
    raw: str | dict[str, Any] | ModelAttributes | None, *, field_prefix: str = "model_attributes"
) -> ModelAttributes | None:
    """Validate attributes given as JSON text or a dict. Raises ``InputValidationError``."""
    if raw is None or isinstance(raw, ModelAttributes):
        return raw
    if isinstance(raw, str):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputValidationError(f"{field_prefix} is not valid JSON: {exc.msg}", field=field_prefix) from exc
    else:
        data = raw
    if not isinstance(data, dict):
        raise InputValidationError(f"{field_prefix} must be a JSON object", field=field_prefix)
    try:
        return ModelAttributes.model_validate(data)
    except ValidationError as exc:
        loc, msg = _first_error_field(exc)
        name = f"{field_prefix}.{loc}" if loc else field_prefix
        raise InputValidationError(f"{name}: {msg}", field=name) from exc


@dataclass(slots=True, frozen=True)
class ResolvedModel:
    """Everything an adapter needs to call one model, after merging all attribute sources."""

    provider: str
    model_id: str
    api_kind: str
    base_url: str
    api_key: str | None
    name: str
    reasoning: bool
    web_search: bool | None  # None = capability not declared
    input: tuple[str, ...]
    cost: Cost
    context_window: int
    max_tokens: int
    thinking_level_map: dict[str, str | None] = field(default_factory=dict)
    effort_levels: tuple[str, ...] | None = None  # None = every thinking level

    @property
    def accepts_images(self) -> bool:
        return "image" in self.input

    def price(self, usage: Usage) -> Cost:
        """Cost of one response, each token class priced separately (per million tokens)."""
        return Cost(
            input=usage.input_tokens * self.cost.input / 1e6,
            output=usage.output_tokens * self.cost.output / 1e6,
            cache_read=usage.cached_input_tokens * self.cost.cache_read / 1e6,
            cache_write=usage.cache_creation_tokens * self.cost.cache_write / 1e6,
        )

    def public_dict(self) -> dict[str, Any]:
        """A description safe to store or show: never includes the API key."""
        return {
            "provider": self.provider,
            "model": self.model_id,
            "api_kind": self.api_kind,
            "base_url": self.base_url,
            "name": self.name,
            "reasoning": self.reasoning,
            "web_search": self.web_search,
            "input": list(self.input),
            "context_window": self.context_window,
            "max_tokens": self.max_tokens,
        }
