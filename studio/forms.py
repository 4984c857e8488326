"""Forms: the only place that parses what a browser posts."""

from __future__ import annotations

import base64
import copy
from typing import Any

from django import forms
from django.http import QueryDict
from django.urls import reverse

from agentcore.inputs import IMAGE_MIME_TYPES, MAX_IMAGE_BYTES
from studio.models import Effort, Mode, PermissionPolicy, RegisteredModel, ToolIsolation
from studio.selectors import default_model_for, registered_models

MAX_PROMPT_CHARS = 200_000
#: Images per message (each at most the runtime's ``MAX_IMAGE_BYTES``, 20 MB): they are kept in
#: the session's store with the message and sent with every later request of its context.
MAX_IMAGES = 4
#: The composer's file picker: the image types the runtime accepts.
IMAGE_ACCEPT = ",".join(IMAGE_MIME_TYPES)


class FixedChoiceField(forms.ChoiceField):
    """A ``ChoiceField`` of constant choices for a form that only validates (it is never drawn):
    each form's copy shares the declaration's choices and widget instead of deep-copying both.

    Why: ``Form.__init__`` deep-copies every field, and a choice field's copy normalises its
    choices again for itself and for its widget — three quarters of the ~0.26 ms a composer
    message's validation cost on this VM, at every prompt. Sharing is sound because nothing
    here changes a field's choices or widget after declaration; the error messages and
    validators, which a form may change, are still copied as ``Field`` copies them."""

    def __deepcopy__(self, memo: dict[int, Any]) -> FixedChoiceField:
        result = copy.copy(self)
        memo[id(self)] = result
        result.error_messages = self.error_messages.copy()
        result.validators = self.validators[:]
        return result


class ModelChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: RegisteredModel) -> str:
        return obj.display_name


class NewSessionForm(forms.Form):
    registered_model = ModelChoice(queryset=RegisteredModel.objects.none(), label="Model", empty_label=None)
    title = forms.CharField(
        label="Title",
        required=False,
        max_length=200,
        widget=forms.TextInput(attrs={"placeholder": "Optional — the first prompt names it"}),
    )
    workdir = forms.CharField(
        label="Working directory",
        required=False,
        max_length=1000,
        widget=forms.TextInput(attrs={"placeholder": "Blank = a fresh folder for this session", "class": "mono"}),
    )
    permission_policy = forms.ChoiceField(
        label="Permissions", choices=PermissionPolicy.choices, initial=PermissionPolicy.WORKSPACE
    )
    effort = forms.ChoiceField(label="Reasoning effort", choices=Effort.choices, initial=Effort.MEDIUM)
    mode = forms.ChoiceField(label="Start in", choices=Mode.choices, initial=Mode.BUILD, widget=forms.RadioSelect)
    # Staff only (removed for everyone else): where this session's tools run.
    tool_isolation = forms.ChoiceField(
        label="Tools run",
        choices=[("", "As the model says (by person: sandboxed unless staff)"), *ToolIsolation.choices],
        required=False,
        help_text="Staff only. A sandbox shows the agent nothing but the session's workspace.",
    )

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not getattr(user, "is_staff", False):
            del self.fields["tool_isolation"]
        field = self.fields["registered_model"]
        assert isinstance(field, ModelChoice)
        field.queryset = registered_models()
        # Picking a model checks that its endpoint answers (studio.endpoint_check), at once.
        field.widget.attrs.update(
            {
                "hx-get": reverse("studio:model_check"),
                "hx-trigger": "load, change",
                "hx-target": "#endpoint-check",
                "hx-swap": "innerHTML",
            }
        )
        default = default_model_for(user)
        if default is not None:
            field.initial = default.pk


