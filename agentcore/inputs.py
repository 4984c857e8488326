"""Boundary models: ``create_agent`` options and per-run ``AgentInput`` (SPEC R1, I1–I2).

Both are strict pydantic models: an unknown option or a wrong type is an
``input_validation`` error naming the field, raised before anything touches the store.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentcore.errors import InputValidationError
from agentcore.models.attributes import ModelAttributes, parse_model_attributes
from agentcore.providers.stream_limits import MAX_TIMEOUT_S, StreamTimeouts

ApiKind: TypeAlias = Literal["openai-responses", "anthropic-messages", "openai-completions"]
Effort: TypeAlias = Literal["", "off", "minimal", "low", "medium", "high", "xhigh", "max", "ultra"]
PermissionPolicy: TypeAlias = Literal["read-only", "workspace", "auto"]
Mode: TypeAlias = Literal["build", "plan"]

MAX_PROMPT_CHARS = 1_000_000
MAX_IMAGE_BYTES = 20 * 1024 * 1024


class ImageInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    data: str = Field(max_length=MAX_IMAGE_BYTES * 4 // 3 + 4)  # base64
    mime_type: Literal["image/png", "image/jpeg", "image/gif", "image/webp"]


class PlanResume(BaseModel):
    """The reviewer's decision on a plan; ``plan`` carries the plan text so it survives compaction."""

    model_config = ConfigDict(extra="forbid")

    approval_id: str
    approved: bool
    plan: str = ""
    notes: str = ""


class AskResume(BaseModel):
    """Answers to a pending ``ask_user`` call: one entry per question id."""

    model_config = ConfigDict(extra="forbid")

    answers: dict[str, list[str] | str]


class ToolApprovalResume(BaseModel):
    model_config = ConfigDict(extra="forbid")

    approval_id: str
    approved: bool
    message: str = ""


class AgentInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(default="", max_length=MAX_PROMPT_CHARS)
    request_id: str | None = Field(default=None, min_length=1, max_length=200)
    images: list[ImageInput] = Field(default_factory=list)
    image_files: list[str] = Field(default_factory=list)
    model_attributes: ModelAttributes | None = None
    web_search: bool | None = None
    workdir: str | None = None
    allowed_directories: list[str] | None = None
    system_prompt: str | None = None
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    effort: Effort | None = None
    agent: Mode | None = None
    permission_policy: PermissionPolicy | None = None
    context_window: int | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    compact: bool = False
    host_input: Any = None
    plan_resume: PlanResume | None = None
    ask_resume: AskResume | None = None
    tool_resume: ToolApprovalResume | None = None

    @field_validator("model_attributes", mode="before")
    @classmethod
    def _attributes(cls, value: Any) -> Any:
        return parse_model_attributes(value, field_prefix="model_attributes")


_DEFAULT_TIMEOUTS = StreamTimeouts()


def _seconds(default: float) -> Any:
    return Field(default=default, gt=0, le=MAX_TIMEOUT_S, strict=True, allow_inf_nan=False)


class StreamTimeoutsOption(BaseModel):
    """``create_agent(stream_timeouts={"connect_s": …, "header_s": …, "idle_s": …})``: the
    bounds of one streamed model request in seconds (numbers, not strings; see
    ``agentcore.providers.stream_limits``). Omitted keys keep their defaults."""

    model_config = ConfigDict(extra="forbid")

    connect_s: float = _seconds(_DEFAULT_TIMEOUTS.connect_s)
    header_s: float = _seconds(_DEFAULT_TIMEOUTS.header_s)
    idle_s: float = _seconds(_DEFAULT_TIMEOUTS.idle_s)

    def settings(self) -> StreamTimeouts:
        return StreamTimeouts(self.connect_s, self.header_s, self.idle_s)


class AgentOptions(BaseModel):
    """Options of ``create_agent`` that are plain data (callables and objects are kept apart)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    database_path: str | None = None
    workdir: str | None = None
    system_prompt: str | None = None
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    api_kind: ApiKind | None = None
    web_search: bool | None = None
    model_attributes: ModelAttributes | None = None
    effort: Effort | None = None
    permission_policy: PermissionPolicy = "workspace"
    mode: Mode = "build"
    tools: list[str] | None = None
    allowed_directories: list[str] = Field(default_factory=list)
    session_id: str | None = Field(default=None, min_length=1, max_length=200)
    context_window: int | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    session: dict[str, Any] | None = None
    stream_timeouts: StreamTimeoutsOption = Field(default_factory=StreamTimeoutsOption)

    @field_validator("model_attributes", mode="before")
    @classmethod
    def _attributes(cls, value: Any) -> Any:
        return parse_model_attributes(value, field_prefix="model_attributes")


def validate_model(model_cls: type[BaseModel], data: dict[str, Any], *, what: str) -> Any:
    """Validate ``data`` into ``model_cls``; raise ``InputValidationError`` naming the first bad field."""
    try:
        return model_cls.model_validate(data)
    except InputValidationError:
        raise
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = ".".join(str(part) for part in error["loc"]) or what
        ctx_error = (error.get("ctx") or {}).get("error")
        if isinstance(ctx_error, InputValidationError):
            raise ctx_error from exc
        raise InputValidationError(f"{loc}: {error['msg']}", field=loc) from exc
