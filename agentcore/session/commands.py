"""Session commands (SPEC S1, S2): the boundary models of ``runtime.control(command)``.

A command is validated into an immutable copy on entry (the caller may mutate its dict
afterwards without effect), strictly: an unknown field, a wrong type or a bad value is
``input_validation`` naming the field, before anything is recorded. ``fingerprint`` is what
makes a resend recognisable: the same ``request_id`` with another payload is a conflict.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from agentcore.errors import InputValidationError
from agentcore.inputs import (
    AskResume,
    Effort,
    Identifier,
    ImageInput,
    PlanResume,
    ToolApprovalResume,
    input_error,
    refuse_lone_surrogates,
)

MAX_TASK_INPUT_BYTES = 256 * 1024
MAX_JSON_DEPTH = 64


class _Command(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    request_id: Identifier
    target_id: int | None = Field(default=None, ge=0)


class SubmitCommand(_Command):
    type: Literal["submit"]
    prompt: str = Field(default="", max_length=1_000_000)
    images: list[ImageInput] = Field(default_factory=list)
    mode: Literal["steer", "follow_up", "reject"] = "follow_up"
    # The agent mode of the turn this input starts (None: the runtime's ``mode`` option). A steer
    # joins a turn already running in its own mode, so it cannot name one.
    agent: Literal["build", "plan"] | None = None

    @field_validator("agent")
    @classmethod
    def _not_on_a_steer(cls, agent: str | None, info: ValidationInfo) -> str | None:
        if agent is not None and info.data.get("mode") == "steer":
            raise ValueError("cannot be set on a steer: it joins the running turn in that turn's mode")
        return agent

    @model_validator(mode="after")
    def _not_empty(self) -> SubmitCommand:
        if not self.prompt and not self.images:
            raise ValueError("prompt is empty and no images are attached")
        return self


class WithdrawCommand(_Command):
    type: Literal["withdraw"]
    input_id: Identifier


class PromoteCommand(_Command):
    type: Literal["promote"]
    input_id: Identifier


class CompactCommand(_Command):
    type: Literal["compact"]
    instructions: str | None = Field(default=None, max_length=20_000)
    # True: keep the newest ``keep_recent_tokens`` verbatim (C4's cut); False: summarize the
    # whole context, as ``/compact`` does (C3) — what a person asking to compact expects.
    keep_recent: bool = True


class ResetCommand(_Command):
    type: Literal["reset"]
    handoff: str | None = Field(default=None, max_length=200_000)


class ForkCommand(_Command):
    type: Literal["fork"]
    entry_id: Identifier


class DeleteCommand(_Command):
    type: Literal["delete"]


class ModelRef(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str = Field(min_length=1, max_length=200)
    model_id: str = Field(min_length=1, max_length=200)


class ConfigureCommand(_Command):
    type: Literal["configure"]
    expected_version: int = Field(ge=0)
    model: ModelRef | None = None
    effort: Effort | None = None
    # P2 for this conversation's next requests: auto (the model's default), on or off.
    web_search: Literal["auto", "on", "off"] | None = None

    @model_validator(mode="after")
    def _something(self) -> ConfigureCommand:
        if self.model is None and self.effort is None and self.web_search is None:
            raise ValueError("configure needs model, effort and/or web_search")
        return self


class PlanItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Identifier
    text: str = Field(min_length=1, max_length=10_000)
    status: Literal["pending", "in_progress", "completed"]


class PlanCommand(_Command):
    type: Literal["plan"]
    expected_version: int = Field(ge=0)
    items: list[PlanItem] = Field(max_length=200)

    @field_validator("items")
    @classmethod
    def _unique_ids(cls, items: list[PlanItem]) -> list[PlanItem]:
        ids = [item.id for item in items]
        if len(set(ids)) != len(ids):
            raise ValueError("plan item ids must be unique")
        return items


class CancelCommand(_Command):
    type: Literal["cancel"]
    scope: Literal["foreground", "all", "task"] = "foreground"
    task_id: Identifier | None = None

    @model_validator(mode="after")
    def _task_needs_id(self) -> CancelCommand:
        if self.scope == "task" and self.task_id is None:
            raise ValueError("scope 'task' needs task_id")
        if self.scope != "task" and self.task_id is not None:
            raise ValueError("task_id is only valid with scope 'task'")
        return self


class SnapshotCommand(_Command):
    type: Literal["snapshot"]


class TaskCommand(_Command):
    type: Literal["task"]
    name: Identifier
    input: Any = None
    background: bool = False


class ResumeCommand(_Command):
    """Answer a paused request (a plan review, ``ask_user`` questions, a tool approval).

    Not in the seed's command list: a long-lived host (``serve()``) has no ``run()`` call to
    carry ``plan_resume`` / ``ask_resume`` / ``tool_resume``, so it sends them here.
    """

    type: Literal["resume"]
    input_id: Identifier
    plan_resume: PlanResume | None = None
    ask_resume: AskResume | None = None
    tool_resume: ToolApprovalResume | None = None

    @model_validator(mode="after")
    def _one_decision(self) -> ResumeCommand:
        given = [x for x in (self.plan_resume, self.ask_resume, self.tool_resume) if x is not None]
        if len(given) != 1:
            raise ValueError("resume needs exactly one of plan_resume, ask_resume, tool_resume")
        return self


Command: TypeAlias = Annotated[
    SubmitCommand
    | WithdrawCommand
    | PromoteCommand
    | CompactCommand
    | ResetCommand
    | ForkCommand
    | DeleteCommand
    | ConfigureCommand
    | PlanCommand
    | CancelCommand
    | SnapshotCommand
    | TaskCommand
    | ResumeCommand,
    Field(discriminator="type"),
]


class _Envelope(BaseModel):
    command: Command


def parse_command(raw: Any) -> Command:
    """Validate ``raw`` (a dict or a pydantic model) into an immutable command.

    Task input is checked as strict JSON (finite numbers, string keys, plain containers,
    ≤ 256 KiB encoded) before anything else, so a non-JSON value never reaches the store.
    """
    if isinstance(raw, BaseModel):
        raw = raw.model_dump()
    if not isinstance(raw, dict):
        raise InputValidationError("command must be an object with a 'type'", field="command")
    if raw.get("type") == "task" and "input" in raw:
        check_strict_json(raw["input"], "input")
    try:
        command = _Envelope.model_validate({"command": raw}).command
    except ValidationError as exc:
        loc = exc.errors()[0]["loc"]
        tagged = len(loc) > 1 and loc[1] == raw.get("type")  # ("command", <the union's tag>, field…)
        raise input_error(exc, "type", skip=2 if tagged else 1) from None
    refuse_lone_surrogates(command)
    return command


def fingerprint(command: Command) -> str:
    """A stable hash of the command's payload (what a resend must repeat exactly)."""
    data = command.model_dump(mode="json", exclude={"request_id"})
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def check_strict_json(value: Any, field: str, *, limit: int = MAX_TASK_INPUT_BYTES) -> None:
    """Raise ``input_validation`` unless ``value`` is plain JSON of at most ``limit`` bytes
    (256 KiB: a task's input, S2)."""
    _check(value, field, 0)
    try:
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except (ValueError, UnicodeEncodeError) as exc:
        raise InputValidationError(f"{field}: not encodable as JSON ({exc})", field=field) from None
    if size > limit:
        raise InputValidationError(f"{field}: {size:,} bytes of JSON; at most {limit:,} are accepted", field=field)


def _check(value: Any, where: str, depth: int) -> None:
    if depth > MAX_JSON_DEPTH:
        raise InputValidationError(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels", field=where)
    if value is None or isinstance(value, bool | str):
        if isinstance(value, str):
            _check_text(value, where)
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputValidationError(f"{where}: {value!r} is not a finite number", field=where)
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, f"{where}.{index}", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InputValidationError(f"{where}: object keys must be strings, got {key!r}", field=where)
            _check_text(key, where)
            _check(item, f"{where}.{key}", depth + 1)
        return
    raise InputValidationError(f"{where}: {type(value).__name__} is not a JSON value", field=where)


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputValidationError(f"{where}: contains a lone surrogate (not valid UTF-8)", field=where) from None
