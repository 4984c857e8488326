"""What a registered model can do, as the runtime will resolve it: reasoning, web search, images.

The composer offers web search only where the model's API kind has a search tool, says when an
effort has no effect (a model without reasoning) and refuses images a model cannot read — each
before anything is sent. The facts come from agentcore's own resolution (``resolve_model``: the
attributes, then the built-in catalog, then the fallback of SPEC M2), and the reason web search
cannot be turned on is the runtime's own ``input_validation`` message, so the page and a run
never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from studio.models import Provider, RegisteredModel


@dataclass(frozen=True, slots=True)
class Capabilities:
    reasoning: bool
    images: bool
    api_kind: str
    web_search_default: bool  # what "auto" means for this model
    web_search_refusal: str  # why "on" is refused ("" when search can be turned on)


def capabilities(model: RegisteredModel) -> Capabilities:
    """The model's facts as a runtime would resolve them (no key is needed, none is read)."""
    from agentcore.config import resolve_web_search
    from agentcore.errors import AgentError
    from agentcore.models import resolve_model
    from agentcore.models.attributes import ModelAttributes

    attributes: ModelAttributes | None
    provider: str | None
    model_id: str | None
    base_url: str | None
    api_kind: str | None
    if model.is_demo:
        from agentcore.demo import demo_model_options

        options = demo_model_options("http://127.0.0.1")
        attributes = options["model_attributes"]
        provider, model_id, base_url, api_kind = "demo", "demo", options["base_url"], "openai-responses"
    else:
        try:
            attributes = ModelAttributes.model_validate(model.attributes or {})
        except ValueError:
            attributes = None
        provider = None if model.provider == Provider.CUSTOM else str(model.provider)
        model_id, base_url, api_kind = model.model_id or None, model.base_url or None, model.api_kind or None
    try:
        resolved = resolve_model(
            provider=provider or "custom",
            model=model_id,
            base_url=base_url,
            api_key="-",  # resolution checks that a key is given; this one is never sent
            api_kind=api_kind,
            runtime_attributes=attributes,
        )
    except AgentError:
        return Capabilities(
            reasoning=True, images=True, api_kind=api_kind or "", web_search_default=False, web_search_refusal=""
        )
    refusal = ""
    try:
        resolve_web_search(True, resolved)
    except AgentError as exc:
        refusal = str(getattr(exc, "message", None) or exc)
    return Capabilities(
        reasoning=resolved.reasoning,
        images=resolved.accepts_images,
        api_kind=resolved.api_kind,
        web_search_default=resolve_web_search(None, resolved),
        web_search_refusal=refusal,
    )
