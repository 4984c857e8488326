"""Django admin: registered models (secrets write-only) and session stores.

The API key field is a ``PasswordInput`` that never renders the stored value back; leaving it
blank keeps the current key, and a "clear" checkbox removes it. Attributes are validated by
agentcore's own strict parser (SPEC M3), and its error names the offending field.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import filesizeformat

from studio.models import Approval, RegisteredModel, Run, SessionStore, StudioSession, ToolCall, UsageRecord


class RegisteredModelForm(forms.ModelForm):
    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only: the stored key is never shown. Leave blank to keep the current key.",
    )
    clear_api_key = forms.BooleanField(label="Remove the stored key", required=False)
    attributes = forms.CharField(
        label="Attributes (JSON)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "class": "vLargeTextField", "spellcheck": "false"}),
        help_text='e.g. {"context_window": 200000, "cost": {"input": 3, "output": 15, "cache_read": 0.3, '
        '"cache_write": 3.75}}. Unknown keys are rejected.',
    )

    class Meta:
        model = RegisteredModel
        fields = ("name", "provider", "model_id", "base_url", "api_kind", "api_key", "attributes", "enabled")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initial["api_key"] = ""
        value = self.instance.attributes if self.instance and self.instance.pk else None
        self.initial["attributes"] = json.dumps(value, indent=2) if value else ""

    def clean_api_key(self) -> str:
        new = self.cleaned_data.get("api_key") or ""
        if new:
            return new
        return self.instance.api_key if self.instance and self.instance.pk else ""

    def clean_attributes(self) -> dict[str, Any]:
        raw = (self.cleaned_data.get("attributes") or "").strip()
        if not raw:
            return {}
        from agentcore.errors import InputValidationError
        from agentcore.models.attributes import parse_model_attributes

        try:
            parsed = parse_model_attributes(raw, field_prefix="attributes")
        except InputValidationError as exc:
            raise forms.ValidationError(
                f"{exc.field}: {exc.message}" if exc.field and exc.field not in exc.message else exc.message
            ) from exc
        assert parsed is not None
        return parsed.model_dump(exclude_none=True)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("clear_api_key"):
            data["api_key"] = ""
        provider = data.get("provider")
        if provider == "custom" and not data.get("base_url"):
            self.add_error("base_url", "A custom endpoint needs a base URL.")
        if provider not in ("demo", None) and not data.get("model_id"):
            self.add_error("model_id", "Name the model id (e.g. gpt-5-mini or claude-sonnet-4-5).")
        return data

    def save(self, commit: bool = True) -> RegisteredModel:
        instance: RegisteredModel = super().save(commit=False)
        instance.api_key = self.cleaned_data.get("api_key") or ""
        instance.attributes = self.cleaned_data.get("attributes") or {}
        if commit:
            instance.save()
        return instance


async def _probe_model(model: RegisteredModel) -> tuple[bool, str]:
    """Run one tiny prompt against the model in a throwaway in-memory runtime."""
    from agentcore import create_agent
    from agentcore.inputs import AgentInput

    with tempfile.TemporaryDirectory() as workdir:
        runtime = await create_agent(workdir=workdir, permission_policy="read-only", **model.runtime_options())
        try:
            status, error = "failed", "no result"
            async for event in runtime.run(AgentInput(prompt="Reply with the single word OK.", effort="off")):
                if event.type == "end":
                    status, error = event.status, event.error or ""
            return status == "completed", error
        finally:
            await runtime.close()


@admin.action(description="Test connection (one tiny prompt)")
def test_connection(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[RegisteredModel]) -> None:
    for model in queryset:
        try:
            ok, error = async_to_sync(asyncio.wait_for)(_probe_model(model), 60)
        except Exception as exc:
            ok, error = False, f"{exc.__class__.__name__}: {getattr(exc, 'message', None) or exc}"
        if ok:
            modeladmin.message_user(request, f"{model.display_name}: connection works.", messages.SUCCESS)
        else:
            modeladmin.message_user(request, f"{model.display_name}: {error[:300]}", messages.ERROR)


@admin.register(RegisteredModel)
class RegisteredModelAdmin(admin.ModelAdmin):
    form = RegisteredModelForm
    list_display = ("name", "provider", "model_id", "api_kind", "key_set", "enabled")
    list_filter = ("provider", "enabled")
    search_fields = ("name", "model_id")
    actions = (test_connection,)
    fieldsets = (
        (None, {"fields": ("name", "provider", "model_id", "enabled")}),
        ("Endpoint", {"fields": ("base_url", "api_kind", "api_key", "clear_api_key")}),
        ("Attributes", {"fields": ("attributes",)}),
    )

    @admin.display(boolean=True, description="API key set")
    def key_set(self, obj: RegisteredModel) -> bool:
        return bool(obj.api_key)


def _exports_dir() -> Path:
    path = Path(settings.STUDIO_DATA_DIR) / "exports"
    path.mkdir(parents=True, exist_ok=True)
    return path


@admin.action(description="Export a consistent copy of the store")
def export_store(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[SessionStore]) -> None:
    try:
        from agentcore.harness.backup import export_agent_database
    except ImportError:
        modeladmin.message_user(request, "This agentcore has no export_agent_database yet.", messages.ERROR)
        return
    for store in queryset:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        destination = _exports_dir() / f"{store.pk}-{stamp}.sqlite"
        try:
            export_agent_database(database_path=store.store_path, destination=destination)
        except Exception as exc:
            code = getattr(exc, "code", exc.__class__.__name__)
            modeladmin.message_user(
                request, f"{store}: export failed ({code}): {getattr(exc, 'message', exc)}", messages.ERROR
            )
        else:
            modeladmin.message_user(request, f"{store}: exported to {destination}", messages.SUCCESS)


@admin.action(description="Cancel unfinished work offline")
def cancel_offline(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[SessionStore]) -> None:
    try:
        from agentcore.harness import cancel_agent_conversation  # type: ignore[attr-defined]
    except ImportError:
        modeladmin.message_user(request, "This agentcore has no cancel_agent_conversation yet.", messages.ERROR)
        return
    for store in queryset:
        try:
            cancel_agent_conversation(agent_store_dir=os.path.dirname(store.store_path), conversation_id=str(store.pk))
        except Exception as exc:
            modeladmin.message_user(request, f"{store}: cancel failed: {getattr(exc, 'message', exc)}", messages.ERROR)
        else:
            modeladmin.message_user(request, f"{store}: unfinished work cancelled.", messages.SUCCESS)


@admin.register(SessionStore)
class SessionStoreAdmin(admin.ModelAdmin):
    list_display = ("__str__", "owner", "status", "store_file", "store_size", "last_activity")
    list_filter = ("status",)
    search_fields = ("title", "store_path", "owner__username")
    actions = (export_store, cancel_offline)
    readonly_fields = ("owner", "registered_model", "workdir", "store_path", "status", "created_at", "last_activity")
    fields = (*readonly_fields, "title")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="Store file")
    def store_file(self, obj: SessionStore) -> str:
        return os.path.basename(obj.store_path)

    @admin.display(description="Size")
    def store_size(self, obj: SessionStore) -> str:
        try:
            size = sum(os.path.getsize(p) for p in (obj.store_path, obj.store_path + "-wal") if os.path.exists(p))
        except OSError:
            return "—"
        return filesizeformat(size) if size else "not created"


@admin.register(StudioSession)
class StudioSessionAdmin(admin.ModelAdmin):
    list_display = ("__str__", "owner", "registered_model", "status", "total_tokens", "cost", "last_activity")
    list_filter = ("status", "registered_model")
    search_fields = ("title", "owner__username")
    readonly_fields = ("store_path", "created_at", "last_activity")


for _model in (Run, ToolCall, Approval, UsageRecord):
    admin.site.register(_model)
