"""Turn configuration: from options, run settings and a request's pin to a ``TurnConfig``
(SPEC R1, I2, M2, M5, P2, T2–T3, PL1, K1).

The runtime asks for one ``TurnConfig`` per model request; building tools, guards and prompts
is far more expensive than a fast loop's request, so a configuration is built once per
(settings, pin, mode, style, tool set) and reused. Nothing here touches the store.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentcore.compaction.settings import CompactionSettings
from agentcore.demo import DemoServer, demo_model_options
from agentcore.engine.base import TurnConfig
from agentcore.engine.fragments import StreamWindow
from agentcore.errors import AgentError, InputValidationError
from agentcore.harness.op_state import OpState
from agentcore.inputs import AgentOptions
from agentcore.models import resolve_effort, resolve_model
from agentcore.models.attributes import ModelAttributes, ResolvedModel
from agentcore.prompts import load_prompt
from agentcore.providers.base import Provider
from agentcore.providers.registry import ProviderRegistry
from agentcore.tools.ask_user import ASK_USER, ask_user_tool
from agentcore.tools.base import AgentTool, ToolContext, ToolDefinition
from agentcore.tools.environment import AgentExecutionEnv
from agentcore.tools.guard import PathGuard
from agentcore.tools.selection import select_tools

COMMUNICATION_SKILL = "i-have-adhd.md"
SESSION_TOOLS = ("update_plan", "subagent", "codemode", "tool_search")


@dataclass(slots=True, frozen=True)
class ToolScope:
    """Tools a conversation adds to or removes from the runtime's set (session protocol):
    ``extra`` are session tools (update_plan, subagent, ...); ``only`` narrows to names
    (a subagent's whitelist); ``key`` names the scope in the cache."""

    key: str = ""
    extra: tuple[AgentTool, ...] = ()
    only: frozenset[str] | None = None
    sections: tuple[str, ...] = ()  # prompt sections (extension docs), appended to the system prompt


class ConfigResolver:
    """Resolves models and builds turn configurations for one runtime."""

    def __init__(
        self,
        options: AgentOptions,
        *,
        providers: ProviderRegistry,
        extra_tools: Sequence[AgentTool],
        tool_definitions: dict[str, ToolDefinition],
        resolved_model: ResolvedModel | None,
        models: dict[str, ModelAttributes],
        scratch: Path,
        compaction: CompactionSettings,
    ) -> None:
        self.options = options
        self.providers = providers
        self.extra_tools = list(extra_tools)
        self.tool_definitions = tool_definitions
        self.resolved_model = resolved_model
        self.models = models
        self.scratch = scratch
        self.compaction = compaction
        self.demo: DemoServer | None = None
        self.environment: AgentExecutionEnv | None = None  # None: the tools run on this machine
        self.stream_window = StreamWindow()  # every turn's fragment window (``set_stream_window``)
        self._cache: dict[tuple[str, Any, bool, str], TurnConfig] = {}

    def use_environment(self, environment: AgentExecutionEnv) -> None:
        """Run the built-in tools of every later turn against ``environment`` (SPEC X5)."""
        self.environment = environment
        self._cache.clear()

    def update_models(self, models: dict[str, ModelAttributes]) -> None:
        """A new host model table for later requests; built configurations are rebuilt from it."""
        self.models = dict(models)
        self._cache.clear()

    def clear(self) -> None:
        """Forget built configurations: workdirs, files and registrations may have changed."""
        self._cache.clear()

    async def aclose(self) -> None:
        if self.demo is not None:
            demo, self.demo = self.demo, None
            await asyncio.to_thread(demo.stop)

    # --- models ------------------------------------------------------------------------

    def model(self, settings: dict[str, Any], pinned: dict[str, Any] | None = None) -> ResolvedModel:
        """The model of a request: its pin when it has one, else run settings over options."""
        opts = self.options
        if pinned is not None and pinned.get("provider") != "demo":
            return self._pinned_model(settings, pinned)
        if self.resolved_model is not None and not any(k in settings for k in ("provider", "model", "base_url")):
            return self.resolved_model
        provider = settings.get("provider", opts.provider)
        run_attrs = (
            ModelAttributes.model_validate(settings["model_attributes"]) if "model_attributes" in settings else None
        )
        if provider == "demo":
            # A host running many runtimes passes one shared demo server's ``base_url``;
            # otherwise this runtime starts (and later stops) its own.
            url = settings.get("base_url", opts.base_url)
            if url is None:
                if self.demo is None:
                    self.demo = DemoServer()
                url = self.demo.base_url
            base = demo_model_options(url)
            return resolve_model(
                provider="demo",
                model="demo",
                base_url=base["base_url"],
                api_key="demo",
                api_kind="openai-responses",
                runtime_attributes=base["model_attributes"],
                run_attributes=run_attrs,
                context_window=settings.get("context_window", opts.context_window),
                max_tokens=settings.get("max_tokens", opts.max_tokens),
            )
        model_id = settings.get("model", opts.model)
        return resolve_model(
            provider=provider,
            model=model_id,
            base_url=settings.get("base_url", opts.base_url),
            api_key=opts.api_key,
            api_kind=opts.api_kind,
            runtime_attributes=self.models.get(model_id or "", opts.model_attributes),
            run_attributes=run_attrs,
            context_window=settings.get("context_window", opts.context_window),
            max_tokens=settings.get("max_tokens", opts.max_tokens),
        )

    def pin(self, settings: dict[str, Any]) -> dict[str, Any]:
        """The model identity a request runs on, fixed when the request starts (DURABILITY 13).

        A resumed request continues on this model with this output limit even when the runtime
        was reopened with other options. The demo's base URL is per process, so it is not pinned;
        credentials never are.
        """
        model = self.model(settings)
        pinned: dict[str, Any] = {
            "provider": model.provider,
            "model": model.model_id,
            "api_kind": model.api_kind,
            "max_tokens": settings.get("max_tokens") or self.options.max_tokens or model.max_tokens,
            "context_window": settings.get("context_window") or model.context_window,
        }
        if model.provider != "demo":
            pinned["base_url"] = model.base_url
        return pinned

    def _pinned_model(self, settings: dict[str, Any], pinned: dict[str, Any]) -> ResolvedModel:
        """Resolve a request's pinned model; attributes and the key come from today's options only
        when they describe that same provider and model."""
        opts = self.options
        known = self.resolved_model
        if known is not None and (known.provider, known.model_id, known.api_kind) == (
            pinned["provider"],
            pinned["model"],
            pinned["api_kind"],
        ):
            return known
        same_provider = opts.provider in (None, pinned["provider"])
        run_attrs = (
            ModelAttributes.model_validate(settings["model_attributes"]) if "model_attributes" in settings else None
        )
        runtime_attrs = self.models.get(
            pinned["model"], opts.model_attributes if opts.model in (None, pinned["model"]) else None
        )
        return resolve_model(
            provider=pinned["provider"],
            model=pinned["model"],
            base_url=pinned.get("base_url"),
            api_key=opts.api_key if same_provider else None,
            api_kind=pinned["api_kind"],
            runtime_attributes=runtime_attrs,
            run_attributes=run_attrs,
            context_window=pinned.get("context_window"),
            max_tokens=pinned.get("max_tokens"),
        )

    def window_guess(self) -> int | None:
        try:
            return self.model({}).context_window
        except AgentError:
            return None

    # --- turn configuration --------------------------------------------------------------

    def configure(self, op: OpState, *, style_on: bool, scope: ToolScope | None = None) -> TurnConfig:
        """The (cached) configuration for ``op``."""
        scope = scope or ToolScope()
        key = (
            json.dumps([op.get("settings", {}), op.get("pinned")], sort_keys=True),
            op.get("mode"),
            style_on,
            scope.key,
        )
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self._build(op, style_on, scope)
        return cached

    def _build(self, op: OpState, style_on: bool, scope: ToolScope) -> TurnConfig:
        settings = op.get("settings", {})
        opts = self.options
        pinned = op.get("pinned")
        model = self.model(settings, pinned)
        mode = op.get("mode", opts.mode)
        web_search = resolve_web_search(settings.get("web_search", opts.web_search), model)
        workdir = Path(settings.get("workdir") or opts.workdir or os.getcwd())
        environment = self.environment
        if environment is None and not workdir.is_dir():  # an environment checks it on its target
            raise InputValidationError(f"workdir {str(workdir)!r} is not a directory", field="workdir")
        policy = settings.get("permission_policy", opts.permission_policy)
        allowed = settings.get("allowed_directories", opts.allowed_directories)
        guard = PathGuard(workdir, policy, allowed)
        tools = select_tools(
            policy=policy,
            mode=mode,
            tools=opts.tools,
            extra_tools=self.extra_tools,
            tool_definitions=list(self.tool_definitions.values()),
            also_known={ASK_USER, *SESSION_TOOLS},
        )
        if mode == "plan" and (opts.tools is None or ASK_USER in opts.tools):
            tools = [*tools, ask_user_tool()]
        # Session tools follow the same narrowing: an explicit ``tools`` list must name them. A tool
        # a catalog offers is governed by its catalog (found through ``tool_search``, which the list
        # names), since its id is not known when the list is written.
        tools += [
            tool
            for tool in scope.extra
            if opts.tools is None or tool.name in opts.tools or "catalog_id" in tool.metadata
        ]
        if scope.only is not None:
            tools = [tool for tool in tools if tool.name in scope.only]
        system = settings.get("system_prompt") or opts.system_prompt or load_prompt("system.md")
        if mode == "plan":
            system = f"{system}\n\n{load_prompt('plan.md')}"
        for section in scope.sections:
            system = f"{system}\n\n{section}"
        if style_on:
            system = f"{system}\n\n{load_prompt(COMMUNICATION_SKILL)}"
        effort = resolve_effort(settings.get("effort"), opts.effort, model)
        provider: Provider = self.providers.get(model.api_kind)
        scratch = self.scratch
        result_cap = opts.max_tool_result_bytes

        def tool_context(call_id: str, abort: asyncio.Event) -> ToolContext:
            return ToolContext(
                workdir=workdir,
                guard=guard,
                abort=abort,
                tool_call_id=call_id,
                accepts_images=model.accepts_images,
                scratch_dir=scratch,
                env=environment,
                max_result_bytes=result_cap,
            )

        return TurnConfig(
            model=model,
            provider=provider,
            system_prompt=system,
            tools=tools,
            effort=effort,
            max_tokens=_max_tokens(pinned, settings, opts.max_tokens, model),
            web_search=web_search,
            mode=mode,
            tool_context=tool_context,
            tool_definitions=self.tool_definitions,
            context_window=settings.get("context_window") or model.context_window,
            compaction=self.compaction,
            stream_window=self.stream_window,
        )


def resolve_web_search(requested: bool | None, model: ResolvedModel) -> bool:
    """Whether ``model``'s requests carry the search tool (P2): ``None`` = the model's default;
    ``True`` where search cannot work is ``input_validation`` naming ``web_search``."""
    if requested is None:
        return bool(model.web_search) and model.api_kind != "openai-completions"
    if not requested:
        return False
    if model.api_kind == "openai-completions":
        raise InputValidationError(
            "web_search is not available with the openai-completions api_kind", field="web_search"
        )
    if model.web_search is False:
        raise InputValidationError(f"model {model.model_id!r} declares web_search: false", field="web_search")
    return True


def _max_tokens(
    pinned: dict[str, Any] | None, settings: dict[str, Any], option: int | None, model: ResolvedModel
) -> int:
    """The output limit: the request's pinned one, else the run's, the runtime's or the model's."""
    value = (pinned or {}).get("max_tokens") or settings.get("max_tokens") or option or model.max_tokens
    return int(value)
