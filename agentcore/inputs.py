"""Boundary models: ``create_agent`` options and per-run ``AgentInput`` (SPEC R1, I1–I2).

All are strict pydantic models: an unknown option, a wrong type or a bad value is an
``InputValidationError`` (code ``input_validation``) naming the field — however the model is
built: ``AgentInput(...)``, ``AgentInput.model_validate(...)`` or ``validate_model`` — and it
is raised before anything touches the store. A raw pydantic ``ValidationError`` never leaves
this module.

Ids are checked here too (``Identifier``): every id a caller gives becomes a key of the store's
rows (a receipt, a conversation, a task), and the stores differ in what a key may hold —
PostgreSQL text cannot hold NUL, no backend can hold a lone surrogate. So an id is 1–200
characters with no control character and no lone surrogate, on every store alike, refused
before anything is written.

Inline images are checked here too (I1): strict base64, at most ``MAX_IMAGE_BYTES`` decoded,
and content whose magic bytes match the declared ``mime_type`` — a provider would reject
anything else on every later request of the conversation.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Any, Final, Literal, Self, TypeAlias, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from agentcore.errors import InputValidationError
from agentcore.models.attributes import ModelAttributes, parse_model_attributes
from agentcore.providers.stream_limits import MAX_TIMEOUT_S, StreamTimeouts

ApiKind: TypeAlias = Literal["openai-responses", "anthropic-messages", "openai-completions"]
Effort: TypeAlias = Literal["", "off", "minimal", "low", "medium", "high", "xhigh", "max", "ultra"]
PermissionPolicy: TypeAlias = Literal["read-only", "workspace", "auto"]
Mode: TypeAlias = Literal["build", "plan"]

ImageMime: TypeAlias = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]
IMAGE_MIME_TYPES: Final[tuple[str, ...]] = get_args(ImageMime)

MAX_PROMPT_CHARS = 1_000_000
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_IMAGE_BASE64_CHARS: Final = (MAX_IMAGE_BYTES + 2) // 3 * 4


# The cap on every tool result (``agentcore.tools.result_cap``), ``max_tool_result_bytes``: the
# default sits above what the built-in tools keep of their own output (50 KB plus a note), so
# they are never cut twice; the top is ~4M tokens, more than any model's window.
MAX_TOOL_RESULT_BYTES: Final = 64 * 1024
MIN_TOOL_RESULT_BYTES: Final = 1024
TOOL_RESULT_BYTES_LIMIT: Final = 16 * 1024 * 1024

MAX_ID_CHARS: Final = 200
_NOT_IN_IDS: Final = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # controls (NUL too), lone surrogates


def _check_id(value: str) -> str:
    bad = _NOT_IN_IDS.search(value)
    if bad is not None:
        what = "a lone surrogate" if "\ud800" <= bad.group() <= "\udfff" else "a control character"
        raise ValueError(f"an id must not contain {what} ({bad.group()!r} at position {bad.start()})")
    return value


Identifier: TypeAlias = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS), AfterValidator(_check_id)]
"""An id a caller gives (request, session, input, entry, task, approval): see the module docstring."""


def image_mime_type(head: bytes) -> str | None:
    """Recognise the image formats providers accept, by content rather than by name or label."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def check_image_data(data: str, mime_type: str, *, max_bytes: int = MAX_IMAGE_BYTES) -> None:
    """Raise ``ValueError`` (with a reason a person can act on) unless ``data`` is a real image.

    Real means: strict base64 (no ``data:`` prefix, no whitespace, correct padding), at most
    ``max_bytes`` once decoded, and magic bytes that say ``mime_type``.
    """
    if mime_type not in IMAGE_MIME_TYPES:
        raise ValueError(f"mime_type {mime_type!r} is not one of {', '.join(IMAGE_MIME_TYPES)}")
    if len(data) > (max_bytes + 2) // 3 * 4:
        raise ValueError(f"the image is larger than {max_bytes} bytes")
    if data.startswith("data:"):
        raise ValueError("give the bare base64 content, without a 'data:' URL prefix")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not valid base64 ({exc})") from None
    if not raw:
        raise ValueError("the image is empty")
    found = image_mime_type(raw[:16])
    if found is None:
        raise ValueError(f"the content is not a PNG, JPEG, GIF or WebP image (declared {mime_type})")
    if found != mime_type:
        raise ValueError(f"the content is {found}, not the declared {mime_type}")


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SURROGATE_MESSAGE: Final = "contains a lone surrogate (not valid UTF-8)"


def input_error(exc: ValidationError, what: str, *, skip: int = 0) -> InputValidationError:
    """The ``InputValidationError`` for the first problem pydantic found, naming its field
    (``skip``: leading parts of its location that are not fields, e.g. a union's tag)."""
    error = exc.errors()[0]
    loc = ".".join(str(part) for part in error["loc"][skip:]) or what
    ctx_error = (error.get("ctx") or {}).get("error")
    if isinstance(ctx_error, InputValidationError):
        return ctx_error
    if error["type"] == "string_unicode":  # pydantic-core's words for a lone surrogate
        return InputValidationError(f"{loc}: {_SURROGATE_MESSAGE}", field=loc)
    message = str(error["msg"]).removeprefix("Value error, ")
    return InputValidationError(f"{loc}: {message}", field=loc)