class PromptForm(forms.Form):
    """A message from the composer: text, images (``images`` files, SPEC I1), or both."""

    prompt = forms.CharField(max_length=MAX_PROMPT_CHARS, strip=False, required=False)
    agent = FixedChoiceField(choices=Mode.choices, required=False)
    effort = FixedChoiceField(choices=Effort.choices, required=False)
    # While the agent works: queue it (default) or steer the running turn with it.
    mode = FixedChoiceField(choices=[("follow_up", "Queue"), ("steer", "Steer")], required=False)
    # Declared so that an error can name it; the uploads themselves are read in ``clean``.
    images = forms.Field(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        try:
            data["images"] = prompt_images(self.files.getlist("images") if self.files else [])
        except forms.ValidationError as exc:
            self.add_error("images", exc)
            return data
        if "prompt" in data and not data["prompt"].strip() and not data["images"]:
            self.add_error("prompt", "Write a message first.")
        return data


def prompt_images(files: list[Any]) -> list[dict[str, str]]:
    """Uploaded images as the runtime takes them (``{data: base64, mime_type}``), each checked
    as the runtime checks it (I1: PNG, JPEG, GIF or WebP by its bytes, at most
    ``MAX_IMAGE_BYTES``), at most ``MAX_IMAGES``. An error names the file and the limit."""
    from agentcore.inputs import check_image_data, image_mime_type

    if len(files) > MAX_IMAGES:
        raise forms.ValidationError(f"At most {MAX_IMAGES} images per message ({len(files)} attached).")
    images = []
    for upload in files:
        name = str(getattr(upload, "name", "") or "image")
        if upload.size > MAX_IMAGE_BYTES:
            size = upload.size / 1024 / 1024
            raise forms.ValidationError(
                f"Image {name!r} is {size:.1f} MB: the limit is {MAX_IMAGE_BYTES // 1024 // 1024} MB per image."
            )
        raw = upload.read()
        mime = image_mime_type(raw[:16])
        if mime is None:
            raise forms.ValidationError(f"{name!r} is not a PNG, JPEG, GIF or WebP image.")
        data = base64.b64encode(raw).decode("ascii")
        try:
            check_image_data(data, mime)
        except ValueError as exc:
            raise forms.ValidationError(f"Image {name!r}: {exc}") from None
        images.append({"data": data, "mime_type": mime})
    return images


class InputIdForm(forms.Form):
    input_id = forms.CharField(max_length=200)


class TaskIdForm(forms.Form):
    task_id = forms.CharField(max_length=200)


class ForkForm(forms.Form):
    entry_id = forms.CharField(max_length=200)


class CompactForm(forms.Form):
    """Compact now (SPEC C3): optional instructions for the summary."""

    instructions = forms.CharField(required=False, max_length=20_000, strip=True)


class ResendForm(forms.Form):
    """Retry a failed turn or regenerate the last answer: the prompt's entry, and optionally
    another of the session's models to run it on."""

    entry_id = forms.CharField(max_length=200)
    model = forms.IntegerField(required=False, min_value=1)


class EditForm(forms.Form):
    """Edit and resend a past prompt: its entry, the new text (``first``: the conversation's
    first message, which has nothing before it to fork from)."""

    entry_id = forms.CharField(max_length=200)
    prompt = forms.CharField(max_length=MAX_PROMPT_CHARS, strip=False)
    first = forms.BooleanField(required=False)

    def clean_prompt(self) -> str:
        prompt: str = self.cleaned_data["prompt"]
        if not prompt.strip():
            raise forms.ValidationError("Write a message first.")
        return prompt


class ResetForm(forms.Form):
    handoff = forms.CharField(required=False, max_length=200_000, strip=True)


class ConfigureForm(forms.Form):
    """Model and effort for the next request; ``expected_version`` is the settings version the
    page showed (a stale one is refused by the runtime: ``version_conflict``)."""

    expected_version = forms.IntegerField(min_value=0)
    model = forms.IntegerField(required=False, min_value=1)
    effort = FixedChoiceField(choices=Effort.choices, required=False)
    web_search = FixedChoiceField(choices=[("auto", "auto"), ("on", "on"), ("off", "off")], required=False)


class PlanDecisionForm(forms.Form):
    decision = FixedChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    notes = forms.CharField(required=False, max_length=20_000)


def form_error(form: forms.Form) -> tuple[str, str]:
    """A refused form as one line for the page, and the first field it names (``__all__`` for
    a refusal of the whole form): every command's error slot shows the same text."""
    field = next(iter(form.errors), "__all__")
    return field, " ".join(e for errs in form.errors.values() for e in errs)


def parse_answers(data: QueryDict, questions: list[dict[str, Any]]) -> dict[str, str | list[str]]:
    """Answers to ``ask_user`` questions from the question form.

    A single-choice question answers with one string, a multi-select with a list; a free-text
    answer is used when given (added to a multi-select's choices). Every question needs an
    answer: a missing one raises ``ValidationError`` naming it.
    """
    answers: dict[str, str | list[str]] = {}
    for q in questions:
        qid = str(q.get("id"))
        chosen = [v for v in data.getlist(f"q-{qid}") if v]
        options = {str(o) for o in q.get("options") or []}
        chosen = [v for v in chosen if v in options]
        free = (data.get(f"q-{qid}-text") or "").strip()
        if q.get("multi_select"):
            values = chosen + ([free] if free else [])
            if not values:
                raise forms.ValidationError(f"Answer: {q.get('question')}")
            answers[qid] = values
        else:
            value = free or (chosen[0] if chosen else "")
            if not value:
                raise forms.ValidationError(f"Answer: {q.get('question')}")
            answers[qid] = value
    return answers
