"""Forms: the only place that parses what a browser posts."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict

from studio.models import Effort, Mode, PermissionPolicy, RegisteredModel, ToolIsolation
from studio.selectors import default_model_for, registered_models

MAX_PROMPT_CHARS = 200_000


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
        default = default_model_for(user)
        if default is not None:
            field.initial = default.pk


class PromptForm(forms.Form):
    prompt = forms.CharField(max_length=MAX_PROMPT_CHARS, strip=False)
    agent = forms.ChoiceField(choices=Mode.choices, required=False)
    effort = forms.ChoiceField(choices=Effort.choices, required=False)
    # While the agent works: queue it (default) or steer the running turn with it.
    mode = forms.ChoiceField(choices=[("follow_up", "Queue"), ("steer", "Steer")], required=False)

    def clean_prompt(self) -> str:
        prompt: str = self.cleaned_data["prompt"]
        if not prompt.strip():
            raise forms.ValidationError("Write a message first.")
        return prompt


class InputIdForm(forms.Form):
    input_id = forms.CharField(max_length=200)


class TaskIdForm(forms.Form):
    task_id = forms.CharField(max_length=200)


class ForkForm(forms.Form):
    entry_id = forms.CharField(max_length=200)


class ResetForm(forms.Form):
    handoff = forms.CharField(required=False, max_length=200_000, strip=True)


class ConfigureForm(forms.Form):
    """Model and effort for the next request; ``expected_version`` is the settings version the
    page showed (a stale one is refused by the runtime: ``version_conflict``)."""

    expected_version = forms.IntegerField(min_value=0)
    model = forms.IntegerField(required=False, min_value=1)
    effort = forms.ChoiceField(choices=Effort.choices, required=False)


class PlanDecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    notes = forms.CharField(required=False, max_length=20_000)


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
