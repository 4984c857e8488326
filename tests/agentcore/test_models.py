"""Model attributes, catalog, fallback and effort (SPEC M1–M5)."""

from __future__ import annotations

import pytest

from agentcore import InputValidationError, parse_model_attributes
from agentcore.models import resolve_effort, resolve_model
from agentcore.models.effort import clamp_effort, normalize_effort


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"nmae": "x"}', "model_attributes.nmae"),
        ('{"reasoning": "yes"}', "model_attributes.reasoning"),
        ('{"context_window": -5}', "model_attributes.context_window"),
        ('{"context_window": 1.5}', "model_attributes.context_window"),
        ('{"cost": {"input": -1}}', "model_attributes.cost.input"),
        ('{"cost": {"inptu": 1}}', "model_attributes.cost.inptu"),
        ('{"input": ["text", "audio"]}', "model_attributes.input.1"),
        ('{"thinking_level_map": {"ultra": "x"}}', "model_attributes.thinking_level_map"),
        ('{"thinking_level_map": {"huge": "x"}}', "model_attributes.thinking_level_map"),
        ('{"name": "' + "n" * 201 + '"}', "model_attributes.name"),
        ("[1, 2]", "model_attributes"),
        ("{not json", "model_attributes"),
    ],
)
def test_invalid_attribute_json_names_the_field(raw: str, field: str) -> None:
    """M3: unknown keys, wrong types and out-of-range values are rejected, naming the field."""
    with pytest.raises(InputValidationError) as info:
        parse_model_attributes(raw)
    assert info.value.code == "input_validation"
    assert info.value.field == field


def test_valid_attributes_parse() -> None:
    attrs = parse_model_attributes(
        '{"name": "Vendor 1", "reasoning": true, "input": ["text", "image"], "context_window": 1000000,'
        ' "max_tokens": 64000, "cost": {"input": 0.4, "output": 1.6, "cache_read": 0.04, "cache_write": 0.5},'
        ' "thinking_level_map": {"minimal": null, "max": "xhigh"}}'
    )
    assert (
        attrs is not None
        and attrs.context_window == 1_000_000
        and attrs.thinking_level_map
        == {
            "minimal": None,
            "max": "xhigh",
        }
    )


def test_fallback_attributes_for_unknown_model() -> None:
    """M2: no attributes → reasoning, images, zero price, window guessed from the id prefix."""
    model = resolve_model(
        provider="gw", model="vendor/qwen3-coder", base_url="http://x/v1", api_key=None, api_kind=None
    )
    assert model.reasoning and model.accepts_images
    assert model.cost.total == 0
    assert model.context_window == 131_072


def test_explicit_window_beats_attributes_and_run_beats_runtime() -> None:
    """M2: explicit context_window/max_tokens > per-run attributes > runtime attributes."""
    runtime = parse_model_attributes({"context_window": 1000, "max_tokens": 100, "name": "rt"})
    run = parse_model_attributes({"context_window": 2000, "name": "run"})
    model = resolve_model(
        provider="gw",
        model="m",
        base_url="http://x",
        api_key=None,
        api_kind=None,
        runtime_attributes=runtime,
        run_attributes=run,
    )
    assert (model.context_window, model.max_tokens, model.name) == (2000, 100, "run")
    model = resolve_model(
        provider="gw",
        model="m",
        base_url="http://x",
        api_key=None,
        api_kind=None,
        runtime_attributes=runtime,
        run_attributes=run,
        context_window=5000,
        max_tokens=50,
    )
    assert (model.context_window, model.max_tokens) == (5000, 50)


def test_catalog_knows_well_known_models() -> None:
    """M4: catalog entries carry windows, prices, modalities and capabilities."""
    model = resolve_model(provider="anthropic", model=None, base_url=None, api_key="k", api_kind=None)
    assert model.api_kind == "anthropic-messages" and model.context_window == 200_000 and model.cost.output > 0
    assert model.web_search is True


def test_missing_model_config_is_input_validation() -> None:
    """R4: no provider and no model → input_validation naming model."""
    with pytest.raises(InputValidationError) as info:
        resolve_model(provider=None, model=None, base_url=None, api_key=None, api_kind=None)
    assert info.value.field == "model"


