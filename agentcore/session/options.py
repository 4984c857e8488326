"""``create_agent(session={...})``: the session protocol's options (SPEC S1, S5, C5).

Parsed strictly: an unknown key is ``input_validation`` naming ``session.<key>``, never
ignored — a misspelt ``subagent`` silently doing nothing is the bug this prevents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from agentcore.compaction.settings import CompactionSettings
from agentcore.errors import InputValidationError
from agentcore.session.extension import EXTENSION_MODULES, parse_extension_option

PlanFork = Literal["as_of", "initial", "current"]
PLAN_FORKS: tuple[PlanFork, ...] = ("as_of", "initial", "current")
DEFAULT_MAX_AGENTS = 4


@dataclass(slots=True, frozen=True)
class ModelChoice:
    """An exact provider/model pair (subagent whitelist, ``configure``)."""

    provider: str
    model_id: str

    def as_dict(self) -> dict[str, str]:
        return {"provider": self.provider, "model_id": self.model_id}


@dataclass(slots=True, frozen=True)
class SubagentOptions:
    tools: tuple[str, ...]
    max_agents: int = DEFAULT_MAX_AGENTS
    models: tuple[ModelChoice, ...] = ()


@dataclass(slots=True, frozen=True)
class SessionOptions:
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    subagents: SubagentOptions | None = None
    plan_fork: PlanFork = "as_of"
    extensions: dict[str, Any] = field(default_factory=dict)  # parsed registry / tool_search / code_mode / environment


def parse_session_options(raw: Any) -> SessionOptions:
    if not isinstance(raw, dict):
        raise InputValidationError("session must be an object", field="session")
    for key in raw:
        if key not in ("compaction", "subagents", "plan_fork", *EXTENSION_MODULES):
            raise InputValidationError(f"session.{key}: unknown option", field=f"session.{key}")
    plan_fork = raw.get("plan_fork", "as_of")
    if plan_fork not in PLAN_FORKS:
        raise InputValidationError(
            f"session.plan_fork must be one of {', '.join(PLAN_FORKS)}; got {plan_fork!r}", field="session.plan_fork"
        )
    return SessionOptions(
        compaction=CompactionSettings.parse(raw.get("compaction")),
        subagents=_subagents(raw["subagents"]) if raw.get("subagents") is not None else None,
        plan_fork=plan_fork,
        extensions={key: parse_extension_option(key, raw[key]) for key in EXTENSION_MODULES if key in raw},
    )


def _subagents(raw: Any) -> SubagentOptions:
    where = "session.subagents"
    if not isinstance(raw, dict):
        raise InputValidationError(f"{where} must be an object", field=where)
    for key in raw:
        if key not in ("tools", "max_agents", "models"):
            raise InputValidationError(f"{where}.{key}: unknown option", field=f"{where}.{key}")
    tools = raw.get("tools")
    if not isinstance(tools, list) or not all(isinstance(name, str) and name for name in tools):
        raise InputValidationError(f"{where}.tools must be a list of tool names", field=f"{where}.tools")
    max_agents = raw.get("max_agents", DEFAULT_MAX_AGENTS)
    if isinstance(max_agents, bool) or not isinstance(max_agents, int) or not 1 <= max_agents <= 64:
        raise InputValidationError(f"{where}.max_agents must be an integer from 1 to 64", field=f"{where}.max_agents")
    models = raw.get("models", [])
    if not isinstance(models, list):
        raise InputValidationError(f"{where}.models must be a list", field=f"{where}.models")
    return SubagentOptions(
        tools=tuple(dict.fromkeys(tools)),
        max_agents=max_agents,
        models=tuple(parse_model_choice(item, f"{where}.models.{n}") for n, item in enumerate(models)),
    )


def parse_model_choice(raw: Any, where: str) -> ModelChoice:
    if not isinstance(raw, dict):
        raise InputValidationError(f"{where} must be an object {{provider, model_id}}", field=where)
    for key in raw:
        if key not in ("provider", "model_id"):
            raise InputValidationError(f"{where}.{key}: unknown field", field=f"{where}.{key}")
    for key in ("provider", "model_id"):
        value = raw.get(key)
        if not isinstance(value, str) or not value or len(value) > 200:
            raise InputValidationError(f"{where}.{key} must be a non-empty string", field=f"{where}.{key}")
    return ModelChoice(raw["provider"], raw["model_id"])