class BoundaryModel(BaseModel):
    """A strict model at the API boundary: invalid data raises ``InputValidationError``.

    Building one directly (``AgentInput(prompt=...)``) or through ``model_validate`` gives the
    same typed error as ``validate_model``; nested models report the full path
    (``images.0.data``).
    """

    model_config = ConfigDict(extra="forbid")

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise input_error(exc, type(self).__name__) from exc
        refuse_lone_surrogates(self)

    # Marks this __init__ as pydantic's own (as ``RootModel`` does), so a NESTED model is still
    # validated by pydantic-core and its errors keep their full path (``images.0.data``).
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        try:
            model = super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise input_error(exc, cls.__name__) from exc
        refuse_lone_surrogates(model)
        return model




def refuse_lone_surrogates(model: BaseModel) -> None:
    """Refuse text no store can hold, naming where it is (``ask_resume.answers.scope``).

    pydantic keeps a lone surrogate in a plain ``str`` field (only a constrained one is refused,
    and with an unhelpful message), and every backend refuses it at commit — after the run has
    started. So every string a boundary model carries, nested models, lists and dicts (keys
    too) included, is checked once here, after the fields are valid, before anything is written.
    """
    stack: list[tuple[str, Any]] = [(name, value) for name, value in model.__dict__.items()]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if not value.isascii() and _LONE_SURROGATE.search(value):
                raise InputValidationError(f"{path}: {_SURROGATE_MESSAGE}", field=path)
        elif isinstance(value, BaseModel):
            stack.extend((f"{path}.{name}", item) for name, item in value.__dict__.items())
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and not key.isascii() and _LONE_SURROGATE.search(key):
                    raise InputValidationError(f"{path}: a key contains a lone surrogate (not valid UTF-8)", field=path)
                stack.append((f"{path}.{key}", item))
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}.{index}", item) for index, item in enumerate(value))


class ImageInput(BoundaryModel):
    # mime_type is declared first so that it is validated first: the data check needs it.
    mime_type: ImageMime
    data: str = Field(min_length=1, max_length=MAX_IMAGE_BASE64_CHARS)  # base64, no data: prefix

    @field_validator("data")
    @classmethod
    def _real_image(cls, value: str, info: ValidationInfo) -> str:
        mime = info.data.get("mime_type")
        if mime is not None:  # an invalid mime_type is reported on its own
            check_image_data(value, mime)
        return value


class PlanResume(BoundaryModel):
    """The reviewer's decision on a plan; ``plan`` carries the plan text so it survives compaction."""

    approval_id: Identifier
    approved: bool
    plan: str = ""
    notes: str = ""


class AskResume(BoundaryModel):
    """Answers to a pending ``ask_user`` call: one entry per question id."""

    answers: dict[str, list[str] | str]


class ToolApprovalResume(BoundaryModel):
    approval_id: Identifier
    approved: bool
    message: str = ""


class AgentInput(BoundaryModel):
    prompt: str = Field(default="", max_length=MAX_PROMPT_CHARS)
    request_id: Identifier | None = None
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


class StreamTimeoutsOption(BoundaryModel):
    """``create_agent(stream_timeouts={"connect_s": …, "header_s": …, "idle_s": …})``: the
    bounds of one streamed model request in seconds (numbers, not strings; see
    ``agentcore.providers.stream_limits``). Omitted keys keep their defaults."""

    connect_s: float = _seconds(_DEFAULT_TIMEOUTS.connect_s)
    header_s: float = _seconds(_DEFAULT_TIMEOUTS.header_s)
    idle_s: float = _seconds(_DEFAULT_TIMEOUTS.idle_s)

    def settings(self) -> StreamTimeouts:
        return StreamTimeouts(self.connect_s, self.header_s, self.idle_s)


class AgentOptions(BoundaryModel):
    """Options of ``create_agent`` that are plain data (callables and objects are kept apart)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    database_path: str | None = None
    database_url: str | None = Field(default=None, repr=False)  # may hold a password
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
    session_id: Identifier | None = None
    context_window: int | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    session: dict[str, Any] | None = None
    stream_timeouts: StreamTimeoutsOption = Field(default_factory=StreamTimeoutsOption)
    # The cap on every tool result in UTF-8 bytes of text (``agentcore.tools.result_cap``).
    max_tool_result_bytes: int = Field(
        default=MAX_TOOL_RESULT_BYTES, ge=MIN_TOOL_RESULT_BYTES, le=TOOL_RESULT_BYTES_LIMIT, strict=True
    )

    @field_validator("model_attributes", mode="before")
    @classmethod
    def _attributes(cls, value: Any) -> Any:
        return parse_model_attributes(value, field_prefix="model_attributes")


def validate_model(model_cls: type[BaseModel], data: dict[str, Any], *, what: str) -> Any:
    """Validate ``data`` into ``model_cls``; raise ``InputValidationError`` naming the first bad field."""
    try:
        return model_cls.model_validate(data)
    except ValidationError as exc:  # a model that is not a BoundaryModel
        raise input_error(exc, what) from exc