def test_custom_provider_needs_base_url() -> None:
    with pytest.raises(InputValidationError) as info:
        resolve_model(provider="mine", model="m", base_url=None, api_key=None, api_kind=None)
    assert info.value.field == "base_url"


def test_api_key_defaults_from_environment() -> None:
    """R4: keys come from OPENAI_API_KEY / ANTHROPIC_API_KEY when not given."""
    model = resolve_model(
        provider="openai",
        model="gpt-5",
        base_url=None,
        api_key=None,
        api_kind=None,
        environ={"OPENAI_API_KEY": "sk-env"},
    )
    assert model.api_key == "sk-env"


def test_effort_normalisation() -> None:
    """M5: '' = off, ultra = max, None = no choice; unknown levels are input_validation."""
    assert normalize_effort("") == "off"
    assert normalize_effort("ultra") == "max"
    assert normalize_effort(None) is None
    with pytest.raises(InputValidationError):
        normalize_effort("extreme")


@pytest.mark.parametrize(
    ("level", "supported", "expected"),
    [
        ("max", ("low", "medium", "high"), "high"),
        ("minimal", ("low", "medium", "high"), "low"),
        ("xhigh", ("minimal", "low", "medium", "high", "xhigh", "max"), "xhigh"),
        ("medium", (), None),
        ("off", ("low",), None),
    ],
)
def test_effort_clamps_to_nearest_supported(level: str, supported: tuple[str, ...], expected: str | None) -> None:
    """M5: unsupported levels clamp to the nearest supported one, never fail."""
    assert clamp_effort(level, supported) == expected


def test_thinking_level_map_null_marks_unsupported() -> None:
    attrs = parse_model_attributes({"thinking_level_map": {"max": None, "xhigh": None}})
    model = resolve_model(
        provider="gw", model="m", base_url="http://x", api_key=None, api_kind=None, runtime_attributes=attrs
    )
    assert resolve_effort("ultra", None, model) == "high"
    assert resolve_effort("", "high", model) is None
    assert resolve_effort(None, "low", model) == "low"


@pytest.mark.parametrize(("provider", "variable"), [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")])
@pytest.mark.parametrize("environ", [{}, {"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": "  "}])
def test_builtin_provider_without_key_is_input_validation_naming_the_variable(
    provider: str, variable: str, environ: dict[str, str]
) -> None:
    """R4: a built-in provider's own endpoint with no key (unset or blank) fails up front, naming
    the environment variable — not after a retry budget of refused or unreachable requests."""
    with pytest.raises(InputValidationError) as info:
        resolve_model(provider=provider, model=None, base_url=None, api_key=None, api_kind=None, environ=environ)
    assert info.value.field == "api_key"
    assert variable in info.value.message
    known_model = "claude-sonnet-4-5" if provider == "anthropic" else "gpt-5.1"
    with pytest.raises(InputValidationError, match=variable):  # the provider implied by a catalog model id
        resolve_model(provider=None, model=known_model, base_url=None, api_key=None, api_kind=None, environ=environ)


def test_builtin_provider_key_from_argument_or_environment_is_enough() -> None:
    """R4: an explicit ``api_key`` or the provider's variable satisfies the check."""
    assert resolve_model(provider="openai", model=None, base_url=None, api_key="sk", api_kind=None, environ={})
    model = resolve_model(
        provider="anthropic", model=None, base_url=None, api_key=None, api_kind=None, environ={"ANTHROPIC_API_KEY": "k"}
    )
    assert model.api_key == "k"


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:8080/v1", "https://gateway.example/anthropic"])
def test_custom_base_url_needs_no_key(base_url: str) -> None:
    """R4: a built-in provider name on a custom endpoint (local server, gateway) may go keyless."""
    model = resolve_model(provider="anthropic", model=None, base_url=base_url, api_key=None, api_kind=None, environ={})
    assert model.api_key is None and model.base_url == base_url
    model = resolve_model(provider="gw", model="m", base_url=base_url, api_key=None, api_kind=None, environ={})
    assert model.api_key is None


def test_the_provider_default_endpoint_given_explicitly_still_needs_a_key() -> None:
    with pytest.raises(InputValidationError, match="OPENAI_API_KEY"):
        resolve_model(
            provider="openai",
            model=None,
            base_url="https://api.openai.com/v1/",
            api_key=None,
            api_kind=None,
            environ={},
        )
